"""Python's cyclic garbage collector on the hot path: paused while a batch is decoded, and
collected at checkpoints while a runner runs."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager


class _CollectorPause:
    """Pauses Python's cyclic garbage collector while a thread decodes a batch (see
    :func:`collection_paused`), and resumes it when the last such thread is done, unless it was
    off before."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._resume = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._resume:
                    gc.enable()


_COLLECTOR = _CollectorPause()


def collection_paused() -> AbstractContextManager[None]:
    """A context in which the cyclic garbage collector does not run.

    A batch's decoding allocates tens of thousands of tuples and dicts that form no reference
    cycles, and every 700 of them would start a collection, which walks the young objects again
    and again, and the whole heap (the rows buffered until the next checkpoint) every so often:
    about a quarter of the decoder's CPU. Paused, the objects allocated meanwhile are collected once,
    by the first collection after the batch. Reference counting frees objects as usual.
    """
    return _COLLECTOR.paused()


#: Seconds between two collections of the young objects when no checkpoint has come to do it.
COLLECT_EVERY_S = 30.0
#: A collection of the whole heap every so many collections of the young objects.
FULL_COLLECTION_EVERY = 20


class GarbageCollection:
    """Python's cyclic garbage collector while a runner runs.

    Buffered rows are many small objects that live until the next checkpoint and form no cycles
    (each event is two tuples the collector tracks). Collected every so many allocations, they
    are walked again and again while they wait: about 5 % of the CPU of a pipeline into the null
    sink, with a young generation of 100,000 objects. While the runner runs, automatic collection
    is off (:func:`collection_paused`, held for the whole run). The young objects are collected
    right after each checkpoint has written its rows and let them go, when little is left to
    walk, or after :data:`COLLECT_EVERY_S` without a checkpoint (a stalled sink), and the whole
    heap every :data:`FULL_COLLECTION_EVERY` of those. Objects alive when the run starts are
    frozen out of every collection."""

    def __init__(self) -> None:
        self.active = False
        self.collections = 0
        self._last = 0.0

    @contextmanager
    def running(self) -> Iterator[None]:
        gc.freeze()
        with collection_paused():
            self.active, self._last = True, time.monotonic()
            try:
                yield
            finally:
                self.active = False

    def collect(self, now: float, *, checkpoint: bool) -> None:
        """After a checkpoint began, or at any step (only when the last collection is long ago)."""
        if not self.active or (not checkpoint and now - self._last < COLLECT_EVERY_S):
            return
        self.collections += 1
        gc.collect(2 if self.collections % FULL_COLLECTION_EVERY == 0 else 1)
        self._last = now
