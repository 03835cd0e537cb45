"""A local MaxCompute endpoint: the REST API and the Tunnel that pyodps speaks, on one port.

MaxCompute does not run here. This HTTP server implements the part of its two protocols that
pyodps uses to create and change tables, read their metadata and write and read rows, so that
pyodps talks to it unmodified through ``ODPS(access_id, access_key, project, endpoint=...)``:

- **REST API** under ``/api`` (the ``endpoint``): ``GET /projects/{p}/tables/{t}`` (the table XML
  with its JSON schema; ``?extended`` adds the reserved properties ``Transactional`` and
  ``PrimaryKey``), ``POST /projects/{p}/instances`` (an SQL task, run when it is submitted),
  ``GET /projects/{p}/instances/{id}`` with ``?instancestatus``, ``?taskstatus``, ``?result`` and
  ``?source``, ``GET /projects/{p}/tunnel?service`` (where the Tunnel is), ``/tenants``,
  ``/logview/host``;
- **Tunnel** at the root (the ``tunnel_endpoint``): upload sessions (``?uploads``, blocks by
  ``PUT ...?uploadid&blockid``, commit), upsert sessions of transactional tables with a primary
  key (``/upserts``: buckets routed by pyodps' record hasher, checked here, commit, abort),
  download sessions of tables (``?downloads``, ``?downloadid&data&rowrange``) and of ``SELECT``
  instances (the instance tunnel). Blocks are decoded with pyodps' own tunnel reader classes (the
  protobuf record wire format with its CRC checks, ``deflate`` compression) and rows are sent with
  its writer classes;
- **SQL**, parsed with sqlglot (Spark spelling, which MaxCompute's DDL shares, plus MaxCompute's
  ``CHANGE COLUMN c RENAME TO d`` and ``CHANGE COLUMN c NULL``): ``CREATE TABLE [IF NOT EXISTS]``
  with ``PRIMARY KEY``, ``COMMENT`` and ``TBLPROPERTIES`` (``transactional``,
  ``write.bucket.num``), ``ALTER TABLE ... ADD COLUMNS / DROP COLUMNS / CHANGE COLUMN`` (type
  widenings only, as MaxCompute allows them), ``TRUNCATE TABLE``, ``DROP TABLE [IF EXISTS]``,
  ``SELECT * FROM t``. Names are case-insensitive and kept in lower case, as MaxCompute keeps them.
  A failed statement fails its task with an ``ODPS-0130071`` message;
- **authentication**: every request's ``Authorization`` is checked with pyodps' signer against the
  access id and key the server was given (``401 SignatureNotMatch`` otherwise).

Tables live in memory, by project. What this does not do: partitions, schemas (the three-level
model), quotas, SQL beyond the statements above, the streaming tunnel, and MaxCompute's own type
checks beyond pyodps' type parser.

::

    with MaxComputeServer(project="ferry") as mc:
        odps = ODPS(mc.access_id, mc.access_key, mc.project, endpoint=mc.endpoint)
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, unquote, urlparse, urlsplit
from xml.etree import ElementTree

import sqlglot
from odps import types as odps_types
from odps.accounts import CloudAccount
from odps.models import Record, TableSchema
from odps.tunnel.hasher import RecordHasher
from odps.tunnel.io.reader import TunnelRecordReader
from odps.tunnel.io.stream import CompressOption, get_decompress_stream
from odps.tunnel.io.writer import BaseRecordWriter
from sqlglot import exp

from tests.support.http_server import LocalHttpServer, read_body, reply

__all__ = ["MaxComputeServer", "SqlInstanceError"]

#: The extra columns of every record of an upsert session (pyodps ``TableUpsertSession``).
UPSERT_COLUMNS = ("__version", "__app_version", "__operation", "__key_cols", "__value_cols")
_UPSERT_TYPES = ("bigint", "bigint", "tinyint", "array<bigint>", "array<bigint>")
_SEMANTIC = "ODPS-0130071"
_PARSE = "ODPS-0130161"
_TABLE_NOT_FOUND = "ODPS-0130131"
_T = exp.DataType.Type
_SIMPLE_TYPES = {
    _T.TINYINT: "tinyint",
    _T.SMALLINT: "smallint",
    _T.INT: "int",
    _T.BIGINT: "bigint",
    _T.FLOAT: "float",
    _T.DOUBLE: "double",
    _T.BOOLEAN: "boolean",
    _T.DATE: "date",
    _T.DATETIME: "datetime",
    _T.TIMESTAMP: "timestamp",
    _T.TIMESTAMPTZ: "timestamp",
    _T.TIMESTAMPLTZ: "timestamp",
    _T.TIMESTAMPNTZ: "timestamp_ntz",
    _T.TEXT: "string",
    _T.BINARY: "binary",
    _T.JSON: "json",
}
_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}


class SqlInstanceError(Exception):
    """A statement MaxCompute would refuse: ``code`` is its ``ODPS-...`` error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(
            f"{code}:[0,0] {'Parse' if code == _PARSE else 'Semantic analysis'} exception - {message}"
        )
        self.code = code


