"""The runner on Debezium streams with the in-package doubles: table drops from the schema-change
topic, tombstones, deletes whose before-image no longer fits, dead letters as they were read, and a
bounded read whose every record was bad."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from ferry.connectors.formats import decoder_for
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS, Event
from ferry.model.schema import TableId
from ferry.pipeline.exceptions import BadRecordError, NothingWrittenError, SchemaChangeRefusedError
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.base import ChangeKind, SinkCapabilities, Support
from ferry.sinks.memory import ALL_SUPPORTED, MemorySink
from ferry.state import StateStore

TABLE = TableId(None, "db", "t")


class ListHints:
    """The schema-change topic as a list, read when the test says."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.decoder = decoder_for("debezium-schema-change")
        self.position = 0

    def open(self, start: Mapping[int, int]) -> None:
        self.position = start.get(0, 0)

    def drain(self) -> list[Event]:
        records, self.position = self.records[self.position :], len(self.records)
        return self.decoder.decode(records)

    def sync(self, timeout: float) -> list[Event]:
        return self.drain()

    def close(self) -> None:
        pass


def table() -> dbz.DebeziumTable:
    return dbz.DebeziumTable(
        "srv",
        "db",
        "t",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("n", dbz.INT64)],
    )


def records(pairs: list[tuple[bytes | None, bytes | None]], topic: str = "srv.db.t") -> list[Record]:
    return [Record(topic, 0, i, key=k, value=v) for i, (k, v) in enumerate(pairs)]


def runner_for(
    source: MemorySource,
    sink: MemorySink,
    tmp_path: Path,
    *,
    hints: ListHints | None = None,
    behavior: SchemaChangeBehavior = SchemaChangeBehavior.EVOLVE,
    fail_on_bad_record: bool = False,
    dead_letter: MemoryDeadLetter | None = None,
) -> PipelineRunner:
    return PipelineRunner(
        settings=RunnerSettings(name="dbz", tune_gc=False, fail_on_bad_record=fail_on_bad_record),
        source=source,
        decode=decoder_for("debezium-json", infer_types=True).decode,
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, behavior, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=dead_letter or MemoryDeadLetter(),
        hints=hints,
    )


def drop_table_record() -> Record:
    key, value = table().schema_change("DROP TABLE `t`")
    # the schema-change topic's record of a DROP TABLE: the table's id and no definition
    import orjson

    message = orjson.loads(value)
    message["tableChanges"] = [{"type": "DROP", "id": '"db"."t"'}]
    return Record("srv", 0, 0, key=key, value=orjson.dumps(message))


def test_a_table_drop_from_the_schema_change_topic_reaches_the_sink_once_its_rows_are_written(
    tmp_path: Path,
) -> None:
    t = table()
    source = MemorySource(records([t.insert({"id": 1, "n": 1}), t.insert({"id": 2, "n": 2})]))
    sink = MemorySink()
    hints = ListHints([])
    runner = runner_for(source, sink, tmp_path, hints=hints)
    runner.open()
    first = source.poll(1, 0)
    runner.process(runner.decode(first), first)
    hints.records.append(drop_table_record())
    runner.read_hints()
    assert TABLE in sink.tables  # row 2, written before the drop, is still to be read
    rest = source.poll(10, 0)
    runner.process(runner.decode(rest), rest)
    assert TABLE not in sink.tables
    assert [str(c) for c in sink.applied] == [
        "create.table db.t (`id` INT NOT NULL, `n` BIGINT, PRIMARY KEY (id))",
        "drop.table db.t",
    ]
    history = runner.state.schema_history("dbz")
    assert [(h.change, h.outcome) for h in history] == [
        ("create.table db.t (`id` INT NOT NULL, `n` BIGINT, PRIMARY KEY (id))", "apply"),
        ("drop.table db.t", "apply"),
    ]
    runner.close()


def test_a_table_drop_the_sink_cannot_apply_fails_under_evolve_naming_it(tmp_path: Path) -> None:
    t = table()
    source = MemorySource(records([t.insert({"id": 1, "n": 1})]))
    no_drops = SinkCapabilities(changes={**ALL_SUPPORTED.changes, ChangeKind.DROP_TABLE: Support.UNSUPPORTED})
    sink = MemorySink(capabilities=no_drops)
    runner = runner_for(source, sink, tmp_path, hints=ListHints([drop_table_record()]))
    runner.open()
    with pytest.raises(SchemaChangeRefusedError, match=r"drop.table db.t"):
        batch = source.poll(10, 0)
        runner.process(runner.decode(batch), batch)
    runner.close()


