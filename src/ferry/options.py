"""The base of every options model: frozen, strict about unknown keys, dotted aliases; durations.

Job files (:mod:`ferry.config`), each sink's options (``ferry.sinks.<type>.config``), the server
file and the pipeline resource's spec build on these. The module imports nothing else of ferry, so
a sink's options model can be imported before, and by, the job model.
"""

from __future__ import annotations

import difflib
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, ClassVar, Self
from urllib.parse import urlparse

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)


class OptionError(ValueError):
    """A validation problem about one option, named relative to where pydantic reports the error.

    In a field validator the error is already at the field, so ``path`` is usually empty; in a
    model validator ``path`` names the option with its YAML key (``"scan.startup.mode"``, or
    ``"tables", 0, "topic"``). A path naming an absent key points at the enclosing mapping.
    ``offset`` is a character offset into the option's text value (a function in a projection),
    where the problem is.
    """

    def __init__(self, message: str, *path: str | int, offset: int | None = None) -> None:
        super().__init__(message)
        self.path: tuple[str | int, ...] = path
        self.offset = offset


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


def flink_list(value: Any) -> Any:
    """A list option written as one string, as Flink reads a ``List<String>`` option:
    ``drop.column`` is ``[drop.column]``, ``drop.column;add.column`` two items."""
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(";") if item.strip())
    return value


#: A list of text options: a YAML list, or one string of items separated by ``;``.
TextList = Annotated[tuple[str, ...], BeforeValidator(flink_list)]


class SinkConfigBase(ConfigModel):
    """Options every sink has. Each sink subclasses this with ``type: Literal["<type>"]``.

    A number where text is wanted is taken as its text (``password: 123456``): Flink CDC reads
    every option as a string, and its examples write such values bare."""

    model_config = ConfigDict(**ConfigModel.model_config, coerce_numbers_to_str=True)

    type: str
    name: str | None = None
    include_schema_changes: TextList | None = Field(default=None, alias="include.schema.changes")
    exclude_schema_changes: TextList = Field(default=(), alias="exclude.schema.changes")
    #: Whether a sink table that does not exist is created (Kafka Connect's ``auto.create``).
    auto_create_tables: bool = Field(default=True, alias="auto-create-tables")

    def refused_workers(self, parallelism: int) -> tuple[str, str] | None:
        """The sink key and the reason why ``parallelism`` workers cannot write this sink as it is
        configured, or None when they can."""
        return None

    def refused_table_option(self, key: str, value: str) -> str | None:
        """Why the sink cannot give the tables it creates the option ``key`` of a transform's
        ``table-options`` (``comment`` aside, which every sink takes), or None when it does."""
        return (
            f"the {self.type} sink has no table options to give it: it creates a table from the "
            "projected schema (columns, keys, partitions and comment=) and its own sink options"
        )


