"""What pyiceberg does once per commit, done once: table metadata read, staged and copied.

A table's metadata file never changes once written: a commit writes a new file and moves the
catalog's pointer to it. pyiceberg's SQL catalog nevertheless reads and parses the metadata file
on every load, and a commit loads the table twice (the sink, for the offsets it merges; then
``commit_table``, for the table it applies the commit to). :class:`CachingSqlCatalog` keeps, per
table, the metadata of the file its catalog row pointed at last (read or just written), so a load
costs one catalog query while the pointer has not moved; a commit by another writer moves it, and
the next load reads the new file.

pyiceberg's :class:`~pyiceberg.table.Transaction` applies every staged update to the table's
metadata again, and deep-copies the result, each time its ``table_metadata`` is read, which a
snapshot producer does about twenty times per commit (a third of a small commit's time, growing
with the number of snapshots kept). :class:`StagedTransaction` computes it once per staged change.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.io import FileIO
from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableUpdate, update_table_metadata


class CachingSqlCatalog(SqlCatalog):
    """pyiceberg's SQL catalog, reading a table's metadata file only when its pointer moved."""

    def __init__(self, name: str, **properties: Any) -> None:
        super().__init__(name, **properties)
        #: per table (its uuid), the metadata location read or written last and its metadata
        self._newest: dict[str, tuple[str, TableMetadata]] = {}
        self._by_location: dict[str, TableMetadata] = {}

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

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        staged = self._staged
        if staged is None or staged[0] is not base or staged[1] is not updates:
            staged = self._staged = (base, updates, update_table_metadata(base, updates))
        return staged[2]
