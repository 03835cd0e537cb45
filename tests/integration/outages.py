"""What the outage tests share: a pipeline run in a thread, quick retries, and an outage held for
as long as an operator's would last."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ferry.pipeline.phase import Phase
from ferry.pipeline.runner import PipelineRunner

#: Quick retries, so that a test sees several attempts during a short outage.
RETRIES = """\
  restart-strategy.initial-backoff: 100ms
  restart-strategy.max-backoff: 400ms
  restart-strategy.timeout: 3min
"""


@contextmanager
def running(runner: PipelineRunner, join_s: float = 60) -> Iterator[list[BaseException]]:
    """``runner`` in a thread until the block ends (then waited for up to ``join_s``); what it
    raised is in the list yielded."""
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
        thread.join(join_s)


#: How long a component stays down in the tests that stop one during a run: the length of the
#: fault (a restart or a failover), not a bound on the pipeline, which must simply wait it out.
OUTAGE_S = 30.0


def hold_outage(runner: PipelineRunner, errors: list[BaseException], began: float) -> None:
    """Keep a component down until :data:`OUTAGE_S` has passed since ``began``, checking all along
    that the pipeline waits (still RUNNING, nothing raised) instead of failing."""
    stop = threading.Event()
    while (left := OUTAGE_S - (time.monotonic() - began)) > 0:
        assert runner.status.phase is Phase.RUNNING and not errors, (runner.status.detail, errors)
        stop.wait(min(left, 0.5))
    assert runner.status.phase is Phase.RUNNING and not errors, (runner.status.detail, errors)
