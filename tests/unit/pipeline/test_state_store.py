"""The state store shared by the workers of one pipeline: merged checkpoints, leases, worker status.

SQLite here (a file, as deployments without PostgreSQL use); the same behaviour on a real
PostgreSQL server is in tests/integration/test_workers.py.
"""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ferry.model import events as E
from ferry.model import types as T
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline import tracker as tracker_module
from ferry.pipeline.checkpoints import now_ms
from ferry.pipeline.tracker import SchemaTracker
from ferry.state import StateStore
from ferry.state.store import WORKER_FORGOTTEN_AFTER_MS, merge_schemas

TID = TableId.parse("db.t")
ID = Column("id", T.INT().not_null())


@pytest.fixture
def store(tmp_path: Path) -> Any:
    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    yield state
    state.close()


def tracked(*observed: tuple[int, Schema], changed_ms: int) -> dict[str, Any]:
    """A tracker's snapshot after seeing these (partition, schema) pairs, last changed at ``changed_ms``."""
    tracker = SchemaTracker()
    for offset, (partition, schema) in enumerate(observed):
        tracker.observe(E.SchemaObserved(TID, schema, E.SourcePosition("topic", partition, offset)))
    snapshot = tracker.snapshot()
    for entry in snapshot["tables"][str(TID)]["history"]:
        entry[2] = changed_ms
    return snapshot


def schema(*extra: str) -> Schema:
    return Schema.of([ID, *(Column(name, T.INT()) for name in extra)], ["id"])


def hammer(url: str, writers: int, rounds: int, work: Any) -> list[BaseException]:
    """``work(store, writer, round)`` from ``writers`` threads, each with its own store, in lockstep."""
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def run(writer: int) -> None:
        state = StateStore(url)
        try:
            for n in range(1, rounds + 1):
                barrier.wait(timeout=30)
                work(state, writer, n)
        except BaseException as e:
            errors.append(e)
            barrier.abort()
        finally:
            state.close()

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def test_a_checkpoint_keeps_the_offsets_of_partitions_another_worker_reads(store: StateStore) -> None:
    store.save_checkpoint("p", {("t", 0): 10, ("t", 1): 20}, {"tables": {}})
    store.save_checkpoint("p", {("t", 2): 30, ("t", 3): 40}, {"tables": {}})
    store.save_checkpoint("p", {("t", 0): 11}, {"tables": {}})
    checkpoint = store.latest_checkpoint("p")
    assert checkpoint is not None
    assert checkpoint.offsets == {("t", 0): 11, ("t", 1): 20, ("t", 2): 30, ("t", 3): 40}
    # other pipelines are other checkpoints
    store.save_checkpoint("q", {("t", 0): 1}, {"tables": {}})
    assert store.latest_checkpoint("q").offsets == {("t", 0): 1}  # type: ignore[union-attr]


def test_a_checkpoint_saved_without_merging_is_exactly_what_is_given(store: StateStore) -> None:
    store.save_checkpoint("p", {("t", 0): 10, ("t", 1): 20}, {"tables": {}})
    store.save_checkpoint("p", {("t", 0): 3}, {"tables": {}}, merge=False)
    assert store.latest_checkpoint("p").offsets == {("t", 0): 3}  # type: ignore[union-attr]


def test_workers_checkpointing_at_the_same_moment_lose_none_of_each_others_offsets(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"

    def save(state: StateStore, writer: int, n: int) -> None:
        state.save_checkpoint("p", {("t", writer): n}, {"tables": {}})

    assert hammer(url, writers=4, rounds=40, work=save) == []
    store = StateStore(url)
    assert store.latest_checkpoint("p").offsets == {("t", w): 40 for w in range(4)}  # type: ignore[union-attr]
    store.close()


def test_schemas_merge_by_partition_owner_and_the_table_schema_has_every_partitions_columns() -> None:
    # worker A reads partition 0 and saw column a; worker B reads partition 1 and saw column b
    stored = tracked((0, schema()), (1, schema()), (0, schema("a")), changed_ms=1_000)
    written = tracked((0, schema()), (1, schema()), (1, schema("b")), changed_ms=2_000)
    merged = merge_schemas(stored, written, partitions={1})
    table = SchemaTracker.restore(merged).tables[TID]
    assert table.partitions == {0: schema("a"), 1: schema("b")}
    # in the order of the side that changed the table last (B), the other columns after
    assert table.schema.names == ("id", "b", "a")
    # B's view changed last: its version and history are kept
    assert [h.change for h in table.history][-1] == "add.column db.t `b` INT LAST"
    # a stale view of a partition the writer does not read never replaces the owner's
    stale = tracked((0, schema()), (1, schema("b")), changed_ms=3_000)
    again = SchemaTracker.restore(merge_schemas(merged, stale, partitions={1})).tables[TID]
    assert again.partitions[0] == schema("a") and again.schema.names == ("id", "b", "a")


def test_a_worker_that_reads_every_partition_saves_its_schemas_as_they_are() -> None:
    stored = tracked((0, schema()), (1, schema("b")), changed_ms=1_000)
    written = tracked((0, schema()), (1, schema("b")), (0, schema("a", "b")), changed_ms=2_000)
    assert merge_schemas(stored, written, partitions={0, 1}) == written


def test_schemas_of_a_table_only_one_worker_tracks_are_kept() -> None:
    other = TableId.parse("db.u")
    stored = tracked((0, schema("a")), changed_ms=1_000)
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(other, schema("z"), E.SourcePosition("topic", 1, 0)))
    merged = SchemaTracker.restore(merge_schemas(stored, tracker.snapshot(), partitions={1}))
    assert merged.schema(TID) == schema("a") and merged.schema(other) == schema("z")


