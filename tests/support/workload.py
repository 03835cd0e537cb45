"""Deterministic workloads (seeded) against the source databases: rows that exist before the
connectors start (their snapshot), then row changes interleaved with schema changes.

The MariaDB workload (:class:`ShopWorkload`) runs on database ``shop``: ``customers`` and ``orders``
take most changes, ``promotions`` exists in the snapshot and is dropped, ``shipments`` is created
midway and truncated later. Between the changes come, in this order: ADD COLUMN (last), ADD COLUMN
... AFTER, RENAME COLUMN, INT → BIGINT, VARCHAR(40) → VARCHAR(120), CREATE TABLE, DROP COLUMN,
DROP TABLE and TRUNCATE TABLE. Changes are grouped in transactions of one to four statements; a
few updates change a primary key. The PostgreSQL workload (:class:`AccountsWorkload`) runs on schema
``inventory``: TOASTed text, bytea and jsonb under ``REPLICA IDENTITY DEFAULT`` and ``FULL``,
columns added with and without defaults, renames (a chain, and a column added earlier), INTEGER →
BIGINT, VARCHAR and NUMERIC widenings, DROP COLUMN, a column dropped and added again, a table
created midway and truncated later (PostgreSQL sends Debezium no DDL: its connector's records show
the changes).

Markers (:func:`mark_binlog`, :func:`mark_wal`) are rows written to a control table after the
workload; the position before the last one is what a connector's committed offset must reach.
"""

from __future__ import annotations

import random
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from tests.support.oracle import SourceTable, mariadb_state, postgres_state
from tests.support.sources import BinlogPosition, binlog_end, wal_end

SEED = 20240611
SHOP_DATABASE = "shop"
CONTROL_DATABASE = "cdc_control"
POSTGRES_SCHEMA = "inventory"
POSTGRES_CONTROL_SCHEMA = "cdc_control"

Make = Callable[[random.Random], Any]


def _word(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(string.ascii_letters + "  -'é") for _ in range(rng.randint(low, high))).strip()


def _maybe(rng: random.Random, make: Make, null_share: float = 0.1) -> Any:
    return None if rng.random() < null_share else make(rng)


def _money(digits: int) -> Make:
    return lambda rng: Decimal(rng.randint(-(10**digits) + 1, 10**digits - 1)).scaleb(-2)


def _datetime(precision_us: int) -> Make:
    start = datetime(2020, 1, 1)

    def make(rng: random.Random) -> datetime:
        micros = rng.randint(0, 5 * 365 * 86_400 * 1_000_000)
        return start + timedelta(microseconds=micros - micros % precision_us)

    return make


def _date(rng: random.Random) -> date:
    return date(1950, 1, 1) + timedelta(days=rng.randint(0, 60 * 365))


def _time_of_day(rng: random.Random) -> timedelta:
    return timedelta(seconds=rng.randint(0, 86_399))


@dataclass
class ColumnModel:
    """A column of a workload table: its DDL and how to make a value for it."""

    name: str
    ddl: str
    make: Make


@dataclass
class TableModel:
    """What the workload knows of a table: its columns in order and the ids of its live rows."""

    name: str
    columns: list[ColumnModel]
    weight: int
    ids: list[int] = field(default_factory=list)
    next_id: int = 1

    def column(self, name: str) -> ColumnModel:
        return next(c for c in self.columns if c.name == name)

    def create_statement(self, database: str) -> str:
        """``CREATE TABLE`` in ``database`` (a quoted name, or ``{db}`` to be filled in)."""
        columns = ", ".join(f"`{c.name}` {c.ddl}" for c in self.columns)
        return f"CREATE TABLE {database}.`{self.name}` (`id` BIGINT NOT NULL PRIMARY KEY, {columns})"

    def values(self, rng: random.Random) -> dict[str, Any]:
        return {c.name: c.make(rng) for c in self.columns}


@dataclass
class WorkloadSummary:
    """What a workload did: how many of each operation, its schema changes, and what a sink that
    skips some of them is left with."""

    operations: Counter[str] = field(default_factory=Counter)
    schema_changes: list[str] = field(default_factory=list)
    #: Per table, the renamed columns: new name -> old name.
    renamed_columns: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Per table, the dropped columns.
    dropped_columns: dict[str, list[str]] = field(default_factory=dict)
    #: Per table, the columns dropped and added again (the rows not written since read NULL there).
    readded_columns: dict[str, list[str]] = field(default_factory=dict)
    #: The dropped tables, as they were right before the drop.
    dropped_tables: dict[str, SourceTable] = field(default_factory=dict)
    #: The truncated tables, as they were right before the truncation.
    truncated_tables: dict[str, SourceTable] = field(default_factory=dict)
    #: Per table, the nullable columns added with a default: column -> the default as the source
    #: reads it (Kafka Connect's JSON converter writes a NULL of such a column as its default).
    nullable_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def row_changes(self) -> int:
        return sum(n for op, n in self.operations.items() if op in ("insert", "update", "delete", "rekey"))


