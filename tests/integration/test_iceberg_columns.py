"""Runs of column changes written to Iceberg (:meth:`IcebergSink.commit_columns`: collapsed by key
with Arrow's kernels) leave the table as the same changes written as rows do: merge-on-read and
copy-on-write, over several commits, with keys inserted, updated, moved and deleted again within a
commit; and they are committed as columns (no commit of rows)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferry.model.columns import all_changes
from ferry.model.events import ColumnChanges, Op, SourcePosition
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, INT, STRING
from ferry.sinks.iceberg.sink import IcebergSink
from tests.integration.helpers import create
from tests.integration.test_iceberg_sink import make_config, read

pytestmark = pytest.mark.integration

T = TableId(None, "shop", "items")
SCHEMA = Schema.of(
    [Column("id", BIGINT().not_null()), Column("qty", INT()), Column("note", STRING())], ["id"]
)
Row = msgspec.defstruct("Row", [("id", int), ("qty", int | None), ("note", str | None)], gc=False)
TOPIC = "shop.items"

_ROW = st.builds(
    Row, st.integers(0, 6), st.none() | st.integers(-(2**31), 2**31 - 1), st.none() | st.text(max_size=4)
)
_CHANGE = st.one_of(
    st.tuples(st.just(Op.INSERT), st.none(), _ROW),
    st.tuples(st.just(Op.UPDATE), _ROW, _ROW),
    st.tuples(st.just(Op.DELETE), _ROW, st.none()),
)


def _run(changes: list[tuple[Op, Any, Any]], first: int) -> ColumnChanges:
    offsets = list(range(first, first + len(changes)))
    return ColumnChanges(
        T,
        ("id", "qty", "note"),
        [c[0] for c in changes],
        [c[1] for c in changes],
        [c[2] for c in changes],
        offsets,
        [None] * len(changes),
        SourcePosition(TOPIC, 0, offsets[-1]),
    )


class RowCommits(IcebergSink):
    """The sink, counting the commits of rows."""

    row_commits = 0

    def commit(self, *args: Any, **kwargs: Any) -> None:
        self.row_commits += 1
        super().commit(*args, **kwargs)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    commits=st.lists(st.lists(_CHANGE, min_size=1, max_size=25), min_size=1, max_size=3),
    mode=st.sampled_from(["merge-on-read", "copy-on-write"]),
)
def test_runs_leave_the_table_as_their_rows_do(
    tmp_path_factory: pytest.TempPathFactory, commits: list[list[tuple[Op, Any, Any]]], mode: str
) -> None:
    folder = tmp_path_factory.mktemp("columns")
    options = {"sink.compaction.enabled": False, "table.properties.write.update.mode": mode}
    by_rows = RowCommits(make_config(folder / "rows", **options), pipeline="p1")
    by_columns = RowCommits(make_config(folder / "columns", **options), pipeline="p1")
    try:
        create(by_rows, SCHEMA, T)
        create(by_columns, SCHEMA, T)
        offset = 0
        for changes in commits:
            run = _run(changes, offset)
            offset += len(changes)
            by_rows.write(T, SCHEMA, all_changes([run]))
            # a commit's first change as a row change (the rows a runner buffers before a run)
            by_columns.write_columns(
                T,
                SCHEMA,
                [*all_changes([run])[:1], _run(changes[1:], offset - len(changes) + 1)]
                if len(changes) > 1
                else [run],
            )
            by_rows.flush({(TOPIC, 0): offset})
            by_columns.flush({(TOPIC, 0): offset})
            assert read(by_columns, T) == read(by_rows, T)
        assert by_columns.row_commits == 0
        assert by_rows.row_commits == len(commits)
        assert by_columns.committed_offsets(T) == by_rows.committed_offsets(T) == {(TOPIC, 0): offset}
    finally:
        by_rows.close()
        by_columns.close()
