"""Table identifiers and table schemas: columns in order, primary keys, comments."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ferry.model.exceptions import SchemaError
from ferry.model.types import DataType, parse, widen


class TableId(NamedTuple):
    """A source or sink table: ``namespace.schema_name.table_name`` with the first two optional.

    MySQL tables are ``database.table`` (``schema_name`` set); PostgreSQL tables are
    ``schema.table``; a three-part id carries a catalog or server name in ``namespace``. A tuple,
    so that hashing it (once per row on the hot path) costs no Python call.
    """

    namespace: str | None
    schema_name: str | None
    table_name: str

    @classmethod
    def parse(cls, text: str) -> TableId:
        parts = text.split(".")
        if len(parts) == 1:
            return cls(None, None, parts[0])
        if len(parts) == 2:
            return cls(None, parts[0], parts[1])
        if len(parts) == 3:
            return cls(parts[0], parts[1], parts[2])
        raise SchemaError(f"a table id has one to three dot-separated parts, got {text!r}")

    @classmethod
    def of(cls, *parts: str | None) -> TableId:
        names = [p for p in parts if p]
        return cls.parse(".".join(names))

    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in (self.namespace, self.schema_name, self.table_name) if p is not None)

    def __str__(self) -> str:
        return ".".join(self.parts())


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: DataType
    comment: str | None = None
    default: str | None = None

    def __str__(self) -> str:
        return f"`{self.name}` {self.type}"


@dataclass(frozen=True, slots=True)
class Schema:
    """An ordered list of columns with the primary key (column names, in key order)."""

    columns: tuple[Column, ...]
    primary_keys: tuple[str, ...] = ()
    partition_keys: tuple[str, ...] = ()
    comment: str | None = None
    #: Options of the table a sink creates (a transform's ``table-options`` but ``comment``), in
    #: the order given: Flink CDC's ``Schema.options``.
    options: tuple[tuple[str, str], ...] = ()
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        index = self._index
        for i, column in enumerate(self.columns):
            if column.name in index:
                raise SchemaError(f"duplicate column {column.name!r}")
            index[column.name] = i
        for key in self.primary_keys:
            if key not in index:
                raise SchemaError(f"primary key column {key!r} is not a column")

    @classmethod
    def of(cls, columns: Iterable[Column], primary_keys: Iterable[str] = (), **kw: object) -> Schema:
        return cls(tuple(columns), tuple(primary_keys), **kw)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Column]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        try:
            return self.columns[self._index[name]]
        except KeyError:
            raise SchemaError(f"no column {name!r}; columns are {', '.join(self.names)}") from None

    def find(self, name: str) -> Column | None:
        i = self._index.get(name)
        return None if i is None else self.columns[i]

    def find_ignoring_case(self, name: str) -> Column | None:
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)

    def position(self, name: str) -> int:
        self.column(name)
        return self._index[name]

    def with_columns(self, columns: Iterable[Column]) -> Schema:
        columns = tuple(columns)
        names = {c.name for c in columns}
        keys = tuple(k for k in self.primary_keys if k in names)
        return replace(
            self,
            columns=columns,
            primary_keys=keys,
            partition_keys=tuple(k for k in self.partition_keys if k in names),
        )

    def describe(self) -> str:
        cols = ", ".join(str(c) for c in self.columns)
        pk = f", PRIMARY KEY ({', '.join(self.primary_keys)})" if self.primary_keys else ""
        return f"({cols}{pk})"


def widen_schemas(a: Schema, b: Schema) -> Schema:
    """The widest common schema: every column of ``a`` in its order, then ``b``'s new columns.

    Shared columns get the widened type; a column present on one side only becomes nullable (the
    other side has no value for it). Primary keys are kept when both sides agree.
    """
    columns = []
    for col in a.columns:
        other = b.find(col.name)
        if other is None:
            columns.append(replace(col, type=col.type.with_nullable(True)))
        else:
            columns.append(
                replace(col, type=widen(col.type, other.type), comment=col.comment or other.comment)
            )
    columns += [replace(c, type=c.type.with_nullable(True)) for c in b.columns if c.name not in a]
    keys = (
        a.primary_keys
        if a.primary_keys == b.primary_keys or not b.primary_keys
        else a.primary_keys or b.primary_keys
    )
    partitions, comment = a.partition_keys or b.partition_keys, a.comment or b.comment
    return Schema(tuple(columns), keys, partitions, comment, a.options or b.options)


def schema_to_dict(schema: Schema) -> dict[str, object]:
    """A JSON-able form of a schema (types in Flink SQL spelling), for the state store."""
    return {
        "columns": [
            {
                "name": c.name,
                "type": str(c.type),
                **({"comment": c.comment} if c.comment else {}),
                **({"default": c.default} if c.default is not None else {}),
            }
            for c in schema.columns
        ],
        "primary_keys": list(schema.primary_keys),
        **({"partition_keys": list(schema.partition_keys)} if schema.partition_keys else {}),
        **({"comment": schema.comment} if schema.comment else {}),
        **({"options": dict(schema.options)} if schema.options else {}),
    }


def schema_from_dict(data: dict[str, object]) -> Schema:
    columns = data["columns"]
    assert isinstance(columns, list)
    return Schema(
        tuple(Column(c["name"], parse(c["type"]), c.get("comment"), c.get("default")) for c in columns),
        tuple(data.get("primary_keys", ())),  # type: ignore[arg-type]
        tuple(data.get("partition_keys", ())),  # type: ignore[arg-type]
        data.get("comment"),  # type: ignore[arg-type]
        tuple(dict(data.get("options", {})).items()),  # type: ignore[call-overload]
    )
