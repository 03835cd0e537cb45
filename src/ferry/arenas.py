"""Python's freed arenas kept mapped for reuse while a pipeline runs.

A pipeline buffers a checkpoint's rows and frees them all once the checkpoint has written them.
Python's small-object allocator then hands every emptied arena (1 MiB) back to the system, and
the next checkpoint's rows fault the pages of new arenas in again: in the benchmark's null lane,
about a fifth of the CPU per event went to those page faults and the kernel's zeroing of the
pages (``bench/README.md``). :func:`keep_freed_arenas` installs an arena allocator (the C module
``ferry._arenas``; CPython offers the hook in C only) that keeps freed arenas, up to a limit, and
hands them out again; the kernel may still take their pages back when memory runs short.

The C module is built with ferry where a C compiler is at hand; without it, ferry runs with
Python's own arena allocator.
"""

from __future__ import annotations

import logging
from types import ModuleType

log = logging.getLogger(__name__)

_arenas: ModuleType | None
try:
    from ferry import _arenas
except ImportError:  # not built: no C compiler where ferry was installed
    _arenas = None

#: The size of pymalloc's arenas in the CPython builds ferry runs on (64-bit, 3.10 and later).
ARENA_BYTES = 1 << 20
#: The freed arenas kept at most, in bytes.
KEPT_BYTES = 1 << 30


def keep_freed_arenas(limit_bytes: int = KEPT_BYTES) -> bool:
    """Keep up to ``limit_bytes`` of freed arenas for reuse (a lower limit gives the rest back
    now). Returns whether the allocator is in place (False where ``ferry._arenas`` was not built)."""
    if _arenas is None:
        log.debug("ferry._arenas is not built: freed arenas go back to the system")
        return False
    _arenas.keep(limit_bytes // ARENA_BYTES)
    return True


def kept_arenas() -> int:
    """The freed arenas kept now (0 where ``ferry._arenas`` was not built)."""
    return 0 if _arenas is None else int(_arenas.kept())
