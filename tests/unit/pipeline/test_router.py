import pytest

from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.router import Action, SchemaChangeBehavior, SchemaChangeRouter, change_kind
from ferry.sinks.base import ChangeKind, SinkCapabilities, Support
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.memory import MemorySink

TID = TableId.parse("db.t")
SINK_SCHEMA = Schema.of(
    [Column("id", T.INT().not_null()), Column("a", T.STRING()), Column("b", T.INT())], ["id"]
)
ALL = frozenset(SCHEMA_CHANGE_TAGS)

LIMITED = SinkCapabilities(
    changes={
        ChangeKind.CREATE_TABLE: Support.APPLY,
        ChangeKind.ADD_COLUMN_LAST: Support.APPLY,
        ChangeKind.ADD_COLUMN_POSITIONED: Support.APPLY_AT_END,
        ChangeKind.DROP_COLUMN: Support.UNSUPPORTED,
        ChangeKind.RENAME_COLUMN: Support.UNSUPPORTED,
        ChangeKind.ALTER_COLUMN_COMMENT: Support.NOT_SYNCED,
    },
    lenient_rename_as_new_column=True,
)


def router(
    behavior: SchemaChangeBehavior, accepted: frozenset[str] = ALL, capabilities: SinkCapabilities = LIMITED
) -> SchemaChangeRouter:
    return SchemaChangeRouter(MemorySink(capabilities=capabilities), behavior, accepted)


def test_change_kinds() -> None:
    assert change_kind(E.AddColumn(TID, Column("x", T.INT())), SINK_SCHEMA) is ChangeKind.ADD_COLUMN_LAST
    assert (
        change_kind(E.AddColumn(TID, Column("x", T.INT()), E.after("b")), SINK_SCHEMA)
        is ChangeKind.ADD_COLUMN_LAST
    )
    assert (
        change_kind(E.AddColumn(TID, Column("x", T.INT()), E.FIRST), SINK_SCHEMA)
        is ChangeKind.ADD_COLUMN_POSITIONED
    )
    relax = E.AlterColumnType(TID, "id", T.INT())
    assert change_kind(relax, SINK_SCHEMA) is ChangeKind.RELAX_NULLABILITY
    assert change_kind(E.AlterColumnType(TID, "b", T.BIGINT()), SINK_SCHEMA) is ChangeKind.ALTER_COLUMN_TYPE


def test_every_other_change_type_is_the_kind_of_its_name() -> None:
    cased = {E.SchemaChangeType.ADD_COLUMN, E.SchemaChangeType.ALTER_COLUMN_TYPE}
    for change_type in set(E.SchemaChangeType) - cased:
        assert ChangeKind(change_type.value).value == change_type
    assert change_kind(E.DropTable(TID), SINK_SCHEMA) is ChangeKind.DROP_TABLE
    assert change_kind(E.AlterColumnComment(TID, "b", "c"), SINK_SCHEMA) is ChangeKind.ALTER_COLUMN_COMMENT
    assert {k.value.split(".")[0] for k in ChangeKind} <= {
        t.value.split(".")[0] for t in E.SchemaChangeType
    } | {
        "relax",
        "tighten",
    }


def test_exception_fails_on_any_change_but_create_table() -> None:
    r = router(SchemaChangeBehavior.EXCEPTION)
    assert r.decide(E.CreateTable(TID, SINK_SCHEMA), None).action is Action.APPLY
    d = r.decide(E.AddColumn(TID, Column("x", T.INT())), SINK_SCHEMA)
    assert d.action is Action.FAIL and "EXCEPTION" in d.reason


def test_ignore_skips_everything_but_create_table() -> None:
    r = router(SchemaChangeBehavior.IGNORE)
    assert r.decide(E.CreateTable(TID, SINK_SCHEMA), None).action is Action.APPLY
    assert r.decide(E.AddColumn(TID, Column("x", T.INT())), SINK_SCHEMA).action is Action.SKIP


def test_lenient_applies_supported_and_skips_unsupported() -> None:
    r = router(SchemaChangeBehavior.LENIENT)
    assert r.decide(E.AddColumn(TID, Column("x", T.INT())), SINK_SCHEMA).action is Action.APPLY
    assert r.decide(E.DropColumn(TID, "a"), SINK_SCHEMA).action is Action.SKIP
    assert r.decide(E.AlterColumnComment(TID, "a", "c"), SINK_SCHEMA).action is Action.SKIP


