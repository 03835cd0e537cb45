"""Options of the Paimon sink, in the spelling of Flink CDC's Paimon pipeline connector.

This module imports no pypaimon, so a job file validates without the ``paimon`` extra.

.. code-block:: yaml

    sink:
      type: paimon
      catalog.properties.metastore: filesystem           # default
      catalog.properties.warehouse: file:///data/paimon  # default: ./var/paimon
      table.properties.bucket: "4"                       # default: "1" ("-1" without a primary key)
      commit.user: orders-to-lake                        # default: the pipeline's name
      partition.key: app.orders:dt;app.items:region,dt   # partition keys of the tables it creates
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from ferry.options import TableFormatSinkConfigBase, local_dir

#: The warehouse when ``catalog.properties.warehouse`` is not set (relative to the working directory).
DEFAULT_WAREHOUSE = Path("var/paimon")

#: Properties of every primary-key table the sink creates, unless ``table.properties.*`` sets them.
DEFAULT_TABLE_PROPERTIES: dict[str, str] = {"bucket": "1"}
#: Properties of every table without a primary key the sink creates, unless ``table.properties.*``
#: sets them: Paimon's bucket-unaware append table (a fixed bucket needs a ``bucket-key``).
DEFAULT_APPEND_TABLE_PROPERTIES: dict[str, str] = {"bucket": "-1"}

#: The row-kind column of the primary-key tables ferry created before the column became opt-in
#: (``table.properties.rowkind.field``); such tables keep it and are written through it.
DEFAULT_ROWKIND_COLUMN = "_ferry_row_kind"


#: Paimon table options that the sink sets from the schema → where to give them instead.
_KEYS_GIVEN_OTHERWISE: dict[str, str] = {
    "primary-key": "the table's primary key is the transform's primary-keys (the source's by default)",
    "partition": "the table's partition keys are the transform's partition-keys or partition.key",
}


class PaimonSinkConfig(TableFormatSinkConfigBase):
    """``catalog.properties.*`` go to pypaimon's ``CatalogFactory``; ``partition.key`` names the
    partition keys (columns)."""

    type: Literal["paimon"] = "paimon"
    located_by = frozenset({"metastore", "warehouse", "uri"})
    #: The commit user of every snapshot the sink writes; by default the pipeline's name.
    commit_user: str | None = Field(default=None, alias="commit.user", min_length=1)
    #: Flink CDC's ``commit.user-prefix``: the commit user is ``<prefix>_<pipeline name>`` (Flink
    #: CDC adds a random suffix per job; ferry's stays the same across restarts, so that a restart
    #: finds its own commits).
    commit_user_prefix: str | None = Field(default=None, alias="commit.user-prefix", min_length=1)
    #: The Paimon database of tables whose id has no schema part.
    database: str = Field(default="default", min_length=1)

    @model_validator(mode="after")
    def _one_commit_user(self) -> PaimonSinkConfig:
        if self.commit_user is not None and self.commit_user_prefix is not None:
            raise ValueError("give either commit.user or commit.user-prefix")
        return self

    def resolved_catalog_properties(self) -> dict[str, str]:
        """The catalog properties with ferry's defaults: a filesystem catalog in a local warehouse."""
        props = dict(self.catalog_properties)
        props.setdefault("metastore", "filesystem")
        if props["metastore"] != "filesystem" and "warehouse" not in props:
            return props
        local = local_dir(props.get("warehouse", str(DEFAULT_WAREHOUSE)))
        if local is not None:
            props["warehouse"] = str(local)
        return props

    def new_table_properties(self, *, primary_key: bool) -> dict[str, str]:
        """The options a table the sink creates gets. A primary-key table has a row-kind column
        only when ``table.properties.rowkind.field`` names one (Paimon's option); a table without
        a primary key never has one."""
        defaults = DEFAULT_TABLE_PROPERTIES if primary_key else DEFAULT_APPEND_TABLE_PROPERTIES
        props = {**defaults, **self.table_properties}
        if not primary_key:
            props.pop("rowkind.field", None)
        return props

    def refused_table_option(self, key: str, value: str) -> str | None:
        """Paimon's table options go to the table, except the keys the transform gives otherwise."""
        return _KEYS_GIVEN_OTHERWISE.get(key)

    def refused_workers(self, parallelism: int) -> tuple[str, str] | None:
        """Workers of a remote warehouse cannot take turns for the overwrite a delete takes without
        the row-kind column (a file lock guards a local warehouse only): they need the column."""
        if parallelism == 1 or "rowkind.field" in self.table_properties or self.warehouse_dir() is not None:
            return None
        return (
            "table.properties.rowkind.field",
            f"{parallelism} workers writing a remote Paimon warehouse need the row-kind column "
            "(table.properties.rowkind.field: _ferry_row_kind): without it a flush with deletes "
            "overwrites the table, and an overwrite built before another worker's commit would "
            "remove that commit's rows",
        )

    def resolved_commit_user(self, pipeline: str) -> str:
        if self.commit_user_prefix is not None:
            return f"{self.commit_user_prefix}_{pipeline}"
        return self.commit_user or pipeline