def test_a_save_merges_only_the_tables_that_differ_from_the_stored_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # worker B (partition 1) saves over worker A's checkpoint: B saw table t's column b, A column a;
    # the other tables B tracks as they are stored, one table is new
    others, new = [TableId.parse(f"db.o{i}") for i in range(30)], TableId.parse("db.new")
    tracker = SchemaTracker()
    for table_id in others:
        tracker.observe(E.SchemaObserved(table_id, schema("x"), E.SourcePosition("topic", 1, 0)))
    alike = tracker.snapshot()["tables"]
    tracker.observe(E.SchemaObserved(new, schema("z"), E.SourcePosition("topic", 1, 0)))
    stored = tracked((0, schema()), (0, schema("a")), changed_ms=1_000)
    stored["tables"] = {**stored["tables"], **copy.deepcopy(alike)}
    written = tracked((1, schema()), (1, schema("b")), changed_ms=2_000)
    written["tables"] = {**written["tables"], **tracker.snapshot()["tables"]}

    parsed: list[dict[str, object]] = []
    parse = tracker_module.schema_from_dict

    def counted(data: dict[str, object]) -> Schema:
        parsed.append(data)
        return parse(data)

    monkeypatch.setattr(tracker_module, "schema_from_dict", counted)
    merged = merge_schemas(stored, written, partitions={1})
    assert len(parsed) == 4  # table t's schema and its partition's, on each side: nothing else is read
    monkeypatch.undo()
    restored = SchemaTracker.restore(merged)
    assert restored.tables[TID].partitions == {0: schema("a"), 1: schema("b")}
    assert restored.tables[TID].schema.names == ("id", "b", "a")
    assert restored.schema(new) == schema("z")
    assert all(merged["tables"][str(t)] == alike[str(t)] for t in others)


def test_a_lease_is_held_by_one_worker_until_released_or_expired(store: StateStore) -> None:
    assert store.take_lease("p", "schema db.t", "w1", ttl_s=30) is None
    assert store.take_lease("p", "schema db.t", "w2", ttl_s=30) == "w1"
    assert store.take_lease("p", "schema db.t", "w1", ttl_s=30) is None  # renewed by its holder
    assert store.take_lease("p", "schema db.u", "w2", ttl_s=30) is None  # another lease
    assert store.take_lease("q", "schema db.t", "w2", ttl_s=30) is None  # another pipeline
    store.release_lease("p", "schema db.t", "w2")  # not its holder: nothing happens
    assert store.take_lease("p", "schema db.t", "w2", ttl_s=30) == "w1"
    store.release_lease("p", "schema db.t", "w1")
    assert store.take_lease("p", "schema db.t", "w2", ttl_s=0.05) is None
    time.sleep(0.1)  # w2 died holding it: it expires
    assert store.take_lease("p", "schema db.t", "w1", ttl_s=30) is None


def test_workers_taking_a_lease_at_the_same_moment_hold_it_one_at_a_time(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    holders: list[int] = []
    overlaps: list[tuple[int, int]] = []

    def hold(state: StateStore, writer: int, n: int) -> None:
        with state.lease("p", "schema db.t", f"w{writer}", ttl_s=30, poll_s=0.005):
            if holders:
                overlaps.append((holders[-1], writer))
            holders.append(writer)
            time.sleep(0.002)
            holders.remove(writer)

    assert hammer(url, writers=3, rounds=15, work=hold) == []
    assert overlaps == []


def test_a_waiting_worker_is_told_who_holds_the_lease(store: StateStore) -> None:
    store.take_lease("p", "schema db.t", "w1", ttl_s=30)
    told: list[str] = []
    threading.Timer(0.2, store.release_lease, ("p", "schema db.t", "w1")).start()
    with store.lease("p", "schema db.t", "w2", ttl_s=30, poll_s=0.02, waiting=told.append):
        assert store.take_lease("p", "schema db.t", "w1", ttl_s=30) == "w2"
    assert told and set(told) == {"w1"}
    assert store.take_lease("p", "schema db.t", "w1", ttl_s=30) is None  # released after the block


def test_the_status_lists_each_worker_with_its_partitions(store: StateStore) -> None:
    store.set_status("p", "RUNNING", "reading", {"records_read": 5, "assigned": {"t": [0, 1]}}, worker="a:1")
    store.set_status("p", "RUNNING", "reading", {"records_read": 7, "assigned": {"t": [2, 3]}}, worker="b:2")
    status = store.get_status("p")
    assert status is not None
    workers = status["metrics"]["workers"]
    assert {w: (s["assigned"], s["records_read"]) for w, s in workers.items()} == {
        "a:1": ({"t": [0, 1]}, 5),
        "b:2": ({"t": [2, 3]}, 7),
    }
    # a worker not heard from for long is dropped from the list
    metrics = {
        **status["metrics"],
        "workers": {**workers, "old:3": {"updated_ms": now_ms() - WORKER_FORGOTTEN_AFTER_MS}},
    }
    store.set_status("p", "RUNNING", "reading", metrics)
    store.set_status("p", "STOPPED", "done", {"records_read": 9, "assigned": {}}, worker="a:1")
    status = store.get_status("p")
    assert status is not None and status["phase"] == "STOPPED"
    assert sorted(status["metrics"]["workers"]) == ["a:1", "b:2"]
    assert status["metrics"]["workers"]["a:1"]["phase"] == "STOPPED"
