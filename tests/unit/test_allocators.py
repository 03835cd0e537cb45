"""A pipeline process's allocators (:mod:`ferry.allocators`): pyarrow on the system allocator,
glibc's arenas capped, and either left alone when its environment variable chooses. Each case runs
in a fresh interpreter: the settings are the process's."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

#: Starts threads that each allocate and stay alive, then counts glibc's arenas (``malloc_info``
#: lists one <heap> per arena).
_PROBE = r"""
import ctypes, ctypes.util, json, os, re, sys, tempfile, threading
from ferry.allocators import configure
chosen = configure()
import pyarrow as pa
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
count = int(sys.argv[1])
ready, done = threading.Barrier(count + 1), threading.Event()
def allocate():
    libc.malloc(ctypes.c_size_t(4096))
    ready.wait()
    done.wait()
threads = [threading.Thread(target=allocate) for _ in range(count)]
for t in threads:
    t.start()
ready.wait()
path = tempfile.mktemp()
stream = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
done.set()
for t in threads:
    t.join()
with open(path) as f:
    arenas = len(re.findall(r"<heap nr=", f.read()))
os.remove(path)
print(json.dumps({"pool": pa.default_memory_pool().backend_name, "chosen": [chosen.arrow_pool, chosen.arena_max], "arenas": arenas}))
"""

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's arenas are counted")


#: The arenas :func:`ferry.allocators.configure` allows: one per core it may run on, at least 2.
CAP = max(2, len(os.sched_getaffinity(0)))


def _probe(**env: str) -> dict[str, object]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ARROW_DEFAULT_MEMORY_POOL", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES")
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(CAP + 6)],
        env={**environment, **env},
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


@glibc
def test_a_pipeline_process_allocates_arrow_with_malloc_and_caps_glibc_arenas() -> None:
    result = _probe()
    assert result["pool"] == "system"
    assert result["chosen"] == ["system", CAP]
    # more threads than the cap allocated at once, in no more arenas (glibc's default: one each)
    assert isinstance(result["arenas"], int) and 1 <= result["arenas"] <= CAP


@glibc
def test_the_environment_chooses_over_the_defaults() -> None:
    result = _probe(ARROW_DEFAULT_MEMORY_POOL="mimalloc", MALLOC_ARENA_MAX=str(CAP + 3))
    assert result["pool"] == "mimalloc"
    assert result["chosen"] == ["mimalloc", None]
    assert result["arenas"] == CAP + 3  # the environment's cap, reached by the threads
