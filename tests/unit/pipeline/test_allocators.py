"""The allocators a running pipeline tunes (ferry.pipeline.allocators), each in a process of its own:
the tuning is process-wide. glibc's malloc, as on every machine ferry is tested on."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# A 4 MiB block freed raises glibc's mmap threshold to 4 MiB; a 2 MiB block after it is mapped on
# its own only when the threshold is fixed. mallinfo2's hblkhd counts the bytes mapped that way.
_PROBE = """
import ctypes, json, sys
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
{tune}
libc.free(libc.malloc(4 << 20))
before = libc.mallinfo2().hblkhd
block = libc.malloc(2 << 20)
mapped = libc.mallinfo2().hblkhd - before
libc.free(block)
out = {{"mapped": mapped, "pyarrow_loaded": "pyarrow" in sys.modules}}
if "pyarrow" in sys.modules:
    import pyarrow as pa
    out["pool"] = pa.default_memory_pool().backend_name
print(json.dumps(out))
"""


def _probe(tune: str) -> dict[str, object]:
    code = textwrap.dedent(_PROBE).format(tune=tune)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    out: dict[str, object] = json.loads(result.stdout)
    return out


def test_a_large_block_is_mapped_on_its_own_once_tuned_however_large_the_blocks_freed_before() -> None:
    assert _probe("")["mapped"] == 0  # glibc's default: the threshold rose to 4 MiB
    tuned = _probe("from ferry.pipeline import allocators; allocators.tune()")
    assert isinstance(tuned["mapped"], int)
    assert tuned["mapped"] >= 2 << 20


def test_pyarrow_allocates_from_malloc_when_loaded_and_is_not_loaded_by_the_tuning() -> None:
    loaded = _probe("import pyarrow\nfrom ferry.pipeline import allocators; allocators.tune()")
    assert loaded["pool"] == "system"
    untouched = _probe("import pyarrow")
    assert untouched["pool"] != "system"  # mimalloc or jemalloc, as pyarrow's wheels build it
    assert _probe("from ferry.pipeline import allocators; allocators.tune()")["pyarrow_loaded"] is False
