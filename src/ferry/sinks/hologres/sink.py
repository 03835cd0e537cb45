"""The Hologres sink: PostgreSQL protocol through psycopg 3, DDL and upserts from the SQL sink base.

What Hologres stores for a source type follows ``sink.type-normalize-strategy``
(:func:`~ferry.sinks.hologres.types.hologres_type`). A column added NOT NULL is added nullable (the
rows already in the table have no value for it). A row whose key is in the table is ignored,
replaced or updated as ``mutatetype`` says (:class:`~ferry.sinks.hologres.config.MutateType`). New
tables get ``table_property.*`` through ``CALL set_table_property`` in the transaction that creates
them; these calls exist only in Hologres, so a sink pointed at a plain PostgreSQL server
(``hologres_only_statements=False``) leaves them out and runs everything else unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from ferry.model import types as ft
from ferry.model.events import DataChange
from ferry.model.schema import Schema, TableId
from ferry.model.types import DataType, TypeRoot
from ferry.model.unavailable import unavailable_reason
from ferry.sinks.base import SinkCapabilities
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.base.sql.sink import DbConnection, DbCursor, SqlSink
from ferry.sinks.hologres import HOLOGRES
from ferry.sinks.hologres.config import HologresSinkConfig, MutateType
from ferry.sinks.hologres.dialect import ARRAY_ELEMENTS, HologresDialect
from ferry.sinks.hologres.types import hologres_type

#: SQLSTATE classes of errors that may pass on retry: connection exceptions, transaction rollbacks
#: (serialization failures, deadlocks), insufficient resources, operator intervention.
_TRANSIENT_SQLSTATE_CLASSES = ("08", "40", "53", "57")
#: SQLSTATE classes of a row refused for its data: data exception, integrity constraint violation.
_ROW_SQLSTATE_CLASSES = ("22", "23")
#: What the server says when it refuses a login (no retry changes that).
_LOGIN_REFUSALS = ("authentication failed", "no pg_hba.conf entry", "does not exist", "permission denied")
_TIMES = (TypeRoot.TIME, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ)
_ARRAY_ELEMENT = {TypeRoot.TINYINT: ft.INT(), TypeRoot.SMALLINT: ft.INT(), TypeRoot.VARCHAR: ft.STRING()}


class HologresSink(SqlSink):
    """Writes change events into Hologres (or, without the Hologres-only statements, PostgreSQL)."""

    type: str = HOLOGRES.type
    capabilities: SinkCapabilities = HOLOGRES.capabilities
    dialect: HologresDialect = HologresDialect()

    def __init__(
        self, config: HologresSinkConfig, *, pipeline: str, hologres_only_statements: bool = True
    ) -> None:
        super().__init__(default_schema=config.target_schema, table_properties=config.table_properties)
        self.config = config
        self.pipeline = pipeline
        #: Whether the statements only Hologres knows (``set_table_property``) are run.
        self.hologres_only_statements = hologres_only_statements

    def connect(self) -> DbConnection:
        c = self.config
        connection = psycopg.connect(
            host=c.host,
            port=c.port,
            dbname=c.dbname,
            user=c.username,
            password=c.password.get_secret_value(),
            connect_timeout=c.connect_timeout,
            application_name=f"ferry {self.pipeline}"[:63],
        )
        return connection

    def is_transient(self, error: Exception) -> bool:
        if isinstance(error, psycopg.Error):
            state = error.sqlstate
            if state is None:  # the connection failed: transient unless the server refused the login
                message = str(error)
                return isinstance(error, psycopg.OperationalError) and not any(
                    refusal in message for refusal in _LOGIN_REFUSALS
                )
            return state[:2] in _TRANSIENT_SQLSTATE_CLASSES
        return super().is_transient(error)

    def is_row_error(self, error: Exception) -> bool:
        if isinstance(error, psycopg.DataError | psycopg.IntegrityError):
            return True  # psycopg's own refusals (a NUL in a text value) have no SQLSTATE
        return isinstance(error, psycopg.Error) and (error.sqlstate or "")[:2] in _ROW_SQLSTATE_CLASSES

    def secrets(self) -> Sequence[str]:
        return (self.config.password.get_secret_value(),)

    def complete_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], partial: Sequence[int]
    ) -> list[tuple[int, str]]:
        if self.config.mutate_type is MutateType.INSERT_OR_REPLACE:  # a row written is the whole row
            reason = "; mutatetype insertorreplace writes whole rows"
            return [(i, unavailable_reason(changes[i]) + reason) for i in partial]
        return super().complete_rows(table_id, schema, changes, partial)

    def sink_type(self, source_type: DataType) -> DataType:
        mapped = hologres_type(source_type, self.config.type_normalize_strategy)
        root = mapped.root
        if root in _TIMES:
            mapped = DataType(root, nullable=mapped.nullable, precision=6)
        elif root is TypeRoot.ARRAY:
            assert mapped.element is not None
            element = _ARRAY_ELEMENT.get(mapped.element.root, mapped.element.with_nullable(True))
            mapped = (
                ft.ARRAY(element).with_nullable(mapped.nullable)
                if element.root in ARRAY_ELEMENTS
                else ft.STRING().with_nullable(mapped.nullable)
            )
        return mapped

    def create_table_statements(self, table: SqlTable, schema: Schema) -> list[str]:
        statements = super().create_table_statements(table, schema)
        if self.hologres_only_statements:
            statements += self.dialect.table_property_statements(table, self.table_properties)
        return statements

    def upsert_statement(
        self, cursor: DbCursor, table_id: TableId, columns: Sequence[str], keys: Sequence[str]
    ) -> str:
        table = self.sql_table(table_id)
        mutate_type = self.config.mutate_type
        if mutate_type is MutateType.INSERT_OR_IGNORE:
            return self.dialect.insert_or_ignore(table, columns, keys)
        if mutate_type is MutateType.INSERT_OR_REPLACE:
            # the table's columns, not only the written ones: those the write lacks become NULL
            current = self._schemas.get(table_id) or self._read_schema(cursor, table)
            table_columns = current.names if current is not None else tuple(columns)
            return self.dialect.insert_or_replace(table, columns, keys, table_columns)
        return self.dialect.upsert(table, columns, keys)
