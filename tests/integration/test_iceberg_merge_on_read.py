"""Merge-on-read into Iceberg: upserts and deletes as position delete files, read back by pyiceberg."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent, ManifestContent
from pyiceberg.table import FileScanTask

from ferry.model.schema import TableId
from ferry.sinks.iceberg.compaction import live_bytes
from ferry.sinks.iceberg.deletes import DELETE_FILES_PER_DATA_FILE, FILE_PATH_ID, POS_ID
from ferry.sinks.iceberg.sink import IcebergSink
from tests.integration.helpers import ORDERS, Feed, create, write
from tests.integration.test_iceberg_sink import T, make_config, order, read

pytestmark = pytest.mark.integration


def _sink(warehouse: Path, **options: Any) -> IcebergSink:
    """A sink whose compactions, when on, run within the commit that finds them due (those written
    in the background: ``test_iceberg_background_compaction.py``)."""
    config = {"sink.compaction.enabled": False, "sink.compaction.background": False, **options}
    return IcebergSink(make_config(warehouse, **config), pipeline="p1")


def _tasks(sink: IcebergSink, table_id: TableId = T) -> list[FileScanTask]:
    table = sink.load_table(table_id)
    assert table is not None
    return list(table.scan().plan_files())


def _files(sink: IcebergSink, table_id: TableId = T) -> tuple[set[str], set[str]]:
    table = sink.load_table(table_id)
    assert table is not None
    tasks = table.scan().plan_files()
    return {t.file.file_path for t in tasks}, {d.file_path for t in tasks for d in t.delete_files}


def test_upserts_and_deletes_add_position_deletes_and_keep_the_data_files(tmp_path: Path) -> None:
    sink = _sink(tmp_path / "warehouse")
    try:
        feed = Feed(T)
        create(sink, ORDERS)
        write(sink, ORDERS, feed, *(feed.insert(order(i)) for i in range(10)))
        first_files, _ = _files(sink)
        write(
            sink,
            ORDERS,
            feed,
            feed.update(order(3), order(3, qty=30)),
            feed.delete(order(5)),
            feed.insert(order(10)),
            feed.update(order(10), order(10, qty=100)),  # inserted and changed in one flush
        )
        data_files, delete_files = _files(sink)
        assert first_files <= data_files  # nothing was rewritten
        assert len(delete_files) == 1
        table = sink.load_table(T)
        assert table is not None
        snapshot = table.current_snapshot()
        assert snapshot is not None and snapshot.summary is not None
        assert snapshot.summary.operation.value == "overwrite"
        assert snapshot.summary["added-position-deletes"] == "2"
        # a delete file as the spec has it: in a delete manifest, the reserved columns, sorted
        manifests = snapshot.manifests(table.io)
        delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES]
        assert len(delete_manifests) == 1
        [entry] = delete_manifests[0].fetch_manifest_entry(table.io)
        assert entry.data_file.content == DataFileContent.POSITION_DELETES
        deletes = pq.read_table(entry.data_file.file_path.removeprefix("file://"))
        ids = [int(f.metadata[b"PARQUET:field_id"]) for f in deletes.schema]
        assert ids == [FILE_PATH_ID, POS_ID]
        assert deletes["file_path"].to_pylist() == sorted(first_files) * 2
        assert deletes["pos"].to_pylist() == [3, 5]

        expected = [order(i) for i in range(10) if i != 5]
        expected[3] = order(3, qty=30)
        assert read(sink) == [*expected, order(10, qty=100)]
    finally:
        sink.close()


def test_a_new_sink_indexes_the_table_again_and_goes_on(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    feed = Feed(T)
    sink = _sink(warehouse)
    try:
        create(sink, ORDERS)
        write(sink, ORDERS, feed, *(feed.insert(order(i)) for i in range(6)))
        write(sink, ORDERS, feed, feed.update(order(1), order(1, qty=2)), feed.delete(order(2)))
    finally:
        sink.close()
    again = _sink(warehouse)  # a restart: the key index is built from the table and its deletes
    try:
        write(
            again,
            ORDERS,
            feed,
            feed.update(order(1, qty=2), order(1, qty=3)),
            feed.delete(order(4)),
            feed.insert(order(2, customer="back")),
        )
        assert read(again) == [
            order(0),
            order(1, qty=3),
            order(2, customer="back"),
            order(3),
            order(5),
        ]
    finally:
        again.close()


def _delete_positions(sink: IcebergSink) -> dict[str, list[list[int]]]:
    """Per live data file, the positions each of its live delete files removes."""
    table = sink.load_table(T)
    assert table is not None
    out: dict[str, list[list[int]]] = {}
    for task in table.scan().plan_files():
        files = [pq.read_table(d.file_path.removeprefix("file://")) for d in task.delete_files]
        out[task.file.file_path] = [f["pos"].to_pylist() for f in files]
    return out


def test_a_data_file_keeps_a_few_delete_files_then_one_with_every_position_deleted_from_it(
    tmp_path: Path,
) -> None:
    warehouse = tmp_path / "warehouse"
    feed = Feed(T)
    limit = DELETE_FILES_PER_DATA_FILE
    updated = list(range(limit + 1))  # one row of the first file updated per commit
    sink = _sink(warehouse, **{"snapshot.retain": 2})
    try:
        create(sink, ORDERS)
        write(sink, ORDERS, feed, *(feed.insert(order(i)) for i in range(10)))
        [first] = _files(sink)[0]
        for i in updated[:2]:
            write(sink, ORDERS, feed, feed.update(order(i), order(i, qty=10 + i)))
        assert sorted(_delete_positions(sink)[first]) == [[0], [1]]
        replaced = _files(sink)[1]
    finally:
        sink.close()
    again = _sink(warehouse, **{"snapshot.retain": 2})  # a restart: indexed again, its own files found
    try:
        for i in updated[2:limit]:
            write(again, ORDERS, feed, feed.update(order(i), order(i, qty=10 + i)))
        assert sorted(_delete_positions(again)[first]) == [[i] for i in updated[:limit]]
        # one more: one file with every position deleted from the data file, the others removed
        write(again, ORDERS, feed, feed.update(order(limit), order(limit, qty=10 + limit)))
        assert _delete_positions(again)[first] == [updated]
        for i in (10, 11, 12):  # commits without deletes: the older snapshots expire
            write(again, ORDERS, feed, feed.insert(order(i)))
        # the replaced delete files went with the last snapshots that listed them
        assert not replaced & _files(again)[1]
        assert not any(Path(f.removeprefix("file://")).exists() for f in replaced)
        table = again.load_table(T)
        assert table is not None
        snapshot = table.current_snapshot()
        assert snapshot is not None and snapshot.summary is not None
        assert snapshot.summary["total-delete-files"] == "1"
        assert snapshot.summary["total-position-deletes"] == str(len(updated))
        assert [m.content for m in snapshot.manifests(table.io)].count(ManifestContent.DELETES) == 1
        changed = {i: order(i, qty=10 + i) for i in updated}
        assert read(again) == [changed.get(i, order(i)) for i in range(13)]
    finally:
        again.close()


def test_a_commit_by_another_writer_is_seen_before_the_next_deletes(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    feed = Feed(T)
    sink, other = _sink(warehouse), _sink(warehouse)
    try:
        create(sink, ORDERS)
        write(sink, ORDERS, feed, *(feed.insert(order(i)) for i in range(4)))
        write(sink, ORDERS, feed, feed.update(order(0), order(0, qty=5)))
        write(other, ORDERS, feed, feed.update(order(1), order(1, qty=6)))
        write(sink, ORDERS, feed, feed.update(order(1, qty=6), order(1, qty=7)), feed.delete(order(0, qty=5)))
        assert read(sink) == [order(1, qty=7), order(2), order(3)]
    finally:
        sink.close()
        other.close()


def test_compaction_applies_the_deletes_and_drops_their_files(tmp_path: Path) -> None:
    options = {
        "sink.compaction.enabled": True,
        "sink.compaction.commit-interval": 4,
        "sink.compaction.min-input-files": 2,
    }
    sink = _sink(tmp_path / "warehouse", **options)
    try:
        feed = Feed(T)
        create(sink, ORDERS)
        for i in range(8):
            write(sink, ORDERS, feed, feed.insert(order(i + 1)), feed.update(order(0), order(0, qty=i)))
            if i == 6:
                write(sink, ORDERS, feed, feed.delete(order(3)))
        data_files, delete_files = _files(sink)
        # compacted on the 4th and 8th commit: the deletes of the files it rewrote went with them
        assert len(delete_files) < len(data_files)
        table = sink.load_table(T)
        assert table is not None
        snapshot = table.current_snapshot()
        assert snapshot is not None and snapshot.summary is not None
        assert int(snapshot.summary["total-delete-files"]) == len(delete_files)
        # writes after a compaction use the index it kept up to date
        write(sink, ORDERS, feed, feed.update(order(0, qty=7), order(0, qty=99)), feed.delete(order(8)))
        assert read(sink) == [order(0, qty=99), *(order(i) for i in range(1, 8) if i != 3)]
    finally:
        sink.close()


def test_a_compaction_rewrites_at_most_its_bound_of_the_smallest_files(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    feed = Feed(T)
    sink = _sink(warehouse)
    try:
        create(sink, ORDERS)
        write(sink, ORDERS, feed, *(feed.insert(order(i)) for i in range(40)))
        for i in range(7):  # small files, the first one losing rows to each commit's updates
            write(sink, ORDERS, feed, feed.insert(order(100 + i)), feed.update(order(i), order(i, qty=i)))
    finally:
        sink.close()
    table_files = _files(sink)[0]
    table = sink.load_table(T)
    assert table is not None
    sizes = sorted(live_bytes(t) for t in table.scan().plan_files())
    bound = int(sum(sizes[:3])) + 1  # the three smallest fit, not four
    assert sum(sizes[:4]) > bound
    compacting = _sink(
        warehouse, **{"sink.compaction.small-file-bytes": bound, "sink.compaction.min-input-files": 2}
    )
    try:
        assert compacting.compact(T) == 3
        data_files, delete_files = _files(compacting)
        assert len(data_files) == len(table_files) - 2
        assert len(delete_files) <= 1  # the first file's, unless it was among the three
        expected = {i: order(i) for i in range(40)} | {100 + i: order(100 + i) for i in range(7)}
        expected |= {i: order(i, qty=i) for i in range(7)}
        assert read(compacting) == [expected[k] for k in sorted(expected)]
        # the key index kept by the compaction places the next updates right
        write(
            compacting, ORDERS, feed, feed.update(order(100), order(100, qty=9)), feed.delete(order(1, qty=1))
        )
        expected[100] = order(100, qty=9)
        del expected[1]
        assert read(compacting) == [expected[k] for k in sorted(expected)]
    finally:
        compacting.close()


def _compactions(sink: IcebergSink, table_id: TableId) -> int:
    """How many of the table's snapshots are compactions (they remove data files)."""
    table = sink.load_table(table_id)
    assert table is not None
    return sum(
        1 for s in table.snapshots() if s.summary and "deleted-data-files" in s.summary.additional_properties
    )


