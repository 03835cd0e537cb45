"""A real, throw-away PostgreSQL server for tests: ``initdb`` into a temporary directory, then start.

The server listens on a free port of 127.0.0.1, with its unix socket in the same temporary directory,
and trusts nobody: every login needs a password (SCRAM). A database and a user that owns it are
created; :attr:`PostgresServer.conninfo` is what psycopg connects with, and
:attr:`PostgresServer.sqlalchemy_url` what SQLAlchemy (the state store) connects with. Leaving the
``with`` block stops the server and deletes the directory.

The binaries come from ``$FERRY_PG_BIN``, else the directory ``pg_ctl`` on the ``PATH`` resolves to,
else the newest ``/usr/lib/postgresql/<version>/bin``. PostgreSQL refuses to run as root: when the
tests run as root, the directory is given to the ``postgres`` user and the binaries run as that user
through ``runuser``. ``settings`` are extra server settings (``-c name=value``), e.g.
``{"wal_level": "logical"}`` for logical decoding. The server favours speed over durability
(``fsync=off``)::

    with PostgresServer() as pg:
        with psycopg.connect(pg.conninfo) as conn:
            ...
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from ferry.exceptions import FerryError
from ferry.local.ports import HOST, free_ports
from tests.support.temporary_server import TemporaryServer

__all__ = ["BIN_ENV", "PostgresServer", "PostgresServerError", "find_bin_dir"]

BIN_ENV = "FERRY_PG_BIN"
"""Environment variable naming the directory of ``initdb`` and ``pg_ctl``."""

SERVICE_USER = "postgres"
_ADMIN = "ferry_admin"
_START_ATTEMPTS = 3


class PostgresServerError(FerryError):
    """The local PostgreSQL server could not be set up, started or stopped."""


def find_bin_dir() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``."""
    configured = os.environ.get(BIN_ENV)
    candidates: list[Path] = [Path(configured)] if configured else []
    on_path = shutil.which("pg_ctl")
    if on_path is not None:
        candidates.append(Path(on_path).resolve().parent)

    def version(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name))

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version, reverse=True)
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    raise PostgresServerError(
        f"no PostgreSQL binaries (initdb, pg_ctl, postgres) found; set {BIN_ENV} to their directory"
    )