def test_evolve_fails_on_unsupported_naming_sink_table_and_change() -> None:
    d = router(SchemaChangeBehavior.EVOLVE).decide(E.DropColumn(TID, "a"), SINK_SCHEMA)
    assert d.action is Action.FAIL
    assert "memory" in d.reason and "db.t" in d.reason and "drop.column" in d.reason
    # not-synced changes are never an error
    assert (
        router(SchemaChangeBehavior.EVOLVE).decide(E.AlterColumnComment(TID, "a", "c"), SINK_SCHEMA).action
        is Action.SKIP
    )


def test_positioned_add_is_appended_when_the_sink_only_appends() -> None:
    d = router(SchemaChangeBehavior.EVOLVE).decide(
        E.AddColumn(TID, Column("x", T.INT()), E.FIRST), SINK_SCHEMA
    )
    assert d.action is Action.APPLY and d.change == E.AddColumn(TID, Column("x", T.INT()), E.LAST)


def test_lenient_rename_as_new_column() -> None:
    d = router(SchemaChangeBehavior.LENIENT).decide(E.RenameColumn(TID, "a", "title"), SINK_SCHEMA)
    assert d.action is Action.APPLY
    assert d.change == E.AddColumn(TID, Column("title", T.STRING()), E.LAST)
    assert (
        router(SchemaChangeBehavior.EVOLVE).decide(E.RenameColumn(TID, "a", "t"), SINK_SCHEMA).action
        is Action.FAIL
    )


def test_a_lenient_rename_routed_again_does_not_add_its_column_twice() -> None:
    # a restart routes again the changes on their way to the sink when the process died
    after = Schema.of([*SINK_SCHEMA.columns, Column("title", T.STRING())], ["id"])
    d = router(SchemaChangeBehavior.LENIENT).decide(E.RenameColumn(TID, "a", "title"), after)
    assert d.action is Action.SKIP and "already applied" in d.reason


def test_include_and_exclude_narrow_what_is_applied() -> None:
    r = router(SchemaChangeBehavior.EVOLVE, accepted=ALL - {"add.column"})
    d = r.decide(E.AddColumn(TID, Column("x", T.INT())), SINK_SCHEMA)
    assert d.action is Action.SKIP and "not accepted" in d.reason


def test_an_applied_change_is_not_applied_again() -> None:
    r = router(SchemaChangeBehavior.EVOLVE)
    d = r.decide(E.AddColumn(TID, Column("b", T.INT())), SINK_SCHEMA)
    assert d.action is Action.SKIP and "already applied" in d.reason
    assert r.decide(E.CreateTable(TID, SINK_SCHEMA), SINK_SCHEMA).action is Action.SKIP


def test_create_table_over_an_incompatible_table_fails_with_both_schemas() -> None:
    other = Schema.of([Column("k", T.INT().not_null())], ["k"])
    d = router(SchemaChangeBehavior.LENIENT).decide(E.CreateTable(TID, other), SINK_SCHEMA)
    assert d.action is Action.FAIL
    assert SINK_SCHEMA.describe() in d.reason and other.describe() in d.reason


@pytest.mark.parametrize(
    ("behavior", "action"),
    [
        (SchemaChangeBehavior.TRY_EVOLVE, Action.SKIP),
        (SchemaChangeBehavior.LENIENT, Action.SKIP),
        (SchemaChangeBehavior.EVOLVE, Action.FAIL),
    ],
)
def test_a_change_refused_at_apply_time(behavior: SchemaChangeBehavior, action: Action) -> None:
    r = router(behavior)
    d = r.decide(E.AddColumn(TID, Column("x", T.INT())), SINK_SCHEMA)
    assert r.on_refused(d, SinkTerminalError("nope", sink="memory")).action is action


def test_a_missing_table_is_created_unless_auto_create_tables_is_off() -> None:
    create = E.CreateTable(TID, SINK_SCHEMA)
    assert router(SchemaChangeBehavior.LENIENT).decide(create, None).action is Action.APPLY
    sink = MemorySink(capabilities=LIMITED)
    off = SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, ALL, create_tables=False)
    decision = off.decide(create, None)
    assert decision.action is Action.SKIP and "sink.auto-create-tables is false" in decision.reason
    assert off.decide(create, SINK_SCHEMA).reason == "the table already exists"
