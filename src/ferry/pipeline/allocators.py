"""Allocators that give back what a running pipeline frees.

A pipeline's memory rises and falls with every checkpoint: the rows buffered since the last one
(freed once they are written), the Arrow tables and Parquet pages of its commits and compactions
(tens of MiB each), the sorted runs of the sinks' key indexes (copied when two are merged). With
the allocators' defaults, a long run kept much of what it freed, and its peak RSS grew by half
over 5,000,000 events into Iceberg while what it used grew by the key index only:

* glibc's ``malloc`` raises its mmap threshold to the size of each large block freed (up to
  32 MiB), so that later large blocks come from the heap, where freed space mostly stays the
  process's; and it makes up to eight arenas per core for the threads (librdkafka's, Arrow's, a
  background compaction's), each keeping its own free space;
* pyarrow's default pool (mimalloc in its wheels) keeps freed segments for later allocations.

:func:`tune` fixes glibc's mmap threshold at :data:`MMAP_THRESHOLD` (a block that large is mapped
on its own and unmapped when freed), allows :data:`ARENAS` arenas, and has pyarrow allocate from
``malloc`` when pyarrow is loaded (the Iceberg and Paimon sinks load it before a run starts). It
changes where memory comes from, never what is computed. ``bench/README.md`` has the figures.

``mallopt`` is called through ctypes: no library wraps it. On a C library other than glibc (or
another system), nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

#: Blocks of at least this many bytes are mapped on their own, and returned to the system when freed.
MMAP_THRESHOLD = 1 << 20
#: The most malloc arenas the process's threads share.
ARENAS = 2
#: ``mallopt`` parameters (glibc's malloc.h).
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8

_tuned = False


def tune() -> None:
    """Tune the process's allocators as described above (once; later calls do nothing)."""
    global _tuned  # noqa: PLW0603 (process-wide, like the allocators it tunes)
    if _tuned:
        return
    _tuned = True
    _tune_glibc()
    if "pyarrow" in sys.modules:
        import pyarrow as pa  # noqa: PLC0415 (only when a sink has loaded it)

        pa.set_memory_pool(pa.system_memory_pool())


def _tune_glibc() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        if not hasattr(libc, "gnu_get_libc_version"):
            return  # another C library: its mallopt takes other parameters
    except (OSError, AttributeError):
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_ARENA_MAX, ARENAS)):
        log.debug("glibc's mallopt refused a setting; the allocator keeps its defaults")