def test_tombstones_are_counted_and_passed_over_even_with_on_bad_record_fail(tmp_path: Path) -> None:
    t = table()
    key, _ = t.insert({"id": 1, "n": 1})
    stream = [t.insert({"id": 1, "n": 1}), t.delete({"id": 1, "n": 1}), (key, None)]
    source = MemorySource(records(stream))
    sink, dead = MemorySink(), MemoryDeadLetter()
    runner = runner_for(source, sink, tmp_path, fail_on_bad_record=True, dead_letter=dead)
    runner.run()
    assert runner.metrics.tombstones == 1 and runner.metrics.bad_records == 0 and dead.records == []
    assert sink.rows(TABLE) == []


def test_a_delete_whose_before_image_no_longer_fits_the_sink_deletes_by_key(tmp_path: Path) -> None:
    t = table()
    t.columns = [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("n", dbz.INT32)]
    first = [t.insert({"id": 1, "n": 1}), t.insert({"id": 2, "n": 2})]
    t.change_type("n", dbz.INT64)  # widened at the source; the sink keeps INT (the change is skipped)
    later = [t.delete({"id": 1, "n": 2**40})]
    source = MemorySource(records(first + later))
    sink, dead = MemorySink(), MemoryDeadLetter()
    sink.refuse_tags = {"alter.column.type"}
    runner = runner_for(source, sink, tmp_path, behavior=SchemaChangeBehavior.LENIENT, dead_letter=dead)
    runner.run()
    assert sink.tables[TABLE].schema.find("n") is not None
    assert sink.tables[TABLE].schema.column("n").type == T.INT()
    assert sink.rows(TABLE) == [{"id": 2, "n": 2}]
    assert dead.records == []


def test_a_row_the_sink_cannot_take_goes_to_the_dead_letter_as_it_was_read(tmp_path: Path) -> None:
    t = table()
    t.columns = [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("n", dbz.INT32)]
    first = [t.insert({"id": 1, "n": 1})]
    t.change_type("n", dbz.INT64)
    later = [t.insert({"id": 2, "n": 2**40})]
    stream = records(first + later)
    source = MemorySource(stream)
    sink, dead = MemorySink(), MemoryDeadLetter()
    sink.refuse_tags = {"alter.column.type"}
    runner = runner_for(source, sink, tmp_path, behavior=SchemaChangeBehavior.LENIENT, dead_letter=dead)
    runner.run()
    [letter] = dead.records
    assert (letter.partition, letter.offset) == (0, 1)
    assert (letter.key, letter.value) == (stream[1].key(), stream[1].value())
    assert "n" in letter.reason


def test_a_bounded_read_whose_every_record_went_to_the_dead_letter_fails_naming_the_cause(
    tmp_path: Path,
) -> None:
    source = MemorySource(records([(b"1", b"<order id=1/>"), (b"2", b"<order id=2/>")]))
    runner = runner_for(source, MemorySink(), tmp_path)
    with pytest.raises(
        NothingWrittenError, match=r"every one of the 2 records .*malformed JSON.*source.value.format"
    ):
        runner.run()
    assert runner.status.phase == "FAILED"


def test_on_bad_record_fail_names_the_record(tmp_path: Path) -> None:
    source = MemorySource(records([(b"1", b"not json")]))
    runner = runner_for(source, MemorySink(), tmp_path, fail_on_bad_record=True)
    with pytest.raises(BadRecordError, match=r"topic srv.db.t, partition 0, offset 0"):
        runner.run()


class PollingSource(MemorySource):
    """A memory source whose consumer must be polled to stay in its group: counts those polls."""

    def __init__(self, records: list[Record]) -> None:
        super().__init__(records)
        self.keep_alives = 0

    def keep_alive(self) -> list[Record]:
        self.keep_alives += 1
        return []


def test_a_batch_dense_in_schema_changes_is_processed_in_parts_polling_the_consumer_between(
    tmp_path: Path,
) -> None:
    t = table()
    stream = []
    for i in range(6):
        stream.append(t.insert({"id": i, "n": i, **{f"c{j}": j for j in range(i)}}))
        t.add_column(f"c{i}", dbz.INT32)
    source = PollingSource(records(stream))
    sink = MemorySink()
    runner = PipelineRunner(
        settings=RunnerSettings(name="dense", tune_gc=False, poll_budget_s=0.0),
        source=source,
        decode=decoder_for("debezium-json", infer_types=True).decode,
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.run()
    # one poll of the consumer before each schema change but the first of the batch
    assert source.keep_alives == 5
    assert len(sink.rows(TABLE)) == 6 and runner.metrics.records_read == 6
    assert sink.tables[TABLE].schema.names == ("id", "n", "c0", "c1", "c2", "c3", "c4")
