"""Records in the Confluent wire format, their writer schemas read from a schema registry.

A record is the magic byte ``0``, the writer schema's id (4 bytes, big-endian), then the datum in
Avro's binary encoding. :class:`ConfluentAvroReader` fetches each writer schema once, with
confluent-kafka's ``SchemaRegistryClient`` (Confluent's REST API, which Apicurio Registry and
Karapace serve too), parses it with fastavro once, and decodes data with ``schemaless_reader``.

Registry look-ups happen only in :meth:`ConfluentAvroReader.fetch`, which a decoder calls for a
whole batch before it decodes any record: a registry that cannot be reached raises
:class:`SchemaRegistryUnavailableError` (transient: the batch is decoded again after a retry,
with no record half-decoded) and one that refuses the credentials raises
:class:`SchemaRegistryAccessError` (terminal). A schema id the registry does not know, a schema
that is not Avro, or bytes that do not decode are facts about one record: :meth:`read` raises
:class:`~ferry.connectors.exceptions.DecodeError` and the decoder turns it into a bad record.

fastavro is asked to read the physical values only (logical types are left to
:mod:`connect_avro`, which converts them as the JSON decoders do).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import SecretStr

from ferry import install_hint
from ferry.connectors.exceptions import DecodeError
from ferry.exceptions import TerminalError, TransientError

try:
    from fastavro import parse_schema, schemaless_reader
except ImportError as e:  # pragma: no cover - the avro extra is part of the dev install
    raise ImportError(f"the Avro formats need fastavro: {install_hint('avro')}") from e

__all__ = [
    "ConfluentAvroReader",
    "SchemaRegistryAccessError",
    "SchemaRegistryUnavailableError",
    "WriterSchema",
    "schema_id_of",
]

MAGIC_BYTE = 0
HEADER_SIZE = 5
_NOT_FOUND_CODES = (40401, 40403)
#: HTTP statuses after which a later attempt may succeed.
_RETRIABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class SchemaRegistryUnavailableError(TransientError):
    """The schema registry did not answer (or answered with a server error): retry the batch."""

    def __init__(self, message: str, *, url: str, schema_id: int) -> None:
        super().__init__(message)
        self.url = url
        self.schema_id = schema_id


class SchemaRegistryAccessError(TerminalError):
    """The schema registry refused the request (credentials, permissions): retrying cannot help."""

    def __init__(self, message: str, *, url: str, schema_id: int) -> None:
        super().__init__(message)
        self.url = url
        self.schema_id = schema_id


@dataclass(frozen=True, slots=True, eq=False)
class WriterSchema:
    """One registered Avro schema: its id, its JSON form and fastavro's parse of it."""

    schema_id: int
    schema: Any
    """The schema as JSON (a dict for a record), with its logical types."""
    parsed: Any
    """fastavro's parsed schema, without logical types (physical values only)."""
    referenced: tuple[Any, ...] = ()
    """The schemas (as JSON) that define the named types ``schema`` refers to, theirs first."""


def schema_id_of(value: bytes | None) -> int | None:
    """The writer schema id of a record in the Confluent wire format, else None."""
    if value is None or len(value) < HEADER_SIZE or value[0] != MAGIC_BYTE:
        return None
    return int.from_bytes(value[1:HEADER_SIZE], "big")


