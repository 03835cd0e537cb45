"""ferry types ↔ Paimon types: a mapping table, its inverse, and the type changes the sink allows.

Paimon's type system is Flink's, so most ferry types are stored as they are; Paimon's SQL spelling
of an atomic type (``DECIMAL(10, 2)``, ``TIMESTAMP_LTZ(6)``) is ferry's, and reads back through
:func:`ferry.model.types.parse`. What differs is in :data:`PAIMON_ATOMIC`: Paimon has no
``TIMESTAMP WITH TIME ZONE`` (the instant is kept, as ``TIMESTAMP_LTZ``), and pypaimon reads and
writes ``TIME`` with millisecond precision, so a ``TIME(p)`` column is created as ``TIME(min(p, 3))``.

pypaimon checks no type change (it would let a STRING column become INT); the sink allows a
change only when every value of the old type is a value of the new one (:func:`check_type_change`).
pypaimon casts the rows of older data files to the new type when it reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pypaimon.schema.data_types import (
    ArrayType,
    AtomicInteger,
    AtomicType,
    DataField,
    MapType,
    RowType,
)
from pypaimon.schema.data_types import DataType as PaimonType

from ferry.model.exceptions import TypeWideningError
from ferry.model.schema import Column, Schema
from ferry.model.types import (
    ARRAY,
    MAP,
    ROW,
    DataType,
    Field,
    TypeRoot,
    can_widen,
    parse,
    render,
)

#: Milliseconds: the precision pypaimon keeps for ``TIME`` values (it reads them as ``time32[ms]``).
MAX_TIME_PRECISION = 3


def _plain(t: DataType) -> str:
    return t.root.value


def _time(t: DataType) -> str:
    return f"TIME({min(t.precision or 0, MAX_TIME_PRECISION)})"


def _precision(name: str) -> Callable[[DataType], str]:
    return lambda t: f"{name}({t.precision})"


def _length(t: DataType) -> str:
    return f"{t.root.value}({t.length})"


#: ferry type root → Paimon's spelling of the atomic type that stores it (nested types are built
#: by :func:`to_paimon_type`).
PAIMON_ATOMIC: dict[TypeRoot, Callable[[DataType], str]] = {
    TypeRoot.BOOLEAN: _plain,
    TypeRoot.TINYINT: _plain,
    TypeRoot.SMALLINT: _plain,
    TypeRoot.INT: _plain,
    TypeRoot.BIGINT: _plain,
    TypeRoot.FLOAT: _plain,
    TypeRoot.DOUBLE: _plain,
    TypeRoot.DECIMAL: lambda t: f"DECIMAL({t.precision}, {t.scale})",
    TypeRoot.CHAR: _length,
    TypeRoot.VARCHAR: _length,
    TypeRoot.STRING: _plain,
    TypeRoot.BINARY: _length,
    TypeRoot.VARBINARY: _length,
    TypeRoot.BYTES: _plain,
    TypeRoot.DATE: _plain,
    TypeRoot.TIME: _time,
    TypeRoot.TIMESTAMP: _precision("TIMESTAMP"),
    TypeRoot.TIMESTAMP_LTZ: _precision("TIMESTAMP_LTZ"),
    # Paimon keeps the instant, not the offset it was written with
    TypeRoot.TIMESTAMP_TZ: _precision("TIMESTAMP_LTZ"),
    TypeRoot.VARIANT: _plain,
}

#: Paimon's names for ferry's: ``VARCHAR(2147483647)`` is how Paimon may spell ``STRING``.
_PAIMON_ALIASES = {"VARCHAR(2147483647)": "STRING", "VARBINARY(2147483647)": "BYTES"}


class PaimonTypeError(ValueError):
    """A type Paimon cannot store, or a type change the sink does not allow."""


# ----------------------------------------------------------------------------------- ferry → Paimon


def to_paimon_type(t: DataType, *, nested: bool = False) -> PaimonType:
    """The Paimon type storing ``t``; nested fields get ids that the catalog reassigns. A column's
    VARIANT is Paimon's VARIANT; one inside an ARRAY, MAP or ROW (``nested``) is its JSON text."""
    root = t.root
    result: PaimonType
    if root is TypeRoot.ARRAY:
        assert t.element is not None
        result = ArrayType(t.nullable, to_paimon_type(t.element, nested=True))
    elif root is TypeRoot.MAP:
        assert t.key is not None and t.element is not None
        result = MapType(
            t.nullable, to_paimon_type(t.key.not_null(), nested=True), to_paimon_type(t.element, nested=True)
        )
    elif root is TypeRoot.ROW:
        result = RowType(
            t.nullable,
            [DataField(i, f.name, to_paimon_type(f.type, nested=True)) for i, f in enumerate(t.fields)],
        )
    elif root is TypeRoot.VARIANT and nested:
        result = AtomicType("STRING", t.nullable)
    else:
        spell = PAIMON_ATOMIC.get(root)
        if spell is None:
            raise PaimonTypeError(f"Paimon cannot store {render(t)}")
        result = AtomicType(spell(t), t.nullable)
    return result


