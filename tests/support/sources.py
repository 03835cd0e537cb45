"""The source databases Debezium captures: MariaDB with a row-based binary log, PostgreSQL with
logical decoding. Each is a throw-away server of ``tests.support`` started with the options
change-data capture needs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tests.support.mariadb import MariaDbServer
from tests.support.postgres import PostgresServer

#: Debezium's MySQL connector refuses MariaDB's own version string (it then asks for
#: ``SHOW BINARY LOG STATUS``) and an 8.x version makes Connector/J query a variable MariaDB lacks;
#: reporting MySQL 5.7 makes both speak the MySQL 5.7 dialect, which MariaDB understands.
MYSQL_COMPATIBLE_VERSION = "5.7.19-log"
#: The name of the publication the PostgreSQL connector reads (created ahead for all tables, since
#: creating one for all tables needs a superuser).
PUBLICATION = "dbz_publication"


def binlog_mariadb(server_id: int = 1) -> MariaDbServer:
    """A MariaDB server (not started) writing a row-based binary log with full row images, in UTC."""
    return MariaDbServer(
        server_options=(
            f"--version={MYSQL_COMPATIBLE_VERSION}",
            "--log-bin=binlog",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            f"--server-id={server_id}",
            "--default-time-zone=+00:00",
        )
    )


def mariadb_connection(server: MariaDbServer, database: str | None = None, **options: Any) -> Any:
    """A pymysql connection of the server's password user, in UTC, autocommit off."""
    import pymysql

    return pymysql.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=database,
        init_command="SET time_zone = '+00:00'",
        **options,
    )


@dataclass(frozen=True, order=True)
class BinlogPosition:
    """A position in a MariaDB binary log: the file's sequence number and the byte offset."""

    sequence: int
    offset: int
    file: str

    @classmethod
    def of(cls, file: str, offset: int) -> BinlogPosition:
        match = re.search(r"\.(\d+)$", file)
        if match is None:
            raise ValueError(f"a binary log file name ends with .<number>, got {file!r}")
        return cls(int(match.group(1)), int(offset), file)


def binlog_end(connection: Any) -> BinlogPosition:
    """Where the next event of the server's binary log will be written."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW MASTER STATUS")
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError("SHOW MASTER STATUS returned nothing: the server writes no binary log")
    return BinlogPosition.of(str(row[0]), int(row[1]))


def logical_postgres() -> PostgresServer:
    """A PostgreSQL server (not started) with logical decoding (``wal_level=logical``)."""
    return PostgresServer(
        settings={"wal_level": "logical", "max_replication_slots": "8", "max_wal_senders": "8"}
    )


def superuser_conninfo(server: PostgresServer) -> str:
    """The superuser on the server's test database."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(server.admin_conninfo, dbname=server.database)


def prepare_logical_capture(server: PostgresServer) -> None:
    """Let the test user stream changes (``REPLICATION``) and publish every table of its database."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(superuser_conninfo(server), autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} REPLICATION").format(sql.Identifier(server.user)))
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(sql.Identifier(PUBLICATION)))


def wal_end(connection: Any) -> int:
    """The server's current write-ahead-log insert position, as the number Debezium's offsets hold."""
    row = connection.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    high, low = str(row[0]).split("/")
    return (int(high, 16) << 32) + int(low, 16)
