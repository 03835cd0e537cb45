"""The retry policy: transient errors retried with growing waits, within a bound; others at once."""

from __future__ import annotations

import sqlite3
import time

import pytest
from pydantic import ValidationError
from sqlalchemy.exc import OperationalError, ProgrammingError

from ferry.config.job import PipelineConfig
from ferry.exceptions import TerminalError, TransientError
from ferry.retry import RestartStrategyType, RetryPolicy, RetryWait
from ferry.state import StateStore

#: Waits of a millisecond: the tests count attempts, they do not wait.
FAST = RetryPolicy(attempts=5, timeout_s=10.0, initial_s=0.001, max_s=0.002)


class Flaky:
    """Fails with ``error`` the first ``failures`` calls, then returns the number of calls."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.calls


def test_a_transient_error_is_retried_and_each_wait_is_announced() -> None:
    work = Flaky(3, TransientError("broker not reachable"))
    waits: list[RetryWait] = []
    assert FAST.call(work, "storing the dead letters", on_wait=waits.append) == 4
    announced = [str(w) for w in waits]
    assert len(announced) == 3
    assert announced[0].startswith("storing the dead letters: attempt 1 of 5 failed")
    assert "TransientError: broker not reachable" in announced[0]
    assert "attempt 3 of 5" in announced[2] and "retrying in" in announced[2]
    # what the status and the metrics show of it
    assert [(w.what, w.attempt, w.attempts) for w in waits] == [
        ("storing the dead letters", n, 5) for n in (1, 2, 3)
    ]
    assert all(w.next_attempt_ms <= (w.gives_up_ms or 0) for w in waits)


def test_a_permanent_error_fails_at_once() -> None:
    work = Flaky(3, TerminalError("permission denied"))
    announced: list[RetryWait] = []
    with pytest.raises(TerminalError, match="permission denied"):
        FAST.call(work, "flushing the sink", on_wait=announced.append)
    assert (work.calls, announced) == (1, [])


def test_the_last_error_is_raised_when_the_attempts_are_used_up() -> None:
    work = Flaky(10, TransientError("still down"))
    with pytest.raises(TransientError, match="still down"):
        FAST.call(work, "saving the checkpoint")
    assert work.calls == 5


def test_no_wait_passes_the_total_timeout_and_the_last_attempt_comes_at_it() -> None:
    # the first wait (an hour) would end after the timeout: it is shortened to end at the timeout,
    # where the last attempt is made, as the message says ("giving up 0.3 s after the first attempt")
    policy = RetryPolicy(attempts=100, timeout_s=0.3, initial_s=3600.0, max_s=3600.0)
    work = Flaky(5, TransientError("down"))
    waits: list[RetryWait] = []
    began = time.monotonic()
    with pytest.raises(TransientError):
        policy.call(work, "flushing the sink", on_wait=waits.append)
    assert work.calls == 2
    assert time.monotonic() - began >= 0.3 * (1 - 1e-3)
    assert (
        len(waits) == 1
        and waits[0].wait_s <= 0.3
        and "giving up 0.3 s after the first attempt" in str(waits[0])
    )


def test_the_policy_gives_up_at_its_timeout_not_a_whole_wait_before() -> None:
    # the default waits 0.5, 1, 2, 4, 8, 16, 30, 30 s and then the 28.5 s left: the last attempt is
    # at 120 s, not at 91.5 s because a full 30 s wait would have passed the timeout
    policy = PipelineConfig.model_validate({}).restart_strategy.policy()
    assert policy.waits() == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 28.5]
    assert sum(policy.waits()) == policy.timeout_s == 120.0


def test_the_caller_says_what_is_transient() -> None:
    work = Flaky(2, ConnectionResetError("reset"))
    assert FAST.call(work, "x", transient=lambda e: isinstance(e, ConnectionError)) == 3
    with pytest.raises(ConnectionResetError):
        FAST.call(Flaky(2, ConnectionResetError("reset")), "x")


def test_waits_grow_exponentially_up_to_the_longest_and_stay_within_the_total() -> None:
    policy = RetryPolicy(attempts=100, timeout_s=60.0, initial_s=1.0, max_s=10.0, multiplier=2.0)
    assert policy.waits() == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0, 5.0]
    assert RetryPolicy(attempts=3, timeout_s=60.0, initial_s=1.0).waits() == [1.0, 2.0]


def test_the_default_survives_a_thirty_second_outage_and_gives_up_within_two_minutes() -> None:
    policy = PipelineConfig.model_validate({}).restart_strategy.policy()
    waits = policy.waits()
    assert sum(waits) > 30 * (1 + policy.jitter) and sum(waits) == 120


def test_restart_strategy_keys_in_flinks_shape() -> None:
    pipeline = PipelineConfig.model_validate(
        {
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.attempts": 4,
            "restart-strategy.delay": "2s",
            "restart-strategy.timeout": "1min",
        }
    )
    assert pipeline.restart_strategy.type is RestartStrategyType.FIXED_DELAY
    assert pipeline.restart_strategy.policy() == RetryPolicy(4, 60.0, 2.0, 2.0, 1.0, 0.0)
    nested = PipelineConfig.model_validate({"restart-strategy": {"type": "exponentialdelay"}})
    assert nested.restart_strategy.type is RestartStrategyType.EXPONENTIAL_DELAY
    none = PipelineConfig.model_validate({"restart-strategy.type": "none"}).restart_strategy.policy()
    assert none.attempts == 1


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"restart-strategy.type": "none", "restart-strategy.max-backoff": "1s"}, "max-backoff: not an"),
        ({"restart-strategy.delay": "2s"}, "delay: not an option of restart-strategy.type exponential"),
        ({"restart-strategy.attempts": 0}, "greater than or equal to 1"),
        ({"restart-strategy.jitter-factor": 2}, "less than or equal to 1"),
        ({"restart-strategy.atempts": 3}, "Extra inputs"),
    ],
)
def test_restart_strategy_refuses_what_it_would_not_use(keys: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PipelineConfig.model_validate(keys)


def _database_error(cls: type[OperationalError] | type[ProgrammingError], message: str) -> Exception:
    return cls("SELECT 1", {}, sqlite3.OperationalError(message))


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (_database_error(OperationalError, "connection refused"), True),
        (_database_error(OperationalError, "server closed the connection unexpectedly"), True),
        (_database_error(OperationalError, "database is locked"), True),
        (_database_error(OperationalError, 'password authentication failed for user "ferry"'), False),
        (_database_error(OperationalError, "attempt to write a readonly database"), False),
        (_database_error(ProgrammingError, "permission denied for table ferry_checkpoints"), False),
        (TransientError("x"), True),
        (ValueError("x"), False),
    ],
)
def test_the_state_store_says_which_of_its_errors_are_transient(error: Exception, transient: bool) -> None:
    assert StateStore.is_transient(error) is transient
