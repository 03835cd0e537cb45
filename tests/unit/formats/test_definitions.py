from __future__ import annotations

from ferry.connectors.formats.definitions import TableDefinitions
from ferry.model import types as t
from ferry.model.schema import Column, Schema, TableId

ORDERS = TableId(None, "shop", "orders")


def schema(*names: str, widened: bool = False) -> Schema:
    kind = t.BIGINT() if widened else t.INT()
    return Schema(tuple(Column(n, kind) for n in names))


def test_the_newest_schema_with_the_names() -> None:
    known = TableDefinitions()
    v1, v2, v3 = schema("id", "name"), schema("id", "name", "email"), schema("id", "name", widened=True)
    for s in (v1, v2, v3):
        known.add(ORDERS, s)
    assert known.match(ORDERS, frozenset({"id", "name"})) == v3
    assert known.match(ORDERS, frozenset({"id", "name", "email"})) == v2
    assert known.match(ORDERS, frozenset({"id"})) is None
    assert known.match(TableId(None, "shop", "other"), frozenset({"id", "name"})) is None
    assert known.latest(ORDERS) == v3 and known.tables() == [ORDERS]


def test_adding_a_known_schema_again_keeps_its_place() -> None:
    known = TableDefinitions()
    old, new = schema("id", "name"), schema("id", "name", widened=True)
    known.add(ORDERS, old)
    known.add(ORDERS, new)
    version = known.version
    known.add(ORDERS, old)  # the schema-change topic read again from its start
    assert known.version == version
    assert known.match(ORDERS, frozenset({"id", "name"})) == new


def test_refresh_once_per_unknown_shape() -> None:
    calls: list[frozenset[str]] = []
    known = TableDefinitions(refresh=lambda: calls.append(frozenset()))
    assert known.match(ORDERS, frozenset({"id"})) is None
    assert known.match(ORDERS, frozenset({"id"})) is None
    assert len(calls) == 1
    assert known.match(ORDERS, frozenset({"id", "name"})) is None
    assert len(calls) == 2
    # what a later add brings is found without a refresh
    known.add(ORDERS, schema("id"))
    assert known.match(ORDERS, frozenset({"id"})) == schema("id")
    assert len(calls) == 2


def test_a_refresh_that_adds_the_schema() -> None:
    known = TableDefinitions(refresh=lambda: known.add(ORDERS, schema("id", "name")))
    assert known.match(ORDERS, frozenset({"id", "name"})) == schema("id", "name")
    assert known.version == 1
