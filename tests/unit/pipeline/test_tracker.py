from ferry.model import events as E
from ferry.model import types as T
from ferry.model.apply import diff_schemas
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.tracker import SchemaTracker

TID = TableId.parse("db.t")


def at(offset: int, partition: int = 0) -> E.SourcePosition:
    return E.SourcePosition("topic", partition, offset)


def schema(*cols: tuple[str, T.DataType]) -> Schema:
    return Schema.of([Column(n, t) for n, t in cols], ["id"])


ID = ("id", T.INT().not_null())


def test_first_schema_creates_the_table_and_the_same_schema_changes_nothing() -> None:
    tracker = SchemaTracker()
    s = schema(ID, ("a", T.STRING()))
    assert tracker.observe(E.SchemaObserved(TID, s, at(0))) == [E.CreateTable(TID, s)]
    assert tracker.observe(E.SchemaObserved(TID, s, at(1))) == []
    assert tracker.version(TID) == 1


def test_drift_becomes_positioned_adds_drops_and_widenings() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.STRING()), ("b", T.INT())), at(0)))
    changes = tracker.observe(
        E.SchemaObserved(TID, schema(ID, ("z", T.INT()), ("a", T.STRING()), ("c", T.DOUBLE())), at(1))
    )
    # additions first; the drop once every partition holding the table passed it (here: at once)
    assert [str(c) for c in changes] == [
        "add.column db.t `z` INT AFTER id",
        "add.column db.t `c` DOUBLE AFTER a",
        "drop.column db.t b",
    ]
    changes = tracker.observe(
        E.SchemaObserved(TID, schema(ID, ("z", T.BIGINT()), ("a", T.STRING()), ("c", T.DOUBLE())), at(2))
    )
    assert changes == [E.AlterColumnType(TID, "z", T.BIGINT(), T.INT())]
    assert tracker.version(TID) == 5


def test_types_never_narrow_and_tightening_is_not_an_event() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.BIGINT())), at(0)))
    assert tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT().not_null())), at(1))) == []
    assert tracker.schema(TID) == schema(ID, ("a", T.BIGINT()))


def test_relaxing_nullability_is_a_type_change() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT().not_null())), at(0)))
    changes = tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT())), at(1)))
    assert changes == [E.AlterColumnType(TID, "a", T.INT(), T.INT().not_null())]


def test_a_rename_needs_ddl_and_is_confirmed_by_records() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.STRING())), at(0)))
    hint = E.SchemaHint(
        TID, (E.RenameColumn(TID, "a", "b"),), "ALTER TABLE t RENAME COLUMN a TO b", ordered=False
    )
    assert tracker.hint(hint) == []  # unordered: waits for a record to show it
    changes = tracker.observe(E.SchemaObserved(TID, schema(ID, ("b", T.STRING())), at(1)))
    assert changes == [E.RenameColumn(TID, "a", "b")]


def test_without_ddl_a_rename_is_a_drop_and_an_add() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.STRING())), at(0)))
    changes = tracker.observe(E.SchemaObserved(TID, schema(ID, ("b", T.STRING())), at(1)))
    assert [c.tag for c in changes] == ["add.column", "drop.column"]


def test_ordered_ddl_applies_where_it_stands() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.STRING())), at(0)))
    hint = E.SchemaHint(
        TID,
        (E.RenameColumn(TID, "a", "b"), E.AddColumn(TID, Column("c", T.INT()))),
        "ALTER ...",
        ordered=True,
    )
    assert [c.tag for c in tracker.hint(hint)] == ["rename.column", "add.column"]
    assert tracker.schema(TID) == schema(ID, ("b", T.STRING()), ("c", T.INT()))
    # a record with the new schema afterwards changes nothing
    assert tracker.observe(E.SchemaObserved(TID, schema(ID, ("b", T.STRING()), ("c", T.INT())), at(2))) == []
    # repeating the DDL (a replay) is not a new change
    assert tracker.hint(E.SchemaHint(TID, (E.AddColumn(TID, Column("c", T.INT())),), "x", ordered=True)) == []


