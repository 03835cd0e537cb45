"""Options of the StarRocks sink, in the spelling of Flink CDC's StarRocks pipeline connector.

This module imports no driver, so a job file validates without the ``starrocks`` extra.

.. code-block:: yaml

    sink:
      type: starrocks
      jdbc-url: jdbc:mysql://fe-host:9030          # DDL and metadata (MySQL protocol)
      load-url: fe-host:8030                       # Stream Load (HTTP); without it rows are INSERTed
      username: ${STARROCKS_USER}
      password: ${STARROCKS_PASSWORD}
      sink.label-prefix: ferry                     # Stream Load labels: <prefix>_<db>_<table>_<n>
      table.create.properties.replication_num: 3   # PROPERTIES of the tables the sink creates
      table.create.num-buckets: 8                  # BUCKETS of the tables the sink creates
      sink.properties.max_filter_ratio: 0.1        # headers of every Stream Load
      schema.evolution.timeout: 30s                # how long to wait for an asynchronous ALTER
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator

from ferry.options import SinkConfigBase, fold_prefixed, parse_duration

#: Flink CDC's spelling of the connect timeout, in milliseconds.
_CONNECT_TIMEOUT_MS = "sink.connect.timeout-ms"
#: ``schema.evolution.timeout`` and Flink CDC's spelling of it.
_SCHEMA_CHANGE_TIMEOUT_KEYS = ("schema.evolution.timeout", "table.schema-change.timeout")


def _one_spelling(data: dict[str, Any], keys: tuple[str, ...]) -> None:
    present = [k for k in keys if k in data]
    if len(present) > 1:
        raise ValueError(f"{present[0]} is also given as {present[1]}: keep one")


_JDBC_URL = re.compile(r"^jdbc:mysql://(?P<host>[^:/?]+)(?::(?P<port>\d+))?(?:/(?P<db>[^?]*))?(?:\?.*)?$")
#: The FE's MySQL port when ``jdbc-url`` names none.
DEFAULT_QUERY_PORT = 9030


#: Stream Load headers ferry sets itself → the only value ``sink.properties.*`` may give them.
_LOAD_HEADERS_OF_FERRY: dict[str, str | None] = {
    "format": "json",
    "strip_outer_array": "true",
    "columns": None,
    "label": None,
}


def _seconds(value: Any) -> Any:
    if isinstance(value, str) and not value.strip().replace(".", "", 1).isdigit():
        return parse_duration(value).total_seconds()
    return value


class MySqlProtocolSinkConfig(SinkConfigBase):
    """What StarRocks and SelectDB sinks share: a MySQL-protocol FE and an HTTP Stream Load endpoint."""

    #: ``jdbc:mysql://host:port[/database]`` of the frontend's MySQL protocol.
    jdbc_url: str = Field(alias="jdbc-url", min_length=1)
    #: ``host:port`` (or ``http://host:port``) of the Stream Load endpoint; several are ``;``-separated.
    load_url: str | None = Field(default=None, alias="load-url")
    username: str = Field(min_length=1)
    password: SecretStr = SecretStr("")
    #: Prefix of the Stream Load label of every batch.
    label_prefix: str = Field(default="ferry", alias="sink.label-prefix", pattern=r"^[A-Za-z0-9_\-]+$")
    #: ``PROPERTIES`` of the tables the sink creates (``table.create.properties.*``).
    table_properties: dict[str, str] = Field(default_factory=dict)
    #: Headers of every Stream Load (``sink.properties.*``: ``max_filter_ratio``, ``timeout``,
    #: ``strict_mode``, ``timezone``, ...), beside the ones ferry sets.
    load_properties: dict[str, str] = Field(default_factory=dict)
    #: The database of tables whose id has no schema part (else the database of ``jdbc-url``).
    database: str | None = Field(default=None, min_length=1)
    #: Seconds to wait for an asynchronous schema change to finish before writing rows (Flink CDC's
    #: StarRocks connector: ``table.schema-change.timeout``).
    schema_evolution_timeout: float = Field(
        default=60.0,
        gt=0,
        alias="schema.evolution.timeout",
        validation_alias=AliasChoices(*_SCHEMA_CHANGE_TIMEOUT_KEYS),
    )
    #: Seconds to wait for a connection or a Stream Load answer (Flink CDC: ``sink.connect.timeout-ms``,
    #: in milliseconds).
    connect_timeout: int = Field(default=30, ge=1, alias="sink.connect.timeout-s")

    @model_validator(mode="before")
    @classmethod
    def _flink_spellings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        _one_spelling(data, _SCHEMA_CHANGE_TIMEOUT_KEYS)
        if _CONNECT_TIMEOUT_MS in data:
            _one_spelling(data, (_CONNECT_TIMEOUT_MS, "sink.connect.timeout-s"))
            ms = data[_CONNECT_TIMEOUT_MS]
            if isinstance(ms, str) and ms.strip().isdigit():
                ms = int(ms)
            if not isinstance(ms, int) or isinstance(ms, bool) or ms < 1:
                raise ValueError(f"{_CONNECT_TIMEOUT_MS} is a whole number of milliseconds, at least 1")
            rest = {k: v for k, v in data.items() if k != _CONNECT_TIMEOUT_MS}
            data = {**rest, "sink.connect.timeout-s": max(1, math.ceil(ms / 1000))}
        return data

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        data = fold_prefixed(data, "table.create.properties", "table_properties")
        return fold_prefixed(data, "sink.properties", "load_properties")

    @field_validator("load_properties")
    @classmethod
    def _load_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for key, given in value.items():
            name = key.lower()
            if name not in _LOAD_HEADERS_OF_FERRY:
                continue
            only = _LOAD_HEADERS_OF_FERRY[name]
            if only is None:
                raise ValueError(
                    f"sink.properties.{key}: ferry sets the Stream Load header {name} itself "
                    f"({'from the table' if name == 'columns' else 'from sink.label-prefix'})"
                )
            if given.strip().lower() != only:
                raise ValueError(f"sink.properties.{key}: ferry loads {name} {only} (not {given!r})")
        return value

    @field_validator("schema_evolution_timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return _seconds(value)

    @field_validator("jdbc_url")
    @classmethod
    def _check_jdbc_url(cls, value: str) -> str:
        if _JDBC_URL.match(value) is None:
            raise ValueError("jdbc-url is written jdbc:mysql://host:port[/database]")
        return value

    def _jdbc(self) -> re.Match[str]:
        match = _JDBC_URL.match(self.jdbc_url)
        assert match is not None
        return match

    @property
    def host(self) -> str:
        return self._jdbc()["host"]

    @property
    def port(self) -> int:
        port = self._jdbc()["port"]
        return int(port) if port else DEFAULT_QUERY_PORT

    @property
    def default_database(self) -> str | None:
        return self.database or self._jdbc()["db"] or None

    def create_buckets(self) -> str | None:
        """The ``BUCKETS`` of the tables the sink creates (``None``: the vendor's default)."""
        return None

    @property
    def load_urls(self) -> list[str]:
        """The Stream Load base URLs (``http://host:port``), in the order to try them."""
        if not self.load_url:
            return []
        urls = [u.strip() for u in self.load_url.split(";") if u.strip()]
        return [u.rstrip("/") if "://" in u else f"http://{u}" for u in urls]


class StarRocksSinkConfig(MySqlProtocolSinkConfig):
    """The StarRocks sink's options."""

    type: Literal["starrocks"] = "starrocks"
    #: ``BUCKETS`` of ``DISTRIBUTED BY HASH(...)`` of the tables the sink creates (StarRocks's
    #: default: chosen by the server).
    num_buckets: int | None = Field(default=None, ge=1, alias="table.create.num-buckets")

    def create_buckets(self) -> str | None:
        return None if self.num_buckets is None else str(self.num_buckets)
