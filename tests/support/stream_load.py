"""A local Stream Load endpoint, applying the loaded rows to a MySQL-compatible server.

StarRocks and Doris do not run here; this HTTP server implements their documented Stream Load
protocol on ``PUT /api/{db}/{table}/_stream_load`` and writes the rows into MariaDB:

- Basic authentication with the MariaDB user the server was given (``401`` otherwise);
- ``format: json`` (the only format implemented), ``strip_outer_array: true`` for a JSON array,
  ``columns`` (names, backtick-quoted or not), ``max_filter_ratio`` (default 0);
- ``label``: a label that already loaded answers ``"Status": "Label Already Exists"`` (with
  ``ExistingJobStatus: FINISHED``) and loads nothing; a failed load leaves its label free;
- rows are upserted by the table's primary key; a row whose ``__op`` (StarRocks) or
  ``__DORIS_DELETE_SIGN__`` (Doris) is 1 deletes the row with its key; the table's columns a
  load does not name are NULL in the rows it writes, unless it is a partial update
  (``partial_update: true``, StarRocks; ``partial_columns: true``, Doris), which keeps their values;
- a row the server refuses (not an object, a bad value) is filtered: above ``max_filter_ratio`` the
  load fails and nothing of it is kept; the answer's ``ErrorURL`` serves the rejected rows
  (``GET /api/_load_error_log?file=...``);
- the answer is the documented status JSON (``TxnId``, ``Label``, ``Status``, ``Message``,
  ``NumberTotalRows``, ``NumberLoadedRows``, ``NumberFilteredRows``, ``NumberUnselectedRows``,
  ``LoadBytes``, ``LoadTimeMs``, ``ErrorURL``).

::

    with StreamLoadServer(mysql_host=db.host, mysql_port=db.port) as load:
        ...  # sink option load-url: load.url
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.http_server import LocalHttpServer, read_body, reply

__all__ = ["DELETE_COLUMNS", "StreamLoadFrontend", "StreamLoadServer", "parse_columns"]

#: The columns that mark a row as a delete: StarRocks's ``__op`` and Doris's delete sign.
DELETE_COLUMNS = ("__op", "__DORIS_DELETE_SIGN__")
#: MySQL's error code of a refused login: the load is answered 401 Unauthorized.
_ACCESS_DENIED = 1045
_HTTP_CODE = "_http_code"


def parse_columns(header: str) -> list[str]:
    """The names of a ``columns`` header: comma-separated, each bare or in backticks (doubled inside)."""
    names: list[str] = []
    i, n = 0, len(header)
    while i < n:
        while i < n and header[i] in " \t,":
            i += 1
        if i >= n:
            break
        if header[i] == "`":
            i += 1
            name = []
            while i < n:
                if header[i] == "`":
                    if i + 1 < n and header[i + 1] == "`":
                        name.append("`")
                        i += 2
                        continue
                    i += 1
                    break
                name.append(header[i])
                i += 1
            names.append("".join(name))
        else:
            end = header.find(",", i)
            end = n if end < 0 else end
            names.append(header[i:end].strip())
            i = end
    return names


def _q(name: str) -> str:
    """A backtick-quoted identifier for a statement run with parameters (``%`` doubled)."""
    return "`" + name.replace("`", "``").replace("%", "%%") + "`"


class StreamLoadServer(LocalHttpServer):
    """Stream Load over HTTP on 127.0.0.1, writing into the MySQL-compatible server it is given."""

    name = "stream-load"

    def __init__(self, *, mysql_host: str, mysql_port: int) -> None:
        self.mysql_host = mysql_host
        self.mysql_port = mysql_port
        #: (database, label) → the status of the load that succeeded under it.
        self.labels: dict[tuple[str, str], dict[str, Any]] = {}
        #: Every request's label and answered status, in order.
        self.requests: list[tuple[str, str]] = []
        self._error_logs: dict[str, str] = {}
        self._lock = threading.Lock()
        self._txn = itertools.count(1)

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.command == "PUT":
            self._handle_load(handler)
        elif handler.command == "GET":
            self._handle_error_log(handler)
        else:
            handler.send_error(501, f"Unsupported method ({handler.command!r})")

    # ------------------------------------------------------------------------------- requests

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, code: int, body: dict[str, Any] | str) -> None:
        data = (json.dumps(body) if isinstance(body, dict) else body).encode("utf-8")
        content_type = "application/json" if isinstance(body, dict) else "text/plain"
        reply(handler, code, {"Content-Type": content_type}, data)

    def _handle_error_log(self, handler: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(handler.path)
        file = urllib.parse.parse_qs(url.query).get("file", [""])[0]
        if url.path != "/api/_load_error_log" or file not in self._error_logs:
            self._reply(handler, 404, "not found")
            return
        self._reply(handler, 200, self._error_logs[file])

    def _credentials(self, handler: BaseHTTPRequestHandler) -> tuple[str, str] | None:
        header = handler.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return None
        try:
            user, sep, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
        except ValueError:
            return None
        return (user, password) if sep else None

    def _handle_load(self, handler: BaseHTTPRequestHandler) -> None:
        started = time.monotonic()
        body = read_body(handler)
        parts = urllib.parse.urlsplit(handler.path).path.split("/")
        if len(parts) != 5 or parts[1] != "api" or parts[4] != "_stream_load":
            self._reply(handler, 404, {"Status": "Fail", "Message": f"no such endpoint: {handler.path}"})
            return
        database, table = urllib.parse.unquote(parts[2]), urllib.parse.unquote(parts[3])
        credentials = self._credentials(handler)
        if credentials is None:
            self._reply(handler, 401, {"Status": "Fail", "Message": "no valid Basic authorization"})
            return
        label = handler.headers.get("label") or f"auto_{next(self._txn)}"
        with self._lock:
            status = self._load(
                handler, credentials=credentials, database=database, table=table, label=label, body=body
            )
        status.update(Label=label, LoadBytes=len(body), LoadTimeMs=int((time.monotonic() - started) * 1000))
        self.requests.append((label, str(status["Status"])))
        self._reply(handler, int(status.pop(_HTTP_CODE, 200)), status)

    def _load(
        self,
        handler: BaseHTTPRequestHandler,
        *,
        credentials: tuple[str, str],
        database: str,
        table: str,
        label: str,
        body: bytes,
    ) -> dict[str, Any]:
        import pymysql

        existing = self.labels.get((database, label))
        if existing is not None:
            return {
                "TxnId": existing["TxnId"],
                "Status": "Label Already Exists",
                "ExistingJobStatus": "FINISHED",
                "Message": f"Label [{label}] has already been used.",
                "NumberTotalRows": 0,
                "NumberLoadedRows": 0,
                "NumberFilteredRows": 0,
                "NumberUnselectedRows": 0,
            }
        txn = next(self._txn)

        def fail(message: str, **extra: Any) -> dict[str, Any]:
            return {"TxnId": txn, "Status": "Fail", "Message": message, **extra}

        if handler.headers.get("format", "csv").lower() != "json":
            return fail("this endpoint loads format: json only")
        try:
            data = json.loads(body or b"null")
        except ValueError as e:
            return fail(f"the body is not JSON: {e}")
        strip = handler.headers.get("strip_outer_array", "false").lower() == "true"
        if strip and not isinstance(data, list):
            return fail("strip_outer_array is true but the body is not a JSON array")
        rows: list[Any] = data if strip else [data]
        header = handler.headers.get("columns")
        columns = parse_columns(header) if header else None
        partial = any(
            handler.headers.get(name, "false").lower() == "true"
            for name in ("partial_update", "partial_columns")
        )
        try:
            max_ratio = float(handler.headers.get("max_filter_ratio", "0"))
        except ValueError:
            return fail("max_filter_ratio is not a number")
        try:
            connection = pymysql.connect(
                host=self.mysql_host,
                port=self.mysql_port,
                user=credentials[0],
                password=credentials[1],
                database=database,
                charset="utf8mb4",
                autocommit=False,
            )
        except pymysql.MySQLError as e:
            refused = bool(e.args) and e.args[0] == _ACCESS_DENIED
            return fail(f"cannot log in or open the database: {e}", **({_HTTP_CODE: 401} if refused else {}))
        try:
            return self._apply(
                connection,
                txn=txn,
                table=table,
                label=label,
                database=database,
                rows=rows,
                columns=columns,
                max_ratio=max_ratio,
                partial=partial,
            )
        finally:
            connection.close()

    def _apply(
        self,
        connection: Any,
        *,
        txn: int,
        table: str,
        label: str,
        database: str,
        rows: list[Any],
        columns: list[str] | None,
        max_ratio: float,
        partial: bool = False,
    ) -> dict[str, Any]:
        import pymysql

        cursor = connection.cursor()
        cursor.execute(
            "SELECT column_name, column_key FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (database, table),
        )
        described = cursor.fetchall()
        if not described:
            return {"TxnId": txn, "Status": "Fail", "Message": f"unknown table {database}.{table}"}
        table_columns = [str(r[0]) for r in described]
        keys = [str(r[0]) for r in described if r[1] == "PRI"]
        errors: list[str] = []
        loaded = 0
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                errors.append(f"row {index}: not a JSON object: {json.dumps(row)[:200]}")
                continue
            given = columns if columns is not None else list(row)
            delete_flags = [row.get(c) for c in DELETE_COLUMNS if c in given]
            deleted = any(flag in (1, "1", True) for flag in delete_flags)
            names = [c for c in given if c in table_columns]
            cursor.execute("SAVEPOINT ferry_row")
            try:
                if deleted:
                    if not keys or any(k not in row for k in keys):
                        raise ValueError("a delete needs every key column")
                    condition = " AND ".join(f"{_q(k)} = %s" for k in keys)
                    cursor.execute(f"DELETE FROM {_q(table)} WHERE {condition}", [row[k] for k in keys])
                else:
                    if not partial:  # the columns the load does not name take NULL
                        names += [c for c in table_columns if c not in names and c not in DELETE_COLUMNS]
                    values = [row.get(c) for c in names]
                    placeholders = ", ".join("%s" for _ in names)
                    others = [_q(c) for c in names if c not in keys]
                    update = (
                        " ON DUPLICATE KEY UPDATE " + ", ".join(f"{q} = VALUES({q})" for q in others)
                        if others
                        else ""
                    )
                    verb = "INSERT" if others or not keys else "INSERT IGNORE"
                    cursor.execute(
                        f"{verb} INTO {_q(table)} ({', '.join(_q(c) for c in names)}) "
                        f"VALUES ({placeholders}){update}",
                        values,
                    )
                cursor.execute("RELEASE SAVEPOINT ferry_row")
                loaded += 1
            except (pymysql.MySQLError, ValueError, TypeError) as e:
                cursor.execute("ROLLBACK TO SAVEPOINT ferry_row")
                errors.append(f"row {index}: {e}: {json.dumps(row, default=str)[:200]}")
        total = len(rows)
        status: dict[str, Any] = {
            "TxnId": txn,
            "NumberTotalRows": total,
            "NumberLoadedRows": loaded,
            "NumberFilteredRows": len(errors),
            "NumberUnselectedRows": 0,
        }
        if errors:
            file = f"error_log_{txn}"
            self._error_logs[file] = "\n".join(errors) + "\n"
            status["ErrorURL"] = f"{self.url}/api/_load_error_log?file={file}"
        if total and len(errors) / total > max_ratio:
            connection.rollback()
            status.update(Status="Fail", Message="too many filtered rows", NumberLoadedRows=0)
            return status
        connection.commit()
        status.update(Status="Success", Message="OK")
        self.labels[(database, label)] = status
        return status


class StreamLoadFrontend(LocalHttpServer):
    """A frontend in front of a :class:`StreamLoadServer`: as StarRocks's and Doris's frontends do, it
    refuses a load without Basic authorization or without ``Expect: 100-continue``, and answers any
    other with a 307 redirect to the backend, named by another host name (``localhost``) and port,
    so that following it is a redirect to another origin. It reads no body."""

    name = "stream-load-frontend"

    def __init__(self, backend: StreamLoadServer) -> None:
        self.backend = backend
        #: Every redirect answered: the location.
        self.redirects: list[str] = []

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        read_body(handler)
        if not handler.headers.get("Authorization", "").startswith("Basic "):
            reply(handler, 401, {"Content-Type": "text/plain"}, b"no valid Basic authorization")
            return
        if handler.headers.get("Expect", "").lower() != "100-continue":
            body = json.dumps({"Status": "Fail", "Message": "There is no 100-continue header"}).encode()
            reply(handler, 200, {"Content-Type": "application/json"}, body)
            return
        port = urllib.parse.urlsplit(self.backend.url).port
        location = f"http://localhost:{port}{handler.path}"
        self.redirects.append(location)
        reply(handler, 307, {"Location": location}, b"")
