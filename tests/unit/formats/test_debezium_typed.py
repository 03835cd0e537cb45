"""The typed decoding of debezium-json (msgspec) gives exactly what the generic decoding gives: the
same events, rows (values, types, column order) and schemas for good records, and the same bad
records with the same reasons for records that contradict the shape the typed decoder expects."""

from __future__ import annotations

import binascii
import decimal
import itertools
import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import orjson
import pytest
from format_fixtures import records
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_debezium import FIXTURES

from ferry.connectors.formats.debezium import DebeziumJsonDecoder
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import BadRecord, DataChange, Event, SchemaObserved
from ferry.model.raw_values import RawValues


def _generic() -> DebeziumJsonDecoder:
    decoder = DebeziumJsonDecoder(infer_types=True)
    decoder._typed_rows = False  # the reference: every record read by orjson and the row converters
    return decoder


def _same(typed: list[Event], generic: list[Event]) -> None:
    assert typed == generic
    for a, b in zip(typed, generic, strict=True):
        assert type(a) is type(b)
        if isinstance(a, DataChange) and isinstance(b, DataChange):
            for x, y in ((a.after, b.after), (a.before, b.before)):
                if x is not None and y is not None:
                    assert list(x.items()) == list(y.items())
                    assert [type(v) for v in x.values()] == [type(v) for v in y.values()]


def _materialized(events: list[Event]) -> list[Event]:
    """A raw-values decoder's events with the raw values converted (and their events left out);
    no raw column is a key column of its rows (they are matched by those)."""
    keys = {e.table_id: set(e.schema.primary_keys) for e in events if isinstance(e, SchemaObserved)}
    out = []
    for event in events:
        if isinstance(event, RawValues):
            assert not {name for name, _ in event.columns} & keys.get(event.table_id, set())
            event.materialize()
        else:
            out.append(event)
    return out


def _both(batch: list[Record]) -> list[Event]:
    typed = DebeziumJsonDecoder(infer_types=True).decode(batch)
    generic = _generic().decode(batch)
    _same(typed, generic)
    raw = DebeziumJsonDecoder(raw_values=True, infer_types=True).decode(batch)
    _same(_materialized(raw), generic)
    return typed


@pytest.mark.parametrize("path", sorted(p for p in FIXTURES if "debezium" in p))
def test_fixtures_decode_the_same_typed(path: str) -> None:
    _both(records(path))


def _table(with_schema: bool) -> dbz.DebeziumTable:
    return dbz.DebeziumTable(
        "srv",
        "shop",
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("qty", dbz.INT64),
            dbz.ConnectColumn("price", dbz.DECIMAL(10, 2)),
            dbz.ConnectColumn("amount", dbz.FLOAT64),
            dbz.ConnectColumn("note", dbz.STRING),
            dbz.ConnectColumn("created_at", dbz.TIMESTAMP_MICROS),
            dbz.ConnectColumn("ship_date", dbz.DATE),
            dbz.ConnectColumn("active", dbz.BOOLEAN),
        ],
        with_schema=with_schema,
        ts_ms=1_700_000_000_000,
    )


def _row(key: int, version: int = 0) -> dict[str, Any]:
    return {
        "id": key,
        "qty": key * 10 + version,
        "price": decimal.Decimal(f"{key}.{version:02d}"),
        "amount": key / 4,
        "note": f"note {key}.{version}",
        "created_at": 1_700_000_000_000_000 + key,
        "ship_date": 19_000 + key,
        "active": key % 2 == 0,
    }


def _stream(with_schema: bool, count: int = 30) -> list[tuple[bytes | None, bytes]]:
    table = _table(with_schema)
    out = []
    for key in range(1, count + 1):
        out.append(table.insert(_row(key)))
        if key % 3 == 0:
            out.append(table.update(_row(key - 1), _row(key - 1, 1)))
        if key % 7 == 0:
            out.append(table.delete(_row(key - 2)))
    return out