class ConfluentAvroReader:
    """Reads Confluent-framed Avro data, writer schemas fetched once per id (see the module
    documentation). ``client`` replaces the ``SchemaRegistryClient`` built from ``url`` and
    ``user_info`` (``user:password`` for HTTP basic authentication, a secret)."""

    def __init__(
        self,
        url: str,
        user_info: SecretStr | str | None = None,
        *,
        client: Any = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.url = _without_userinfo(url)
        secret = user_info.get_secret_value() if isinstance(user_info, SecretStr) else user_info
        self._secrets = tuple(s for s in (*_userinfo_of(url), secret) if s)
        if client is None:
            client = _client(url, secret, timeout_s)
        self._client = client
        self._schemas: dict[int, WriterSchema] = {}
        self._unreadable: dict[int, str] = {}

    def __repr__(self) -> str:
        return f"ConfluentAvroReader({self.url!r}, {len(self._schemas)} schemas)"

    # ------------------------------------------------------------------------------- fetching

    def fetch(self, values: Iterable[bytes | None]) -> None:
        """Fetch the writer schemas of ``values`` that are not known yet.

        Raises :class:`SchemaRegistryUnavailableError` or :class:`SchemaRegistryAccessError`;
        a schema the registry does not have, or that is not Avro, is remembered as unreadable for
        this batch (:meth:`read` says why).
        """
        self._unreadable.clear()
        schemas = self._schemas
        for value in values:
            schema_id = schema_id_of(value)
            if schema_id is not None and schema_id not in schemas and schema_id not in self._unreadable:
                self._fetch(schema_id)

    def _fetch(self, schema_id: int) -> None:
        registered = self._ask(
            lambda: self._client.get_schema(schema_id), schema_id, f"schema id {schema_id}"
        )
        if registered is None:
            return
        schema_type = (registered.schema_type or "AVRO").upper()
        if schema_type != "AVRO":
            self._unreadable[schema_id] = f"schema id {schema_id} is a {schema_type} schema, not Avro"
            return
        referenced: list[str] = []
        if not self._referenced(registered.references, schema_id, referenced, set()):
            return
        try:
            self._schemas[schema_id] = _writer_schema(schema_id, registered.schema_str, referenced)
        except DecodeError as e:
            self._unreadable[schema_id] = e.reason

    def _referenced(
        self, references: Any, schema_id: int, texts: list[str], seen: set[tuple[str, int]]
    ) -> bool:
        """Append the schemas that ``references`` name (theirs first) to ``texts``: Apicurio's
        serde registers a record of another namespace (Debezium's ``Source``) as a schema of its
        own that the envelope refers to by name. False when one is missing (the reason is kept)."""
        for reference in references or ():
            subject, version = reference.subject, reference.version
            if (subject, version) in seen:
                continue
            seen.add((subject, version))
            what = f"the schema {subject!r} version {version} that schema id {schema_id} refers to"
            registered = self._ask(
                lambda s=subject, v=version: self._client.get_version(s, v), schema_id, what
            )
            if registered is None:
                return False
            schema = registered.schema
            if not self._referenced(schema.references, schema_id, texts, seen):
                return False
            texts.append(schema.schema_str or "")
        return True

    def _ask(self, request: Any, schema_id: int, what: str) -> Any:
        """The registry's answer to ``request()``; None when it does not have ``what`` (the reason
        is kept for :meth:`read`); raises when it cannot answer."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: PLC0415

        try:
            return request()
        except SchemaRegistryError as e:
            status = e.http_status_code
            detail = self._scrub(f"HTTP {status}: {e.error_message}")
            if status == 404 or e.error_code in _NOT_FOUND_CODES:
                self._unreadable[schema_id] = f"{what} is not in the schema registry ({detail})"
                return None
            message = f"the schema registry at {self.url} answered {detail} for {what}"
            if status in _RETRIABLE_STATUSES or status >= 500:
                raise SchemaRegistryUnavailableError(message, url=self.url, schema_id=schema_id) from None
            raise SchemaRegistryAccessError(message, url=self.url, schema_id=schema_id) from None
        except Exception as e:  # httpx's transport errors, timeouts, a malformed answer
            detail = self._scrub(f"{type(e).__name__}: {e}")
            raise SchemaRegistryUnavailableError(
                f"cannot reach the schema registry at {self.url} for {what}: {detail}",
                url=self.url,
                schema_id=schema_id,
            ) from None

    # -------------------------------------------------------------------------------- reading

    def schema(self, schema_id: int) -> WriterSchema:
        """A writer schema fetched by :meth:`fetch`; DecodeError when it cannot be read."""
        writer = self._schemas.get(schema_id)
        if writer is None:
            raise DecodeError(self._unreadable.get(schema_id) or f"schema id {schema_id} was not fetched")
        return writer

    def read(self, value: bytes, what: str = "value") -> tuple[WriterSchema, Any]:
        """The writer schema and the decoded datum of one framed record (DecodeError if bad)."""
        schema_id = schema_id_of(value)
        if schema_id is None:
            if len(value) < HEADER_SIZE:
                raise DecodeError(
                    f"the {what} is not in the Confluent wire format: {len(value)} bytes, fewer than "
                    "the 5 of its header"
                )
            raise DecodeError(
                f"the {what} is not in the Confluent wire format: its first byte is 0x{value[0]:02x}, "
                "not the magic byte 0x00"
            )
        writer = self.schema(schema_id)
        return writer, read_datum(writer, value, what)

    def close(self) -> None:
        """Close the registry client's HTTP connections."""
        exit_client = getattr(self._client, "__exit__", None)
        if exit_client is not None:
            exit_client(None, None, None)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def read_datum(writer: WriterSchema, value: bytes, what: str = "value") -> Any:
    """The datum after the 5-byte header of ``value``, read with ``writer``."""
    buffer = io.BytesIO(value)
    buffer.seek(HEADER_SIZE)
    try:
        datum = schemaless_reader(buffer, writer.parsed, None)
    except Exception as e:  # fastavro raises EOFError, ValueError, IndexError ... on bad bytes
        raise DecodeError(
            f"the {what} is not valid Avro for schema id {writer.schema_id}: {type(e).__name__}: {e}"
        ) from None
    rest = len(value) - buffer.tell()
    if rest:
        raise DecodeError(f"the {what} has {rest} bytes after its Avro datum (schema id {writer.schema_id})")
    return datum


def _writer_schema(schema_id: int, text: str | None, referenced: list[str]) -> WriterSchema:
    named: dict[str, Any] = {}
    referenced_json = []
    for reference in (*referenced, text):
        try:
            schema = orjson.loads(reference or "")
        except orjson.JSONDecodeError as e:
            raise DecodeError(f"schema id {schema_id} is not JSON: {e.msg}") from None
        try:
            parsed = parse_schema(physical(schema), named_schemas=named, _ignore_default_error=True)
        except Exception as e:  # fastavro's SchemaParseException, UnknownType ...
            raise DecodeError(f"schema id {schema_id} is not a valid Avro schema: {e}") from None
        referenced_json.append(schema)
    return WriterSchema(schema_id, referenced_json[-1], parsed, tuple(referenced_json[:-1]))


def physical(schema: Any) -> Any:
    """``schema`` without its ``logicalType`` attributes: the same binary encoding, read as the
    physical values (the number of days, the unscaled bytes of a decimal ...)."""
    if isinstance(schema, list):
        return [physical(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k != "logicalType"}
    kind = out.get("type")
    if isinstance(kind, dict | list):
        out["type"] = physical(kind)
    if kind == "record" and isinstance(out.get("fields"), list):
        out["fields"] = [physical(f) for f in out["fields"]]
    elif kind == "array" and "items" in out:
        out["items"] = physical(out["items"])
    elif kind == "map" and "values" in out:
        out["values"] = physical(out["values"])
    return out


def registry_client_class() -> Any:
    """confluent-kafka's ``SchemaRegistryClient``, imported without the deprecation notice that
    authlib (which it imports) prints about its own httpx integration: authlib turns its warnings
    on with an ``always`` filter of its own when it is imported, so that filter is overridden for
    the import only."""
    with warnings.catch_warnings():
        from authlib.deprecate import AuthlibDeprecationWarning  # noqa: PLC0415

        warnings.simplefilter("ignore", AuthlibDeprecationWarning)
        from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415
    return SchemaRegistryClient


def _client(url: str, user_info: str | None, timeout_s: float) -> Any:
    SchemaRegistryClient = registry_client_class()  # noqa: N806
    config: dict[str, Any] = {"url": url, "timeout": timeout_s}
    if user_info:
        config["basic.auth.user.info"] = user_info
    return SchemaRegistryClient(config)


def _userinfo_of(url: str) -> list[str]:
    """The credentials that the URLs of ``url`` carry (``user:password``), to keep out of messages."""
    found = []
    for one in url.split(","):
        authority = one.split("://", 1)[-1].split("/", 1)[0]
        if "@" in authority:
            found.append(authority.rsplit("@", 1)[0])
    return found


def _without_userinfo(url: str) -> str:
    """``url`` (or comma-separated URLs) with any credentials replaced by ``***``."""
    parts = []
    for one in url.split(","):
        scheme, sep, rest = one.strip().partition("://")
        authority, slash, path = rest.partition("/")
        if "@" in authority:
            authority = "***@" + authority.rsplit("@", 1)[1]
        parts.append(f"{scheme}{sep}{authority}{slash}{path}")
    return ",".join(parts)
