"""``route`` and ``pipeline.route-mode``: which sink tables a source table feeds, under Flink CDC's two
modes, and how a restart skips rows that every one of them already holds."""

from __future__ import annotations

import pytest

from ferry.config import ConfigError, load_job_text
from ferry.model.events import DataChange, Op, SourcePosition
from ferry.model.schema import TableId
from ferry.pipeline.partitions import PartitionOffsets
from ferry.pipeline.route import Route, RouteMode, TableRouter
from ferry.sinks.memory import MemorySink

JOB = """\
source: {type: kafka, properties.bootstrap.servers: 127.0.0.1:9092, topic: orders}
sink: {type: memory}
route:
  - {source-table: 'db\\.orders', sink-table: ods.orders}
  - {source-table: 'db\\.(orders|items)', sink-table: 'archive.$1'}
"""

ORDERS, ITEMS = TableId.parse("db.orders"), TableId.parse("db.items")
ROUTES = (Route(r"db\.orders", "ods.orders"), Route(r"db\.(orders|items)", "archive.$1"))


def ids(*names: str) -> tuple[TableId, ...]:
    return tuple(TableId.parse(n) for n in names)


def test_all_match_is_the_default_and_feeds_every_matching_sink_table() -> None:
    assert load_job_text(JOB).pipeline.route_mode is RouteMode.ALL_MATCH
    router = TableRouter(ROUTES)
    assert router.sink_tables(ORDERS) == ids("ods.orders", "archive.orders")
    assert router.sink_tables(ITEMS) == ids("archive.items")
    assert router.sources_of(TableId.parse("archive.orders")) == [ORDERS]


def test_first_match_takes_the_first_route_in_file_order() -> None:
    router = TableRouter(ROUTES, RouteMode.FIRST_MATCH)
    assert router.sink_tables(ORDERS) == ids("ods.orders")
    assert router.sink_tables(ITEMS) == ids("archive.items")
    assert router.sources_of(TableId.parse("archive.orders")) == []


@pytest.mark.parametrize("mode", list(RouteMode))
def test_a_table_no_route_matches_keeps_its_id(mode: RouteMode) -> None:
    assert TableRouter(ROUTES, mode).sink_tables(TableId.parse("db.other")) == ids("db.other")


def test_two_routes_to_one_sink_table_feed_it_once() -> None:
    router = TableRouter([Route(r"db\.orders", "ods.orders"), Route(r"db\..*", "ods.orders")])
    assert router.sink_tables(ORDERS) == ids("ods.orders")


@pytest.mark.parametrize(
    ("written", "mode"),
    [
        ("FIRST_MATCH", RouteMode.FIRST_MATCH),
        ("first-match", RouteMode.FIRST_MATCH),
        ("all_match", RouteMode.ALL_MATCH),
    ],
)
def test_route_mode_is_read_in_any_case(written: str, mode: RouteMode) -> None:
    assert load_job_text(JOB + f"pipeline: {{route-mode: {written}}}\n").pipeline.route_mode is mode


def test_an_unknown_route_mode_is_refused_at_its_line() -> None:
    with pytest.raises(ConfigError) as e:
        load_job_text(JOB + "pipeline:\n  route-mode: EVERY_MATCH\n", file="job.yaml")
    assert str(e.value).startswith("job.yaml:7:3: pipeline.route-mode: ")
    assert "ALL_MATCH" in str(e.value) and "FIRST_MATCH" in str(e.value)


class CommittingSink(MemorySink):
    """A memory sink whose tables report the offsets their commits reached (as Iceberg's do)."""

    def __init__(self, committed: dict[str, dict[tuple[str, int], int]]) -> None:
        super().__init__()
        self.committed = committed

    def committed_offsets(self, table_id: TableId) -> dict[tuple[str, int], int]:
        return dict(self.committed.get(str(table_id), {}))


def row(offset: int) -> DataChange:
    return DataChange(ORDERS, Op.INSERT, None, {"id": offset}, SourcePosition("t", 0, offset))


def test_a_restart_skips_only_the_rows_every_sink_table_of_a_source_holds() -> None:
    # ods.orders committed up to offset 10, archive.orders only up to 5 (a crash between the two)
    sink = CommittingSink({"ods.orders": {("t", 0): 10}, "archive.orders": {("t", 0): 5}})
    offsets = PartitionOffsets(sink, TableRouter(ROUTES))
    offsets.take({("t", 0): 0})
    offsets.first_seen(ORDERS)
    assert [o for o in range(12) if offsets.committed(row(o))] == [0, 1, 2, 3, 4]


def test_a_sink_table_without_commits_skips_nothing() -> None:
    sink = CommittingSink({"ods.orders": {("t", 0): 10}})
    offsets = PartitionOffsets(sink, TableRouter(ROUTES))
    offsets.take({("t", 0): 0})
    offsets.first_seen(ORDERS)
    assert not any(offsets.committed(row(o)) for o in range(12))
