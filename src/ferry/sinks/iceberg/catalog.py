"""What pyiceberg does once per commit, done once: table metadata read, staged and copied.

A table's metadata file never changes once written: a commit writes a new file and moves the
catalog's pointer to it. pyiceberg's SQL catalog nevertheless reads and parses the metadata file
on every load, and a commit loads the table twice (the sink, for the offsets it merges; then
``commit_table``, for the table it applies the commit to). :class:`CachingSqlCatalog` keeps, per
table, the metadata of the file its catalog row pointed at last (read or just written), so a load
costs one catalog query while the pointer has not moved; a commit by another writer moves it, and
the next load reads the new file.

A checkpoint commits every table it has rows for. pyiceberg (0.12) commits one table at a time:
its catalogs have ``commit_table`` and no multi-table commit (its REST catalog does not call the
REST protocol's ``/v1/transactions/commit``). The SQL catalog's commit is a metadata file written
and the table's row pointed at it, one SQL transaction per table.
:meth:`CachingSqlCatalog.commits_together` gathers the commits made inside it: each writes its
metadata file as before, and the rows of all the tables are pointed at their new files in one SQL
transaction at the end, each only if it still points where the commit started from. Either every
table moves or none does; another writer's commit to one of them fails the whole group
(:class:`~pyiceberg.exceptions.CommitFailedException`), and readers see the checkpoint's tables
move together.

pyiceberg's :class:`~pyiceberg.table.Transaction` applies every staged update to the table's
metadata again, and deep-copies the result, each time its ``table_metadata`` is read, which a
snapshot producer does about twenty times per commit (a third of a small commit's time, growing
with the number of snapshots kept). :class:`StagedTransaction` computes it once per staged change.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import FileIO
from pyiceberg.table import CommitTableResponse, Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata
from pyiceberg.typedef import Identifier
from sqlalchemy import update
from sqlalchemy.orm import Session


@dataclass(frozen=True)
class GatheredCommit:
    """A table's commit made while commits are gathered: its row is not yet pointed at it."""

    expected: str
    """The metadata location the table's row must still hold (where the first commit started)."""
    location: str
    """The metadata file written last for the table."""
    metadata: TableMetadata


def _row_key(identifier: str | Identifier) -> tuple[str, str]:
    """The ``(namespace, table)`` of a table's row in the SQL catalog."""
    namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
    return namespace, Catalog.table_name_from(identifier)


