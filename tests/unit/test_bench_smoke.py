"""The throughput benchmark's event stream: the counts, the schema changes, and that ferry reads it whole."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import orjson
import pytest

from ferry.connectors.formats import decoder_for
from ferry.connectors.record import Record
from ferry.model.events import BadRecord, DataChange, SchemaObserved

BENCH = Path(__file__).resolve().parents[2] / "bench" / "throughput.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_throughput", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _records(stream: list[tuple[str, bytes | None, bytes]]) -> list[Record]:
    offsets: Counter[str] = Counter()
    records = []
    for topic, key, value in stream:
        records.append(Record(topic, 0, offsets[topic], key=key, value=value))
        offsets[topic] += 1
    return records


def test_the_stream_has_the_events_and_schema_changes_asked_for(bench: ModuleType) -> None:
    workload = bench.Workload(events=4000, tables=4, change_every=500, server="smoke")
    generator = bench.EventGenerator(workload)
    stream = list(generator)

    assert len(stream) == 4000
    assert Counter(topic for topic, _, _ in stream) == dict.fromkeys(workload.topics(), 1000)
    assert sum(generator.ops.values()) == 4000
    assert generator.ops["c"] > generator.ops["u"] > generator.ops["d"] > 0
    assert sum(generator.live_rows.values()) == generator.ops["c"] - generator.ops["d"]

    # every table changes at its staggered offsets, alternating additions and widenings
    assert len(generator.changes) == 8
    assert Counter(c.kind for c in generator.changes) == {"add": 4, "widen": 4}
    for index, table in enumerate(bench.table_names(4)):
        offsets = [c.table_event for c in generator.changes if c.table == table]
        first = generator.first_change_at(index)
        assert offsets == [first, first + 500]

    # the envelope changes exactly where a change was made, and only there
    for change in generator.changes:
        topic, _, value = stream[change.event]
        previous = next(v for t, _, v in reversed(stream[: change.event]) if t == topic)
        assert orjson.loads(value)["schema"] != orjson.loads(previous)["schema"]
    shapes = Counter((topic, orjson.dumps(orjson.loads(value)["schema"])) for topic, _, value in stream)
    assert len(shapes) == 4 + 8


def test_the_stream_drops_and_renames_columns_when_asked(bench: ModuleType) -> None:
    workload = bench.Workload(
        events=4000, tables=2, change_every=500, server="smoke", changes=("drop", "rename")
    )
    generator = bench.EventGenerator(workload)
    stream = list(generator)
    assert Counter(c.kind for c in generator.changes) == {"drop": 4, "rename": 4}
    assert all(("DROP COLUMN" in c.ddl) == (c.kind == "drop") for c in generator.changes)
    last = {topic: orjson.loads(value) for topic, _, value in stream}
    for payload in last.values():
        names = [f["field"] for f in payload["schema"]["fields"][1]["fields"]]  # the row's columns
        assert "id" in names and "note" in names  # what the read-back checks is never changed
        assert "amount" not in names and "active" not in names
        assert "status_r" in names and "created_at_r" in names and "status" not in names


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
def test_ferry_decodes_every_event_and_sees_every_schema_change(bench: ModuleType, with_schema: bool) -> None:
    workload = bench.Workload(
        events=2000, tables=2, change_every=400, with_schema=with_schema, server="smoke"
    )
    generator = bench.EventGenerator(workload)
    records = _records(list(generator))

    decoder = decoder_for("debezium-json", infer_types=True)  # as the bench's job accepts (payload-only)
    events = [
        event
        for start in range(0, len(records), 500)
        for event in decoder.decode(records[start : start + 500])
    ]

    assert [e for e in events if isinstance(e, BadRecord)] == []
    assert sum(1 for e in events if isinstance(e, DataChange)) == 2000
    observed = [e for e in events if isinstance(e, SchemaObserved)]
    if with_schema:
        # one schema per table to start with, then one per change
        assert len(observed) == 2 + len(generator.changes)
    else:
        # inferred from values: a widened int stays BIGINT, so only additions show
        additions = sum(1 for c in generator.changes if c.kind == "add")
        assert len(observed) == 2 + additions


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
def test_the_ceiling_parses_the_payload_ferry_parses(bench: ModuleType, with_schema: bool) -> None:
    workload = bench.Workload(
        events=1200, tables=2, change_every=300, with_schema=with_schema, server="smoke"
    )
    generator = bench.EventGenerator(workload)
    payloads = bench.PayloadBytes()
    whole = 0
    for topic, _key, value in generator:
        data, is_whole = payloads.split(value, topic, 0)
        whole += is_whole
        document = orjson.loads(value)
        expected = document["payload"] if with_schema else document
        assert (orjson.loads(data)["payload"] if is_whole else orjson.loads(data)) == expected
        if with_schema and not is_whole:
            assert len(data) < len(value) // 3  # the schema text is not parsed again
    # with the envelope, a record is parsed whole once per schema and table, as ferry's decoder does
    assert whole == (2 + len(generator.changes) if with_schema else 0)
    assert payloads.whole == whole


def test_the_mix_sets_the_shares_of_inserts_updates_and_deletes(bench: ModuleType) -> None:
    args = bench.parse_args(["--mix", "50/50/0"])
    assert args.mix_shares == (0.5, 0.5, 0.0)
    workload = bench.Workload(events=4000, tables=2, change_every=10_000, mix=args.mix_shares, server="smoke")
    generator = bench.EventGenerator(workload)
    list(generator)
    assert generator.ops["d"] == 0
    assert 1800 < generator.ops["u"] < 2200
    assert sum(generator.live_rows.values()) == generator.ops["c"]

    default = bench.EventGenerator(bench.Workload(events=4000, tables=2, change_every=10_000, server="smoke"))
    list(default)
    assert default.ops["c"] > default.ops["u"] > default.ops["d"] > 0


@pytest.mark.parametrize("mix", ["70/30", "0/50/50", "a/b/c", "5/-1/96"])
def test_a_mix_that_is_not_three_shares_with_inserts_is_refused(
    bench: ModuleType, mix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--mix", mix])
    assert exit_info.value.code == 2
    assert "--mix takes three shares" in capsys.readouterr().err
