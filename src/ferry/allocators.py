"""How a pipeline process allocates memory, so that its peak stays flat over a long run.

A pipeline's memory comes and goes in waves (each checkpoint's buffered rows, the Arrow tables and
Parquet files it writes, a compaction's files) while a little grows underneath (the Iceberg key
indexes, the tables' metadata). With two allocators' defaults, each wave leaves memory behind and
the process's peak grows with the run (``bench/README.md``: 1.45-1.50 times the first tenth's over
5,000,000 events):

* pyarrow allocates from mimalloc, which keeps the segments it freed for later. A pipeline uses the
  system allocator instead (:func:`pyarrow.system_memory_pool`), whose memory glibc reuses for
  everything else.
* glibc gives each thread that allocates an arena of its own, up to 8 per core, and keeps the
  free space of each. A pipeline caps them at the cores it may run on, and at least 2
  (``mallopt(M_ARENA_MAX)``).

Each is left as it is when its environment variable chooses otherwise (``ARROW_DEFAULT_MEMORY_POOL``,
``MALLOC_ARENA_MAX`` or ``glibc.malloc.arena_max`` in ``GLIBC_TUNABLES``); without glibc the arenas
are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import platform
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: glibc's ``M_ARENA_MAX`` (malloc.h).
_M_ARENA_MAX = -8


@dataclass(frozen=True, slots=True)
class Allocators:
    """What :func:`configure` chose: pyarrow's memory pool, and glibc's arena cap (None: left as is)."""

    arrow_pool: str
    arena_max: int | None


@functools.cache
def configure() -> Allocators:
    """Set this process's allocators for a pipeline (once; later calls say what was chosen)."""
    chosen = Allocators(_arrow_pool(), _arena_max())
    log.debug(
        "allocators: pyarrow %s, glibc arenas %s", chosen.arrow_pool, chosen.arena_max or "as they were"
    )
    return chosen


def _arrow_pool() -> str:
    import pyarrow as pa  # noqa: PLC0415 - only a pipeline process needs it loaded here

    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        pa.set_memory_pool(pa.system_memory_pool())
    return str(pa.default_memory_pool().backend_name)


def _arena_max() -> int | None:
    if os.environ.get("MALLOC_ARENA_MAX") or "arena_max" in os.environ.get("GLIBC_TUNABLES", ""):
        return None
    if platform.libc_ver()[0] != "glibc":
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    arenas = max(2, len(os.sched_getaffinity(0)))
    if ctypes.CDLL(name).mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas)) != 1:
        return None
    return arenas
