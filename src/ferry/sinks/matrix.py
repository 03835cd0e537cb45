"""What each sink does with each schema change in each mode, derived from the declarations.

The outcomes come from the router itself, deciding a sample change of each kind against a sink
that declares the capabilities of the sink in question, so the table cannot drift from what ferry
does. ``ferry sinks`` prints it; the README carries it (a test checks it is current).
"""

from __future__ import annotations

from ferry.pipeline import types as t
from ferry.pipeline.events import (
    SCHEMA_CHANGE_TAGS,
    AddColumn,
    AlterColumnComment,
    AlterColumnType,
    AlterTableComment,
    CreateTable,
    DropColumn,
    DropTable,
    RenameColumn,
    SchemaChange,
    TruncateTable,
    after,
)
from ferry.pipeline.router import Action, SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.schema import Column, Schema, TableId
from ferry.sinks.capabilities import CAPABILITIES

_TABLE = TableId.parse("db.t")
_SCHEMA = Schema.of(
    [Column("id", t.INT().not_null()), Column("qty", t.INT()), Column("code", t.STRING().not_null())], ["id"]
)
#: The matrix's change names, in its order, with a sample change of each (None: never an event).
SAMPLES: dict[str, SchemaChange | None] = {
    "add_column_last": AddColumn(_TABLE, Column("extra", t.INT())),
    "add_column_positioned": AddColumn(_TABLE, Column("extra", t.INT()), after("id")),
    "drop_column": DropColumn(_TABLE, "qty"),
    "rename_column": RenameColumn(_TABLE, "qty", "quantity"),
    "alter_column_type": AlterColumnType(_TABLE, "qty", t.BIGINT(), t.INT()),
    "relax_nullability": AlterColumnType(_TABLE, "code", t.STRING(), t.STRING().not_null()),
    "tighten_nullability": None,
    "create_table": CreateTable(TableId.parse("db.t2"), _SCHEMA),
    "drop_table": DropTable(_TABLE),
    "truncate_table": TruncateTable(_TABLE),
    "alter_column_comment": AlterColumnComment(_TABLE, "qty", "units"),
    "alter_table_comment": AlterTableComment(_TABLE, "orders"),
}
MODES = (
    SchemaChangeBehavior.LENIENT,
    SchemaChangeBehavior.EVOLVE,
    SchemaChangeBehavior.TRY_EVOLVE,
    SchemaChangeBehavior.IGNORE,
    SchemaChangeBehavior.EXCEPTION,
)


def outcome(kind: str, change: str, behavior: SchemaChangeBehavior) -> str:
    """The outcome word for one sink, one change of the matrix and one behaviour."""
    from ferry.sinks.memory import MemorySink  # noqa: PLC0415 - memory imports the router

    capabilities = CAPABILITIES[kind]
    sample = SAMPLES[change]
    if sample is None:
        return "no event"
    if behavior is SchemaChangeBehavior.TRY_EVOLVE and not capabilities.try_evolve:
        return "refused at validation"
    sink = MemorySink(capabilities=capabilities, kind=kind)
    existing = None if isinstance(sample, CreateTable) else _SCHEMA
    decision = SchemaChangeRouter(sink, behavior, SCHEMA_CHANGE_TAGS).decide(sample, existing)
    if decision.action is Action.APPLY:
        if decision.change == sample:
            return "apply"
        if isinstance(sample, RenameColumn):
            return "add new column"
        return "apply at end"
    return decision.action.value


def markdown() -> str:
    """One table per sink: rows are changes, columns are behaviours."""
    parts = []
    header = "| change | " + " | ".join(m.value for m in MODES) + " |"
    rule = "|---|" + "---|" * len(MODES)
    for kind in sorted(CAPABILITIES):
        notes = CAPABILITIES[kind].notes
        lines = [f"#### {kind}", "", header, rule]
        for change in SAMPLES:
            cells = " | ".join(outcome(kind, change, m) for m in MODES)
            lines.append(f"| `{change}` | {cells} |")
        if notes:
            lines.append("")
            lines += [f"- `{k.value}`: {note}" for k, note in notes.items()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def write_readme(path: str = "README.md") -> None:
    """Replace the README's generated sink matrix with the current one."""
    import re  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    readme = Path(path)
    text = readme.read_text()
    block = "<!-- sink-matrix:start -->\n" + markdown() + "<!-- sink-matrix:end -->"
    readme.write_text(
        re.sub(r"<!-- sink-matrix:start -->.*?<!-- sink-matrix:end -->", lambda _: block, text, flags=re.S)
    )


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write-readme"]:
        write_readme()
    else:
        print(markdown(), end="")