class _HttpError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


# ----------------------------------------------------------------------------------- tables


@dataclass
class _Column:
    id: int
    name: str
    type: str  # MaxCompute spelling, lower case: "bigint", "decimal(10,2)", "struct<`a`:int>"
    nullable: bool = True
    comment: str = ""


@dataclass
class _Table:
    name: str
    columns: list[_Column]
    primary_key: list[str]
    transactional: bool
    buckets: int
    comment: str
    properties: dict[str, str]
    created: float = field(default_factory=time.time)
    modified: float = field(default_factory=time.time)
    #: Bumped by every change of the columns: a tunnel session opened before refuses to commit.
    version: int = 0
    keyed: dict[tuple[Any, ...], dict[int, Any]] = field(default_factory=dict)
    appended: list[dict[int, Any]] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def find(self, name: str) -> _Column | None:
        return next((c for c in self.columns if c.name == name.lower()), None)

    def column(self, name: str) -> _Column:
        column = self.find(name)
        if column is None:
            raise SqlInstanceError(_SEMANTIC, f"column {name} cannot be resolved in table {self.name}")
        return column

    def new_column(self, name: str, type_text: str, nullable: bool, comment: str) -> _Column:
        if self.find(name) is not None:
            raise SqlInstanceError(_SEMANTIC, f"column {name.lower()} already exists in table {self.name}")
        return _Column(next(self._ids), name.lower(), type_text, nullable, comment)

    def rows(self) -> list[dict[int, Any]]:
        return [*self.keyed.values(), *self.appended]

    def changed(self) -> None:
        self.version += 1
        self.modified = time.time()


def _odps_schema(columns: list[_Column]) -> Any:
    return TableSchema(columns=[odps_types.Column(c.name, c.type) for c in columns])