def test_partitions_merge_so_the_table_only_widens() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT())), at(0, partition=0)))
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT())), at(0, partition=1)))
    # partition 0 drops `a` and adds `b` after `id`: partition 1 still has `a`, so only `b` is added
    changes = tracker.observe(E.SchemaObserved(TID, schema(ID, ("b", T.STRING())), at(1, partition=0)))
    assert [str(c) for c in changes] == ["add.column db.t `b` STRING AFTER id"]
    # partition 1 widens `a`
    changes = tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.BIGINT())), at(1, partition=1)))
    assert changes == [E.AlterColumnType(TID, "a", T.BIGINT(), T.INT())]
    # once partition 1 drops `a` too, it goes
    changes = tracker.observe(E.SchemaObserved(TID, schema(ID, ("b", T.STRING())), at(2, partition=1)))
    assert changes == [E.DropColumn(TID, "a")]


def test_whole_table_ddl_schemas_do_not_change_the_table() -> None:
    tracker = SchemaTracker()
    # before any record: the DDL's schema describes the table after changes whose rows are still coming
    ddl = E.SchemaObserved(TID, schema(ID, ("c", T.STRING())), None, ddl="ALTER TABLE t ...")
    assert tracker.observe(ddl) == []
    assert tracker.schema(TID) is None
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT())), at(0)))
    assert tracker.observe(ddl) == []
    assert tracker.schema(TID) == schema(ID, ("a", T.INT()))


def test_a_rename_named_before_the_table_is_seen_waits_for_its_records() -> None:
    tracker = SchemaTracker()
    hint = E.SchemaHint(
        TID, (E.RenameColumn(TID, "a", "b"),), "ALTER TABLE t RENAME COLUMN a TO b", ordered=False
    )
    assert tracker.hint(hint) == []
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.STRING())), at(0)))
    # the pending rename survives a checkpoint and a restart
    restored = SchemaTracker.restore(tracker.snapshot())
    assert restored.observe(E.SchemaObserved(TID, schema(ID, ("b", T.STRING())), at(1))) == [
        E.RenameColumn(TID, "a", "b")
    ]


def test_drop_table_hint_forgets_the_table() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID), at(0)))
    assert tracker.hint(E.SchemaHint(TID, (E.DropTable(TID),), "DROP TABLE t", ordered=False)) == [
        E.DropTable(TID)
    ]
    assert tracker.schema(TID) is None


def test_snapshot_round_trip_keeps_schemas_versions_and_history() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.DECIMAL(10, 2))), at(0)))
    tracker.observe(
        E.SchemaObserved(
            TID, schema(ID, ("a", T.DECIMAL(12, 2)), ("m", T.MAP(T.STRING(), T.INT()))), at(1, partition=3)
        )
    )
    restored = SchemaTracker.restore(tracker.snapshot())
    assert restored.schema(TID) == tracker.schema(TID)
    assert restored.version(TID) == tracker.version(TID) == 3
    assert restored.tables[TID].partitions.keys() == {0, 3}
    assert [h.change for h in restored.tables[TID].history] == [h.change for h in tracker.tables[TID].history]


def test_diff_of_identical_schemas_is_empty() -> None:
    s = schema(ID, ("a", T.INT()))
    assert diff_schemas(TID, s, s) == []


def test_ordered_ddl_for_an_unknown_table_is_an_error() -> None:
    import pytest

    from ferry.model.exceptions import SchemaError

    tracker = SchemaTracker()
    hint = E.SchemaHint(
        TID, (E.AddColumn(TID, Column("c", T.INT())),), "ALTER TABLE t ADD c INT", ordered=True
    )
    with pytest.raises(SchemaError, match="DDL for unknown table db.t"):
        tracker.hint(hint)
    # the unordered schema-change topic talks about every table of the database: no error
    assert tracker.hint(E.SchemaHint(TID, hint.changes, hint.ddl, ordered=False)) == []