def test_tables_due_at_one_checkpoint_take_turns_at_compacting(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    first, second = T, TableId(None, "shop", "returns")
    feeds = {first: Feed(first), second: Feed(second, partition=1)}

    def checkpoint(sink: IcebergSink, number: int) -> None:
        for table_id, feed in feeds.items():
            sink.write(table_id, ORDERS, [feed.insert(order(number))])
        sink.flush({tp: o for feed in feeds.values() for tp, o in feed.offsets().items()})

    sink = _sink(warehouse)
    try:
        for table_id in feeds:
            create(sink, ORDERS, table_id)
        checkpoint(sink, 0)
        sizes = [live_bytes(t) for table_id in feeds for t in _tasks(sink, table_id)]
    finally:
        sink.close()
    # one table's two files fit in a checkpoint's share, both tables' do not
    share = int(2 * max(sizes) + min(sizes) / 2)
    options = {
        "sink.compaction.enabled": True,
        "sink.compaction.commit-interval": 2,
        "sink.compaction.min-input-files": 2,
        "sink.compaction.small-file-bytes": share,
    }
    sink = _sink(warehouse, **options)
    try:
        checkpoint(sink, 1)  # the first commit of this sink: none is due
        checkpoint(sink, 2)  # both due: the first table compacts, the second waits
        assert (_compactions(sink, first), _compactions(sink, second)) == (1, 0)
        checkpoint(sink, 3)  # the second's turn (the first is not due)
        assert (_compactions(sink, first), _compactions(sink, second)) == (1, 1)
        for table_id in feeds:
            assert read(sink, table_id) == [order(i) for i in range(4)]
    finally:
        sink.close()