def _json(body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _schema_json(columns: list[_Column]) -> dict[str, Any]:
    """A table schema as the REST API and the Tunnel give it (JSON)."""
    return {
        "columns": [
            {"name": c.name, "type": c.type, "comment": c.comment, "isNullable": c.nullable, "label": ""}
            for c in columns
        ],
        "partitionKeys": [],
    }


@dataclass
class _Instance:
    id: str
    job_xml: str
    status: str  # "Success" or "Failed"
    result: str
    started: float
    columns: list[_Column] | None = None  # a SELECT's result
    rows: list[dict[int, Any]] = field(default_factory=list)


@dataclass
class _Session:
    id: str
    table: str
    version: int
    kind: str  # "upload", "upsert", "download"
    columns: list[_Column]
    blocks: dict[int, list[list[Any]]] = field(default_factory=dict)
    operations: list[tuple[str, list[Any]]] = field(default_factory=list)
    rows: list[dict[int, Any]] = field(default_factory=list)
    status: str = "normal"


# ----------------------------------------------------------------------------------- SQL


def _identifier(node: exp.Expression | None) -> str:
    if node is None:
        raise SqlInstanceError(_PARSE, "a name is missing")
    return str(node.name).lower()


def _type_text(t: exp.DataType) -> str:
    """The MaxCompute spelling of a parsed type, checked by pyodps' type parser."""
    kind = t.this
    params = [int(p.name) for p in t.expressions if isinstance(p, exp.DataTypeParam)]
    if kind in _SIMPLE_TYPES:
        text = _SIMPLE_TYPES[kind]
    elif kind is _T.DECIMAL:
        text = "decimal" if not params else f"decimal({params[0]},{params[1] if len(params) > 1 else 0})"
    elif kind in (_T.VARCHAR, _T.CHAR) and params:
        text = f"{'varchar' if kind is _T.VARCHAR else 'char'}({params[0]})"
    elif kind is _T.ARRAY and len(t.expressions) == 1:
        text = f"array<{_type_text(t.expressions[0])}>"
    elif kind is _T.MAP and len(t.expressions) == 2:
        text = f"map<{_type_text(t.expressions[0])},{_type_text(t.expressions[1])}>"
    elif kind is _T.STRUCT:
        fields = [f"`{f.name.replace('`', '``')}`:{_type_text(f.args['kind'])}" for f in t.expressions]
        text = f"struct<{','.join(fields)}>"
    else:
        raise SqlInstanceError(_PARSE, f"unsupported type {t.sql(dialect='spark')}")
    try:
        odps_types.validate_data_type(text)
    except Exception as e:
        raise SqlInstanceError(_SEMANTIC, f"invalid type {text}: {e}") from None
    return text


def _widens(old: str, new: str) -> bool:
    """Whether MaxCompute changes a column of type ``old`` to ``new`` (lossless widenings only)."""
    if old == new or (new == "string" and not old.startswith(("array", "map", "struct", "binary"))):
        return True
    if old in _INTEGERS:
        if new in _INTEGERS:
            return _INTEGERS.index(new) >= _INTEGERS.index(old)
        if new == "double":
            return old != "bigint"
        if new.startswith("decimal("):
            precision, scale = (int(x) for x in new[8:-1].split(","))
            return precision - scale >= _DIGITS[old]
    if old == "float":
        return new == "double"
    if old.startswith("decimal(") and new.startswith("decimal("):
        p1, s1 = (int(x) for x in old[8:-1].split(","))
        p2, s2 = (int(x) for x in new[8:-1].split(","))
        return s2 >= s1 and p2 - s2 >= p1 - s1
    if old.startswith(("varchar(", "char(")) and new.startswith("varchar("):
        return int(new[8:-1]) >= int(old[old.index("(") + 1 : -1])
    return False


def _cast(value: Any, new: str) -> Any:
    if value is None:
        return None
    if new == "string":
        return value if isinstance(value, str) else str(value)
    if new == "double":
        return float(value)
    if new.startswith("decimal"):
        return Decimal(value)
    return value


def _change_column(sql: str) -> tuple[str, str, str] | None:
    """MaxCompute's ``ALTER TABLE t CHANGE [COLUMN] c RENAME TO d`` and ``... CHANGE COLUMN c NULL``,
    which sqlglot's Spark grammar does not have: (table, column, new name or "" for NULL)."""
    tokens = [t for t in sqlglot.Dialect.get_or_raise("spark").tokenize(sql) if t.text != ";"]
    words = [t.text.upper() if t.token_type.name != "IDENTIFIER" else None for t in tokens]
    if words[:2] != ["ALTER", "TABLE"] or "CHANGE" not in words:
        return None
    change = words.index("CHANGE")
    table = tokens[change - 1].text
    rest = tokens[change + 1 :]
    if rest and rest[0].text.upper() == "COLUMN":
        rest = rest[1:]
    if len(rest) == 2 and rest[1].text.upper() == "NULL":
        return table.lower(), rest[0].text, ""
    if len(rest) == 4 and [t.text.upper() for t in rest[1:3]] == ["RENAME", "TO"]:
        return table.lower(), rest[0].text, rest[3].text
    return None


class _Sql:
    """Runs one statement against the tables of a project."""

    def __init__(self, tables: dict[str, _Table]) -> None:
        self.tables = tables

    def table(self, name: str) -> _Table:
        table = self.tables.get(name.lower())
        if table is None:
            raise SqlInstanceError(_TABLE_NOT_FOUND, f"table {name.lower()} does not exist")
        return table

    def run(self, sql: str) -> tuple[str, list[_Column] | None, list[dict[int, Any]]]:
        text = sql.strip().rstrip(";").strip()
        changed = _change_column(text)
        if changed is not None:
            table_name, column, new_name = changed
            return self.change_column(self.table(table_name), column, new_name), None, []
        try:
            statement = sqlglot.parse_one(text, read="spark")
        except sqlglot.errors.ParseError as e:
            raise SqlInstanceError(_PARSE, str(e).splitlines()[0]) from None
        if isinstance(statement, exp.Create) and str(statement.args.get("kind", "")).upper() == "TABLE":
            return self.create(statement), None, []
        if isinstance(statement, exp.Drop) and str(statement.args.get("kind", "")).upper() == "TABLE":
            for target in statement.args.get("tables") or [statement.this]:
                name = _identifier(target)
                if name not in self.tables and not statement.args.get("exists"):
                    raise SqlInstanceError(_TABLE_NOT_FOUND, f"table {name} does not exist")
                self.tables.pop(name, None)
            return "OK", None, []
        if isinstance(statement, exp.TruncateTable):
            for target in statement.expressions:
                table = self.table(_identifier(target))
                table.keyed.clear()
                table.appended.clear()
                table.modified = time.time()
            return "OK", None, []
        if isinstance(statement, exp.Alter):
            return self.alter(self.table(_identifier(statement.this)), statement), None, []
        if isinstance(statement, exp.Select) and isinstance(statement.args.get("from_"), exp.From):
            source = statement.args["from_"].this
            if [type(e) for e in statement.expressions] == [exp.Star] and isinstance(source, exp.Table):
                table = self.table(_identifier(source))
                return "OK", list(table.columns), [dict(r) for r in table.rows()]
        raise SqlInstanceError(_SEMANTIC, f"this local service does not run: {text[:200]}")

    def create(self, statement: exp.Create) -> str:
        schema = statement.this
        if not isinstance(schema, exp.Schema):
            raise SqlInstanceError(_SEMANTIC, "CREATE TABLE needs its columns")
        name = _identifier(schema.this)
        if name in self.tables:
            if statement.args.get("exists"):
                return "OK"
            raise SqlInstanceError(_SEMANTIC, f"table {name} already exists")
        properties = {}
        comment = ""
        for prop in statement.args["properties"].expressions if statement.args.get("properties") else []:
            if isinstance(prop, exp.SchemaCommentProperty):
                comment = str(prop.this.this)
            elif isinstance(prop, exp.Property):
                properties[str(prop.name).lower()] = str(prop.args["value"].this)
        table = _Table(
            name,
            [],
            [],
            transactional=properties.get("transactional", "false").lower() == "true",
            buckets=int(properties.get("write.bucket.num", "16")),
            comment=comment,
            properties=properties,
        )
        for element in schema.expressions:
            if isinstance(element, exp.ColumnDef):
                table.columns.append(self.column_def(table, element))
            elif isinstance(element, exp.PrimaryKey):
                table.primary_key = [_identifier(e) for e in element.expressions]
        for key in table.primary_key:
            column = table.column(key)
            if column.nullable:
                raise SqlInstanceError(_SEMANTIC, f"primary key column {key} must be NOT NULL")
        if table.primary_key and not table.transactional:
            raise SqlInstanceError(_SEMANTIC, "a primary key needs tblproperties ('transactional'='true')")
        self.tables[name] = table
        return "OK"

    def column_def(self, table: _Table, element: exp.ColumnDef) -> _Column:
        constraints = [c.args.get("kind") for c in element.constraints]
        comment = next(
            (str(c.this.this) for c in constraints if isinstance(c, exp.CommentColumnConstraint)), ""
        )
        not_null = any(
            isinstance(c, exp.NotNullColumnConstraint) and not c.args.get("allow_null") for c in constraints
        )
        return table.new_column(element.name, _type_text(element.args["kind"]), not not_null, comment)

    def alter(self, table: _Table, statement: exp.Alter) -> str:
        for action in statement.args.get("actions") or []:
            if isinstance(action, exp.Schema):  # ADD COLUMNS (...)
                added = [self.column_def(table, c) for c in action.expressions]
                if any(not c.nullable for c in added):
                    raise SqlInstanceError(_SEMANTIC, "a column added to an existing table must be nullable")
                table.columns.extend(added)
            elif isinstance(action, exp.Drop) and str(action.args.get("kind", "")).upper() == "COLUMNS":
                targets = action.args.get("tables") or []
                names = [
                    _identifier(e)
                    for s in targets
                    for e in (s.expressions if isinstance(s, exp.Schema) else [s])
                ]
                if not names:
                    raise SqlInstanceError(_PARSE, "DROP COLUMNS names no column")
                for name in names:
                    table.column(name)
                    if name in table.primary_key:
                        raise SqlInstanceError(_SEMANTIC, f"cannot drop primary key column {name}")
                if len(names) >= len(table.columns):
                    raise SqlInstanceError(_SEMANTIC, "cannot drop every column of a table")
                table.columns = [c for c in table.columns if c.name not in names]
            elif isinstance(action, exp.AlterColumn) and action.args.get("dtype") is not None:
                column = table.column(_identifier(action.this))
                renamed = action.args.get("rename_to")
                if renamed is not None and _identifier(renamed) != column.name:
                    raise SqlInstanceError(_SEMANTIC, "CHANGE COLUMN renames with RENAME TO")
                new_type = _type_text(action.args["dtype"])
                if not _widens(column.type, new_type):
                    raise SqlInstanceError(
                        _SEMANTIC, f"cannot change column {column.name} from {column.type} to {new_type}"
                    )
                for row in table.rows():
                    row[column.id] = _cast(row.get(column.id), new_type)
                column.type = new_type
            else:
                raise SqlInstanceError(
                    _SEMANTIC, f"this local service does not run: {statement.sql(dialect='spark')}"
                )
        table.changed()
        return "OK"

    def change_column(self, table: _Table, name: str, new_name: str) -> str:
        column = table.column(name)
        if not new_name:
            if column.name in table.primary_key:
                raise SqlInstanceError(_SEMANTIC, f"primary key column {column.name} stays NOT NULL")
            column.nullable = True
        else:
            if table.find(new_name) is not None:
                raise SqlInstanceError(
                    _SEMANTIC, f"column {new_name.lower()} already exists in table {table.name}"
                )
            table.primary_key = [new_name.lower() if k == column.name else k for k in table.primary_key]
            column.name = new_name.lower()
        table.changed()
        return "OK"


# ----------------------------------------------------------------------------------- the server


def _xml(text: str) -> bytes:
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + text).encode()


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cdata(text: str) -> str:
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


