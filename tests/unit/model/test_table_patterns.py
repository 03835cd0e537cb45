"""Table patterns read as Flink CDC reads them: the examples of its route.md and transform.md, its
rules for one-part and three-part patterns, and patterns built from parts against a model."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.config.exceptions import ConfigError
from ferry.config.loader import load_job_text, read_job_text
from ferry.config.transforms import TransformConfig
from ferry.model.schema import TableId
from ferry.model.table_patterns import RoutePattern, TablePatternError, TableSelector, route_regex
from ferry.pipeline.route import Route, RouteMode, TableRouter, unmatched_rules
from ferry.transform.blocks import TableTransforms


def tid(text: str) -> TableId:
    return TableId.parse(text)


# --------------------------------------------------------------------------------------------------
# The documentation's examples


def test_the_sharded_tables_of_route_md_go_to_one_table() -> None:
    route = RoutePattern(r"mydb.\.*", "mydb.ods_web_order")
    assert route.target(tid("mydb.web_order_1")) == tid("mydb.ods_web_order")
    assert route.target(tid("mydb.web_order_2")) == tid("mydb.ods_web_order")
    assert route.target(tid("mydbx.web_order")) is None
    assert route.target(tid("other.web_order")) is None


def test_the_replace_symbol_of_route_md_keeps_each_table_name() -> None:
    route = RoutePattern(r"source_db.\.*", "sink_db.<>", "<>")
    assert route.target(tid("source_db.orders")) == tid("sink_db.orders")
    assert route.target(tid("source_db.items")) == tid("sink_db.items")
    assert route.target(tid("other_db.orders")) is None


def test_the_capturing_groups_of_route_md_fill_the_sink_table() -> None:
    route = RoutePattern(r"db_(\.*).(\.*)_tbl", "sink_db_$1.sink_table_$2")
    assert route.regex.pattern == r"db_(.*)\.(.*)_tbl"
    assert route.target(tid("db_foo.bar_tbl")) == tid("sink_db_foo.sink_table_bar")
    assert route.target(tid("db_foo.bar")) is None


def test_the_starrocks_quickstart_route_takes_the_shards() -> None:
    route = RoutePattern(r"app_db.order\.*", "ods_db.ods_orders")
    assert route.target(tid("app_db.order01")) == tid("ods_db.ods_orders")
    assert route.target(tid("app_db.orders")) == tid("ods_db.ods_orders")
    assert route.target(tid("app_db.products")) is None


def test_the_soft_delete_transform_of_transform_md_takes_every_table() -> None:
    selector = TableSelector(r"\.*.\.*")
    assert selector.matches(tid("mydb.orders")) and selector.matches(tid("shop.items"))


def test_a_comma_separates_alternatives_in_routes_and_transforms() -> None:
    selector = TableSelector("mydb.orders, mydb.items")
    route = RoutePattern("mydb.orders, mydb.items", "ods.all")
    for table, expected in (("mydb.orders", True), ("mydb.items", True), ("mydb.users", False)):
        assert selector.matches(tid(table)) is expected
        assert route.matches(tid(table)) is expected
    assert route_regex("mydb.orders, mydb.items") == r"mydb\.orders|mydb\.items"


# --------------------------------------------------------------------------------------------------
# Flink CDC's rules


def test_a_transform_pattern_of_one_part_matches_only_ids_of_one_part() -> None:
    # the regular expression of old, mydb\.orders, is one part to Flink CDC: a table named so
    selector = TableSelector(r"mydb\.orders")
    assert selector.parts == (1,)
    assert not selector.matches(tid("mydb.orders"))
    assert selector.matches(TableId(None, None, "mydb.orders"))


def test_an_id_of_one_part_is_matched_by_the_last_part_of_any_transform_pattern() -> None:
    assert TableSelector("mydb.orders").matches(tid("orders"))
    assert TableSelector("a.b.orders").matches(tid("orders"))


def test_a_pattern_matches_the_last_parts_of_a_shorter_id() -> None:
    selector = TableSelector(r"shop.public.\.*")
    assert selector.parts == (3,)
    assert selector.matches(tid("shop.public.orders"))
    assert not selector.matches(tid("other.public.orders"))
    # an id without namespace is matched by the schema and table parts (Flink CDC's Selectors)
    assert selector.matches(tid("public.orders"))
    # and an id with a namespace only by a pattern that has one
    assert not TableSelector("public.orders").matches(tid("shop.public.orders"))


def test_transforms_ignore_case_and_routes_do_not() -> None:
    assert TableSelector("MyDB.Orders").matches(tid("mydb.orders"))
    assert not RoutePattern("MyDB.Orders", "x.y").matches(tid("mydb.orders"))


def test_an_escaped_comma_belongs_to_its_part() -> None:
    selector = TableSelector(r"mydb.orders\,items")
    assert selector.matches(tid("mydb.items")) and selector.matches(tid("mydb.orders"))
    # a part's own commas separate alternatives again (Flink CDC splits twice): no {1,2} in transforms
    assert not TableSelector(r"mydb.(ab){1\,2}").matches(tid("mydb.abab"))


def test_java_group_references_take_the_digits_that_name_a_group() -> None:
    route = RoutePattern(r"db.(\.*)", "ods.t_$12")  # one group: $1 then the text 2
    assert route.target(tid("db.x")) == tid("ods.t_x2")
    named = RoutePattern(r"db.(?<name>\.*)", "ods.${name}_copy")  # Java's named group
    assert named.target(tid("db.x")) == tid("ods.x_copy")
    whole = RoutePattern(r"db.\.*", r"ods.\$0")  # an escaped dollar is a dollar
    assert whole.target(tid("db.x")) == tid("ods.$0")


def test_with_replace_symbol_a_dollar_is_text() -> None:
    route = RoutePattern(r"db.(\.*)", "ods.t_<>", "<>")
    assert route.target(tid("db.x")) == tid("ods.t_x")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("a.b.c.d", "has 4 parts"),
        ("mydb.orders\\", "lone backslash"),
        (r"mydb.(\.*", "not a valid regular expression"),
        ("shop.*", "not a valid regular expression"),
        (" , ", "names no table"),
        ("", "cannot be empty"),
    ],
)
def test_what_is_not_a_transform_pattern_is_said(pattern: str, message: str) -> None:
    with pytest.raises(TablePatternError, match=re.escape(message)):
        TableSelector(pattern)


@pytest.mark.parametrize(
    ("pattern", "sink", "message"),
    [
        (r"db.(\.*)", "ods.$2", "has 1 group(s), $2 names none"),
        (r"db.(\.*)", "ods.${n}", "no group named n"),
        (r"db.\.*", "ods.$x", "is not a group reference"),
        (r"db.(\.*", "ods.x", "not a valid regular expression"),
    ],
)
def test_what_is_not_a_route_is_said(pattern: str, sink: str, message: str) -> None:
    with pytest.raises(TablePatternError, match=re.escape(message)):
        RoutePattern(pattern, sink)


JOB = """
source: {type: kafka, properties.bootstrap.servers: 127.0.0.1:9, topic: shop.mydb.orders}
sink: {type: memory}
"""


def test_the_job_file_refuses_a_bad_pattern_at_its_key() -> None:
    with pytest.raises(ConfigError) as error:
        load_job_text(JOB + "transform:\n  - source-table: a.b.c.d\n", env={})
    assert error.value.key_path == "transform[0].source-table" and "has 4 parts" in str(error.value)
    with pytest.raises(ConfigError) as error:
        load_job_text(JOB + "route:\n  - source-table: db.(\\.*)\n    sink-table: ods.$3\n", env={})
    assert error.value.key_path == "route[0].sink-table" and "$3 names none" in str(error.value)
    with pytest.raises(ConfigError) as error:
        load_job_text(
            JOB + "route:\n  - source-table: db.(\\.*)\n    sink-table: ods_$1.<>\n    replace-symbol: <>\n",
            env={},
        )
    assert error.value.key_path == "route[0].sink-table" and "not both" in str(error.value)


def test_a_transform_pattern_of_one_part_is_named_in_a_warning() -> None:
    _, warnings = read_job_text(JOB + "transform:\n  - source-table: mydb\\.orders\n", env={})
    [warning] = warnings
    assert warning.key_path == "transform[0].source-table" and warning.line == 5
    assert "as in 'mydb.orders'" in str(warning)
    _, warnings = read_job_text(JOB + "transform:\n  - source-table: mydb.orders\n", env={})
    assert warnings == []


def test_routes_and_transforms_that_match_no_table_read_are_named() -> None:
    router = TableRouter([Route(r"mydb.\.*", "ods.all"), Route(r"mydb\.x", "ods.x")], RouteMode.ALL_MATCH)
    assert unmatched_rules(router) == []  # nothing read yet
    assert router.sink_tables(tid("mydb.orders")) == (tid("ods.all"),)
    assert unmatched_rules(router) == [
        r"route[1] (source-table mydb\.x) matches none of the 1 table read so far (mydb.orders)"
    ]


def test_transforms_that_match_no_table_read_are_named() -> None:
    transforms = TableTransforms(
        [
            TransformConfig.model_validate({"source-table": "mydb.orders"}),
            TransformConfig.model_validate({"source-table": r"mydb\.orders"}),
            TransformConfig.model_validate({"source-table": r"mydb.\.*"}),  # shadowed, yet it matches
        ]
    )
    router = TableRouter()
    for table in (tid("mydb.orders"), tid("mydb.items")):
        router.sink_tables(table)
        transforms.rule_for(table)
    assert unmatched_rules(router, transforms) == [
        r"transform[1] (source-table mydb\.orders) matches none of the 2 tables read so far "
        "(mydb.orders, mydb.items)"
    ]


# --------------------------------------------------------------------------------------------------
# Patterns built from parts, against a model of what each part matches

NAMES = st.text(alphabet="abcXYZ_0", min_size=1, max_size=4)
#: A part of a pattern: a name, any name (``\.*``), or a prefix (``ab\.*``).
PARTS = st.one_of(
    NAMES.map(lambda n: ("name", n)),
    st.just(("any", "")),
    NAMES.map(lambda n: ("prefix", n)),
)
PATTERNS = st.lists(st.lists(PARTS, min_size=1, max_size=3), min_size=1, max_size=3)
IDS = st.lists(NAMES, min_size=1, max_size=3).map(lambda parts: TableId.of(*parts))


def written(part: tuple[str, str]) -> str:
    kind, name = part
    return {"name": name, "any": r"\.*", "prefix": name + r"\.*"}[kind]


def part_matches(part: tuple[str, str], name: str, *, fold: bool) -> bool:
    kind, text = part
    if fold:
        text, name = text.lower(), name.lower()
    return kind == "any" or (kind == "name" and name == text) or (kind == "prefix" and name.startswith(text))


def selector_model(alternatives: list[list[tuple[str, str]]], table: TableId) -> bool:
    """Flink CDC's Selectors: the id's parts are matched by the alternative's last parts, and an
    alternative shorter than the id matches none of it."""
    names = table.parts()
    return any(
        len(parts) >= len(names)
        and all(part_matches(p, n, fold=True) for p, n in zip(parts[-len(names) :], names, strict=True))
        for parts in alternatives
    )


def route_model(alternatives: list[list[tuple[str, str]]], table: TableId) -> bool:
    """Flink CDC's TableIdRouter: one expression over the id's text, where \\.* spans any text."""
    pieces = {"name": re.escape, "any": lambda n: ".*", "prefix": lambda n: re.escape(n) + ".*"}
    regex = "|".join(
        re.escape(".").join(pieces[kind](name) for kind, name in parts) for parts in alternatives
    )
    return re.fullmatch(regex, str(table)) is not None


@settings(max_examples=300, deadline=None)
@given(PATTERNS, st.lists(IDS, min_size=1, max_size=8))
def test_a_pattern_built_from_parts_matches_exactly_the_ids_it_should(
    alternatives: list[list[tuple[str, str]]], tables: list[TableId]
) -> None:
    text = ", ".join(".".join(written(p) for p in parts) for parts in alternatives)
    selector, route = TableSelector(text), RoutePattern(text, "ods.t")
    for table in tables:
        assert selector.matches(table) is selector_model(alternatives, table), (text, str(table))
        assert route.matches(table) is route_model(alternatives, table), (text, str(table))
