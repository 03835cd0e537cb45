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

from pydantic import Field, model_validator

from ferry.sinks.starrocks.config import MySqlProtocolSinkConfig


class SelectDbSinkConfig(MySqlProtocolSinkConfig):
    """The SelectDB sink's options: ``fenodes`` is the Stream Load endpoint (``load-url``)."""

    type: Literal["selectdb"] = "selectdb"
    #: Rows are buffered until the checkpoint and loaded as one batch; off, every write is loaded.
    enable_batch_mode: bool = Field(default=True, alias="sink.enable-batch-mode")

    @model_validator(mode="before")
    @classmethod
    def _fenodes(cls, data: Any) -> Any:
        if isinstance(data, dict) and "fenodes" in data:
            if "load-url" in data:
                raise ValueError("give either fenodes or load-url")
            data = {("load-url" if k == "fenodes" else k): v for k, v in data.items()}
        return data
