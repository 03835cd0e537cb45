"""What each sink does with each schema change in each mode, derived from the declarations.

The outcomes come from the router itself, deciding a sample change of each kind against a sink
that declares the capabilities of the sink in question, so the table cannot drift from what ferry
does. ``ferry sinks`` prints it; ``docs/schema-changes.md`` carries it (``ferry.docgen`` writes it,
a test checks it is current).
"""

from __future__ import annotations

from enum import StrEnum

from ferry.model import events as E
from ferry.model import types as t
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.router import Action, SchemaChangeBehavior, SchemaChangeRouter
from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base import Support
from ferry.sinks.base.registry import DESTINATIONS
from ferry.sinks.memory import MemorySink

_TABLE = TableId.parse("db.t")
_SCHEMA = Schema.of(
    [Column("id", t.INT().not_null()), Column("qty", t.INT()), Column("code", t.STRING().not_null())], ["id"]
)
#: The matrix's change names, in its order, with a sample change of each (None: never an event).
SAMPLES: dict[K, E.SchemaChange | None] = {
    K.ADD_COLUMN_LAST: E.AddColumn(_TABLE, Column("extra", t.INT())),
    K.ADD_COLUMN_POSITIONED: E.AddColumn(_TABLE, Column("extra", t.INT()), E.after("id")),
    K.ADD_COLUMN_DEFAULT: E.AddColumn(_TABLE, Column("extra", t.INT(), default="0")),
    K.DROP_COLUMN: E.DropColumn(_TABLE, "qty"),
    K.RENAME_COLUMN: E.RenameColumn(_TABLE, "qty", "quantity"),
    K.ALTER_COLUMN_TYPE: E.AlterColumnType(_TABLE, "qty", t.BIGINT(), t.INT()),
    K.RELAX_NULLABILITY: E.AlterColumnType(_TABLE, "code", t.STRING(), t.STRING().not_null()),
    K.TIGHTEN_NULLABILITY: None,
    K.CREATE_TABLE: E.CreateTable(TableId.parse("db.t2"), _SCHEMA),
    K.DROP_TABLE: E.DropTable(_TABLE),
    K.TRUNCATE_TABLE: E.TruncateTable(_TABLE),
    K.ALTER_COLUMN_COMMENT: E.AlterColumnComment(_TABLE, "qty", "units"),
    K.ALTER_TABLE_COMMENT: E.AlterTableComment(_TABLE, "orders"),
}
MODES = (
    SchemaChangeBehavior.LENIENT,
    SchemaChangeBehavior.EVOLVE,
    SchemaChangeBehavior.TRY_EVOLVE,
    SchemaChangeBehavior.IGNORE,
    SchemaChangeBehavior.EXCEPTION,
)


class Outcome(StrEnum):
    """What happens to one change of the matrix at one sink under one behaviour: the router's
    action, or what the action means for the change."""

    APPLY = "apply"
    #: A positioned column is appended last (the sink supports it ``apply-at-end``).
    APPLY_AT_END = "apply-at-end"
    #: The column is added without its default: the rows the table held read NULL in it.
    APPLY_WITHOUT_DEFAULT = "apply-without-default"
    #: A LENIENT rename adds the new name as a column and keeps the old one (NULL from then on).
    ADD_NEW_COLUMN = "add-new-column"
    SKIP = "skip"
    FAIL = "fail"
    IGNORED = "ignored"
    NO_EVENT = "no-event"
    REFUSED_AT_VALIDATION = "refused-at-validation"


def outcome(sink_type: str, change: K, behavior: SchemaChangeBehavior) -> Outcome:
    """The outcome for one sink, one change of the matrix and one behaviour."""
    capabilities = DESTINATIONS[sink_type].capabilities
    sample = SAMPLES[change]
    if sample is None:
        # never an event; a sink that keeps no schema (Kafka) declares it ignored, as it does others
        return Outcome.IGNORED if capabilities.support(change) is Support.IGNORED else Outcome.NO_EVENT
    if behavior is SchemaChangeBehavior.TRY_EVOLVE and not capabilities.try_evolve:
        return Outcome.REFUSED_AT_VALIDATION
    sink = MemorySink(capabilities=capabilities, type=sink_type)
    existing = None if isinstance(sample, E.CreateTable) else _SCHEMA
    decision = SchemaChangeRouter(sink, behavior, E.SchemaChangeType).decide(sample, existing)
    if decision.action is Action.APPLY:
        if decision.change == sample:
            return Outcome.APPLY
        if (
            isinstance(sample, E.AddColumn)
            and isinstance(decision.change, E.AddColumn)
            and decision.change.column.default is None
            and sample.column.default is not None
        ):
            return Outcome.APPLY_WITHOUT_DEFAULT
        if isinstance(sample, E.RenameColumn):
            return Outcome.ADD_NEW_COLUMN
        return Outcome.APPLY_AT_END
    return Outcome(decision.action.value)


def markdown() -> str:
    """One table per sink: rows are changes, columns are behaviours."""
    parts = []
    header = "| change | " + " | ".join(m.value for m in MODES) + " |"
    rule = "|---|" + "---|" * len(MODES)
    for sink_type, declared in DESTINATIONS.items():
        notes = declared.capabilities.notes
        lines = [f"#### {sink_type}", "", header, rule]
        for change in SAMPLES:
            cells = " | ".join(outcome(sink_type, change, m) for m in MODES)
            lines.append(f"| `{change.value}` | {cells} |")
        if notes:
            lines.append("")
            lines += [f"- `{k.value}`: {note}" for k, note in notes.items()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