class ShopWorkload:
    """The MariaDB workload: :meth:`create_snapshot` before the connectors start, :meth:`run_changes`
    once they stream."""

    def __init__(self, seed: int = SEED, database: str = SHOP_DATABASE, changes: int = 4000) -> None:
        self.rng = random.Random(seed)
        self.database = database
        self.changes = changes
        self.summary = WorkloadSummary()
        self._name_length = 40
        self._wide_quantities = False
        self.tables: dict[str, TableModel] = {
            "customers": TableModel(
                "customers",
                [
                    ColumnModel("name", "VARCHAR(40) NOT NULL", lambda rng: _word(rng, 3, self._name_length) or "x"),
                    ColumnModel("email", "VARCHAR(80)", lambda rng: _maybe(rng, lambda r: f"{_word(r, 3, 20)}@example.com".replace(" ", "."))),
                    ColumnModel("score", "INT", lambda rng: _maybe(rng, lambda r: r.randint(-(2**31), 2**31 - 1))),
                    ColumnModel("balance", "DECIMAL(12,2)", lambda rng: _maybe(rng, _money(12))),
                    ColumnModel("signed_up", "DATETIME(3)", lambda rng: _maybe(rng, _datetime(1000))),
                    ColumnModel("birthday", "DATE", lambda rng: _maybe(rng, _date)),
                ],
                weight=40,
            ),
            "orders": TableModel(
                "orders",
                [
                    ColumnModel("customer_id", "INT NOT NULL", lambda rng: rng.randint(1, 500)),
                    ColumnModel("item", "VARCHAR(30)", lambda rng: _maybe(rng, lambda r: _word(r, 1, 30))),
                    ColumnModel("qty", "INT", self._quantity),
                    ColumnModel("price", "DECIMAL(10,2)", lambda rng: _maybe(rng, _money(10))),
                    ColumnModel("weight", "DOUBLE", lambda rng: _maybe(rng, lambda r: round(r.uniform(-1e6, 1e6), 4))),
                    ColumnModel("ordered_at", "TIMESTAMP(6) NULL DEFAULT NULL", lambda rng: _maybe(rng, _datetime(1))),
                    ColumnModel("pickup", "TIME", lambda rng: _maybe(rng, _time_of_day)),
                ],
                weight=45,
            ),
            "promotions": TableModel(
                "promotions",
                [
                    ColumnModel("code", "VARCHAR(20) NOT NULL", lambda rng: _word(rng, 4, 20) or "code"),
                    ColumnModel("percent", "DECIMAL(5,2)", lambda rng: _maybe(rng, lambda r: Decimal(r.randint(0, 9999)).scaleb(-2))),
                ],
                weight=10,
            ),
        }  # fmt: skip
        self._schema_changes: dict[int, Callable[[Any], None]] = {
            changes * 1 // 12: self._add_column_last,
            changes * 2 // 12: self._add_column_after,
            changes * 3 // 12: self._rename_column,
            changes * 4 // 12: self._widen_int,
            changes * 5 // 12: self._widen_varchar,
            changes * 6 // 12: self._create_table,
            changes * 8 // 12: self._drop_column,
            changes * 9 // 12: self._drop_table,
            changes * 10 // 12: self._truncate_table,
        }

    def _quantity(self, rng: random.Random) -> int | None:
        if rng.random() < 0.05:
            return None
        if self._wide_quantities and rng.random() < 0.5:
            return rng.randint(2**31, 2**50)
        return rng.randint(0, 1000)

    # -- snapshot --------------------------------------------------------------------------------

    def create_snapshot(self, connection: Any, rows: dict[str, int] | None = None) -> None:
        """Create the database and its tables with the rows the connectors' snapshot reads."""
        counts = rows or {"customers": 300, "orders": 500, "promotions": 20}
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{self.database}`")
            for table in self.tables.values():
                cursor.execute(table.create_statement(f"`{self.database}`"))
                for _ in range(counts.get(table.name, 0)):
                    self._insert(cursor, table)
        connection.commit()
        self.summary = WorkloadSummary()

    # -- changes ---------------------------------------------------------------------------------

    def run_changes(self, connection: Any) -> WorkloadSummary:
        """Run the row changes and schema changes; returns what was done."""
        rng = self.rng
        step = 0
        with connection.cursor() as cursor:
            while step < self.changes:
                if step in self._schema_changes:
                    connection.commit()
                    self._schema_changes[step](cursor)
                for _ in range(rng.randint(1, 4)):
                    self._change(cursor)
                    step += 1
                    if step in self._schema_changes or step >= self.changes:
                        break
                connection.commit()
        return self.summary

    def _change(self, cursor: Any) -> None:
        rng = self.rng
        tables = list(self.tables.values())
        table = rng.choices(tables, weights=[t.weight for t in tables])[0]
        roll = rng.random()
        if not table.ids or roll < 0.40:
            self._insert(cursor, table)
        elif roll < 0.83:
            self._update(cursor, table)
        elif roll < 0.85:
            self._rekey(cursor, table)
        else:
            self._delete(cursor, table)

    def _execute(self, cursor: Any, statement: str, params: Any = None) -> None:
        affected = cursor.execute(statement, params)
        if affected != 1:
            raise AssertionError(f"{statement} {params} changed {affected} rows, expected 1")

    def _insert(self, cursor: Any, table: TableModel) -> None:
        row = {"id": table.next_id, **table.values(self.rng)}
        table.ids.append(table.next_id)
        table.next_id += 1
        names = ", ".join(f"`{n}`" for n in row)
        marks = ", ".join(["%s"] * len(row))
        self._execute(
            cursor,
            f"INSERT INTO `{self.database}`.`{table.name}` ({names}) VALUES ({marks})",
            list(row.values()),
        )
        self.summary.operations["insert"] += 1

    def _update(self, cursor: Any, table: TableModel) -> None:
        rng = self.rng
        row_id = rng.choice(table.ids)
        columns = rng.sample(table.columns, rng.randint(1, min(3, len(table.columns))))
        values = {c.name: c.make(rng) for c in columns}
        assignments = ", ".join(f"`{n}` = %s" for n in values)
        statement = f"UPDATE `{self.database}`.`{table.name}` SET {assignments} WHERE `id` = %s"
        affected = cursor.execute(statement, [*values.values(), row_id])
        if affected not in (0, 1):
            raise AssertionError(f"{statement} changed {affected} rows")
        self.summary.operations["update" if affected else "unchanged update"] += 1

    def _rekey(self, cursor: Any, table: TableModel) -> None:
        old = self.rng.choice(table.ids)
        new = table.next_id
        table.next_id += 1
        table.ids.remove(old)
        table.ids.append(new)
        self._execute(
            cursor, f"UPDATE `{self.database}`.`{table.name}` SET `id` = %s WHERE `id` = %s", (new, old)
        )
        self.summary.operations["rekey"] += 1

    def _delete(self, cursor: Any, table: TableModel) -> None:
        row_id = self.rng.choice(table.ids)
        table.ids.remove(row_id)
        self._execute(cursor, f"DELETE FROM `{self.database}`.`{table.name}` WHERE `id` = %s", (row_id,))
        self.summary.operations["delete"] += 1

    # -- schema changes --------------------------------------------------------------------------

    def _ddl(self, cursor: Any, statement: str) -> None:
        cursor.execute(statement.format(db=f"`{self.database}`"))
        self.summary.schema_changes.append(statement.format(db=self.database))

    def _add_column_last(self, cursor: Any) -> None:
        self._ddl(cursor, "ALTER TABLE {db}.`customers` ADD COLUMN `tier` VARCHAR(10)")
        self.tables["customers"].columns.append(
            ColumnModel("tier", "VARCHAR(10)", lambda rng: rng.choice(["gold", "silver", "bronze", None]))
        )

    def _add_column_after(self, cursor: Any) -> None:
        self._ddl(cursor, "ALTER TABLE {db}.`orders` ADD COLUMN `discount` DECIMAL(5,2) AFTER `price`")
        orders = self.tables["orders"]
        at = orders.columns.index(orders.column("price")) + 1
        orders.columns.insert(
            at, ColumnModel("discount", "DECIMAL(5,2)", lambda rng: _maybe(rng, lambda r: Decimal(r.randint(0, 99999)).scaleb(-2)))
        )  # fmt: skip

    def _rename_column(self, cursor: Any) -> None:
        self._ddl(cursor, "ALTER TABLE {db}.`customers` RENAME COLUMN `email` TO `email_address`")
        self.tables["customers"].column("email").name = "email_address"
        self.summary.renamed_columns.setdefault("customers", {})["email_address"] = "email"

    def _widen_int(self, cursor: Any) -> None:
        self._ddl(cursor, "ALTER TABLE {db}.`orders` MODIFY COLUMN `qty` BIGINT")
        self._wide_quantities = True

    def _widen_varchar(self, cursor: Any) -> None:
        self._ddl(cursor, "ALTER TABLE {db}.`customers` MODIFY COLUMN `name` VARCHAR(120) NOT NULL")
        self._name_length = 110

    def _create_table(self, cursor: Any) -> None:
        shipments = TableModel(
            "shipments",
            [
                ColumnModel("order_id", "BIGINT NOT NULL", lambda rng: rng.randint(1, 2000)),
                ColumnModel("carrier", "VARCHAR(20)", lambda rng: rng.choice(["ups", "dhl", "post", None])),
                ColumnModel("shipped_on", "DATE", lambda rng: _maybe(rng, _date)),
                ColumnModel("note", "TEXT", lambda rng: _maybe(rng, lambda r: _word(r, 0, 200), 0.3)),
            ],
            weight=25,
        )
        self._ddl(cursor, shipments.create_statement("{db}"))
        self.tables["shipments"] = shipments

    def _drop_column(self, cursor: Any) -> None:
        self._ddl(cursor, "ALTER TABLE {db}.`orders` DROP COLUMN `weight`")
        orders = self.tables["orders"]
        orders.columns.remove(orders.column("weight"))
        self.summary.dropped_columns.setdefault("orders", []).append("weight")

    def _drop_table(self, cursor: Any) -> None:
        self.summary.dropped_tables.update(mariadb_state(cursor.connection, self.database, ["promotions"]))
        self._ddl(cursor, "DROP TABLE {db}.`promotions`")
        del self.tables["promotions"]

    def _truncate_table(self, cursor: Any) -> None:
        self.summary.truncated_tables.update(mariadb_state(cursor.connection, self.database, ["shipments"]))
        self._ddl(cursor, "TRUNCATE TABLE {db}.`shipments`")
        self.tables["shipments"].ids.clear()


def create_binlog_markers(connection: Any) -> None:
    """The control table the end markers are written to (before the connectors start)."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{CONTROL_DATABASE}`")
        cursor.execute(
            f"CREATE TABLE `{CONTROL_DATABASE}`.`markers` (`id` INT AUTO_INCREMENT PRIMARY KEY, `label` VARCHAR(60))"
        )
    connection.commit()


