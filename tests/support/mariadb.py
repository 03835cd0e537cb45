"""A real, throw-away MariaDB server for tests: ``mariadb-install-db`` into a temporary directory.

The server listens on a free port of 127.0.0.1, with its unix socket in the same temporary
directory. ``root`` logs in only through that socket; a database and a password user with every
privilege on it are created for the tests (:attr:`MariaDbServer.user`, :attr:`MariaDbServer.password`,
:attr:`MariaDbServer.database`). The user may also create databases (``CREATE DATABASE``), so a test
can take a fresh one. Leaving the ``with`` block stops the server and deletes the directory.

The binaries (``mariadb-install-db`` or ``mysql_install_db``, and ``mariadbd`` or ``mysqld``) come from
``$FERRY_MARIADB_BIN``, else the ``PATH``, else ``/usr/sbin`` and ``/usr/bin``. Running as root, the
server is started with ``--user=root``. ``server_options`` add to (or override) the server's command
line, e.g. a binary log for change-data capture (``--log-bin``, which replaces the default
``--skip-log-bin``). The server favours speed over durability::

    with MariaDbServer() as db:
        pymysql.connect(host=db.host, port=db.port, user=db.user, password=db.password, database=db.database)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ferry.exceptions import FerryError
from ferry.local.ports import HOST, free_ports, port_open
from tests.support.temporary_server import TemporaryServer
from tests.support.waiting import Deadline

__all__ = ["BIN_ENV", "MariaDbServer", "MariaDbServerError", "find_binary"]

BIN_ENV = "FERRY_MARIADB_BIN"
"""Environment variable naming the directory of ``mariadb-install-db`` and ``mariadbd``."""

_START_ATTEMPTS = 3


class MariaDbServerError(FerryError):
    """The local MariaDB server could not be set up, started or stopped."""


def find_binary(*names: str) -> Path:
    """The first of ``names`` found in ``$FERRY_MARIADB_BIN``, on the ``PATH`` or in the sbin folders."""
    configured = os.environ.get(BIN_ENV)
    folders = [Path(configured)] if configured else []
    for name in names:
        for folder in folders:
            if (folder / name).is_file():
                return folder / name
        found = shutil.which(name)
        if found is not None:
            return Path(found)
        for folder in (Path("/usr/sbin"), Path("/usr/bin"), Path("/usr/local/sbin"), Path("/usr/local/bin")):
            if (folder / name).is_file():
                return folder / name
    raise MariaDbServerError(
        f"no MariaDB binary ({' or '.join(names)}) found; set {BIN_ENV} to its directory"
    )


def _quote_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _quote_name(value: str) -> str:
    return "`" + value.replace("`", "``") + "`"


class MariaDbServer(TemporaryServer):
    """A MariaDB server in a temporary directory, with one database and one password user."""

    directory_prefix = "ferry-mariadb-"
    not_started = MariaDbServerError

    def __init__(
        self,
        *,
        database: str = "ferry",
        user: str = "ferry",
        password: str | None = None,
        start_timeout: float = 60.0,
        server_options: Sequence[str] = (),
    ) -> None:
        self.database = database
        self.user = user
        self.password = password or secrets.token_urlsafe(16)
        self.host = HOST
        self.port = 0
        self.start_timeout = start_timeout
        self.server_options = tuple(server_options)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        return self.directory / "mariadb.sock"

    def _binlog_options(self) -> list[str]:
        """``--skip-log-bin`` unless ``server_options`` turn the binary log on."""
        if any(option.startswith("--log-bin") for option in self.server_options):
            return []
        return ["--skip-log-bin"]

    def _user_option(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    def set_up(self) -> None:
        install = find_binary("mariadb-install-db", "mysql_install_db")
        server = find_binary("mariadbd", "mysqld")
        result = subprocess.run(
            [
                str(install),
                "--no-defaults",
                f"--datadir={self.directory / 'data'}",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
                *self._user_option(),
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.directory,
        )
        if result.returncode != 0:
            raise MariaDbServerError(
                f"{install.name} failed (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )
        self._start_server(server)
        self._create_database()

    def _start_server(self, server: Path) -> None:
        directory = self.directory
        log = directory / "server.log"
        for attempt in range(_START_ATTEMPTS):
            self.port = free_ports(1)[0]
            self._process = subprocess.Popen(
                [
                    str(server),
                    "--no-defaults",
                    f"--datadir={directory / 'data'}",
                    f"--socket={self.socket_path}",
                    f"--pid-file={directory / 'mariadb.pid'}",
                    # temporary tables of their own: servers sharing /tmp clash on their names
                    f"--tmpdir={directory}",
                    f"--log-error={log}",
                    f"--port={self.port}",
                    f"--bind-address={HOST}",
                    *self._binlog_options(),
                    "--skip-name-resolve",
                    "--innodb-flush-log-at-trx-commit=0",
                    "--innodb-doublewrite=0",
                    "--character-set-server=utf8mb4",
                    "--collation-server=utf8mb4_bin",
                    *self._user_option(),
                    *self.server_options,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=directory,
            )
            deadline = Deadline(self.start_timeout)
            while not deadline.expired():
                if self._process.poll() is not None:
                    break
                if self._accepts_connections():
                    return
                time.sleep(0.05)
            server_log = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            self._kill()
            if "Address already in use" not in server_log or attempt == _START_ATTEMPTS - 1:
                raise MariaDbServerError(f"mariadbd did not start:\n{server_log[-2000:]}")

    def _accepts_connections(self) -> bool:
        if not self.socket_path.exists():
            return False
        return port_open(self.port)

    def admin_sql(self, *statements: str) -> None:
        """Run statements as ``root`` through the unix socket."""
        import pymysql

        connection = pymysql.connect(unix_socket=str(self.socket_path), user="root", autocommit=True)
        try:
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
        finally:
            connection.close()

    def _create_database(self) -> None:
        user = f"{_quote_string(self.user)}@'%'"
        self.admin_sql(
            f"CREATE DATABASE {_quote_name(self.database)}",
            f"CREATE USER {user} IDENTIFIED BY {_quote_string(self.password)}",
            f"GRANT ALL PRIVILEGES ON *.* TO {user}",
        )

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)

    def shut_down(self) -> None:
        """Kill the server: nothing in it is kept."""
        self._kill()


# --------------------------------------------------------------------------------------------------
# The pytest fixture (this module is a plugin of ``tests/conftest.py``)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDbServer]:
    """A MariaDB server on 127.0.0.1 in a temporary directory, shared by the whole session.

    Its password user ``mariadb_server.user`` has every privilege, on ``ferry`` and new databases.
    """
    with MariaDbServer() as server:
        yield server
