"""ferry types ↔ Iceberg types: a mapping table, its inverse, and Iceberg's legal type changes.

Iceberg has fewer types than ferry: every integer narrower than BIGINT is an ``int``, every
character type a ``string``, every binary type ``binary``, and times and timestamps have
microsecond precision. :func:`sink_type` tells what a ferry type becomes once stored, so a change
between two ferry types that Iceberg stores alike (SMALLINT → INT, VARCHAR(10) → STRING) is known
to be a no-op.

Changing a column's type is limited to Iceberg's promotions (``int → long``, ``float → double``,
``decimal(P, S) → decimal(P', S)`` with ``P' ≥ P``), relaxing ``required`` to ``optional``, and
adding fields to a struct. :func:`plan_type_change` turns a wanted type into the steps that get
there, or raises :class:`IcebergTypeError` saying why it cannot.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from ferry.model.schema import Column, Schema
from ferry.model.types import (
    ARRAY,
    BIGINT,
    BINARY,
    BOOLEAN,
    BYTES,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    MAP,
    ROW,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    DataType,
    Field,
    TypeRoot,
)

#: ferry type root → the Iceberg type that stores it (DECIMAL and the nested types are built by
#: :func:`to_iceberg_type`, they carry parameters).
ICEBERG_PRIMITIVES: dict[TypeRoot, PrimitiveType] = {
    TypeRoot.BOOLEAN: BooleanType(),
    TypeRoot.TINYINT: IntegerType(),
    TypeRoot.SMALLINT: IntegerType(),
    TypeRoot.INT: IntegerType(),
    TypeRoot.BIGINT: LongType(),
    TypeRoot.FLOAT: FloatType(),
    TypeRoot.DOUBLE: DoubleType(),
    TypeRoot.CHAR: StringType(),
    TypeRoot.VARCHAR: StringType(),
    TypeRoot.STRING: StringType(),
    TypeRoot.BINARY: BinaryType(),
    TypeRoot.VARBINARY: BinaryType(),
    TypeRoot.BYTES: BinaryType(),
    TypeRoot.DATE: DateType(),
    TypeRoot.TIME: TimeType(),
    TypeRoot.TIMESTAMP: TimestampType(),
    TypeRoot.TIMESTAMP_LTZ: TimestamptzType(),
    # Iceberg keeps the instant, not the offset it was written with
    TypeRoot.TIMESTAMP_TZ: TimestamptzType(),
    # pyiceberg has no variant type: a VARIANT is its JSON text
    TypeRoot.VARIANT: StringType(),
}

#: Iceberg primitive type → the ferry type it reads back as (DECIMAL and FIXED carry parameters).
FERRY_PRIMITIVES: dict[type[PrimitiveType], Callable[[], DataType]] = {
    BooleanType: BOOLEAN,
    IntegerType: INT,
    LongType: BIGINT,
    FloatType: FLOAT,
    DoubleType: DOUBLE,
    StringType: STRING,
    BinaryType: BYTES,
    DateType: DATE,
    TimeType: lambda: TIME(6),
    TimestampType: lambda: TIMESTAMP(6),
    TimestamptzType: lambda: TIMESTAMP_LTZ(6),
    TimestampNanoType: lambda: TIMESTAMP(9),
    TimestamptzNanoType: lambda: TIMESTAMP_LTZ(9),
    UUIDType: lambda: BINARY(16),
}

#: The primitive promotions Iceberg allows besides widening a decimal's precision.
PROMOTIONS: frozenset[tuple[type[PrimitiveType], type[PrimitiveType]]] = frozenset(
    {(IntegerType, LongType), (FloatType, DoubleType)}
)


class IcebergTypeError(ValueError):
    """A type Iceberg cannot store, or a type change Iceberg does not allow."""


# ----------------------------------------------------------------------------------- ferry → Iceberg


def to_iceberg_type(t: DataType, next_id: Callable[[], int]) -> IcebergType:
    """The Iceberg type storing ``t``; nested fields get ids from ``next_id`` (the catalog reassigns them)."""
    root = t.root
    if root is TypeRoot.DECIMAL:
        assert t.precision is not None and t.scale is not None
        return DecimalType(t.precision, t.scale)
    if root is TypeRoot.ARRAY:
        assert t.element is not None
        return ListType(
            next_id(), to_iceberg_type(t.element, next_id), element_required=not t.element.nullable
        )
    if root is TypeRoot.MAP:
        assert t.key is not None and t.element is not None
        key_id, value_id = next_id(), next_id()
        return MapType(
            key_id,
            to_iceberg_type(t.key, next_id),
            value_id,
            to_iceberg_type(t.element, next_id),
            value_required=not t.element.nullable,
        )
    if root is TypeRoot.ROW:
        return StructType(
            *(
                NestedField(next_id(), f.name, to_iceberg_type(f.type, next_id), required=not f.type.nullable)
                for f in t.fields
            )
        )
    return ICEBERG_PRIMITIVES[root]


def field_ids(start: int = 1) -> Callable[[], int]:
    """A counter of field ids."""
    counter = itertools.count(start)
    return lambda: next(counter)


def to_iceberg_schema(schema: Schema) -> IcebergSchema:
    """The Iceberg schema of a new table: primary key columns are required identifier fields."""
    next_id = field_ids()
    fields = []
    for column in schema.columns:
        field_id = next_id()
        required = column.name in schema.primary_keys or not column.type.nullable
        fields.append(
            NestedField(
                field_id,
                column.name,
                to_iceberg_type(column.type, next_id),
                required=required,
                doc=column.comment,
            )
        )
    by_name = {f.name: f.field_id for f in fields}
    return IcebergSchema(*fields, identifier_field_ids=[by_name[k] for k in schema.primary_keys])


# ----------------------------------------------------------------------------------- Iceberg → ferry


def to_ferry_type(t: IcebergType, required: bool) -> DataType:
    """The ferry type an Iceberg type reads back as."""
    if isinstance(t, DecimalType):
        result = DECIMAL(t.precision, t.scale)
    elif isinstance(t, FixedType):
        result = BINARY(len(t))
    elif isinstance(t, ListType):
        result = ARRAY(to_ferry_type(t.element_type, t.element_required))
    elif isinstance(t, MapType):
        result = MAP(to_ferry_type(t.key_type, True), to_ferry_type(t.value_type, t.value_required))
    elif isinstance(t, StructType):
        result = ROW(*(Field(f.name, to_ferry_type(f.field_type, f.required)) for f in t.fields))
    else:
        make = FERRY_PRIMITIVES.get(type(t)) if isinstance(t, PrimitiveType) else None
        if make is None:
            raise IcebergTypeError(f"Iceberg type {t} has no ferry type")
        result = make()
    return result.with_nullable(not required)


def to_ferry_schema(schema: IcebergSchema, comment: str | None = None) -> Schema:
    """A table's Iceberg schema as a ferry schema (identifier fields are the primary key)."""
    columns = [
        Column(f.name, to_ferry_type(f.field_type, f.required), comment=f.doc or None) for f in schema.fields
    ]
    keys = [schema.find_column_name(i) for i in schema.identifier_field_ids]
    return Schema.of(columns, [k for k in keys if k is not None], comment=comment)


