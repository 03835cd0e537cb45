"""Errors raised by the connectors: the Kafka source and the format decoders."""

from __future__ import annotations

from ferry.exceptions import FerryError, TerminalError


class DecodeError(FerryError):
    """A record, or a piece of one (a DDL statement, a type name), cannot be decoded.

    Decoders never let this escape for a single bad record: they turn it into a
    :class:`~ferry.model.events.BadRecord`. The position is set when it is known.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = f" (topic {topic}, partition {partition}, offset {offset})" if topic is not None else ""
        super().__init__(message + where)
        self.reason = message
        self.topic = topic
        self.partition = partition
        self.offset = offset


class UnknownFormatError(TerminalError, ValueError):
    """A source names a record format that ferry has no decoder for, or an option it does not take."""

    def __init__(self, message: str, *, format: str) -> None:
        super().__init__(message)
        self.format = format


class UntypedRecordsError(TerminalError):
    """Records the job has no types for: payload-only Debezium records (the JSON converter with
    ``schemas.enable=false``) without a table definition, when the job does not accept types
    inferred from the values. Their decimals, dates, times and bytes would be written as guesses,
    so the pipeline stops on the first one (the command exits as for an invalid job file)."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int) -> None:
        super().__init__(f"topic {topic}, partition {partition}, offset {offset}: {message}")
        self.topic = topic
        self.partition = partition
        self.offset = offset
