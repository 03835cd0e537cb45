"""The job-file reference tables of ``docs/``, generated from the models so they cannot drift.

Each table lists a model's keys in the order the model declares them, with every spelling the
model accepts and the default it gives; :mod:`ferry.docgen` writes them into the pages and a test
checks that the committed pages are current. The third column, what a key means, is prose kept in
the page: it is read from the committed table, by key, and written back beside the key. A key the
model gains gets a row with an empty meaning (a test refuses it); a key it loses loses its row.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, get_origin

from pydantic import AliasChoices, BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ferry.config.job import KafkaSourceConfig, PipelineConfig, RouteConfig
from ferry.config.transforms import TransformConfig, UserDefinedFunctionConfig
from ferry.options import SinkConfigBase
from ferry.sinks.base.registry import SINKS


@dataclass(frozen=True)
class Key:
    """One row: the key as a job file writes it, its other spellings, and its default."""

    key: str
    spellings: tuple[str, ...]
    default: str


#: Fields that hold an open group of ``<prefix>.<key>`` options (folded into a dict by the model's
#: validator, which pydantic cannot show): (model, field) → the prefix a job file writes.
GROUPS: dict[tuple[str, str], str] = {
    ("KafkaSourceConfig", "properties"): "properties",
    ("IcebergSinkConfig", "catalog_properties"): "catalog.properties",
    ("IcebergSinkConfig", "table_properties"): "table.properties",
    ("PaimonSinkConfig", "catalog_properties"): "catalog.properties",
    ("PaimonSinkConfig", "table_properties"): "table.properties",
    ("KafkaSinkConfig", "properties"): "properties",
    ("FlussSinkConfig", "table_properties"): "properties.table",
    ("FlussSinkConfig", "client_properties"): "properties.client",
    ("HologresSinkConfig", "table_properties"): "table_property",
    ("StarRocksSinkConfig", "table_properties"): "table.create.properties",
    ("StarRocksSinkConfig", "load_properties"): "sink.properties",
    ("SelectDbSinkConfig", "table_properties"): "table.create.properties",
    ("SelectDbSinkConfig", "load_properties"): "sink.properties",
    ("SelectDbSinkConfig", "auto_partition"): "table.create.auto-partition.properties",
    ("UserDefinedFunctionConfig", "options"): "options",
}

#: Defaults a validator derives where the field itself has none (it is required or ``None``):
#: (model, key) → how the page says it. A field that gains a default of its own is refused here.
DERIVED_DEFAULTS: dict[tuple[str, str], str] = {
    ("KafkaSourceConfig", "debezium-json.schema-include"): "detected",
    ("KafkaSourceConfig", "schema-registry.basic-auth.credentials-source"): "`USER_INFO`",
    ("PipelineConfig", "dead-letter.topic"): "`<name>.dlq`",
    ("PipelineConfig", "local-time-zone"): "the system's",
    ("SinkConfigBase", "include.schema.changes"): "all",
    ("SinkConfigBase", "exclude.schema.changes"): "none",
    ("IcebergSinkConfig", "catalog.properties.*"): (
        "`type: sql`, `warehouse: var/warehouse`, `uri: sqlite:///<warehouse>/catalog.db`"
    ),
    ("PaimonSinkConfig", "commit.user"): "the pipeline's name",
    ("TransformConfig", "projection"): "`*`",
    ("TransformConfig", "primary-keys"): "the source's key",
    ("TransformConfig", "partition-keys"): "the source's",
    ("StarRocksSinkConfig", "table.create.num-buckets"): "the server's",
    ("SelectDbSinkConfig", "jdbc-url"): (
        "required (or the first of `fenodes` on port 9030, as Flink CDC's Doris connector has it optional)"
    ),
}


def _default_text(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value: Any = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None or value in ((), {}, ""):
        return ""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, datetime.timedelta):
        ms = round(value.total_seconds() * 1000)
        if ms % 60_000 == 0:
            return f"`{ms // 60_000}min`"
        return f"`{ms // 1000}s`" if ms % 1000 == 0 else f"`{ms}ms`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _spellings(info: FieldInfo, key: str) -> tuple[str, ...]:
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(c for c in alias.choices if isinstance(c, str) and c != key)
    return ()


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def keys(model: type[BaseModel], *, prefix: str = "", skip: Sequence[str] = ()) -> list[Key]:
    """The rows of ``model``'s table; ``skip`` leaves out fields (a base class's, shown elsewhere)."""
    rows = []
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        key = prefix + (info.alias or name)
        nested = _nested_model(info.annotation)
        if nested is not None:
            rows += keys(nested, prefix=key + ".")
            continue
        group = GROUPS.get((model.__name__, name))
        if group is None and info.alias is None and get_origin(info.annotation) is dict:
            raise LookupError(f"{model.__name__}.{name} is an open group: name its prefix in GROUPS")
        if group is not None:
            key = prefix + group + ".*"
        default = _default_text(info)
        derived = DERIVED_DEFAULTS.get((model.__name__, key))
        if derived is not None:
            if default not in ("", "required"):
                raise ValueError(f"{model.__name__} gives {key} the default {default}: not a derived one")
            default = derived
        rows.append(Key(key, _spellings(info, info.alias or name), default))
    return rows


_SPLIT = re.compile(r"(?<!\\)\|")


def meanings(table: str) -> dict[str, str]:
    """Key → meaning, read from a committed table (the first key written in each row's first cell)."""
    found: dict[str, str] = {}
    for line in table.splitlines():
        cells = _SPLIT.split(line)
        if len(cells) < 5 or not cells[1].strip().startswith("`"):
            continue
        key = cells[1].strip().split("`")[1]
        found.setdefault(key, "|".join(cells[3:-1]).strip())
    return found


def _key_cell(row: Key, only_in: str = "") -> str:
    cell = f"`{row.key}`"
    if row.spellings:
        cell += " or " + ", ".join(f"`{s}`" for s in row.spellings)
    return cell + (f" ({only_in})" if only_in else "")


def _rows(table: str) -> dict[str, str]:
    """Key → its whole row, as a committed table writes it."""
    found: dict[str, str] = {}
    for line in table.splitlines():
        cells = _SPLIT.split(line)
        if len(cells) >= 5 and cells[1].strip().startswith("`"):
            found.setdefault(cells[1].strip().split("`")[1], line)
    return found


def table(rows: Sequence[tuple[Key, str]], committed: str = "") -> str:
    """A Markdown table of ``rows`` (each with where it applies only), with the meanings the
    ``committed`` table gives. An open group's row (``catalog.properties.*``) is followed by the
    committed rows of keys within it (``catalog.properties.io-impl``): options the model passes on,
    which the page describes as it wrote them."""
    described = meanings(committed)
    written = _rows(committed)
    lines = ["| key | default | meaning |", "|---|---|---|"]
    keys_of_model = {row.key for row, _ in rows}
    for row, only_in in rows:
        cells = (_key_cell(row, only_in), row.default, described.get(row.key, ""))
        lines.append("|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|")
        if row.key.endswith(".*"):
            within = row.key[:-1]
            lines += [
                line
                for key, line in written.items()
                if key.startswith(within) and key not in keys_of_model and not key.endswith(".*")
            ]
    return "\n".join(lines) + "\n"


def _sink_rows(sink_type: str) -> list[tuple[Key, str]]:
    base = list(SinkConfigBase.model_fields)
    return [(k, "") for k in keys(SINKS[sink_type].config, skip=base)]


def _mysql_protocol_rows() -> list[tuple[Key, str]]:
    """StarRocks and SelectDB in one table: a key only one of them has says which."""
    base = list(SinkConfigBase.model_fields)
    starrocks = keys(SINKS["starrocks"].config, skip=base)
    selectdb = keys(SINKS["selectdb"].config, skip=base)
    names = {"starrocks": "StarRocks", "selectdb": "SelectDB"}
    in_selectdb = {k.key: k for k in selectdb}
    rows: list[tuple[Key, str]] = []
    for k in starrocks:
        other = in_selectdb.pop(k.key, None)
        if other is None:
            rows.append((k, names["starrocks"]))
        elif other == k:
            rows.append((k, ""))
        else:
            rows += [(k, names["starrocks"]), (other, names["selectdb"])]
    rows += [(k, names["selectdb"]) for k in in_selectdb.values()]
    return rows


#: Table name (the docs' block is ``job-<name>``) → its rows.
TABLES: dict[str, Callable[[], list[tuple[Key, str]]]] = {
    "source": lambda: [(k, "") for k in keys(KafkaSourceConfig)],
    "sink": lambda: [(k, "") for k in keys(SinkConfigBase)],
    "iceberg": lambda: _sink_rows("iceberg"),
    "hologres": lambda: _sink_rows("hologres"),
    "paimon": lambda: _sink_rows("paimon"),
    "kafka": lambda: _sink_rows("kafka"),
    "maxcompute": lambda: _sink_rows("maxcompute"),
    "fluss": lambda: _sink_rows("fluss"),
    "starrocks-selectdb": _mysql_protocol_rows,
    "route": lambda: [(k, "") for k in keys(RouteConfig)],
    "pipeline": lambda: [(k, "") for k in keys(PipelineConfig)],
    "transform": lambda: [(k, "") for k in keys(TransformConfig)],
    "user-defined-function": lambda: [(k, "") for k in keys(UserDefinedFunctionConfig)],
}


def markdown(name: str, committed: str) -> str:
    """Table ``name`` as the models give it, with the meanings of the ``committed`` one."""
    return table(TABLES[name](), committed)
