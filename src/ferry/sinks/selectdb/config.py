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
      table.create.auto-partition.properties.default-partition-key: created_at   # AUTO PARTITION
      table.create.auto-partition.properties.default-partition-unit: day
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field, model_validator

from ferry.model.table_patterns import TablePatternError, TableSelector
from ferry.options import OptionError, fold_prefixed
from ferry.sinks.starrocks.config import DEFAULT_QUERY_PORT, MySqlProtocolSinkConfig

if TYPE_CHECKING:
    from ferry.model.schema import Schema, TableId

#: The units of Doris's ``date_trunc`` that an automatic range partition takes.
PARTITION_UNITS = ("year", "quarter", "month", "week", "day", "hour")
#: Type roots a partition column of an automatic range partition has (DATE, DATETIME).
PARTITION_TYPES = ("DATE", "TIMESTAMP", "TIMESTAMP_LTZ", "TIMESTAMP_TZ")
_AUTO_PARTITION = "table.create.auto-partition.properties"

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
    #: Flink CDC's ``table.create.auto-partition.properties.*``: ``include`` / ``exclude`` (sink
    #: tables, a table pattern read as a transform's ``source-table``:
    #: :class:`~ferry.model.table_patterns.TableSelector`), ``default-partition-key`` /
    #: ``default-partition-unit``, and ``<db>.<table>.partition-key`` / ``.partition-unit``.
    auto_partition: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _fold_auto_partition(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for written, given in data.items():
                if isinstance(written, str) and written.startswith(_AUTO_PARTITION + "."):
                    _check_auto_partition(written, written[len(_AUTO_PARTITION) + 1 :], str(given))
        return fold_prefixed(data, _AUTO_PARTITION, "auto_partition")

    def auto_partition_of(self, table: TableId, schema: Schema) -> tuple[str, str] | None:
        """(column, unit) of the automatic range partitions of the sink table ``table`` the sink
        creates, as Flink CDC's Doris connector decides: the table is included and not excluded,
        has a partition key and unit (its own, else the defaults), and the column is a DATE or
        DATETIME; else None."""
        props = self.auto_partition
        if not props:
            return None

        def matches(key: str) -> bool:
            return TableSelector(props[key]).matches(table)

        included = not props.get("include", "").strip() or matches("include")
        if not included or (props.get("exclude", "").strip() and matches("exclude")):
            return None
        column = props.get(f"{table}.partition-key") or props.get("default-partition-key")
        unit = props.get(f"{table}.partition-unit") or props.get("default-partition-unit")
        if not column or not unit or column not in schema:
            return None
        if schema.column(column).type.root.name not in PARTITION_TYPES:
            return None
        return column, unit.strip().lower()

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


def _check_auto_partition(written: str, key: str, given: str) -> None:
    """Refuse, at the key as written, an auto-partition property Flink CDC's Doris connector lacks
    or a value it cannot take."""
    if key in ("include", "exclude"):
        if given.strip():
            try:
                TableSelector(given)
            except TablePatternError as e:
                raise OptionError(str(e), written) from None
    elif key.endswith("partition-unit"):
        if given.strip().lower() not in PARTITION_UNITS:
            raise OptionError(f"{given!r} is not one of {', '.join(PARTITION_UNITS)}", written)
    elif not key.endswith("partition-key"):
        raise OptionError(
            "not an auto-partition property (include, exclude, default-partition-key, "
            "default-partition-unit, <db>.<table>.partition-key, <db>.<table>.partition-unit)",
            written,
        )


def _first_host(load_url: str) -> str | None:
    """The host of the first ``host:port`` (or ``http://host:port``) of ``fenodes``."""
    first = next((u.strip() for u in load_url.split(";") if u.strip()), "")
    first = next((u.strip() for u in first.split(",") if u.strip()), "")
    authority = first.split("://", 1)[-1].split("/", 1)[0]
    return authority.rsplit(":", 1)[0] if ":" in authority else authority or None