def _records(pairs: list[tuple[bytes | None, bytes | None]]) -> list[Record]:
    return [Record("srv.shop.orders", 0, i, key=k, value=v) for i, (k, v) in enumerate(pairs)]


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
def test_a_stream_of_changes_decodes_the_same_typed(with_schema: bool) -> None:
    batch = _records(_stream(with_schema))
    decoder = DebeziumJsonDecoder(infer_types=True)
    read, one_by_one, typed = decoder._typed_change, decoder._decode_record, []
    singly: list[Record] = []

    def counted(*args: Any, **kwargs: Any) -> bool:
        typed.append(read(*args, **kwargs))
        return typed[-1]

    def counted_record(record: Any, out: list[Event]) -> None:
        singly.append(record)
        one_by_one(record, out)

    decoder._typed_change = counted  # type: ignore[method-assign]
    decoder._decode_record = counted_record  # type: ignore[method-assign]
    events = decoder.decode(batch)
    _same(events, _generic().decode(batch))
    changes = [e for e in events if isinstance(e, DataChange)]
    assert len(changes) == 30 + 10 + 4
    # all but the partition's first record are read typed, the first of them one by one and
    # the others by the partition's run
    assert len(singly) - typed.count(True) == 1
    assert len(singly) == 2
    if with_schema:
        first = changes[0].after
        assert first is not None
        assert first["price"] == decimal.Decimal("1.00")
        assert first["created_at"] == datetime.fromtimestamp(1_700_000_000, UTC).replace(
            tzinfo=None, microsecond=1
        )


def _payload(value: bytes, with_schema: bool) -> dict[str, Any]:
    document = orjson.loads(value)
    return document["payload"] if with_schema else document


def _with_payload(value: bytes, payload: dict[str, Any], with_schema: bool) -> bytes:
    """The record with another payload; with the envelope, its schema's bytes as they were, so
    that the partition's typed decoder reads it."""
    text = json.dumps(payload, separators=(",", ":")).encode()  # json: integers beyond 64 bits too
    if not with_schema:
        return text
    prefix = value[: value.rindex(b'"payload":') + len(b'"payload":')]
    return prefix + text + b"}"


def _edited(edit: Any, with_schema: bool) -> bytes:
    _, value = _table(with_schema).insert(_row(99))
    payload = _payload(value, with_schema)
    edit(payload)
    return _with_payload(value, payload, with_schema)


def _set(column: str, value: Any) -> Any:
    def edit(payload: dict[str, Any]) -> None:
        payload["after"][column] = value

    return edit


def _drop(column: str) -> Any:
    def edit(payload: dict[str, Any]) -> None:
        del payload["after"][column]

    return edit


EDITS = {
    "unknown column": _set("colour", "red"),
    "null key column": _set("id", None),
    "text for an integer": _set("qty", "12"),
    "float for an integer": _set("qty", 12.0),
    "integer for a float": _set("amount", 12),
    "text for a float": _set("amount", "Infinity"),
    "integer for a boolean": _set("active", 1),
    "integer beyond 64 bits": _set("qty", 1 << 70),
    "integer beyond int64": _set("qty", (1 << 63) + 5),
    "number for a decimal": _set("price", 12.5),
    "bad base64 decimal": _set("price", "@@@"),
    "base64 decimal padded after a whole group": _set("price", "AAAB="),
    "null decimal": _set("price", None),
    "text for a timestamp": _set("created_at", "2024-01-01"),
    "timestamp beyond year 9999": _set("created_at", 253_402_300_800_000_000),
    "timestamp before year 1": _set("created_at", -62_135_596_800_000_001),
    "null timestamp": _set("created_at", None),
    "date beyond year 9999": _set("ship_date", 2_932_897),
    "date before year 1": _set("ship_date", -719_163),
    "null date": _set("ship_date", None),
    "object for a text": _set("note", {"a": 1}),
    "missing column": _drop("note"),
    "missing key column": _drop("id"),
    "unknown op": lambda p: p.update(op="x"),
    "no op": lambda p: p.pop("op"),
    "insert without after": lambda p: p.update(after=None),
    "delete with an after-image only": lambda p: p.update(op="d"),
    "delete with both images": lambda p: p.update(op="d", before=dict(p["after"])),
    "update without before": lambda p: p.update(op="u"),
    "before not an object": lambda p: p.update(before=[1]),
    "no source": lambda p: p.pop("source"),
    "source of another table": lambda p: p["source"].update(table="invoices"),
    "source table a number": lambda p: p["source"].update(table=5),
    "source time as text": lambda p: p["source"].update(ts_ms="soon"),
    "truncate": lambda p: p.update(op="t", after=None),
}


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
@pytest.mark.parametrize("name", sorted(EDITS))
def test_records_of_another_shape_than_the_typed_decoders_decode_as_before(
    name: str, with_schema: bool
) -> None:
    """Each odd record comes after good ones of its partition (the typed decoder is in use) and is
    followed by good ones: every event is the generic path's, bad records with its reasons."""
    good = _stream(with_schema, 6)
    odd = _edited(EDITS[name], with_schema)
    key = _table(with_schema).insert(_row(99))[0]
    events = _both(_records([*good, (key, odd), *_stream(with_schema, 3)]))
    assert sum(isinstance(e, DataChange) for e in events) >= 6 + 1 + 3


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
def test_a_key_that_contradicts_its_row_is_bad_on_the_typed_path_too(with_schema: bool) -> None:
    table = _table(with_schema)
    key, value = table.insert(_row(5))
    other_key, _ = table.insert(_row(6))
    events = _both(_records([*_stream(with_schema, 4), (other_key, value)]))
    bad = events[-1]
    assert isinstance(bad, BadRecord)
    assert "the record key does not match its row" in bad.reason
    assert key != other_key


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
def test_integer_keys_compared_by_their_bytes_match_only_their_own_row(with_schema: bool) -> None:
    """A one-column integer key is compared with its row by its bytes: with a ``%`` in the key's
    schema name, negative and 64-bit values match their rows; a key one digit off is a bad record
    on the typed path as on the generic one, and one that writes the value as a string is the same
    key on both (the slower comparison, as a key's text forms are)."""
    table = dbz.DebeziumTable(
        "srv",
        "shop",
        "or%ders",
        [dbz.ConnectColumn("id", dbz.INT64, optional=False), dbz.ConnectColumn("note", dbz.STRING)],
        with_schema=with_schema,
    )
    keys = [1, -7, 2**63 - 1, -(2**63), 40, 41]
    pairs = [table.insert({"id": k, "note": f"n{k}"}) for k in keys]
    good_key, value = table.insert({"id": 42, "note": "n42"})
    wrong_digit = good_key.replace(b":42}", b":420}")
    as_string = good_key.replace(b":42}", b':"42"}')
    decoder = DebeziumJsonDecoder(infer_types=True)
    decoder.decode(_records(pairs[:2]))
    assert [run.key_column for run in decoder._runs.values()] == ["id"]  # the bytes are compared
    events = _both(_records([*pairs, (wrong_digit, value), (as_string, value), (good_key, value)]))
    changes = [e for e in events if isinstance(e, DataChange | BadRecord)]
    assert [e.after["id"] for e in changes[: len(keys)] if isinstance(e, DataChange) and e.after] == keys
    assert [type(e) for e in changes[len(keys) :]] == [BadRecord, DataChange, DataChange]
    assert all(
        "the record key does not match its row" in e.reason for e in changes if isinstance(e, BadRecord)
    )