class PostgresServer(TemporaryServer):
    """A PostgreSQL server in a temporary directory, with one database and one password user."""

    directory_prefix = "ferry-pg-"
    not_started = PostgresServerError

    def __init__(
        self,
        *,
        database: str = "ferry",
        user: str = "ferry",
        password: str | None = None,
        bin_dir: Path | None = None,
        start_timeout: int = 60,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.database = database
        self.user = user
        self.password = password or secrets.token_urlsafe(16)
        self.host = HOST
        self.port = 0
        self.bin_dir = bin_dir
        self.start_timeout = start_timeout
        self.settings: dict[str, str] = dict(settings or {})
        self._admin_password = secrets.token_urlsafe(16)
        self._running = False
        self._as_user: str | None = None

    # ------------------------------------------------------------------------------- addresses

    @property
    def conninfo(self) -> str:
        """The psycopg connection string of the test user on the test database."""
        return self._conninfo(self.user, self.password, self.database)

    @property
    def sqlalchemy_url(self) -> str:
        """The SQLAlchemy URL (psycopg driver, password included) of the test user on the test
        database: what the state store connects with."""
        return URL.create(
            "postgresql+psycopg",
            username=self.user,
            password=self.password,
            host=self.host,
            port=self.port,
            database=self.database,
        ).render_as_string(hide_password=False)

    @property
    def admin_conninfo(self) -> str:
        """The superuser on the ``postgres`` database."""
        return self._conninfo(_ADMIN, self._admin_password, "postgres")

    def _conninfo(self, user: str, password: str, dbname: str) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(host=self.host, port=self.port, dbname=dbname, user=user, password=password)

    # ------------------------------------------------------------------------------- lifecycle

    def set_up(self) -> None:
        bin_dir = self.bin_dir or find_bin_dir()
        self._prepare_directory()
        pwfile = self.directory / "pwfile"
        pwfile.write_text(self._admin_password + "\n", encoding="utf-8")
        self._give(pwfile)
        self._run(
            bin_dir / "initdb",
            "-D",
            str(self.directory / "data"),
            "-U",
            _ADMIN,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        )
        pwfile.unlink()
        self._start_server(bin_dir)
        self._create_database()

    def _prepare_directory(self) -> None:
        if os.geteuid() == 0:
            try:
                service = pwd.getpwnam(SERVICE_USER)
            except KeyError:
                raise PostgresServerError(
                    f"running as root, PostgreSQL needs a non-root user: no user {SERVICE_USER!r}"
                ) from None
            if shutil.which("runuser") is None:
                raise PostgresServerError("running as root, starting PostgreSQL needs runuser")
            self._as_user = SERVICE_USER
            os.chown(self.directory, service.pw_uid, service.pw_gid)
        self.directory.chmod(0o700)

    def _give(self, path: Path) -> None:
        if self._as_user is not None:
            service = pwd.getpwnam(self._as_user)
            os.chown(path, service.pw_uid, service.pw_gid)
        path.chmod(0o600)

    def _run(self, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(a) for a in args]
        if self._as_user is not None:
            command = ["runuser", "-u", self._as_user, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=self._dir)
        if check and result.returncode != 0:
            raise PostgresServerError(
                f"{Path(command[-len(args)]).name} failed (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )
        return result

    def _start_server(self, bin_dir: Path, port: int | None = None) -> None:
        """Start on ``port``, else on a free port (another one when it was taken meanwhile)."""
        directory = self.directory
        log = directory / "server.log"
        attempts = 1 if port else _START_ATTEMPTS
        for attempt in range(attempts):
            self.port = port or free_ports(1)[0]
            options = " ".join(
                shlex.quote(o)
                for o in (
                    "-p",
                    str(self.port),
                    "-k",
                    str(directory),
                    "-c",
                    f"listen_addresses={HOST}",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    *(part for name, value in self.settings.items() for part in ("-c", f"{name}={value}")),
                )
            )
            result = self._run(
                bin_dir / "pg_ctl",
                "-D",
                str(directory / "data"),
                "-l",
                str(log),
                "-w",
                "-t",
                str(self.start_timeout),
                "-o",
                options,
                "start",
                check=False,
            )
            if result.returncode == 0:
                self._running = True
                return
            server_log = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            if "could not bind" not in server_log or attempt == attempts - 1:
                raise PostgresServerError(
                    f"pg_ctl start failed (exit {result.returncode}): {result.stderr.strip()}\n"
                    f"{server_log[-2000:]}"
                )

    def _create_database(self) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin_conninfo, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(self.user), sql.Literal(self.password)
                )
            )
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(self.database), sql.Identifier(self.user)
                )
            )

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """The server down for the block (its connections cut, as a restart cuts them), then up
        again on the same port with the same data."""
        bin_dir = self.bin_dir or find_bin_dir()
        self._run(bin_dir / "pg_ctl", "-D", str(self.directory / "data"), "-m", "fast", "-w", "stop")
        self._running = False
        try:
            yield
        finally:
            self._start_server(bin_dir, self.port)

    def shut_down(self) -> None:
        """Stop the server immediately: nothing in it is kept."""
        if self._running:
            self._running = False
            pg_ctl = (self.bin_dir or find_bin_dir()) / "pg_ctl"
            self._run(pg_ctl, "-D", str(self.directory / "data"), "-m", "immediate", "-w", "stop")


# --------------------------------------------------------------------------------------------------
# The pytest fixture (this module is a plugin of ``tests/conftest.py``)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on 127.0.0.1 in a temporary directory, shared by the whole session.

    Its database ``ferry`` is owned by the password user ``ferry``: ``postgres_server.conninfo``.
    """
    with PostgresServer() as server:
        yield server
