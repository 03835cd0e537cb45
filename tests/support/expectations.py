"""What a sink must hold at the end: the source's final tables, adjusted only where the sink
declares (``ferry.sinks.base.matrix``, "What each sink does" in docs/schema-changes.md) that it does not apply a
schema change the workload made under the pipeline's behaviour:

- a dropped table the sink does not drop keeps the rows it had right before the drop;
- a truncated table the sink does not truncate keeps the rows it had before, besides the new ones
  (so does every sink when the capture drops truncate events, as ``ExtractNewRecordState`` does);
- a dropped column the sink does not drop stays, and its values are not compared;
- a column dropped and added again at a sink that does not drop columns is the old column: where
  the source has NULL (a row not written since), the old value may stay, and is not compared;
- a renamed column the sink adds as a new column (keeping the old one, NULL from then on) is read
  as the new column, or the old one where the new one is NULL (rows last written before the
  rename); a column renamed twice is read through both renames, newest name first.

Every change a sink declares it applies must show exactly as at the source.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ferry.pipeline.router import SchemaChangeBehavior
from ferry.sinks.base import ChangeKind
from ferry.sinks.base.matrix import Outcome, outcome
from tests.support.oracle import SinkComparison, SourceTable, TableComparison, compare_table
from tests.support.workload import WorkloadSummary

APPLIED = (Outcome.APPLY, Outcome.APPLY_AT_END)


@dataclass
class SinkExpectation:
    """The tables a sink must hold, the ones it must not, and how to read its columns."""

    tables: dict[str, SourceTable]
    absent: list[str]
    #: Per table, sink columns that are there by declaration and carry no value to compare.
    kept_columns: dict[str, set[str]] = field(default_factory=dict)
    #: Per table, columns whose NULLs at the source are not compared (the sink kept the values of
    #: the column dropped and added again there).
    stale_nulls: dict[str, set[str]] = field(default_factory=dict)
    #: Per table, new column -> old column, in the order of the renames: the value is the new
    #: one's, else the old one's (as read itself, so that a chain of renames is followed).
    renamed_as_new: dict[str, dict[str, str]] = field(default_factory=dict)
    #: The declared outcomes taken into account, for the report.
    notes: list[str] = field(default_factory=list)

    def read(self, table: str, row: Mapping[str, Any]) -> dict[str, Any]:
        """A sink row as the source's columns: renamed-as-new columns merged."""
        merged = dict(row)
        for new, old in self.renamed_as_new.get(table, {}).items():
            if merged.get(new) is None:
                merged[new] = merged.get(old)
        return merged


def declared(sink_type: str, behavior: SchemaChangeBehavior) -> Callable[[ChangeKind], str]:
    """The matrix's outcome of each change for ``sink_type`` under ``behavior``."""
    return lambda change: outcome(sink_type, change, behavior)


def sink_expectation(
    final: Mapping[str, SourceTable],
    summary: WorkloadSummary,
    declared_outcome: Callable[[ChangeKind], str],
    *,
    truncates_emitted: bool = True,
    nulls_written_as_defaults: bool = False,
) -> SinkExpectation:
    """The expectation of one sink for a source whose final state is ``final`` after ``summary``;
    without ``truncates_emitted`` the capture wrote no trace of a truncation (the sink cannot know);
    with ``nulls_written_as_defaults`` the converter wrote a NULL of a nullable column that has a
    default as that default (Kafka Connect's ``replace.null.with.default=true``), so the topics hold
    the default where the source has NULL and no sink can tell them apart."""
    tables = dict(final)
    expectation = SinkExpectation(tables, [])
    if nulls_written_as_defaults:
        for name, defaults in summary.nullable_defaults.items():
            table = tables.get(name)
            if table is None:
                continue
            rows = {
                key: {c: defaults[c] if c in defaults and v is None else v for c, v in row.items()}
                for key, row in table.rows.items()
            }
            tables[name] = SourceTable(table.schema, table.name, table.columns, table.key, rows)
            expectation.notes.append(
                f"{name}: the converter writes NULL as the default in {', '.join(defaults)} "
                "(replace.null.with.default=true)"
            )
    for name, before in summary.dropped_tables.items():
        word = declared_outcome(ChangeKind.DROP_TABLE)
        if word in APPLIED:
            expectation.absent.append(name)
        else:
            tables[name] = before
            expectation.notes.append(f"{name}: drop table is '{word}': the rows of before the drop stay")
    for name, before in summary.truncated_tables.items():
        word = declared_outcome(ChangeKind.TRUNCATE_TABLE) if truncates_emitted else "not emitted"
        if word not in APPLIED and name in tables:
            after = tables[name]
            tables[name] = SourceTable(
                after.schema, after.name, after.columns, after.key, {**before.rows, **after.rows}
            )
            expectation.notes.append(f"{name}: truncate table is '{word}': the rows of before it stay")
    for name, columns in summary.dropped_columns.items():
        word = declared_outcome(ChangeKind.DROP_COLUMN)
        if word not in APPLIED:
            expectation.kept_columns.setdefault(name, set()).update(columns)
            expectation.notes.append(
                f"{name}: drop column is '{word}': {', '.join(columns)} stay, not compared"
            )
    for name, columns in summary.readded_columns.items():
        word = declared_outcome(ChangeKind.DROP_COLUMN)
        if word not in APPLIED:
            expectation.stale_nulls.setdefault(name, set()).update(columns)
            expectation.notes.append(
                f"{name}: drop column is '{word}': {', '.join(columns)} added again keep the old "
                "values where the source has NULL, not compared there"
            )
    for name, renames in summary.renamed_columns.items():
        word = declared_outcome(ChangeKind.RENAME_COLUMN)
        if word == Outcome.ADD_NEW_COLUMN:
            expectation.renamed_as_new.setdefault(name, {}).update(renames)
            expectation.kept_columns.setdefault(name, set()).update(renames.values())
            expectation.notes.append(
                f"{name}: rename column is '{word}': "
                + ", ".join(f"{new} read as COALESCE({new}, {old})" for new, old in renames.items())
            )
    return expectation


def compare_sink(
    target: str,
    expectation: SinkExpectation,
    sink_tables: Mapping[str, tuple[list[str], list[dict[str, Any]]]],
    *,
    ignored_prefixes: tuple[str, ...] = (),
) -> SinkComparison:
    """Compare every table of a sink (by name: its columns and rows) with what it must hold."""
    result = SinkComparison(target)
    for name in expectation.absent:
        comparison = TableComparison(name)
        found = sink_tables.get(name)
        if found is not None:
            comparison.differ(f"dropped at the source, but the sink still has it, with {len(found[1])} rows")
        result.tables.append(comparison)
    for name, table in sorted(expectation.tables.items()):
        result.tables.append(
            compare_table(
                table,
                sink_tables.get(name),
                ignored_prefixes=ignored_prefixes,
                kept_columns=expectation.kept_columns.get(name, set()),
                stale_nulls=expectation.stale_nulls.get(name, set()),
                read=functools.partial(expectation.read, name),
            )
        )
    unexpected = sorted(set(sink_tables) - set(expectation.tables) - set(expectation.absent))
    for name in unexpected:
        comparison = TableComparison(name)
        comparison.differ(f"in the sink but never at the source ({len(sink_tables[name][1])} rows)")
        result.tables.append(comparison)
    result.notes = list(expectation.notes)
    return result