def to_paimon_fields(schema: Schema, extra: Sequence[tuple[str, PaimonType]] = ()) -> list[DataField]:
    """The fields of a new table (``extra`` columns last), with table-wide unique ids as Paimon wants."""
    counter = AtomicInteger(-1)
    columns = [(c.name, _column_type(schema, c), c.comment) for c in schema.columns]
    columns += [(name, t, None) for name, t in extra]
    fields = []
    for name, paimon_type, comment in columns:
        field_id = counter.increment_and_get()
        fields.append(DataField(field_id, name, _reassign_ids(paimon_type, counter), comment))
    return fields


def _column_type(schema: Schema, column: Column) -> PaimonType:
    # a primary key column is NOT NULL in Paimon whatever the source says
    t = column.type.not_null() if column.name in schema.primary_keys else column.type
    return to_paimon_type(t)


def _reassign_ids(t: PaimonType, counter: AtomicInteger) -> PaimonType:
    if isinstance(t, RowType):
        fields = [
            DataField(counter.increment_and_get(), f.name, _reassign_ids(f.type, counter), f.description)
            for f in t.fields
        ]
        return RowType(t.nullable, fields)
    if isinstance(t, ArrayType):
        return ArrayType(t.nullable, _reassign_ids(t.element, counter))
    if isinstance(t, MapType):
        return MapType(t.nullable, _reassign_ids(t.key, counter), _reassign_ids(t.value, counter))
    return t


# ----------------------------------------------------------------------------------- Paimon → ferry


def to_ferry_type(t: PaimonType) -> DataType:
    """The ferry type a Paimon type reads back as."""
    result: DataType
    if isinstance(t, ArrayType):
        result = ARRAY(to_ferry_type(t.element))
    elif isinstance(t, MapType):
        result = MAP(to_ferry_type(t.key), to_ferry_type(t.value))
    elif isinstance(t, RowType):
        result = ROW(*(Field(f.name, to_ferry_type(f.type)) for f in t.fields))
    elif isinstance(t, AtomicType):
        spelled = t.type.upper()
        try:
            result = parse(_PAIMON_ALIASES.get(spelled, spelled))
        except TypeWideningError as e:
            raise PaimonTypeError(f"Paimon type {t.type} has no ferry type") from e
    else:
        raise PaimonTypeError(f"Paimon type {t} has no ferry type")
    return result.with_nullable(t.nullable)


def to_ferry_schema(
    fields: list[DataField], primary_keys: list[str], comment: str | None, hidden: frozenset[str]
) -> Schema:
    """A table's Paimon fields as a ferry schema, without the ``hidden`` columns (the row kind)."""
    columns = [
        Column(f.name, to_ferry_type(f.type), comment=f.description or None)
        for f in fields
        if f.name not in hidden
    ]
    return Schema.of(columns, primary_keys, comment=comment)


def sink_type(t: DataType) -> DataType:
    """What a Paimon table stores for ``t``, as a ferry type (TIME(6) → TIME(3), TIMESTAMP_TZ → LTZ)."""
    return to_ferry_type(to_paimon_type(t))


def sink_schema(schema: Schema) -> Schema:
    """``schema`` as a Paimon table created from it reads back (primary key columns NOT NULL)."""
    return to_ferry_schema(to_paimon_fields(schema), list(schema.primary_keys), schema.comment, frozenset())


# ----------------------------------------------------------------------------------- type changes


def check_type_change(current: DataType, wanted: DataType) -> None:
    """Raise :class:`PaimonTypeError` unless every value of ``current`` fits ``wanted`` unchanged.

    Nullability is not part of the check: relaxing it is a separate step, tightening never asked.
    """
    old, new = current.with_nullable(True), wanted.with_nullable(True)
    if old == new:
        return
    nested = (TypeRoot.ARRAY, TypeRoot.MAP, TypeRoot.ROW)
    if old.root in nested or new.root in nested:
        raise PaimonTypeError(f"the sink changes no nested type ({render(old)} to {render(new)})")
    if not can_widen(old, new):
        raise PaimonTypeError(f"values of {render(old)} do not all fit {render(new)}")
