"""The shape of a consumed Kafka record, as the decoders see it.

In production the decoders receive ``confluent_kafka.Message`` objects; :class:`RecordLike` is
the part of that interface they use, and :class:`Record` is a small in-memory implementation of
it for tests, replays and the memory source.
"""

from __future__ import annotations

from typing import Protocol

#: ``timestamp()`` types, the same numbers as ``confluent_kafka.TIMESTAMP_*``.
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

Headers = list[tuple[str, bytes | None]]


class RecordLike(Protocol):
    """The accessors of ``confluent_kafka.Message`` that decoders call."""

    def topic(self) -> str: ...

    def partition(self) -> int: ...

    def offset(self) -> int: ...

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...

    def timestamp(self) -> tuple[int, int]: ...

    def headers(self) -> Headers | None: ...


class Record:
    """One Kafka record held in memory, with ``confluent_kafka.Message``'s accessor methods.

    ``key`` and ``value`` may be given as text for convenience; they are stored UTF-8 encoded.
    """

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_timestamp", "_topic", "_value")

    def __init__(
        self,
        topic: str,
        partition: int = 0,
        offset: int = 0,
        *,
        key: bytes | str | None = None,
        value: bytes | str | None = None,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, 0),
        headers: Headers | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key.encode() if isinstance(key, str) else key
        self._value = value.encode() if isinstance(value, str) else value
        self._timestamp = timestamp
        self._headers = headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def headers(self) -> Headers | None:
        return self._headers

    def __repr__(self) -> str:
        size = "null" if self._value is None else f"{len(self._value)} bytes"
        return f"Record({self._topic}[{self._partition}]@{self._offset}, value {size})"