class MaxComputeServer(LocalHttpServer):
    """MaxCompute's REST API (under ``/api``) and Tunnel (at the root) on one port of 127.0.0.1."""

    name = "maxcompute"
    protocol_version = "HTTP/1.1"

    def __init__(
        self, *, project: str = "ferry", access_id: str = "ferry-id", access_key: str = "ferry-key"
    ) -> None:
        self.project = project
        self.access_id = access_id
        self.access_key = access_key
        #: project → table name → table.
        self.projects: dict[str, dict[str, _Table]] = {project: {}}
        #: Every SQL statement submitted, in order, with its outcome ("Success" or the error).
        self.statements: list[tuple[str, str]] = []
        self._instances: dict[str, _Instance] = {}
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.RLock()

    @property
    def endpoint(self) -> str:
        """The REST endpoint: ``ODPS(..., endpoint=...)``."""
        return f"{self.url}/api"

    @property
    def tunnel_endpoint(self) -> str:
        return self.url

    # ------------------------------------------------------------------------------- test helpers

    def table(self, name: str, project: str | None = None) -> _Table | None:
        return self.projects[project or self.project].get(name.lower())

    def execute(self, sql: str, project: str | None = None) -> None:
        """Run a statement directly (as another client of the project would)."""
        with self._lock:
            _Sql(self.projects[project or self.project]).run(sql)

    # ------------------------------------------------------------------------------- HTTP

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = read_body(handler)
        url = urlsplit(handler.path)
        rest = url.path == "/api" or url.path.startswith("/api/")
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        parts = [unquote(p) for p in url.path.split("/") if p][1 if rest else 0 :]
        try:
            self._check_signature(handler, handler.path[4:] if rest else handler.path)
            with self._lock:
                status, headers, data = (self._rest if rest else self._tunnel)(handler, parts, params, body)
        except Exception as e:  # an unexpected failure is answered as the service answers one
            error = e if isinstance(e, _HttpError) else _HttpError(500, "InternalServerError", repr(e))
            status, headers = error.status, {"Content-Type": "application/xml"}
            data = _xml(
                f"<Error><Code>{_esc(error.code)}</Code><Message>{_cdata(str(error))}</Message>"
                f"<RequestId>{uuid.uuid4().hex}</RequestId><HostId>{self.address}</HostId></Error>"
            )
        reply(handler, status, {**headers, "x-odps-request-id": uuid.uuid4().hex}, data)

    def _check_signature(self, h: BaseHTTPRequestHandler, relative: str) -> None:
        """The request is signed with this server's access key (pyodps' own signing, version 2)."""
        given = h.headers.get("Authorization", "")
        if not given.startswith(f"ODPS {self.access_id}:"):
            raise _HttpError(401, "Unauthorized", "no Authorization with a known access id")

        class Signed:
            method = h.command
            headers = {k: v for k, v in h.headers.items() if k.lower() != "authorization"}

        account = CloudAccount(self.access_id, self.access_key)
        canonical = account._build_canonical_str(urlparse(unquote(relative), allow_fragments=False), Signed)
        if account.calc_auth_str(canonical) != given:
            raise _HttpError(401, "SignatureNotMatch", "the request signature does not match")

    def _tables(self, project: str) -> dict[str, _Table]:
        if project not in self.projects:
            raise _HttpError(404, "NoSuchProject", f"ODPS-0420111: Project not found - '{project}'")
        return self.projects[project]

    def _table(self, project: str, name: str) -> _Table:
        table = self._tables(project).get(name.lower())
        if table is None:
            raise _HttpError(404, "NoSuchTable", f"{_TABLE_NOT_FOUND}:Table not found - '{project}.{name}'")
        return table

    # ------------------------------------------------------------------------------- REST

    _Reply = tuple[int, dict[str, str], bytes]

    def _rest(
        self, h: BaseHTTPRequestHandler, parts: list[str], params: dict[str, str], body: bytes
    ) -> _Reply:
        text = {"Content-Type": "text/plain"}
        if parts == ["logview", "host"]:
            return 200, text, b""
        if parts == ["tenants"]:
            return _json({"Tenant": {"Name": "ferry-local", "TenantId": "0", "TenantState": "NORMAL"}})
        if len(parts) < 2 or parts[0] != "projects":
            raise _HttpError(404, "NoSuchObject", f"no such resource: {h.path}")
        project = parts[1]
        tables = self._tables(project)
        if parts[2:] == ["tunnel"] and "service" in params:
            return 200, text, self.address.encode()
        if len(parts) == 4 and parts[2] == "tables" and h.command == "GET":
            return (
                200,
                {"Content-Type": "application/xml"},
                self._table_xml(self._table(project, parts[3]), "extended" in params),
            )
        if parts[2:] == ["instances"] and h.command == "POST":
            instance = self._submit(tables, body.decode("utf-8"))
            location = f"{self.endpoint}/projects/{project}/instances/{instance.id}"
            return 201, {"Location": location}, b""
        if len(parts) == 4 and parts[2] == "instances" and h.command == "GET":
            return self._instance(parts[3], params)
        raise _HttpError(404, "NoSuchObject", f"no such resource: {h.command} {h.path}")

    def _table_xml(self, table: _Table, extended: bool) -> bytes:
        meta: dict[str, Any] = {
            "tableName": table.name,
            "comment": table.comment,
            "owner": f"ALIYUN${self.access_id}",
            "createTime": int(table.created),
            "lastModifiedTime": int(table.modified),
            "lastDDLTime": int(table.modified),
            "isVirtualView": False,
            "lifecycle": -1,
            "size": 0,
            **_schema_json(table.columns),
        }
        if extended:
            reserved = {
                "Transactional": str(table.transactional).lower(),
                "schema_version": str(table.version),
            }
            if table.primary_key:
                reserved["PrimaryKey"] = table.primary_key  # type: ignore[assignment]
            meta = {"Reserved": json.dumps(reserved), "tableProperties": json.dumps(table.properties)}
        return _xml(
            f"<Table><Name>{_esc(table.name)}</Name><TableId>{id(table):x}</TableId>"
            f"<Owner>ALIYUN${_esc(self.access_id)}</Owner><Type>MANAGED_TABLE</Type>"
            f"<CreationTime>{formatdate(table.created, usegmt=True)}</CreationTime>"
            f"<LastModifiedTime>{formatdate(table.modified, usegmt=True)}</LastModifiedTime>"
            f'<Schema format="json">{_cdata(json.dumps(meta))}</Schema></Table>'
        )

    def _submit(self, tables: dict[str, _Table], job_xml: str) -> _Instance:
        root = ElementTree.fromstring(job_xml)
        query = root.findtext("./Job/Tasks/SQL/Query")
        if query is None:
            raise _HttpError(
                400, "InvalidArgument", "ODPS-0420411: Invalid argument - only SQL tasks run here"
            )
        instance = _Instance(
            time.strftime("%Y%m%d%H%M%S") + uuid.uuid4().hex[:18], job_xml, "Success", "OK", time.time()
        )
        try:
            instance.result, instance.columns, instance.rows = _Sql(tables).run(query)
            if instance.columns is not None:
                instance.result = self._csv(instance.columns, instance.rows)
        except SqlInstanceError as e:
            instance.status, instance.result = "Failed", str(e)
        self.statements.append((query, instance.status if instance.status == "Success" else instance.result))
        self._instances[instance.id] = instance
        return instance

    @staticmethod
    def _csv(columns: list[_Column], rows: list[dict[int, Any]]) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([c.name for c in columns])
        writer.writerows([["\\N" if r.get(c.id) is None else r.get(c.id) for c in columns] for r in rows])
        return out.getvalue()

    def _instance(self, instance_id: str, params: dict[str, str]) -> _Reply:
        instance = self._instances.get(instance_id)
        if instance is None:
            raise _HttpError(404, "NoSuchObject", f"instance {instance_id} does not exist")
        stamp = formatdate(instance.started, usegmt=True)
        headers = {
            "Content-Type": "application/xml",
            "x-odps-owner": f"ALIYUN${self.access_id}",
            "x-odps-start-time": stamp,
            "x-odps-end-time": stamp,
        }
        task = f'<Task Type="SQL"><Name>AnonymousSQLTask</Name><Status>{instance.status}</Status>'
        if "source" in params:
            job = ElementTree.fromstring(instance.job_xml).find("./Job")
            assert job is not None
            return 200, headers, _xml(ElementTree.tostring(job, encoding="unicode"))
        if "taskstatus" in params:
            times = f"<StartTime>{stamp}</StartTime><EndTime>{stamp}</EndTime>"
            body = f"<Instance><Status>Terminated</Status><Tasks>{task}{times}</Task></Tasks></Instance>"
            return 200, headers, _xml(body)
        if "result" in params:
            result = f'<Result Transform="false" Format="text">{_cdata(instance.result)}</Result>'
            return 200, headers, _xml(f"<Instance><Tasks>{task}{result}</Task></Tasks></Instance>")
        return 200, headers, _xml("<Instance><Status>Terminated</Status></Instance>")

    # ------------------------------------------------------------------------------- tunnel

    def _tunnel(
        self, h: BaseHTTPRequestHandler, parts: list[str], params: dict[str, str], body: bytes
    ) -> _Reply:
        if len(parts) < 4 or parts[0] != "projects" or parts[2] not in ("tables", "instances"):
            raise _HttpError(404, "NoSuchObject", f"no such tunnel resource: {h.path}")
        if "partition" in params:
            raise _HttpError(400, "InvalidArgument", "this local service has no partitions")
        project, kind, name = parts[1], parts[2], parts[3]
        if kind == "instances":
            return self._instance_download(name, params, h.command)
        table = self._table(project, name)
        upserts = parts[4:] == ["upserts"]
        method = h.command
        if upserts:
            return self._upsert(table, params, method, h, body)
        if "uploads" in params and method == "POST":
            return self._session_reply(self._open(table, "upload"))
        if "downloads" in params and method == "POST":
            session = self._open(table, "download")
            session.rows = [dict(r) for r in table.rows()]
            return self._session_reply(session)
        session = self._session(params.get("uploadid") or params.get("downloadid") or "")
        if "downloadid" in params:
            if "data" in params:
                return self._data(session.columns, session.rows, params)
            return self._session_reply(session)
        if method == "PUT":
            block = int(params.get("blockid", "0"))
            session.blocks[block] = self._decode(session.columns, body, h.headers.get("Content-Encoding"))
            return 200, {}, b""
        if method == "POST":
            self._commit_upload(table, session)
        return self._session_reply(session)

    def _open(self, table: _Table, kind: str) -> _Session:
        columns = [_Column(c.id, c.name, c.type, c.nullable, c.comment) for c in table.columns]
        session = _Session(uuid.uuid4().hex.upper(), table.name, table.version, kind, columns)
        self._sessions[session.id] = session
        return session

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise _HttpError(404, "NoSuchObject", f"tunnel session {session_id!r} does not exist")
        return session

    def _session_reply(self, session: _Session) -> _Reply:
        schema = _schema_json(session.columns)
        if session.kind == "download":
            body: dict[str, Any] = {
                "DownloadID": session.id,
                "Status": session.status,
                "RecordCount": len(session.rows),
                "Schema": schema,
            }
        else:
            blocks = [{"BlockID": b, "CreateTime": 0, "Date": ""} for b in sorted(session.blocks)]
            body = {"UploadID": session.id, "Status": session.status, "UploadedBlockList": blocks}
            body |= {"Schema": schema, "MaxFieldSize": 8 * 1024 * 1024, "QuotaName": ""}
        return _json(body)

    @staticmethod
    def _decode(columns: list[_Column], body: bytes, encoding: str | None) -> list[list[Any]]:
        schema = _odps_schema(columns)
        try:
            option = CompressOption(CompressOption.CompressAlgorithm.from_encoding(encoding))
            stream = get_decompress_stream(io.BytesIO(body), option, requests=False)
            reader = TunnelRecordReader(schema, lambda cursor, *_a, **_k: stream if cursor == 0 else None)
            return [list(record.values) for record in reader]
        except Exception as e:
            raise _HttpError(400, "MalformedDataStream", f"the block cannot be read: {e}") from None

    def _check(self, table: _Table, session: _Session) -> None:
        if table.version != session.version:
            raise _HttpError(409, "SchemaModified", f"table {table.name} changed since the session opened")

    @staticmethod
    def _row(table: _Table, columns: list[_Column], values: list[Any], check: bool = True) -> dict[int, Any]:
        row = {c.id: v for c, v in zip(columns, values, strict=False)}
        for column in columns if check else ():
            if row.get(column.id) is None and not column.nullable:
                raise _HttpError(400, "InvalidArgument", f"column {column.name} of {table.name} is NOT NULL")
        return row

    def _commit_upload(self, table: _Table, session: _Session) -> None:
        if session.status == "normal":
            self._check(table, session)
            rows = [
                self._row(table, session.columns, v)
                for b in sorted(session.blocks)
                for v in session.blocks[b]
            ]
            if table.primary_key:
                raise _HttpError(
                    400, "InvalidArgument", f"{table.name} has a primary key: write with an upsert session"
                )
            table.appended.extend(rows)
            table.modified = time.time()
        session.status = "closed"

    def _upsert(
        self, table: _Table, params: dict[str, str], method: str, h: BaseHTTPRequestHandler, body: bytes
    ) -> _Reply:
        if "upsertid" not in params:
            if method != "POST":
                raise _HttpError(400, "InvalidArgument", "an upsert session is opened by POST")
            if not (table.transactional and table.primary_key):
                raise _HttpError(
                    400, "InvalidArgument", f"{table.name} is not a transactional table with a primary key"
                )
            session = self._open(table, "upsert")
        else:
            session = self._session(params["upsertid"])
            if method == "PUT":
                self._upsert_block(table, session, params, body, h.headers.get("Content-Encoding"))
            elif method == "POST" and session.status == "normal":
                self._check(table, session)
                for operation, values in session.operations:
                    row = self._row(table, session.columns, values, check=operation == "U")
                    key = tuple(row.get(table.column(k).id) for k in table.primary_key)
                    if operation == "D":
                        table.keyed.pop(key, None)
                    else:
                        table.keyed[key] = row
                table.modified = time.time()
                session.status = "committed"
            elif method == "DELETE":
                session.status = "aborted"
        schema = _schema_json(session.columns)
        slot = {"slot_id": "1", "worker_addr": self.address, "buckets": list(range(table.buckets))}
        reply = {
            "id": session.id,
            "status": session.status,
            "slots": [slot],
            "schema": schema,
            "hash_key": table.primary_key,
            "hasher": "default",
            "quota_name": "",
            "enable_partial_update": False,
        }
        return _json(reply)

    def _upsert_block(
        self, table: _Table, session: _Session, params: dict[str, str], body: bytes, encoding: str | None
    ) -> None:
        extra = [
            _Column(-1 - i, n, t) for i, (n, t) in enumerate(zip(UPSERT_COLUMNS, _UPSERT_TYPES, strict=True))
        ]
        records = self._decode([*session.columns, *extra], body, encoding)
        if int(params.get("record_count", len(records))) != len(records):
            raise _HttpError(400, "InvalidArgument", "record_count does not match the block")
        names = [c.name for c in session.columns]
        keys = [next(i for i, c in enumerate(session.columns) if c.name == k) for k in table.primary_key]
        key_schema = _odps_schema([session.columns[i] for i in keys])
        hasher = RecordHasher(key_schema, "default", table.primary_key)
        bucket = int(params.get("bucketid", "-1"))
        for values in records:
            operation = chr(values[len(names) + 2])
            data = values[: len(names)]
            key = Record(schema=key_schema, values=[data[i] for i in keys])
            if hasher.hash_record(key) % table.buckets != bucket:
                raise _HttpError(
                    400, "InvalidArgument", f"a record of bucket {bucket} hashes to another bucket"
                )
            session.operations.append((operation, data))

    def _instance_download(self, instance_id: str, params: dict[str, str], method: str) -> _Reply:
        instance = self._instances.get(instance_id)
        if instance is None:
            raise _HttpError(404, "NoSuchObject", f"instance {instance_id} does not exist")
        if instance.columns is None:
            raise _HttpError(400, "InstanceTypeNotSupported", "only the result of a SELECT is downloaded")
        if "data" in params:
            return self._data(instance.columns, instance.rows, params)
        schema = _schema_json(instance.columns)
        return _json(
            {
                "DownloadID": instance.id,
                "Status": "normal",
                "RecordCount": len(instance.rows),
                "Schema": schema,
            }
        )

    @staticmethod
    def _data(columns: list[_Column], rows: list[dict[int, Any]], params: dict[str, str]) -> _Reply:
        start, count = (int(x) for x in params.get("rowrange", f"(0,{len(rows)})").strip("()").split(","))
        schema = _odps_schema(columns)
        out = io.BytesIO()
        writer = BaseRecordWriter(schema, out)
        for row in rows[start : start + count]:
            writer.write(Record(schema=schema, values=[row.get(c.id) for c in columns]))
        writer.close()
        return 200, {"Content-Type": "application/octet-stream"}, out.getvalue()
