"""SelectDB's (Apache Doris's) SQL: the MySQL-protocol base with Doris's key model and types.

A Doris table the sink creates is a unique key table (``UNIQUE KEY (...)``), so a load replaces the
row with the same key; it is distributed by the key (``DISTRIBUTED BY HASH(...) BUCKETS AUTO``).
Doris renames a column without ``TO`` (``RENAME COLUMN old new``): :meth:`SelectDbDialect.rename_column`
spells it so when ``vendor_only``, and as MariaDB does otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ferry.pipeline.schema import Schema
from ferry.pipeline.types import DataType, TypeRoot
from ferry.sinks.exceptions import SinkTerminalError
from ferry.sinks.sql.dialect import SqlTable
from ferry.sinks.starrocks.dialect import MYSQL_TYPES, MySqlProtocolDialect


class SelectDbDialect(MySqlProtocolDialect):
    """Doris: unique key tables, ``DISTRIBUTED BY HASH(...) BUCKETS AUTO``, ``PROPERTIES``."""

    name = "selectdb"
    key_model = "UNIQUE KEY"
    #: Doris's longest VARCHAR, in bytes (longer strings are ``STRING``).
    max_vendor_varchar = 65_533
    #: Doris's longest CHAR, in bytes.
    max_vendor_char = 255
    default_properties: Mapping[str, str] = {"replication_num": "1"}

    def vendor_type(self, t: DataType) -> str:
        root = t.root
        if root is TypeRoot.DECIMAL:
            return f"DECIMAL({t.precision}, {t.scale})"
        if root is TypeRoot.CHAR:
            length = (t.length or 1) * 3
            return f"CHAR({length})" if length <= self.max_vendor_char else f"VARCHAR({length})"
        if root is TypeRoot.VARCHAR:
            length = (t.length or self.max_vendor_varchar) * 3
            return "STRING" if length > self.max_vendor_varchar else f"VARCHAR({length})"
        if root is TypeRoot.TIMESTAMP:
            return f"DATETIME({self._precision(t)})"
        names = {**MYSQL_TYPES, TypeRoot.STRING: "STRING"}
        try:
            return names[root]
        except KeyError:
            raise SinkTerminalError(f"no {self.name} type for {t}", sink=self.name) from None

    def distribution_clause(self, schema: Schema, primary_keys: Sequence[str]) -> str:
        return super().distribution_clause(schema, primary_keys) + " BUCKETS AUTO"

    def rename_column(self, table: SqlTable, old: str, new: str) -> str:
        if not self.vendor_only:
            return super().rename_column(table, old, new)
        return (
            f"ALTER TABLE {self.table_name(table)} "
            f"RENAME COLUMN {self.quote_identifier(old)} {self.quote_identifier(new)}"
        )