def sink_type(t: DataType) -> DataType:
    """What an Iceberg table stores for ``t``, as a ferry type (TINYINT → INT, VARCHAR(n) → STRING ...)."""
    return to_ferry_type(to_iceberg_type(t, field_ids()), not t.nullable)


def sink_schema(schema: Schema) -> Schema:
    """``schema`` as an Iceberg table created from it reads back."""
    return to_ferry_schema(to_iceberg_schema(schema), schema.comment)


# ----------------------------------------------------------------------------------- type changes


@dataclass(frozen=True, slots=True)
class TypeStep:
    """One schema update that moves a column towards a wanted type."""

    kind: Literal["promote", "make-optional", "add-field"]
    path: tuple[str, ...]
    type: IcebergType | None = None


def plan_type_change(
    path: tuple[str, ...],
    current: IcebergType,
    current_required: bool,
    wanted: IcebergType,
    wanted_required: bool,
) -> list[TypeStep]:
    """The steps that change a field of type ``current`` into ``wanted``.

    A wanted NOT NULL on an optional field is not a step: Iceberg cannot tighten a column that may
    hold NULLs, and the source never asks for it (the sink stays nullable). Raises
    :class:`IcebergTypeError` for a change Iceberg does not allow.
    """
    return list(_plan(path, current, current_required, wanted, wanted_required))


def _plan(
    path: tuple[str, ...],
    current: IcebergType,
    current_required: bool,
    wanted: IcebergType,
    wanted_required: bool,
) -> Iterator[TypeStep]:
    if current_required and not wanted_required:
        yield TypeStep("make-optional", path)
    if isinstance(current, StructType) and isinstance(wanted, StructType):
        yield from _plan_struct(path, current, wanted)
    elif isinstance(current, ListType) and isinstance(wanted, ListType):
        yield from _plan(
            (*path, "element"),
            current.element_type,
            current.element_required,
            wanted.element_type,
            wanted.element_required,
        )
    elif isinstance(current, MapType) and isinstance(wanted, MapType):
        yield from _plan((*path, "key"), current.key_type, True, wanted.key_type, True)
        yield from _plan(
            (*path, "value"),
            current.value_type,
            current.value_required,
            wanted.value_type,
            wanted.value_required,
        )
    elif isinstance(current, PrimitiveType) and isinstance(wanted, PrimitiveType):
        if current != wanted:
            _check_promotion(current, wanted)
            yield TypeStep("promote", path, wanted)
    else:
        raise IcebergTypeError(f"{current} cannot become {wanted}")


def _plan_struct(path: tuple[str, ...], current: StructType, wanted: StructType) -> Iterator[TypeStep]:
    existing = {f.name: f for f in current.fields}
    for field in wanted.fields:
        old = existing.pop(field.name, None)
        if old is None:
            yield TypeStep("add-field", (*path, field.name), field.field_type)
        else:
            yield from _plan(
                (*path, field.name), old.field_type, old.required, field.field_type, field.required
            )
    dropped = [name for name, f in existing.items() if f.required]
    if dropped:
        raise IcebergTypeError(f"required struct field {', '.join(dropped)} would have no value")


def _check_promotion(current: PrimitiveType, wanted: PrimitiveType) -> None:
    if isinstance(current, DecimalType) and isinstance(wanted, DecimalType):
        if current.scale != wanted.scale:
            raise IcebergTypeError(f"Iceberg cannot change a decimal's scale ({current} to {wanted})")
        if wanted.precision < current.precision:
            raise IcebergTypeError(f"Iceberg cannot narrow a decimal ({current} to {wanted})")
        return
    if (type(current), type(wanted)) not in PROMOTIONS:
        raise IcebergTypeError(
            "Iceberg allows only int → long, float → double and a wider decimal precision, "
            f"not {current} → {wanted}"
        )
