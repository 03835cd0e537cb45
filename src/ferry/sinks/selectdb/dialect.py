"""SelectDB's (Apache Doris's) SQL: the MySQL-protocol base with Doris's key model and types.

A Doris table the sink creates is a unique key table (``UNIQUE KEY (...)``), so a load replaces the
row with the same key; it is distributed by the key (``DISTRIBUTED BY HASH(...) BUCKETS AUTO``).
Doris renames a column without ``TO`` (``RENAME COLUMN old new``). Statements are compiled with
SQLAlchemy's MySQL dialect under the name ``doris`` (:class:`DorisSqlDialect`): the ``pydoris``
package's dialect needs ``mysqlclient``, a C extension built against MySQL's client headers, and
would not help either (it drops primary keys and writes ``PROPERTIES`` unescaped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.dialects import mysql
from sqlalchemy.dialects.mysql.base import MySQLDialect
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import DDLCompiler
from sqlalchemy.types import Text, TypeEngine

from ferry.model.types import DataType, TypeRoot
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.sql import ddl
from ferry.sinks.starrocks.dialect import (
    MYSQL_TYPES,
    MariaDbDdlCompiler,
    MySqlPreparer,
    MySqlProtocolDialect,
    MySqlTypeCompiler,
)


class STRING(Text):
    """Doris's unbounded string type."""

    __visit_name__ = "STRING"


class DorisTypeCompiler(MySqlTypeCompiler):
    def visit_STRING(self, type_: Any, **kw: Any) -> str:  # noqa: N802 - SQLAlchemy's visitor name
        return "STRING"


class DorisSqlDialect(MySQLDialect):
    """SQLAlchemy's MySQL dialect with Doris's types, every identifier quoted and ferry's layout."""

    name = "doris"
    supports_statement_cache = True
    preparer = MySqlPreparer
    ddl_compiler = MariaDbDdlCompiler
    type_compiler_cls = DorisTypeCompiler


@compiles(ddl.RenameColumn, "doris")
def _rename_column(element: ddl.RenameColumn, compiler: DDLCompiler, **kw: Any) -> str:
    # Doris: ALTER TABLE t RENAME COLUMN old_name new_name
    quote = compiler.preparer.quote
    return f"{ddl.alter_table(compiler, element)} RENAME COLUMN {quote(element.old)} {quote(element.new)}"


#: Doris types without parameters.
DORIS_TYPES: Mapping[TypeRoot, TypeEngine[Any]] = {**MYSQL_TYPES, TypeRoot.STRING: STRING()}


class SelectDbDialect(MySqlProtocolDialect):
    """Doris: unique key tables, ``DISTRIBUTED BY HASH(...) BUCKETS AUTO``, ``PROPERTIES``."""

    name = "selectdb"
    key_model = "UNIQUE KEY"
    buckets = "AUTO"
    #: Doris's longest VARCHAR, in bytes (longer strings are ``STRING``).
    max_vendor_varchar = 65_533
    #: Doris's longest CHAR, in bytes.
    max_vendor_char = 255
    default_properties: Mapping[str, str] = {"replication_num": "1"}

    def vendor_sa_dialect(self, paramstyle: str) -> Dialect:
        return DorisSqlDialect(paramstyle=paramstyle)

    def vendor_type(self, t: DataType) -> TypeEngine[Any]:
        root = t.root
        if root is TypeRoot.DECIMAL:
            return mysql.DECIMAL(t.precision, t.scale)
        if root is TypeRoot.CHAR:
            length = self.byte_length(t, 1)
            return mysql.CHAR(length) if length <= self.max_vendor_char else mysql.VARCHAR(length)
        if root is TypeRoot.VARCHAR:
            length = self.byte_length(t, self.max_vendor_varchar)
            return STRING() if length > self.max_vendor_varchar else mysql.VARCHAR(length)
        if root is TypeRoot.TIMESTAMP:
            return mysql.DATETIME(fsp=self._precision(t))
        try:
            return DORIS_TYPES[root]
        except KeyError:
            raise SinkTerminalError(f"no {self.name} type for {t}", sink=self.name) from None
