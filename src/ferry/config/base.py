"""The base of every configuration model: frozen, strict about unknown keys, dotted aliases."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ConfigModel(BaseModel):
    """Frozen, ``extra="forbid"``; fields are written with their dotted YAML names as aliases."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def fold_prefixed(data: Any, prefix: str, field: str) -> Any:
    """Move every ``<prefix>.<key>: value`` of a mapping into ``field: {key: value}``.

    Flink CDC writes open-ended option groups as flat dotted keys (``catalog.properties.uri``);
    models keep them as one dict field.
    """
    if not isinstance(data, dict):
        return data
    dotted = prefix + "."
    folded = {k[len(dotted) :]: v for k, v in data.items() if isinstance(k, str) and k.startswith(dotted)}
    if not folded:
        return data
    rest = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith(dotted))}
    rest[field] = {
        **rest.get(field, {}),
        **{k: str(v) if not isinstance(v, str) else v for k, v in folded.items()},
    }
    return rest


class SinkConfigBase(ConfigModel):
    """Options every sink has. Each sink subclasses this with ``type: Literal["<kind>"]``."""

    type: str
    name: str | None = None
    include_schema_changes: tuple[str, ...] | None = Field(default=None, alias="include.schema.changes")
    exclude_schema_changes: tuple[str, ...] = Field(default=(), alias="exclude.schema.changes")
