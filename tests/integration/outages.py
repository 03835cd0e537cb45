"""What the outage tests share: a pipeline run in a thread, and quick retries."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ferry.pipeline.runner import PipelineRunner

#: Quick retries, so that a test sees several attempts during a short outage.
RETRIES = """\
  restart-strategy.initial-backoff: 100ms
  restart-strategy.max-backoff: 400ms
  restart-strategy.timeout: 1min
"""


@contextmanager
def running(runner: PipelineRunner) -> Iterator[list[BaseException]]:
    """``runner`` in a thread until the block ends; what it raised is in the list yielded."""
    stop, errors = threading.Event(), list[BaseException]()

    def run() -> None:
        try:
            runner.run(stop)
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=run, name="pipeline")
    thread.start()
    try:
        yield errors
    finally:
        stop.set()
        thread.join(60)
