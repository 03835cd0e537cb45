"""Reading back what a pipeline wrote, each with the sink's own client: every table of an Iceberg
namespace (pyiceberg), of a Paimon database (pypaimon) or of a PostgreSQL schema (psycopg, the
Hologres sink's tables), as (columns, rows) by table name."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog

SinkTables = dict[str, tuple[list[str], list[dict[str, Any]]]]


def reading_catalog(warehouse: Path) -> SqlCatalog:
    """The warehouse's SQL catalog, opened to read: it never creates the catalog's own tables, so
    that opening it while a pipeline creates them is no race (pyiceberg's creation is not safe
    against a concurrent creator). Close it with ``catalog.engine.dispose()``."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(
        "ferry",
        uri=f"sqlite:///{warehouse}/catalog.db",
        warehouse=warehouse.as_uri(),
        init_catalog_tables="false",
    )


def catalog_not_ready(error: Exception) -> bool:
    """The catalog's file exists but its tables are not created yet."""
    import sqlalchemy.exc

    return isinstance(error, sqlalchemy.exc.OperationalError) and "no such table" in str(error)


def iceberg_tables(warehouse: Path, namespace: str) -> SinkTables:
    """The tables of ``namespace`` in the warehouse's SQL catalog (none while there is no catalog)."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    if not (warehouse / "catalog.db").exists():
        return {}
    catalog = reading_catalog(warehouse)
    try:
        try:
            identifiers = catalog.list_tables(namespace)
        except NoSuchNamespaceError:
            return {}
        except Exception as error:
            if catalog_not_ready(error):
                return {}
            raise
        tables: SinkTables = {}
        for identifier in identifiers:
            table = catalog.load_table(identifier)
            columns = [f.name for f in table.schema().fields]
            tables[identifier[-1]] = (columns, table.scan().to_arrow().to_pylist())
        return tables
    finally:
        catalog.engine.dispose()


def postgres_tables(conninfo: str, schema: str) -> SinkTables:
    """The base tables of ``schema`` in the database ``conninfo`` names."""
    import psycopg
    from psycopg import sql

    tables: SinkTables = {}
    with psycopg.connect(conninfo) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "AND table_type = 'BASE TABLE' ORDER BY table_name",
                (schema,),
            )
        ]
        for name in names:
            cursor = conn.execute(
                sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(name))
            )
            columns = [d.name for d in cursor.description or ()]
            tables[name] = (columns, [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()])
    return tables


def paimon_tables(warehouse: Path, database: str) -> SinkTables:
    """The tables of ``database`` in the Paimon filesystem catalog at ``warehouse``, read with
    pypaimon's own reader (a primary-key table's files merged by key); the column the table's
    ``rowkind.field`` option names (the row kind of each change) is left out."""
    from pypaimon import CatalogFactory
    from pypaimon.catalog.catalog_exception import DatabaseNotExistException

    if not warehouse.exists():
        return {}
    catalog = CatalogFactory.create({"metastore": "filesystem", "warehouse": str(warehouse)})
    try:
        names = catalog.list_tables(database)
    except DatabaseNotExistException:
        return {}
    tables: SinkTables = {}
    for name in names:
        table = catalog.get_table(f"{database}.{name}")
        hidden = table.table_schema.options.get("rowkind.field")
        columns = [f.name for f in table.fields if f.name != hidden]
        builder = table.new_read_builder()
        data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        if data is not None and hidden in data.column_names:
            data = data.drop_columns([hidden])
        tables[name] = (columns, [] if data is None else data.to_pylist())
    return tables