def mark_binlog(connection: Any, label: str) -> BinlogPosition:
    """Write two marker rows, each in its own transaction, and return the binary-log position
    between them: a connector whose committed offset reaches it has emitted every change before."""
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{CONTROL_DATABASE}`.`markers` (`label`) VALUES (%s)", (f"{label}-1",))
        connection.commit()
        position = binlog_end(connection)
        cursor.execute(f"INSERT INTO `{CONTROL_DATABASE}`.`markers` (`label`) VALUES (%s)", (f"{label}-2",))
        connection.commit()
    return position


# --------------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------------

#: The size range of a TOASTed value (characters of text, bytes of bytea, the text inside jsonb):
#: letters and digits in random order do not compress (pglz looks for repeats, and gives up below a
#: 25 % saving), so a row holding one is over PostgreSQL's TOAST threshold (about 2 kB) and the
#: value is stored out of line.
TOASTED_SIZE = (2_500, 4_500)
#: The TOASTed columns of each table that has them.
TOASTED_COLUMNS = {"documents": ("body", "attachment", "meta"), "attachments": ("content", "data", "props")}


def _toasted_text(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits, k=rng.randint(*TOASTED_SIZE)))


def _large_text(rng: random.Random) -> str | None:
    """NULL, a short text, or (mostly) one stored out of line."""
    roll = rng.random()
    if roll < 0.1:
        return None
    return _word(rng, 0, 40) if roll < 0.35 else _toasted_text(rng)


def _large_bytes(rng: random.Random) -> bytes | None:
    roll = rng.random()
    if roll < 0.1:
        return None
    return rng.randbytes(rng.randint(0, 40) if roll < 0.35 else rng.randint(*TOASTED_SIZE))


def _large_json(rng: random.Random) -> Any:
    from psycopg.types.json import Jsonb

    roll = rng.random()
    if roll < 0.1:
        return None
    document = {
        "title": _word(rng, 1, 20),
        "n": rng.randint(-1000, 1000),
        "tags": [_word(rng, 1, 8) for _ in range(rng.randint(0, 3))],
        "text": _word(rng, 0, 40) if roll < 0.35 else _toasted_text(rng),
    }
    return Jsonb(document)


class AccountsWorkload:
    """The PostgreSQL workload on schema ``inventory``, what a PostgreSQL user runs under Debezium's
    PostgreSQL connector: :meth:`create_snapshot` before the connectors start, :meth:`run_changes`
    once they stream.

    - ``accounts`` (``REPLICA IDENTITY DEFAULT``) takes most schema changes: columns added without
      a default (nullable) and with one (``text NOT NULL``, ``integer``, ``date``: existing rows
      read the default), a rename chain (``opened`` → ``opened_on`` → ``started_on``), the rename
      of a column added earlier (``note`` → ``remark``, not the last column by then), INTEGER →
      BIGINT, a VARCHAR widening and a DROP COLUMN;
    - ``payments`` (``DEFAULT``) gets a ``numeric NOT NULL`` column with a default, then
      ``paid_at`` dropped and added again (in one transaction: not the last column, it moves last,
      and the rows not written since read NULL there), a numeric precision change and a nullable
      column;
    - ``documents`` (``REPLICA IDENTITY DEFAULT``) and ``attachments`` (``REPLICA IDENTITY FULL``)
      hold TOASTed text, bytea and jsonb (:data:`TOASTED_SIZE`), touched by some updates and not by
      others: an update that leaves a TOASTed value alone sends it as unchanged, and Debezium writes
      its placeholder instead (under ``FULL`` the old row has the value). ``documents`` gets a
      ``boolean NOT NULL`` column with a default, ``attachments`` a nullable ``text`` one;
    - ``transfers`` is created midway and truncated later (rows follow the truncation).

    Changes are grouped in transactions of one to four statements; a few updates change a primary
    key (under ``REPLICA IDENTITY DEFAULT`` such an update of a row whose TOASTed value stays would
    leave Debezium nothing to send for it, neither in the old row, which has the key only, nor in the
    new one, so the key updates of ``documents`` set its TOASTed columns too). PostgreSQL sends
    Debezium no DDL: every schema change is learnt from the records.
    """

    def __init__(self, seed: int = SEED + 1, changes: int = 2400) -> None:
        self.rng = random.Random(seed)
        self.changes = changes
        self.summary = WorkloadSummary()
        self._owner_length = 40
        self._wide_levels = False
        self._payment_digits = 12
        self.tables: dict[str, TableModel] = {
            "accounts": TableModel(
                "accounts",
                [
                    ColumnModel("owner", "varchar(40) NOT NULL", lambda rng: _word(rng, 3, self._owner_length) or "o"),
                    ColumnModel("amount", "numeric(10,2)", lambda rng: _maybe(rng, _money(10))),
                    ColumnModel("opened", "date", lambda rng: _maybe(rng, _date)),
                    ColumnModel("level", "integer", self._level),
                    ColumnModel("legacy_code", "varchar(8)", lambda rng: _maybe(rng, lambda r: _word(r, 1, 8))),
                ],
                weight=35,
            ),
            "payments": TableModel(
                "payments",
                [
                    ColumnModel("account_id", "integer NOT NULL", lambda rng: rng.randint(1, 400)),
                    ColumnModel("amount", "numeric(14,2) NOT NULL", self._payment_amount),
                    ColumnModel("paid_at", "timestamp(6)", lambda rng: _maybe(rng, _datetime(1))),
                ],
                weight=20,
            ),
            "documents": TableModel(
                "documents",
                [
                    ColumnModel("title", "varchar(60) NOT NULL", lambda rng: _word(rng, 1, 60) or "t"),
                    ColumnModel("body", "text", _large_text),
                    ColumnModel("attachment", "bytea", _large_bytes),
                    ColumnModel("meta", "jsonb", _large_json),
                    ColumnModel("revision", "integer", lambda rng: rng.randint(0, 1000)),
                ],
                weight=15,
            ),
            "attachments": TableModel(
                "attachments",
                [
                    ColumnModel("name", "varchar(60) NOT NULL", lambda rng: _word(rng, 1, 60) or "n"),
                    ColumnModel("content", "text", _large_text),
                    ColumnModel("data", "bytea", _large_bytes),
                    ColumnModel("props", "jsonb", _large_json),
                    ColumnModel("version", "integer", lambda rng: rng.randint(0, 1000)),
                ],
                weight=15,
            ),
        }  # fmt: skip
        self.replica_identity = {"attachments": "FULL"}
        steps = [
            self._add_column_without_default,
            self._add_text_not_null_default,
            self._widen_int,
            self._add_integer_default,
            self._rename_opened,
            self._add_numeric_not_null_default,
            self._add_paid_at_again,
            self._widen_varchar,
            self._create_table,
            self._add_boolean_not_null_default,
            self._rename_added_column,
            self._widen_numeric,
            self._add_date_default,
            self._rename_opened_again,
            self._truncate_table,
            self._add_text_default_full_identity,
            self._drop_column,
            self._add_nullable_column,
        ]
        self._schema_changes: dict[int, Callable[[Any], None]] = {
            changes * (n + 1) // (len(steps) + 2): step for n, step in enumerate(steps)
        }

    def _level(self, rng: random.Random) -> int | None:
        if rng.random() < 0.05:
            return None
        return rng.randint(2**31, 2**52) if self._wide_levels and rng.random() < 0.5 else rng.randint(0, 100)

    def _payment_amount(self, rng: random.Random) -> Decimal:
        return Decimal(rng.randint(-(10**self._payment_digits) + 1, 10**self._payment_digits - 1)).scaleb(-2)

    # -- snapshot --------------------------------------------------------------------------------

    def create_snapshot(self, connection: Any, rows: dict[str, int] | None = None) -> None:
        """Create the schema and its tables with the rows the connectors' snapshot reads."""
        counts = rows or {"accounts": 150, "payments": 150, "documents": 40, "attachments": 40}
        connection.execute(f"CREATE SCHEMA {POSTGRES_SCHEMA}")
        for table in self.tables.values():
            connection.execute(_postgres_create_statement(table))
            if (identity := self.replica_identity.get(table.name)) is not None:
                connection.execute(f"ALTER TABLE {POSTGRES_SCHEMA}.{table.name} REPLICA IDENTITY {identity}")
            for _ in range(counts.get(table.name, 0)):
                self._insert(connection, table)
        connection.commit()
        self.summary = WorkloadSummary()

    def toasted_bytes(self, connection: Any) -> dict[str, int]:
        """The size of each TOAST relation of the tables with TOASTed columns: what is stored out of
        line (a table whose values all fit in its rows has an empty one)."""
        counts: dict[str, int] = {}
        for name in TOASTED_COLUMNS:
            (counts[name],) = connection.execute(
                "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = %s::regclass",
                (f"{POSTGRES_SCHEMA}.{name}",),
            ).fetchone()
        connection.commit()
        return counts

    # -- changes ---------------------------------------------------------------------------------

    def run_changes(self, connection: Any) -> WorkloadSummary:
        """Run the row changes and schema changes; returns what was done."""
        rng = self.rng
        step = 0
        while step < self.changes:
            if step in self._schema_changes:
                connection.commit()
                self._schema_changes[step](connection)
                connection.commit()
            for _ in range(rng.randint(1, 4)):
                self._change(connection)
                step += 1
                if step in self._schema_changes or step >= self.changes:
                    break
            connection.commit()
        return self.summary

    def _change(self, connection: Any) -> None:
        rng = self.rng
        tables = list(self.tables.values())
        table = rng.choices(tables, weights=[t.weight for t in tables])[0]
        roll = rng.random()
        if not table.ids or roll < 0.35:
            self._insert(connection, table)
        elif roll < 0.80:
            self._update(connection, table)
        elif roll < 0.83:
            self._rekey(connection, table)
        else:
            self._delete(connection, table)

    def _execute(self, connection: Any, statement: str, params: Any) -> None:
        affected = connection.execute(statement, params).rowcount
        if affected != 1:
            raise AssertionError(f"{statement} {params} changed {affected} rows, expected 1")

    def _insert(self, connection: Any, table: TableModel) -> None:
        row = {"id": table.next_id, **table.values(self.rng)}
        table.ids.append(table.next_id)
        table.next_id += 1
        names = ", ".join(row)
        marks = ", ".join(["%s"] * len(row))
        self._execute(
            connection,
            f"INSERT INTO {POSTGRES_SCHEMA}.{table.name} ({names}) VALUES ({marks})",
            list(row.values()),
        )
        self.summary.operations["insert"] += 1

    def _update(self, connection: Any, table: TableModel) -> None:
        rng = self.rng
        columns = rng.sample(table.columns, rng.randint(1, min(3, len(table.columns))))
        values = {c.name: c.make(rng) for c in columns}
        assignments = ", ".join(f"{n} = %s" for n in values)
        self._execute(
            connection,
            f"UPDATE {POSTGRES_SCHEMA}.{table.name} SET {assignments} WHERE id = %s",
            [*values.values(), rng.choice(table.ids)],
        )
        self.summary.operations["update"] += 1

    def _rekey(self, connection: Any, table: TableModel) -> None:
        old = self.rng.choice(table.ids)
        new = table.next_id
        table.next_id += 1
        table.ids.remove(old)
        table.ids.append(new)
        rewritten = TOASTED_COLUMNS.get(table.name, ()) if table.name not in self.replica_identity else ()
        values = {"id": new, **{n: table.column(n).make(self.rng) for n in rewritten}}
        assignments = ", ".join(f"{n} = %s" for n in values)
        self._execute(
            connection,
            f"UPDATE {POSTGRES_SCHEMA}.{table.name} SET {assignments} WHERE id = %s",
            [*values.values(), old],
        )
        self.summary.operations["rekey"] += 1

    def _delete(self, connection: Any, table: TableModel) -> None:
        row_id = self.rng.choice(table.ids)
        table.ids.remove(row_id)
        self._execute(connection, f"DELETE FROM {POSTGRES_SCHEMA}.{table.name} WHERE id = %s", (row_id,))
        self.summary.operations["delete"] += 1

    # -- schema changes --------------------------------------------------------------------------

    def _ddl(self, connection: Any, statement: str) -> None:
        connection.execute(statement)
        self.summary.schema_changes.append(statement)

    def _add(self, connection: Any, table: str, column: ColumnModel, nullable_default: Any = None) -> None:
        self._ddl(connection, f"ALTER TABLE {POSTGRES_SCHEMA}.{table} ADD COLUMN {column.name} {column.ddl}")
        self.tables[table].columns.append(column)
        if nullable_default is not None:
            self.summary.nullable_defaults.setdefault(table, {})[column.name] = nullable_default

    def _rename(self, connection: Any, table: str, old: str, new: str) -> None:
        self._ddl(connection, f"ALTER TABLE {POSTGRES_SCHEMA}.{table} RENAME COLUMN {old} TO {new}")
        self.tables[table].column(old).name = new
        self.summary.renamed_columns.setdefault(table, {})[new] = old

    def _add_column_without_default(self, connection: Any) -> None:
        self._add(
            connection,
            "accounts",
            ColumnModel("note", "text", lambda rng: _maybe(rng, lambda r: _word(r, 0, 50), 0.3)),
        )

    def _add_text_not_null_default(self, connection: Any) -> None:
        self._add(
            connection,
            "accounts",
            ColumnModel("region", "text NOT NULL DEFAULT 'eu'", lambda rng: rng.choice(["eu", "us", "apac"])),
        )

    def _add_integer_default(self, connection: Any) -> None:
        self._add(
            connection,
            "accounts",
            ColumnModel(
                "credit", "integer DEFAULT 100", lambda rng: _maybe(rng, lambda r: r.randint(-1000, 1000))
            ),
            nullable_default=100,
        )

    def _add_numeric_not_null_default(self, connection: Any) -> None:
        self._add(
            connection,
            "payments",
            ColumnModel(
                "fee",
                "numeric(8,3) NOT NULL DEFAULT 1.250",
                lambda rng: Decimal(rng.randint(0, 99_999)).scaleb(-3),
            ),
        )

    def _add_boolean_not_null_default(self, connection: Any) -> None:
        self._add(
            connection,
            "documents",
            ColumnModel("archived", "boolean NOT NULL DEFAULT false", lambda rng: rng.random() < 0.3),
        )

    def _add_date_default(self, connection: Any) -> None:
        self._add(
            connection,
            "accounts",
            ColumnModel("since", "date DEFAULT '2020-02-29'", lambda rng: _maybe(rng, _date)),
            nullable_default=date(2020, 2, 29),
        )

    def _add_text_default_full_identity(self, connection: Any) -> None:
        self._add(
            connection,
            "attachments",
            ColumnModel(
                "kind", "text DEFAULT 'file'", lambda rng: rng.choice(["file", "image", "note", None])
            ),
            nullable_default="file",
        )

    def _add_nullable_column(self, connection: Any) -> None:
        self._add(
            connection,
            "payments",
            ColumnModel("memo", "varchar(30)", lambda rng: _maybe(rng, lambda r: _word(r, 1, 30), 0.4)),
        )

    def _rename_opened(self, connection: Any) -> None:
        self._rename(connection, "accounts", "opened", "opened_on")

    def _rename_opened_again(self, connection: Any) -> None:
        self._rename(connection, "accounts", "opened_on", "started_on")

    def _rename_added_column(self, connection: Any) -> None:
        self._rename(connection, "accounts", "note", "remark")

    def _widen_int(self, connection: Any) -> None:
        self._ddl(connection, f"ALTER TABLE {POSTGRES_SCHEMA}.accounts ALTER COLUMN level TYPE bigint")
        self._wide_levels = True

    def _widen_varchar(self, connection: Any) -> None:
        self._ddl(connection, f"ALTER TABLE {POSTGRES_SCHEMA}.accounts ALTER COLUMN owner TYPE varchar(80)")
        self._owner_length = 75

    def _widen_numeric(self, connection: Any) -> None:
        self._ddl(
            connection, f"ALTER TABLE {POSTGRES_SCHEMA}.payments ALTER COLUMN amount TYPE numeric(18,2)"
        )
        self._payment_digits = 16

    def _create_table(self, connection: Any) -> None:
        transfers = TableModel(
            "transfers",
            [
                ColumnModel("from_account", "bigint NOT NULL", lambda rng: rng.randint(1, 400)),
                ColumnModel("to_account", "bigint NOT NULL", lambda rng: rng.randint(1, 400)),
                ColumnModel("amount", "numeric(12,2) NOT NULL", _money(12)),
                ColumnModel("reference", "varchar(40)", lambda rng: _maybe(rng, lambda r: _word(r, 1, 40))),
                ColumnModel("booked_on", "date", lambda rng: _maybe(rng, _date)),
            ],
            weight=15,
        )
        self._ddl(connection, _postgres_create_statement(transfers))
        self.tables["transfers"] = transfers

    def _add_paid_at_again(self, connection: Any) -> None:
        # in one transaction, no row between: the records before and after differ only in where
        # paid_at stands (last now, after fee), which shows the drop and the add
        self._ddl(connection, f"ALTER TABLE {POSTGRES_SCHEMA}.payments DROP COLUMN paid_at")
        payments = self.tables["payments"]
        payments.columns.remove(payments.column("paid_at"))
        self.summary.readded_columns.setdefault("payments", []).append("paid_at")
        self._add(
            connection,
            "payments",
            ColumnModel("paid_at", "timestamp(6)", lambda rng: _maybe(rng, _datetime(1))),
        )

    def _drop_column(self, connection: Any) -> None:
        self._ddl(connection, f"ALTER TABLE {POSTGRES_SCHEMA}.accounts DROP COLUMN legacy_code")
        accounts = self.tables["accounts"]
        accounts.columns.remove(accounts.column("legacy_code"))
        self.summary.dropped_columns.setdefault("accounts", []).append("legacy_code")

    def _truncate_table(self, connection: Any) -> None:
        self.summary.truncated_tables.update(postgres_state(connection, POSTGRES_SCHEMA, ["transfers"]))
        self._ddl(connection, f"TRUNCATE TABLE {POSTGRES_SCHEMA}.transfers")
        self.tables["transfers"].ids.clear()


def _postgres_create_statement(table: TableModel) -> str:
    columns = ", ".join(f"{c.name} {c.ddl}" for c in table.columns)
    return f"CREATE TABLE {POSTGRES_SCHEMA}.{table.name} (id bigint PRIMARY KEY, {columns})"


def create_wal_markers(connection: Any) -> None:
    connection.execute(f"CREATE SCHEMA {POSTGRES_CONTROL_SCHEMA}")
    connection.execute(f"CREATE TABLE {POSTGRES_CONTROL_SCHEMA}.markers (id serial PRIMARY KEY, label text)")
    connection.commit()


def mark_wal(connection: Any, label: str) -> int:
    """Write two marker rows in transactions of their own; return the WAL position between them."""
    connection.execute(f"INSERT INTO {POSTGRES_CONTROL_SCHEMA}.markers (label) VALUES (%s)", (f"{label}-1",))
    connection.commit()
    lsn = wal_end(connection)
    connection.execute(f"INSERT INTO {POSTGRES_CONTROL_SCHEMA}.markers (label) VALUES (%s)", (f"{label}-2",))
    connection.commit()
    return lsn