class CachingSqlCatalog(SqlCatalog):
    """pyiceberg's SQL catalog, reading a table's metadata file only when its pointer moved."""

    def __init__(self, name: str, **properties: Any) -> None:
        super().__init__(name, **properties)
        #: per table (its uuid), the metadata location read or written last and its metadata
        self._newest: dict[str, tuple[str, TableMetadata]] = {}
        self._by_location: dict[str, TableMetadata] = {}
        #: while :meth:`commits_together` runs: the thread it runs on, and the commits gathered
        self._gathering: tuple[int, dict[tuple[str, str], GatheredCommit]] | None = None

    @property
    def gathers_commits(self) -> bool:
        """Whether this catalog's database tells an update that matched no row (see
        :meth:`commits_together`)."""
        return bool(self.engine.dialect.supports_sane_rowcount)

    @contextmanager
    def commits_together(self) -> Iterator[None]:
        """The commits made inside (on this thread) land together when the block ends: every table's
        row pointed at its new metadata file in one SQL transaction, each only if it still holds
        the location its commit started from; otherwise none is, and
        :class:`~pyiceberg.exceptions.CommitFailedException` names the table another writer moved.
        Inside, :meth:`load_table` sees the tables as committed. A block that raises moves nothing
        (the metadata files written are left unreferenced). Nested, or where the database cannot
        tell an update that matched nothing, commits land one by one as they are made."""
        if self._gathering is not None or not self.gathers_commits:
            yield
            return
        gathered: dict[tuple[str, str], GatheredCommit] = {}
        self._gathering = (threading.get_ident(), gathered)
        try:
            yield
        finally:
            self._gathering = None
        if gathered:
            self._point_rows(gathered)

    def _gathered(self) -> dict[tuple[str, str], GatheredCommit] | None:
        gathering = self._gathering
        if gathering is None or gathering[0] != threading.get_ident():
            return None
        return gathering[1]

    def _point_rows(self, gathered: dict[tuple[str, str], GatheredCommit]) -> None:
        with Session(self.engine) as session:
            for (namespace, name), commit in gathered.items():
                moved = session.execute(
                    update(IcebergTables)
                    .where(
                        IcebergTables.catalog_name == self.name,
                        IcebergTables.table_namespace == namespace,
                        IcebergTables.table_name == name,
                        IcebergTables.metadata_location == commit.expected,
                    )
                    .values(metadata_location=commit.location, previous_metadata_location=commit.expected)
                )
                if moved.rowcount < 1:  # type: ignore[attr-defined]
                    session.rollback()
                    raise CommitFailedException(
                        f"Table has been updated by another process: {namespace}.{name} "
                        f"(none of the {len(gathered)} tables committed together was committed)"
                    )
            session.commit()

    def load_table(self, identifier: str | Identifier) -> Table:
        gathered = self._gathered()
        commit = None if gathered is None else gathered.get(_row_key(identifier))
        if commit is None:
            return super().load_table(identifier)
        return Table(
            identifier=Catalog.identifier_to_tuple(identifier),
            metadata=commit.metadata,
            metadata_location=commit.location,
            io=self._load_file_io(commit.metadata.properties, commit.location),
            catalog=self,
        )

    def commit_table(
        self, table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
    ) -> CommitTableResponse:
        gathered = self._gathered()
        if gathered is None or table.metadata_location is None:
            return super().commit_table(table, requirements, updates)
        key = _row_key(table.name())
        earlier = gathered.get(key)
        if earlier is not None and earlier.location != table.metadata_location:
            raise CommitFailedException(f"Table has been updated by another commit: {'.'.join(key)}")
        # built on the table as the caller loaded it: the row is checked to still point there when
        # the gathered commits land (what SqlCatalog.commit_table checks against a fresh load)
        staged = self._update_and_stage_table(table, table.name(), requirements, updates)
        if staged.metadata == table.metadata:
            return CommitTableResponse(metadata=table.metadata, metadata_location=table.metadata_location)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        expected = table.metadata_location if earlier is None else earlier.expected
        gathered[key] = GatheredCommit(expected, staged.metadata_location, staged.metadata)
        return CommitTableResponse(metadata=staged.metadata, metadata_location=staged.metadata_location)

    def _remember(self, location: str, metadata: TableMetadata) -> None:
        table = str(metadata.table_uuid)
        previous = self._newest.get(table)
        if previous is not None and previous[0] != location:
            self._by_location.pop(previous[0], None)
        self._newest[table] = (location, metadata)
        self._by_location[location] = metadata

    def _convert_orm_to_iceberg(self, orm_table: IcebergTables) -> Table:
        location = orm_table.metadata_location
        metadata = self._by_location.get(location) if location else None
        if metadata is None or not orm_table.table_namespace or not orm_table.table_name:
            table = super()._convert_orm_to_iceberg(orm_table)
            self._remember(table.metadata_location, table.metadata)
            return table
        assert location is not None
        return Table(
            identifier=(*SqlCatalog.identifier_to_tuple(orm_table.table_namespace), orm_table.table_name),
            metadata=metadata,
            metadata_location=location,
            io=self._load_file_io(metadata.properties, location),
            catalog=self,
        )

    def _write_metadata(self, metadata: TableMetadata, io: FileIO, metadata_path: str) -> None:  # type: ignore[override]
        SqlCatalog._write_metadata(metadata, io, metadata_path)
        # a commit that then fails to move the pointer leaves this entry unused: loads go by the
        # location the catalog row holds
        self._remember(metadata_path, metadata)


class StagedTransaction(Transaction):
    """pyiceberg's transaction, its staged table metadata computed once per staged change.

    The metadata is immutable (frozen models), so handing out the same staged copy is safe; a
    retry that refreshes the table, or a further staged update, computes it again.
    """

    _staged: tuple[TableMetadata, tuple[TableUpdate, ...], TableMetadata] | None = None

    def _rebuild_snapshot_updates(self) -> None:
        """Never: pyiceberg would commit again, on top of another writer's commit, a snapshot whose
        summary holds the offsets merged into the table as it was before that commit (the other
        writer's offsets lost). The commit fails instead; ferry builds it again, offsets merged anew."""
        raise CommitFailedException("another writer committed first: the snapshot is built again")

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        staged = self._staged
        if staged is None or staged[0] is not base or staged[1] is not updates:
            staged = self._staged = (base, updates, update_table_metadata(base, updates))
        return staged[2]
