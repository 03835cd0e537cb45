"""A partition's run of Debezium JSON records read as columns (see :mod:`ferry.model.columns`), and
the comparisons of a record key with its row that the runs of
:class:`~ferry.connectors.formats.debezium.DebeziumJsonDecoder` make."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import orjson

from ferry.connectors.record import RecordLike
from ferry.model.events import ColumnChanges, Event, Op, SourcePosition

OPS = {"c": Op.INSERT, "u": Op.UPDATE, "d": Op.DELETE, "r": Op.READ}
ENVELOPE = b'{"schema":'
_new = tuple.__new__
_encode = msgspec.json.encode
Row = dict[str, Any]


def key_payload(key: bytes, prefix: bytes) -> Any:
    """The JSON of a key's payload: after ``prefix`` (its schema's bytes, up to ``"payload":``),
    or the whole key when ``prefix`` is empty. Raises ``orjson.JSONDecodeError``."""
    return orjson.loads(key[len(prefix) : key.rfind(b"}")] if prefix else key)


def key_is_rows(values: Row, row: Any) -> bool:
    """Whether a key's JSON values are those of its row struct, both as read (before any
    conversion); a key column the row does not have is not compared."""
    return all(
        type(in_row := getattr(row, column, value)) is type(value) and in_row == value
        for column, value in values.items()
    )


def parsed_key_matches(key: bytes, prefix: bytes, names: tuple[str, ...], row: Any) -> bool:
    """Whether a key's JSON values are its row struct's, as the decoder's typed path reads them
    (``DebeziumJsonDecoder._typed_key`` and ``_typed_change``): the key after ``prefix`` (``b""``:
    the whole key, whose columns must be ``names``)."""
    if prefix and not key.startswith(prefix):
        return False
    try:
        document = key_payload(key, prefix)
    except orjson.JSONDecodeError:
        return False
    if type(document) is not dict or (not prefix and tuple(document) != names):
        return False
    return not names or key_is_rows(document, row)


def decode_columns(
    records: Sequence[RecordLike],
    index: int,
    run: Any,
    out: list[Event],
    deletes: dict[tuple[str, int], tuple[int, bytes | None]],
) -> int:
    """The decoder's runs (``DebeziumJsonDecoder._decode_runs``) for a run whose rows need no
    conversion (``typed.plain``): the records from ``index`` on that match it, as one
    :class:`~ferry.model.events.ColumnChanges` of their row structs (the same checks, the same
    changes; the partition's last delete noted in ``deletes``); returns the index of the first
    that does not, or holds the unavailable-value placeholder (the row path reads that one).
    ``run`` is the partition's ``_Run`` (typed loosely: that module imports this one)."""
    typed, prefix, table = run.typed, run.prefix, run.table
    decode, unavailable, start, encode = typed.decode, typed.unavailable, len(run.prefix), _encode
    topic, partition = run.topic, run.partition
    db, schema_name, name = run.source
    key_prefix, key_names, key_column = run.key_prefix, run.key_names, run.key_column
    key_head, key_tail, key_format = run.key_head, run.key_tail, run.key_format
    head_end, tail_start = len(key_head), -len(key_tail)
    ops, delete, update, envelope = OPS, Op.DELETE, Op.UPDATE, ENVELOPE
    decode_errors = (msgspec.ValidationError, msgspec.DecodeError)
    changes: list[Op] = []
    befores: list[Any] = []
    afters: list[Any] = []
    offsets: list[int] = []
    times: list[int | None] = []
    first, count = index, len(records)
    last_delete: tuple[int, bytes | None] | None = None
    while index < count:
        record = records[index]
        if record.partition() != partition or record.topic() != topic:
            break
        value = record.value()
        if value is None:
            break
        try:
            if start:
                if not value.startswith(prefix) or not value.endswith(b"}"):
                    break
                payload = decode(value[start:-1])
            else:
                if value.startswith(envelope):
                    break
                payload = decode(value)
        except decode_errors:
            break
        op = ops.get(payload.op)
        source = payload.source
        if (
            op is None
            or source is None
            or source.table != name
            or source.db != db
            or source.schema != schema_name
        ):
            break
        after_struct, before_struct = payload.after, payload.before
        row_struct = before_struct if op is delete else after_struct
        if row_struct is None:
            break
        key = record.key()
        if key_prefix is None:
            if key is not None:
                break
        elif key is None:
            break
        else:
            row_struct = after_struct if after_struct is not None else before_struct
            if not (
                key_column is not None
                and (
                    key == key_format % key_value
                    if type(key_value := getattr(row_struct, key_column)) is int
                    else type(key_value) is str
                    and key.startswith(key_head)
                    and key.endswith(key_tail)
                    and key[head_end:tail_start] == encode(key_value)
                )
            ) and not parsed_key_matches(key, key_prefix, key_names, row_struct):
                break
        if (
            op is update
            and unavailable
            and after_struct is not None
            and any(getattr(after_struct, column) == marker for column, marker in unavailable)
        ):
            break  # a partial row: the row path marks it
        offset = record.offset()
        changes.append(op)
        befores.append(before_struct)
        afters.append(after_struct)
        offsets.append(offset)
        times.append(source.ts_ms or payload.ts_ms)
        if op is delete:
            last_delete = (offset, key)
        index += 1
    if index > first:
        typed.misses = 0
        if last_delete is not None:
            deletes[(topic, partition)] = last_delete
        position = _new(SourcePosition, (topic, partition, offsets[-1]))
        names = tuple(typed.names)
        out.append(
            _new(
                ColumnChanges,
                (table.table_id, names, changes, befores, afters, offsets, times, position),
            )
        )
    return index
