"""Errors of the Kafka source and the dead-letter producer, and which of the client's errors pass."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from ferry.exceptions import TerminalError, TransientError


class SourceError(TerminalError):
    """The source cannot be read (no topics, an unrecoverable Kafka error)."""


class DeadLetterError(TransientError):
    """A record could not be stored in the dead-letter topic."""


class DeadLetterRefusedError(TerminalError):
    """The broker refused a record for the dead-letter topic for good (authorisation, a topic that
    cannot exist): retrying cannot store it."""


#: Errors of the client that are not marked retriable but pass once the broker, the partition's
#: leader or the group's coordinator is back (a broker restarted, a leader being elected).
MAY_PASS = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._WAIT_COORD,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
    }
)


def error_may_pass(error: KafkaError) -> bool:
    """Whether asking again later may succeed: not a fatal error, and retriable or one of
    :data:`MAY_PASS`."""
    return not error.fatal() and (error.retriable() or error.code() in MAY_PASS)


def may_pass(error: BaseException) -> bool:
    """The ``transient`` predicate of :meth:`ferry.retry.RetryPolicy.call` for calls to a broker:
    ferry's transient errors, and the client's errors that :func:`error_may_pass`."""
    if isinstance(error, TransientError):
        return True
    if not isinstance(error, KafkaException) or not error.args:
        return False
    kafka_error = error.args[0]
    return isinstance(kafka_error, KafkaError) and error_may_pass(kafka_error)
