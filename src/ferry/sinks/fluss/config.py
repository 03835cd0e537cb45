"""Options of the Fluss sink, in the spelling of Flink CDC's Fluss pipeline connector.

This module imports no client library, so a job file validates without the ``fluss`` extra.

.. code-block:: yaml

    sink:
      type: fluss
      bootstrap.servers: coordinator:9123
      database: fluss                            # tables whose id has no database part
      bucket.num: 4                              # default: the cluster's default.bucket.number
      bucket.key: shop.orders:customer_id;shop.items:order_id
      properties.table.table.datalake.enabled: "true"
      properties.client.writer.acks: all         # any option of the Python client
      username: ${FLUSS_USER}                    # SASL/PLAIN, only with a password
      password: ${FLUSS_PASSWORD}
      alter-table.classpath: /opt/fluss/fluss-client-0.9.1-incubating.jar
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ferry.options import SinkConfigBase, fold_prefixed


class FlussSinkConfig(SinkConfigBase):
    """Where the cluster is, how new tables are laid out, and how columns are added."""

    type: Literal["fluss"] = "fluss"
    #: ``host:port`` of the CoordinatorServer (several, comma-separated).
    bootstrap_servers: str = Field(alias="bootstrap.servers", min_length=1)
    #: The Fluss database of tables whose id has no database part.
    database: str = Field(default="fluss", min_length=1)
    #: Buckets of each table the sink creates; by default the cluster's ``default.bucket.number``.
    #: A number for every table, or per table as Flink CDC writes it: ``db.t1:4;db.t2:8``.
    bucket_num: int | dict[str, int] | None = Field(default=None, alias="bucket.num")
    #: Bucket keys of new tables, per table: ``db.table:col1,col2;db.other:col`` (default: the
    #: primary key, or none for a log table).
    bucket_key: dict[str, tuple[str, ...]] = Field(default_factory=dict, alias="bucket.key")
    #: ``properties.table.*``: properties of the tables the sink creates.
    table_properties: dict[str, str] = Field(default_factory=dict)
    #: ``properties.client.*``: options of the Python client (``writer.acks``, ``writer.retries``...).
    client_properties: dict[str, str] = Field(default_factory=dict)
    #: SASL/PLAIN credentials; without a password the connection is plaintext.
    username: str | None = Field(default=None, min_length=1)
    password: SecretStr | None = None
    #: Jars of Fluss's Java client (``org.apache.fluss:fluss-client``), with which the sink adds
    #: columns: the Python client cannot alter a table. Without them an added column is refused.
    alter_table_classpath: tuple[str, ...] = Field(default=(), alias="alter-table.classpath")
    #: The ``java`` of a JDK 17+ that runs the Java client.
    alter_table_java: str = Field(default="java", alias="alter-table.java", min_length=1)
    #: Seconds an added column may take (starting the JVM included).
    alter_table_timeout: float = Field(default=120.0, alias="alter-table.timeout", gt=0)
    #: Seconds any other request to the cluster (metadata, DDL, a flush) may take.
    request_timeout: float = Field(default=60.0, alias="request.timeout", gt=0)

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        data = fold_prefixed(data, "properties.table", "table_properties")
        return fold_prefixed(data, "properties.client", "client_properties")

    @model_validator(mode="after")
    def _check_credentials(self) -> FlussSinkConfig:
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together (SASL/PLAIN)")
        return self

    @field_validator("bucket_num", mode="before")
    @classmethod
    def _parse_bucket_num(cls, value: Any) -> Any:
        if isinstance(value, str) and ":" in value:
            counts: dict[str, int] = {}
            for entry in filter(None, (part.strip() for part in value.split(";"))):
                table, _, count = entry.partition(":")
                if not table.strip() or not count.strip().isdigit() or int(count) < 1:
                    raise ValueError(f"bucket.num entry {entry!r} is not written table:number (at least 1)")
                counts[table.strip()] = int(count)
            return counts
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ValueError("bucket.num is at least 1")
        return value

    def bucket_count_for(self, database: str, table: str) -> int | None:
        """The configured number of buckets of ``database.table`` (or of ``table`` alone), if any."""
        if isinstance(self.bucket_num, dict):
            return self.bucket_num.get(f"{database}.{table}") or self.bucket_num.get(table)
        return self.bucket_num

    @field_validator("bucket_key", mode="before")
    @classmethod
    def _parse_bucket_key(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        keys: dict[str, tuple[str, ...]] = {}
        for entry in filter(None, (part.strip() for part in value.split(";"))):
            table, sep, columns = entry.partition(":")
            names = tuple(c.strip() for c in columns.split(",") if c.strip())
            if not sep or not table.strip() or not names:
                raise ValueError(f"bucket.key entry {entry!r} is not written table:column[,column...]")
            keys[table.strip()] = names
        return keys

    @field_validator("alter_table_classpath", mode="before")
    @classmethod
    def _split_classpath(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part for part in value.split(os.pathsep) if part)
        return value

    def bucket_keys_for(self, database: str, table: str) -> list[str] | None:
        """The configured bucket keys of ``database.table`` (or of ``table`` alone), if any."""
        keys = self.bucket_key.get(f"{database}.{table}") or self.bucket_key.get(table)
        return None if keys is None else list(keys)

    def python_client_properties(self) -> dict[str, str]:
        """What the Python client's ``Config`` gets (the password included: never log it)."""
        props = {"bootstrap.servers": self.bootstrap_servers, **self.client_properties}
        if self.username is not None and self.password is not None:
            props.update(
                {
                    "security.protocol": "sasl",
                    "security.sasl.mechanism": "PLAIN",
                    "security.sasl.username": self.username,
                    "security.sasl.password": self.password.get_secret_value(),
                }
            )
        return props

    def java_client_properties(self) -> dict[str, str]:
        """What the Java client's ``Configuration`` gets: its options carry a ``client.`` prefix."""
        props = {"bootstrap.servers": self.bootstrap_servers}
        props.update({f"client.{key}": value for key, value in self.client_properties.items()})
        if self.username is not None and self.password is not None:
            props.update(
                {
                    "client.security.protocol": "SASL",
                    "client.security.sasl.mechanism": "PLAIN",
                    "client.security.sasl.username": self.username,
                    "client.security.sasl.password": self.password.get_secret_value(),
                }
            )
        return props
