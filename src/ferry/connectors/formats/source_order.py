"""Where a change event stands in its source database's log.

Debezium's source block says where each change was read: MySQL and MariaDB by binlog file,
position and row, PostgreSQL by LSN. Within one table these positions order every change, the
truncate events too, across the partitions of the table's topic, which Kafka does not order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

#: (binlog file, position, row) for MySQL and MariaDB; ("", LSN, 0) for PostgreSQL.
SourceOrder = tuple[str, int, int]


def source_order(source: Any) -> SourceOrder | None:
    """The position of a Debezium source block, or None when it has none that orders changes."""
    if not isinstance(source, Mapping):
        return None
    file, pos = source.get("file"), source.get("pos")
    if isinstance(file, str) and isinstance(pos, int):
        row = source.get("row")
        return (file, pos, row if isinstance(row, int) else 0)
    lsn = source.get("lsn")
    if isinstance(lsn, int):
        return ("", lsn, 0)
    return None


def _object(value: bytes | None) -> dict[str, Any] | None:
    """A record value's JSON object; None for no value, text that is not JSON, or another value."""
    if not value:
        return None
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def record_columns(value: bytes | None) -> list[str] | None:
    """The row's column names, in order, of a Debezium JSON record with the schema envelope (the
    ``after`` struct's fields, or the flattened row's); None without a schema."""
    parsed = _object(value)
    schema = parsed.get("schema") if parsed is not None else None
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return None
    row = next((f for f in fields if isinstance(f, dict) and f.get("field") == "after"), None)
    if row is not None:
        fields = row.get("fields")
        if not isinstance(fields, list):
            return None
    return [f["field"] for f in fields if isinstance(f, dict) and isinstance(f.get("field"), str)]


def record_source_order(value: bytes | None) -> SourceOrder | None:
    """The source position of a Debezium JSON record's value (with or without the schema envelope)."""
    parsed = _object(value)
    if parsed is None:
        return None
    payload = parsed.get("payload", parsed) if "schema" in parsed else parsed
    return source_order(payload.get("source")) if isinstance(payload, dict) else None