def test_ddl_that_tightens_a_column_to_not_null_is_not_an_event() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT())), at(0)))
    tighten = E.AlterColumnType(TID, "a", T.INT().not_null())
    assert (
        tracker.hint(E.SchemaHint(TID, (tighten,), "ALTER TABLE t MODIFY a INT NOT NULL", ordered=True)) == []
    )
    assert tracker.schema(TID) == schema(ID, ("a", T.INT()))


def test_a_fork_changes_apart_and_shares_only_the_tables_it_did_not_change() -> None:
    tracker = SchemaTracker()
    others = [TableId.parse(f"db.o{i}") for i in range(5)]
    for table_id in [TID, *others]:
        tracker.observe(E.SchemaObserved(table_id, schema(ID, ("a", T.INT())), at(0)))
        tracker.observe(E.SchemaObserved(table_id, schema(ID, ("a", T.INT())), at(0, partition=1)))
    tracker.hint(E.SchemaHint(TID, (E.RenameColumn(TID, "a", "b"),), "RENAME a TO b", ordered=False))
    before = tracker.snapshot()
    entries = dict(tracker.tables)

    fork = tracker.fork()
    # partition 0 shows the rename, partition 1 not yet: the rename waits there, with aliases
    assert fork.observe(E.SchemaObserved(TID, schema(ID, ("b", T.INT())), at(1))) == []
    new = TableId.parse("db.new")
    assert fork.observe(E.SchemaObserved(new, schema(ID), at(0))) == [E.CreateTable(new, schema(ID))]
    fork.forget_partitions([("topic", 0)])
    fork.hint(E.SchemaHint(others[0], (E.RenameColumn(others[0], "a", "c"),), "RENAME a TO c", ordered=False))

    assert tracker.snapshot() == before  # the original as it was
    assert fork.aliases(TID, 0) == {"b": "a"} and tracker.aliases(TID, 0) == {}
    assert fork.renames(others[0]) == {"a": "c"} and tracker.renames(others[0]) == {}
    # the table the fork changed is its own copy; every other table's entry is shared, not copied
    assert fork.tables[TID] is not entries[TID] and tracker.tables[TID] is entries[TID]
    assert all(fork.tables[t] is entries[t] for t in others)
    assert new not in tracker.tables

    # the original changes apart from the fork too
    tracker.observe(E.SchemaObserved(others[1], schema(ID, ("a", T.BIGINT())), at(2)))
    assert fork.schema(others[1]) == schema(ID, ("a", T.INT()))
    assert tracker.schema(others[1]) == schema(ID, ("a", T.BIGINT()))


def test_a_fork_tracks_as_the_tracker_restored_from_its_snapshot_does() -> None:
    tracker = SchemaTracker()
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT()), ("x", T.INT())), at(0)))
    tracker.observe(E.SchemaObserved(TID, schema(ID, ("a", T.INT()), ("x", T.INT())), at(0, partition=1)))
    events = [
        E.SchemaObserved(TID, schema(ID, ("a", T.BIGINT())), at(1)),  # x gone here, not on partition 1
        E.SchemaObserved(TID, schema(ID, ("a", T.INT())), at(1, partition=1)),  # x gone there too
    ]
    for event in events:
        fork, restored = tracker.fork(), SchemaTracker.restore(tracker.snapshot())
        assert fork.observe(event) == restored.observe(event)
        assert _without_times(fork.snapshot()) == _without_times(restored.snapshot())
        tracker = fork
    assert tracker.schema(TID) == schema(ID, ("a", T.BIGINT()))


def _without_times(snapshot: dict[str, object]) -> dict[str, object]:
    tables = snapshot["tables"]
    assert isinstance(tables, dict)
    return {
        **snapshot,
        "tables": {
            name: {**table, "history": [[v, c, p] for v, c, _, p in table["history"]]}
            for name, table in tables.items()
        },
    }
