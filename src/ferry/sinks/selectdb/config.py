"""Options of the SelectDB sink, in the spelling of Flink CDC's Doris pipeline connector.

This module imports no driver, so a job file validates without the ``selectdb`` extra.

.. code-block:: yaml

    sink:
      type: selectdb
      fenodes: selectdb-host:8080                  # Stream Load (HTTP); without it rows are INSERTed
      jdbc-url: jdbc:mysql://selectdb-host:9030    # DDL and metadata (MySQL protocol)
      username: ${SELECTDB_USER}
      password: ${SELECTDB_PASSWORD}
      sink.label-prefix: ferry
      sink.enable-batch-mode: true                 # rows buffered until the checkpoint (else per write)
      table.create.properties.replication_num: 1
      schema.evolution.timeout: 1min               # how long to wait for an asynchronous ALTER
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, model_validator

from ferry.sinks.starrocks.config import DEFAULT_QUERY_PORT, MySqlProtocolSinkConfig

#: ``sink.enable-batch-mode`` and Flink CDC's Doris spelling of it.
_BATCH_MODE_KEYS = ("sink.enable-batch-mode", "sink.enable.batch-mode")


class SelectDbSinkConfig(MySqlProtocolSinkConfig):
    """The SelectDB sink's options: ``fenodes`` is the Stream Load endpoint (``load-url``)."""

    type: Literal["selectdb"] = "selectdb"
    #: Rows are buffered until the checkpoint and loaded as one batch; off, every write is loaded
    #: (Flink CDC's Doris connector: ``sink.enable.batch-mode``).
    enable_batch_mode: bool = Field(
        default=True, alias="sink.enable-batch-mode", validation_alias=AliasChoices(*_BATCH_MODE_KEYS)
    )

    @model_validator(mode="before")
    @classmethod
    def _fenodes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        present = [k for k in _BATCH_MODE_KEYS if k in data]
        if len(present) > 1:
            raise ValueError(f"{present[0]} is also given as {present[1]}: keep one")
        if "fenodes" in data:
            if "load-url" in data:
                raise ValueError("give either fenodes or load-url")
            data = {("load-url" if k == "fenodes" else k): v for k, v in data.items()}
        if "jdbc-url" not in data and isinstance(data.get("load-url"), str):
            # optional, as in Flink CDC's Doris connector: the first frontend's MySQL port
            host = _first_host(data["load-url"])
            if host:
                data = {**data, "jdbc-url": f"jdbc:mysql://{host}:{DEFAULT_QUERY_PORT}"}
        return data


def _first_host(load_url: str) -> str | None:
    """The host of the first ``host:port`` (or ``http://host:port``) of ``fenodes``."""
    first = next((u.strip() for u in load_url.split(";") if u.strip()), "")
    first = next((u.strip() for u in first.split(",") if u.strip()), "")
    authority = first.split("://", 1)[-1].split("/", 1)[0]
    return authority.rsplit(":", 1)[0] if ":" in authority else authority or None