class TableFormatSinkConfigBase(SinkConfigBase):
    """Options of a sink that writes a table format (Iceberg, Paimon) into a catalog's warehouse.

    ``catalog.properties.*`` go to the format's catalog, ``table.properties.*`` to the tables the
    sink creates."""

    catalog_properties: dict[str, str] = Field(default_factory=dict)
    table_properties: dict[str, str] = Field(default_factory=dict)
    #: Sink table id (``db.table``) → how the table is partitioned when the sink creates it
    #: (``partition.key: db.t1:a,b;db.t2:c``); a table not named is partitioned by the partition
    #: keys of its schema (a transform's ``partition-keys``), if any.
    partition_keys: dict[str, tuple[str, ...]] = Field(default_factory=dict, alias="partition.key")

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        data = fold_prefixed(data, "catalog.properties", "catalog_properties")
        return fold_prefixed(data, "table.properties", "table_properties")

    @field_validator("partition_keys", mode="before")
    @classmethod
    def _partition_keys(cls, value: Any) -> Any:
        return table_lists(value, "partition.key")

    #: The catalog properties that locate the catalog (``warehouse``, ``uri``, its type): a key
    #: given without a dot (a client's own properties are dotted: ``s3.endpoint``) that is none of
    #: them but close to one not given is taken for a misspelling of it.
    located_by: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="after")
    def _misspelt_catalog_property(self) -> Self:
        given = self.catalog_properties
        absent = [k for k in sorted(self.located_by) if k not in given]
        for key in given:
            if key in self.located_by or "." in key:
                continue
            close = difflib.get_close_matches(key, absent, n=1, cutoff=0.6)
            if close:
                raise OptionError(
                    f"catalog.properties.{key} is not a catalog property; "
                    f"did you mean catalog.properties.{close[0]}?",
                    f"catalog.properties.{key}",
                )
        return self

    @model_validator(mode="after")
    def _table_properties_apply(self) -> Self:
        for key, value in self.table_properties.items():
            reason = self.refused_table_option(key, value)
            if reason is not None:
                raise OptionError(f"table.properties.{key}={value}: {reason}", f"table.properties.{key}")
        return self

    def resolved_catalog_properties(self) -> dict[str, str]:
        """The catalog's properties, its warehouse resolved."""
        raise NotImplementedError

    def refused_table_option(self, key: str, value: str) -> str | None:
        """A table format takes any table option at creation (after ``table.properties.*``),
        unless the sink's model names it here."""
        return None

    def warehouse_dir(self) -> Path | None:
        """The warehouse as an absolute local directory, or ``None`` when it is remote or unset."""
        warehouse = self.resolved_catalog_properties().get("warehouse")
        return None if warehouse is None else local_dir(warehouse)


def local_dir(warehouse: str | None) -> Path | None:
    """The absolute directory of a ``file://`` URI or a plain path; ``None`` for other schemes."""
    if warehouse is None:
        return None
    parsed = urlparse(warehouse)
    if parsed.scheme == "file":
        return Path(parsed.path).resolve()
    if parsed.scheme == "":
        return Path(warehouse).resolve()
    return None


#: Duration unit → milliseconds. The names are those of Flink's ``TimeUtils``.
_DURATION_UNITS: dict[str, int] = {
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}
_DURATION_RE = re.compile(r"(\d+)\s*([a-z]*)")


def parse_duration(value: object) -> timedelta:
    """``"5s"``, ``"500ms"``, ``"3min"``, ``"1 h"`` or an integer number of milliseconds."""
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, int) and not isinstance(value, bool):
        result = timedelta(milliseconds=value)
    elif isinstance(value, str):
        match = _DURATION_RE.fullmatch(value.strip().lower())
        if match is None or (match.group(2) and match.group(2) not in _DURATION_UNITS):
            raise ValueError(
                "not a duration: write a number with a unit (500ms, 5s, 3min, 1h, 1d) "
                "or an integer number of milliseconds"
            )
        result = timedelta(milliseconds=int(match.group(1)) * _DURATION_UNITS.get(match.group(2), 1))
    else:
        raise ValueError("a duration is a string such as '5s' or an integer number of milliseconds")
    if result <= timedelta(0):
        raise ValueError("a duration must be longer than zero")
    return result


def format_duration(value: timedelta) -> str:
    """The shortest exact spelling of a duration in the job-file syntax (``"5s"``, ``"3min"``)."""
    ms = round(value.total_seconds() * 1000)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


#: A duration option; JSON renders it in the job-file syntax (``"3min"``).
Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]


def table_lists(value: Any, key: str) -> Any:
    """Flink CDC's per-table lists, ``db.t1:a,b;db.t2:c`` → ``{"db.t1": ("a", "b"), "db.t2": ("c",)}``
    (``partition.key`` of the Iceberg and Paimon sinks); a mapping is taken as it is."""
    if not isinstance(value, str):
        return value
    tables: dict[str, tuple[str, ...]] = {}
    for entry in (e.strip() for e in value.split(";")):
        if not entry:
            continue
        table, sep, items = entry.partition(":")
        names = tuple(n.strip() for n in items.split(",") if n.strip())
        if not sep or not table.strip() or not names:
            raise ValueError(f"{key}: {entry!r} is not table:column[,column...] (write db.t1:a,b;db.t2:c)")
        if table.strip() in tables:
            raise ValueError(f"{key}: {table.strip()} is given twice")
        tables[table.strip()] = names
    return tables