def test_flattened_rows_after_change_events_decode_as_before() -> None:
    """A partition that switches to ExtractNewRecordState rows: the typed decoder fails on each of
    them, is given up after a run of failures, and nothing differs."""
    table = _table(False)
    flat = [
        (table.insert(_row(k))[0], orjson.dumps({**_row(k), "price": "AQ==", "__op": "c"}))
        for k in range(100, 180)
    ]
    events = _both(_records([*_stream(False, 5), *flat, *_stream(False, 2)]))
    assert sum(isinstance(e, DataChange) for e in events) == 5 + 1 + 80 + 2


def test_the_same_key_in_a_batch_is_read_once_and_each_row_keeps_its_own_values() -> None:
    table = _table(True)
    pairs = [table.insert(_row(1))]
    pairs += [table.update(_row(1, v), _row(1, v + 1)) for v in range(5)]
    events = _both(_records(pairs))
    afters = [e.after for e in events if isinstance(e, DataChange)]
    assert [a["qty"] for a in afters if a is not None] == [10, 11, 12, 13, 14, 15]
    assert len({id(a) for a in afters}) == len(afters)


def test_columns_converted_together_give_each_row_its_own_values() -> None:
    """More rows than are converted in one go, nulls among them: every row of the typed path has
    the values the generic path reads for it."""
    table = _table(True)
    pairs = []
    for key in range(1, 160):
        row = _row(key)
        if key % 5 == 0:
            row["created_at"] = None
        if key % 7 == 0:
            row["ship_date"] = row["price"] = None
        pairs.append(table.insert(row))
        if key % 4 == 0:
            pairs.append(table.update(row, _row(key, 1)))
    events = _both(_records(pairs))
    afters = [e.after for e in events if isinstance(e, DataChange) and e.op.name == "INSERT"]
    assert [a["ship_date"] is None for a in afters if a is not None].count(True) == 159 // 7
    assert afters[0] is not None and afters[0]["price"] == decimal.Decimal("1.00")


