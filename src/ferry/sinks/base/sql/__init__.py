"""The base of the SQL-speaking sinks (Hologres, StarRocks, SelectDB): one DDL base built with
SQLAlchemy Core (:class:`~ferry.sinks.base.sql.dialect.SqlDialect`,
:mod:`ferry.sinks.base.sql.ddl`) with small dialect hooks, and one writer
(:class:`~ferry.sinks.base.sql.sink.SqlSink`) over a DB-API connection.

Importing this package imports no database driver.
"""

from __future__ import annotations

from ferry.sinks.base.sql.dialect import CatalogColumn, SqlDialect, SqlTable

__all__ = ["CatalogColumn", "SqlDialect", "SqlTable"]
