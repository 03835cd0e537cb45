"""The retry policy: how long a pipeline waits for a transient error to pass before it fails.

One policy, configured by the job's ``pipeline.restart-strategy.*`` keys (named after Flink's
``restart-strategy`` options), is used wherever a pipeline calls a system that may be briefly
unavailable: the sink's flush and schema changes, the state store's checkpoint, the dead-letter
producer, Kafka admin calls. An operation that fails with a transient error (a
:class:`~ferry.exceptions.TransientError`, or what the caller's ``transient`` predicate accepts) is
tried again after an exponentially growing, jittered delay, until it succeeds, the attempts are
used up or the next wait would pass the policy's total ``timeout``; then the last error is raised as
it was. Any other error is raised at once: retrying cannot fix a refused login or a refused change.

The total ``timeout`` is the moment of the last attempt: a wait that would pass it is shortened to
end there, so an outage shorter than the timeout is always waited out and one longer fails the
operation one attempt after the timeout (as the retry's message says).

While it waits, ``on_wait`` is told what failed, which attempt it was and when the next one comes
(a :class:`RetryWait`, whose text is the status detail), so the pipeline's status, its web page and
its metrics show it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, Field, model_validator
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)
from tenacity.wait import wait_base

from ferry.exceptions import TransientError
from ferry.options import ConfigModel, Duration

__all__ = [
    "Operation",
    "RestartStrategyConfig",
    "RestartStrategyType",
    "RetryPolicy",
    "RetryWait",
    "is_transient",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Operation(StrEnum):
    """The kind of call a retry retries: a small fixed set, the ``operation`` label of the retry
    metrics (the text of :attr:`RetryWait.what` names the table or topic; a label must not)."""

    CHECKPOINT_READ = "checkpoint.read"
    CHECKPOINT_SAVE = "checkpoint.save"
    STATE_STORE = "state-store"
    SINK_FLUSH = "sink.flush"
    SINK_COMMIT = "sink.commit"
    SINK_CONNECT = "sink.connect"
    SINK_SCHEMA_READ = "sink.schema.read"
    SINK_SCHEMA_CHANGE = "sink.schema.change"
    DEAD_LETTER_WRITE = "dead-letter.write"
    DEAD_LETTER_READ = "dead-letter.read"
    BROKER_REQUEST = "broker.request"
    BROKER_CONNECT = "broker.connect"
    SCHEMA_REGISTRY_READ = "schema-registry.read"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class RetryWait:
    """A retry waiting: what failed, which attempt it was and when the next one comes. Its text is
    the status detail ("saving the checkpoint: attempt 3 of 100 failed (...); retrying in 2.1 s
    (giving up 120 s after the first attempt)")."""

    #: What is retried ("saving the checkpoint", "flushing the sink").
    what: str
    #: The attempt that failed (the first is 1), and the most the policy makes.
    attempt: int
    attempts: int
    #: The error of that attempt, one line.
    error: str
    #: The wait before the next attempt (seconds), and when that attempt comes (epoch ms).
    wait_s: float
    next_attempt_ms: int
    #: When the operation is given up: its first attempt plus the policy's timeout (epoch ms);
    #: None when something else decides (a broker the client reconnects to by itself).
    gives_up_ms: int | None
    #: The policy's total time, for the message.
    timeout_s: float | None = None
    #: The kind of call retried (the metrics' label).
    operation: Operation = Operation.OTHER

    def __str__(self) -> str:
        bound = "" if self.timeout_s is None else f" (giving up {self.timeout_s:g} s after the first attempt)"
        attempts = f" of {self.attempts}" if self.attempts else ""
        return (
            f"{self.what}: attempt {self.attempt}{attempts} failed ({self.error}); "
            f"retrying in {self.wait_s:.1f} s{bound}"
        )


#: Told, before each wait, what the pipeline is waiting for.
OnWait = Callable[[RetryWait], None]


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` may pass on a later attempt: ferry's own transient errors."""
    return isinstance(error, TransientError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with jitter, bounded by a number of attempts and a total time.

    The ``n``-th wait is ``initial_s * multiplier ** (n - 1)``, at most ``max_s``, varied by up to
    ``jitter`` of itself either way (so that workers that failed together do not retry together).
    """

    attempts: int = 100
    timeout_s: float = 120.0
    initial_s: float = 0.5
    max_s: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.1
    #: The level of the log line each retry writes (races other writers win are not warnings).
    log_level: int = logging.WARNING

    def call(
        self,
        work: Callable[[], T],
        what: str,
        *,
        operation: Operation = Operation.OTHER,
        on_wait: OnWait | None = None,
        transient: Callable[[BaseException], bool] = is_transient,
    ) -> T:
        """``work()``, tried again after a transient error under this policy; ``what`` names it in
        logs and in the status detail ("saving the checkpoint"), ``operation`` is its kind."""
        retrying = Retrying(
            # the last attempt is at the timeout: _Backoff shortens the wait before it to end there
            stop=stop_after_attempt(self.attempts) | stop_after_delay(self.timeout_s),
            wait=_Backoff(self),
            retry=retry_if_exception(transient),
            before_sleep=_announcer(self, what, operation, on_wait),
            reraise=True,
        )
        try:
            return retrying(work)
        except BaseException as e:
            attempt = retrying.statistics.get("attempt_number", 1)
            if attempt > 1 and transient(e):
                log.error("%s failed %d times; giving up: %s", what, attempt, e)
            raise

    def waits(self) -> list[float]:
        """The waits between attempts without jitter when each attempt fails at once: the last one
        shortened to end at the total time (for docs and tests)."""
        out: list[float] = []
        for n in range(1, self.attempts):
            left = self.timeout_s - sum(out)
            if left <= 0:
                break
            out.append(min(self._base_wait(n), left))
        return out

    def _base_wait(self, attempt: int) -> float:
        return float(min(self.max_s, self.initial_s * self.multiplier ** (attempt - 1)))


class _Backoff(wait_base):
    """The policy's wait after the ``n``-th failed attempt."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    def __call__(self, retry_state: RetryCallState) -> float:
        base = self.policy._base_wait(retry_state.attempt_number)
        jitter = self.policy.jitter
        wait = max(0.0, base * (1 + random.uniform(-jitter, jitter)))
        # no wait passes the total time: the last attempt comes at it, not a whole wait before
        left = self.policy.timeout_s - (retry_state.seconds_since_start or 0.0)
        return min(wait, max(left, 0.0))


def _announcer(
    policy: RetryPolicy, what: str, operation: Operation, on_wait: OnWait | None
) -> Callable[[RetryCallState], None]:
    def announce(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait = state.upcoming_sleep
        now = time.time()
        since = state.seconds_since_start or 0.0
        detail = RetryWait(
            what,
            state.attempt_number,
            policy.attempts,
            describe_error(error),
            wait,
            int((now + wait) * 1000),
            int((now - since + policy.timeout_s) * 1000),
            policy.timeout_s,
            operation,
        )
        log.log(policy.log_level, "%s", detail)
        if on_wait is not None:
            on_wait(detail)

    return announce


def describe_error(error: BaseException | None) -> str:
    if error is None:
        return "no error"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


# --------------------------------------------------------------------------------------------------
# The job's options


class RestartStrategyType(StrEnum):
    EXPONENTIAL_DELAY = "exponential-delay"
    FIXED_DELAY = "fixed-delay"
    NONE = "none"


#: Flink's other spellings of the types.
_TYPE_SPELLINGS = {"exponentialdelay": "exponential-delay", "fixeddelay": "fixed-delay", "off": "none"}
_TYPE_SPELLINGS |= {"disable": "none"}


def _type_name(value: Any) -> Any:
    if isinstance(value, str):
        name = value.strip().lower()
        return _TYPE_SPELLINGS.get(name, name)
    return value


_EXPONENTIAL_KEYS = ("initial_backoff", "max_backoff", "backoff_multiplier", "jitter_factor")


class RestartStrategyConfig(ConfigModel):
    """``pipeline.restart-strategy.*``: how transient errors are retried (see :class:`RetryPolicy`)."""

    type: Annotated[RestartStrategyType, BeforeValidator(_type_name)] = RestartStrategyType.EXPONENTIAL_DELAY
    #: The most attempts of one operation (the first included).
    attempts: int = Field(default=100, ge=1)
    #: The most time one operation is retried for, from its first attempt.
    timeout: Duration = timedelta(minutes=2)
    #: ``fixed-delay``: the wait between attempts.
    delay: Duration = timedelta(seconds=1)
    #: ``exponential-delay``: the first wait, the longest wait, the growth and the jitter.
    initial_backoff: Duration = Field(default=timedelta(milliseconds=500), alias="initial-backoff")
    max_backoff: Duration = Field(default=timedelta(seconds=30), alias="max-backoff")
    backoff_multiplier: float = Field(default=2.0, ge=1.0, alias="backoff-multiplier")
    jitter_factor: float = Field(default=0.1, ge=0.0, le=1.0, alias="jitter-factor")

    @model_validator(mode="after")
    def _options_of_the_type(self) -> RestartStrategyConfig:
        """An option the type does not use is refused, unless it has its default (a dump of the job
        has every option)."""
        fields = type(self).model_fields
        unused = {
            RestartStrategyType.EXPONENTIAL_DELAY: ("delay",),
            RestartStrategyType.FIXED_DELAY: _EXPONENTIAL_KEYS,
            RestartStrategyType.NONE: ("delay", *_EXPONENTIAL_KEYS),
        }[self.type]
        given = [k for k in unused if getattr(self, k) != fields[k].default]
        if given:
            names = ", ".join(fields[k].alias or k for k in given)
            raise ValueError(f"{names}: not an option of restart-strategy.type {self.type}")
        return self

    def policy(self) -> RetryPolicy:
        timeout = self.timeout.total_seconds()
        if self.type is RestartStrategyType.NONE:
            return RetryPolicy(attempts=1, timeout_s=timeout)
        if self.type is RestartStrategyType.FIXED_DELAY:
            delay = self.delay.total_seconds()
            return RetryPolicy(self.attempts, timeout, delay, delay, 1.0, 0.0)
        return RetryPolicy(
            self.attempts,
            timeout,
            self.initial_backoff.total_seconds(),
            self.max_backoff.total_seconds(),
            self.backoff_multiplier,
            self.jitter_factor,
        )


def fold_restart_strategy(data: Any) -> Any:
    """``restart-strategy.<key>: value`` of the ``pipeline`` mapping as one ``restart-strategy``
    mapping (Flink writes its options as flat dotted keys)."""
    if not isinstance(data, dict):
        return data
    prefix = "restart-strategy."
    flat = {k[len(prefix) :]: v for k, v in data.items() if isinstance(k, str) and k.startswith(prefix)}
    if not flat:
        return data
    rest = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith(prefix))}
    nested = rest.get("restart-strategy")
    rest["restart-strategy"] = {**(nested if isinstance(nested, dict) else {}), **flat}
    return rest