_EPOCH_EDGES = st.one_of(
    st.integers(-(2**64), 2**64),
    st.integers(-62_135_596_800_000_010, -62_135_596_799_999_990),
    st.integers(253_402_300_799_999_990, 253_402_300_800_000_010),
    st.integers(-720_000, -719_000),
    st.integers(2_932_800, 2_933_000),
    st.none(),
)
_BASE64_ISH = st.text(alphabet="AB/+=Q9z-_ \n", max_size=10)
_DECIMALS = st.one_of(
    _BASE64_ISH,
    st.none(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(
        st.fixed_dictionaries(
            {
                "created_at": _EPOCH_EDGES,
                "ship_date": _EPOCH_EDGES,
                "price": _DECIMALS,
            }
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_timestamp_date_or_decimal_decodes_the_same_typed(values: list[dict[str, Any]]) -> None:
    """Values at and beyond the range of dates, text that is or is nearly base64 and numbers for
    a decimal, after good records of the partition (its typed decoder in use): the events are
    the generic path's."""
    good = _stream(True, 3)
    pairs: list[tuple[bytes | None, bytes | None]] = [*good]
    for key, edits in enumerate(values, start=200):
        key_bytes, value = _table(True).insert(_row(key))
        payload = _payload(value, True)
        payload["after"].update(edits)
        pairs.append((key_bytes, _with_payload(value, payload, True)))
    _both(_records([*pairs, *_stream(True, 2)]))


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="AB/+=Q9z-_ \n\t.", max_size=12))
def test_the_typed_decoder_reads_base64_no_more_leniently_than_the_reader(text: str) -> None:
    """Base64 decimals are decoded by the typed decoder's parser: what it accepts, the generic
    path's reader (binascii, strict) accepts too, with the same bytes."""
    try:
        parsed = msgspec.json.decode(orjson.dumps(text), type=bytes)
    except msgspec.ValidationError:
        return
    assert binascii.a2b_base64(text, strict_mode=True) == parsed


_KINDS = st.sampled_from(["insert", "update", "delete", "tombstone", "other key", "no key", *sorted(EDITS)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    with_schema=st.booleans(),
    steps=st.lists(st.tuples(st.integers(0, 1), _KINDS), min_size=1, max_size=40),
)
def test_two_partitions_of_good_and_odd_records_decode_the_same_typed(
    with_schema: bool, steps: list[tuple[int, str]]
) -> None:
    """Records of two partitions in any order, good ones among odd ones (another shape, a key that
    is not the row's, no key, tombstones), after each partition's typed decoder is made: the
    events are the generic path's."""
    table = _table(with_schema)
    batch = []
    for offset, (partition, kind) in enumerate(steps):
        key = offset + 1
        if kind == "insert":
            pair: tuple[bytes | None, bytes | None] = table.insert(_row(key))
        elif kind == "update":
            pair = table.update(_row(key), _row(key, 1))
        elif kind == "delete":
            pair = table.delete(_row(key))
        elif kind == "tombstone":
            pair = (table.insert(_row(key))[0], None)
        elif kind == "other key":
            pair = (table.insert(_row(key + 1000))[0], table.insert(_row(key))[1])
        elif kind == "no key":
            pair = (None, table.insert(_row(key))[1])
        else:
            pair = (table.insert(_row(99))[0], _edited(EDITS[kind], with_schema))
        batch.append(Record("srv.shop.orders", partition, offset, key=pair[0], value=pair[1]))
    # a first good record per partition, so that the typed decoders are made before the rest
    warm = [
        Record("srv.shop.orders", p, 1000 + p, key=k, value=v)
        for p, (k, v) in enumerate(_stream(with_schema, 1)[:1] * 2)
    ]
    _both([*warm, *batch])


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
def test_a_long_batch_with_odd_records_inside_decodes_the_same_typed(with_schema: bool) -> None:
    """Many records of one partition, odd ones among them (near its start, in runs, one with a key
    that is not its row's), and a second partition's records between them."""
    table = _table(with_schema)
    pairs = [table.insert(_row(k)) for k in range(1, 1300)]
    for index in (1, 2, 511, 512, 513, 700, 1023, 1024, 1200):
        pairs[index] = (table.insert(_row(99))[0], _edited(EDITS["text for an integer"], with_schema))
    pairs[900] = (table.insert(_row(5000))[0], pairs[900][1])  # a key that is not its row's
    batch = [Record("srv.shop.orders", 0, i, key=k, value=v) for i, (k, v) in enumerate(pairs)]
    batch[800:800] = [Record("srv.shop.orders", 1, i, key=k, value=v) for i, (k, v) in enumerate(pairs[:50])]
    events = _both(batch)
    bad = [e for e in events if isinstance(e, BadRecord)]
    assert [e.position.offset for e in bad if "the record key does not match its row" in e.reason] == [900]
    assert sum(isinstance(e, DataChange | BadRecord) for e in events) == 1299 + 50


_STREAM_STEPS = st.lists(
    st.tuples(
        st.integers(0, 2),  # topic and partition
        st.integers(0, 1),  # table
        st.sampled_from(
            ["insert", "update", "delete", "add column", "drop column", "odd", "other key", "tombstone"]
        ),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(with_schema=st.booleans(), steps=_STREAM_STEPS, cuts=st.lists(st.integers(0, 60), max_size=6))
# a table's schema changed in another topic, then back in this one: the earlier record schema again
@example(
    with_schema=True,
    steps=[(0, 0, "insert"), (0, 0, "insert"), (2, 0, "add column"), (0, 0, "drop column")],
    cuts=[],
)
def test_a_stream_cut_into_batches_decodes_the_same_typed_as_it_goes(
    with_schema: bool, steps: list[tuple[int, int, str]], cuts: list[int]
) -> None:
    """Two tables in the partitions of two topics, their schemas changing on the way (a column
    added or dropped: records of another schema, or of an earlier one again), odd records among good ones, the stream cut into batches
    anywhere: one decoder that keeps what each partition's records have been from batch to batch
    gives, batch by batch, the generic path's events. (Partition 0 of both topics holds records
    of the same tables, as when a table's topic is renamed.)"""
    tables = [_table(with_schema), _table(with_schema)]
    tables[1].table = "invoices"
    added = [0, 0]
    batch: list[Record] = []
    for offset, (place, which, kind) in enumerate(steps):
        table, key = tables[which], offset + 1
        row = _row(key)
        for n in range(added[which]):
            row[f"extra_{n}"] = key + n
        if kind == "add column":
            table.add_column(f"extra_{added[which]}", dbz.INT64)
            added[which] += 1
            pair: tuple[bytes | None, bytes | None] = table.insert({**row, f"extra_{added[which] - 1}": 7})
        elif kind == "drop column" and added[which]:
            added[which] -= 1
            table.drop_column(f"extra_{added[which]}")
            del row[f"extra_{added[which]}"]
            pair = table.insert(row)
        elif kind in ("insert", "drop column"):
            pair = table.insert(row)
        elif kind == "update":
            pair = table.update(row, {**row, "qty": -key})
        elif kind == "delete":
            pair = table.delete(row)
        elif kind == "odd":
            key_bytes, value = table.insert(row)
            payload = _payload(value, with_schema)
            payload["after"]["qty"] = "12"
            pair = (key_bytes, _with_payload(value, payload, with_schema))
        elif kind == "other key":
            pair = (table.insert({**row, "id": key + 1000})[0], table.insert(row)[1])
        else:
            pair = (table.insert(row)[0], None)
        topic, partition = ("srv.shop.orders", place) if place < 2 else ("srv.shop.orders_v2", 0)
        batch.append(Record(topic, partition, offset, key=pair[0], value=pair[1]))
    typed, generic = DebeziumJsonDecoder(infer_types=True), _generic()
    bounds = sorted({0, len(batch), *(c for c in cuts if c < len(batch))})
    for start, end in itertools.pairwise(bounds):
        _same(typed.decode(batch[start:end]), generic.decode(batch[start:end]))


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
def test_a_raw_values_decoder_leaves_epoch_and_decimal_columns_raw_but_keys(with_schema: bool) -> None:
    """The rows hold what Debezium wrote for the timestamp, the date and the decimal (their event
    ahead of the rows says so), but a key column of those kinds is converted."""
    table = _table(with_schema)
    table.key = ("id", "created_at")
    pairs = [table.insert(_row(key)) for key in range(1, 6)]
    events = DebeziumJsonDecoder(raw_values=True, infer_types=True).decode(_records(pairs))
    raw = [e for e in events if isinstance(e, RawValues)]
    changes = [e for e in events if isinstance(e, DataChange)]
    if not with_schema:  # payload-only rows are typed by what they show: no epoch or decimal
        assert raw == []
        return
    assert events[: len(raw)] == raw and len(raw) == 1
    assert sorted(name for name, _ in raw[0].columns) == ["price", "ship_date"]
    rows = [c.after for c in changes if c.after is not None]
    assert raw[0].rows == rows[1:]  # the first record is read by the generic path (converted)
    second = rows[1]
    assert type(second["price"]) is bytes and type(second["ship_date"]) is int
    assert isinstance(second["created_at"], datetime)
    raw[0].materialize()
    assert second["price"] == decimal.Decimal("2.00") and raw[0].rows == []
