"""Options of the Paimon sink, in the spelling of Flink CDC's Paimon pipeline connector.

This module imports no pypaimon, so a job file validates without the ``paimon`` extra.

.. code-block:: yaml

    sink:
      type: paimon
      catalog.properties.metastore: filesystem           # default
      catalog.properties.warehouse: file:///data/paimon  # default: ./var/paimon
      table.properties.bucket: "4"                       # default: "1"
      commit.user: orders-to-lake                        # default: the pipeline's name
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import Field, model_validator

from ferry.options import SinkConfigBase, fold_prefixed

#: The warehouse when ``catalog.properties.warehouse`` is not set (relative to the working directory).
DEFAULT_WAREHOUSE = Path("var/paimon")

#: Properties of every table the sink creates, unless ``table.properties.*`` sets them.
DEFAULT_TABLE_PROPERTIES: dict[str, str] = {"bucket": "1"}

#: The column of a primary-key table that holds each row's kind (``+I``, ``+U``, ``-D``), named by
#: the table option ``rowkind.field``: pypaimon deletes a key only through such a column.
DEFAULT_ROWKIND_COLUMN = "_ferry_row_kind"


class PaimonSinkConfig(SinkConfigBase):
    """``catalog.properties.*`` go to pypaimon's ``CatalogFactory``; ``table.properties.*`` to new tables."""

    type: Literal["paimon"] = "paimon"
    catalog_properties: dict[str, str] = Field(default_factory=dict)
    table_properties: dict[str, str] = Field(default_factory=dict)
    #: The commit user of every snapshot the sink writes; by default the pipeline's name.
    commit_user: str | None = Field(default=None, alias="commit.user", min_length=1)
    #: The Paimon database of tables whose id has no schema part.
    database: str = Field(default="default", min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        data = fold_prefixed(data, "catalog.properties", "catalog_properties")
        return fold_prefixed(data, "table.properties", "table_properties")

    def resolved_catalog_properties(self) -> dict[str, str]:
        """The catalog properties with ferry's defaults: a filesystem catalog in a local warehouse."""
        props = dict(self.catalog_properties)
        props.setdefault("metastore", "filesystem")
        if props["metastore"] != "filesystem" and "warehouse" not in props:
            return props
        local = _local_dir(props.get("warehouse", str(DEFAULT_WAREHOUSE)))
        if local is not None:
            props["warehouse"] = str(local)
        return props

    def warehouse_dir(self) -> Path | None:
        """The warehouse as an absolute local directory, or ``None`` when it is remote or unset."""
        warehouse = self.resolved_catalog_properties().get("warehouse")
        return None if warehouse is None else _local_dir(warehouse)

    def new_table_properties(self, *, primary_key: bool) -> dict[str, str]:
        """The options a table the sink creates gets; a primary-key table also names its row-kind column."""
        props = {**DEFAULT_TABLE_PROPERTIES, **self.table_properties}
        if primary_key:
            props.setdefault("rowkind.field", DEFAULT_ROWKIND_COLUMN)
        else:
            props.pop("rowkind.field", None)
        return props

    def resolved_commit_user(self, pipeline: str) -> str:
        return self.commit_user or pipeline


def _local_dir(warehouse: str | None) -> Path | None:
    """The absolute directory of a ``file://`` URI or a plain path; ``None`` for other schemes."""
    if warehouse is None:
        return None
    parsed = urlparse(warehouse)
    if parsed.scheme == "file":
        return Path(parsed.path).resolve()
    if parsed.scheme == "":
        return Path(warehouse).resolve()
    return None
