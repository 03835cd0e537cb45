"""Options of the Iceberg sink, in the spelling of Flink CDC's Iceberg pipeline connector.

This module imports no pyiceberg, so a job file validates without the ``iceberg`` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ferry.config.base import SinkConfigBase, fold_prefixed

DEFAULT_WAREHOUSE = Path("var/warehouse")


class IcebergSinkConfig(SinkConfigBase):
    """``catalog.properties.*`` go to pyiceberg's ``load_catalog``; ``table.properties.*`` to new tables."""

    type: Literal["iceberg"] = "iceberg"
    catalog_name: str = Field(default="ferry", alias="catalog.name")
    catalog_properties: dict[str, str] = Field(default_factory=dict)
    table_properties: dict[str, str] = Field(default_factory=dict)
    namespace: str = "default"
    snapshot_retain: int = Field(default=100, ge=1, alias="snapshot.retain")

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        data = fold_prefixed(data, "catalog.properties", "catalog_properties")
        return fold_prefixed(data, "table.properties", "table_properties")

    def resolved_catalog_properties(self) -> dict[str, str]:
        """The catalog properties with ferry's defaults: a SQLite catalog in a local warehouse."""
        props = dict(self.catalog_properties)
        warehouse = props.get("warehouse")
        if warehouse is None:
            warehouse = DEFAULT_WAREHOUSE.resolve().as_uri()
            props["warehouse"] = warehouse
        props.setdefault("type", "sql")
        if props["type"] == "sql" and "uri" not in props:
            local = Path(warehouse.removeprefix("file://"))
            props["uri"] = f"sqlite:///{local}/catalog.db"
        return props
