"""The classifier's rules, one case each: schema changes against the whole query, option changes by
themselves, the three verdicts and the limitations."""

from __future__ import annotations

from ferry.check import Verdict, check_compatibility

ORDERS = """
CREATE TABLE orders (
  id BIGINT,
  customer STRING,
  amount BIGINT,
  price DOUBLE,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE customers (
  cid STRING,
  name STRING,
  tier INT
) WITH ('connector' = 'kafka', 'topic' = 'customers', 'format' = 'json');
"""


def check(old_query: str, new_query: str, old_tables: str = ORDERS, new_tables: str | None = None) -> Verdict:
    return check_compatibility(old_tables + old_query, (new_tables or old_tables) + new_query)


def outcomes(verdict: Verdict) -> dict[str, str]:
    return {op.label: op.outcome for op in verdict.operators if op.parent}


# ----- aggregate calls -----------------------------------------------------------------------------


def test_an_added_aggregate_call_starts_from_zero_and_the_others_keep_their_state() -> None:
    verdict = check(
        "SELECT customer, SUM(amount) FROM orders GROUP BY customer;",
        "SELECT customer, SUM(amount), COUNT(*) FROM orders GROUP BY customer;",
    )

    assert verdict.compatibility == "partially compatible"
    assert outcomes(verdict) == {"SUM(amount)": "kept", "COUNT(*)": "added"}


def test_a_removed_aggregate_call_discards_its_state_and_stays_fully_compatible() -> None:
    verdict = check(
        "SELECT customer, SUM(amount), MAX(price) FROM orders GROUP BY customer;",
        "SELECT customer, SUM(amount) FROM orders GROUP BY customer;",
    )

    assert verdict.compatibility == "fully compatible"
    assert outcomes(verdict) == {"SUM(amount)": "kept", "MAX(price)": "removed"}


def test_a_modified_aggregate_call_is_a_removal_plus_an_addition() -> None:
    verdict = check(
        "SELECT customer, SUM(amount), MAX(price) FROM orders GROUP BY customer;",
        "SELECT customer, SUM(amount), MIN(price) FROM orders GROUP BY customer;",
    )

    assert verdict.compatibility == "partially compatible"
    assert outcomes(verdict) == {"SUM(amount)": "kept", "MIN(price)": "added", "MAX(price)": "removed"}


def test_renaming_an_alias_does_not_touch_state() -> None:
    verdict = check(
        "SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;",
        "SELECT c, SUM(x) AS revenue FROM (SELECT customer AS c, amount AS x FROM orders) GROUP BY c;",
    )

    assert verdict.compatibility == "fully compatible"
    [call] = [op for op in verdict.operators if op.parent]
    assert call.outcome == "kept"
    assert "computes the same as SUM(amount)" in call.reasons[0]


def test_a_type_change_of_an_aggregated_column_resets_that_call_only() -> None:
    widened = ORDERS.replace("amount BIGINT", "amount DECIMAL(20, 2)")
    verdict = check(
        "SELECT customer, SUM(amount), MAX(price) FROM orders GROUP BY customer;",
        "SELECT customer, SUM(amount), MAX(price) FROM orders GROUP BY customer;",
        new_tables=widened,
    )

    assert verdict.compatibility == "partially compatible"
    assert outcomes(verdict) == {"SUM(amount)": "reset", "MAX(price)": "kept"}
    [change] = verdict.columns
    assert (change.change, change.old, change.new) == ("changed", "amount BIGINT", "amount DECIMAL(20, 2)")


# ----- fixed parts of stateful operators -----------------------------------------------------------


def test_changing_the_group_keys_is_incompatible() -> None:
    verdict = check(
        "SELECT customer, SUM(amount) FROM orders GROUP BY customer;",
        "SELECT customer, id, SUM(amount) FROM orders GROUP BY customer, id;",
    )

    assert verdict.compatibility == "incompatible"
    aggregate = verdict.operator("query#1/aggregate[orders]")
    assert aggregate is not None
    assert aggregate.reasons == ("group keys changed: customer -> customer, id",)
    assert outcomes(verdict) == {"SUM(amount)": "incompatible"}


def test_a_type_change_of_a_group_key_is_incompatible() -> None:
    verdict = check(
        "SELECT customer, SUM(amount) FROM orders GROUP BY customer;",
        "SELECT customer, SUM(amount) FROM orders GROUP BY customer;",
        new_tables=ORDERS.replace("customer STRING", "customer VARCHAR(64)"),
    )

    assert verdict.compatibility == "incompatible"


def test_changing_a_distinct_aggregate_is_incompatible() -> None:
    verdict = check(
        "SELECT customer, COUNT(DISTINCT id) FROM orders GROUP BY customer;",
        "SELECT customer, COUNT(DISTINCT price) FROM orders GROUP BY customer;",
    )

    assert verdict.compatibility == "incompatible"
    aggregate = verdict.operator("query#1/aggregate[orders]")
    assert aggregate is not None
    assert any(reason.startswith("distinct aggregates changed") for reason in aggregate.reasons)


def test_a_window_size_change_is_incompatible_but_the_same_size_in_other_units_is_not() -> None:
    query = (
        "SELECT window_start, customer, SUM(amount) FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), {size})) "
        "GROUP BY window_start, window_end, customer;"
    )
    hour = query.format(size="INTERVAL '1' HOUR")

    bigger = check(hour, query.format(size="INTERVAL '2' HOUR"))
    same = check(hour, query.format(size="INTERVAL '60' MINUTES"))

    assert bigger.compatibility == "incompatible"
    aggregate = bigger.operator("query#1/aggregate[window[orders]]")
    assert aggregate is not None and aggregate.reasons[0].startswith(
        "window changed: TUMBLE(ts, INTERVAL '1' HOUR)"
    )
    assert same.compatibility == "fully compatible"


def test_changing_the_window_kind_of_a_group_window_is_incompatible() -> None:
    verdict = check(
        "SELECT customer, COUNT(*) FROM orders GROUP BY TUMBLE(ts, INTERVAL '1' HOUR), customer;",
        "SELECT customer, COUNT(*) FROM orders "
        "GROUP BY HOP(ts, INTERVAL '5' MINUTE, INTERVAL '1' HOUR), customer;",
    )

    assert verdict.compatibility == "incompatible"


def test_a_filter_change_in_front_of_an_aggregate_is_incompatible_unless_filters_are_ignored() -> None:
    old = "SELECT customer, SUM(amount) FROM orders WHERE amount > 0 GROUP BY customer;"
    new = "SELECT customer, SUM(amount) FROM orders WHERE amount > 10 GROUP BY customer;"

    strict = check(old, new)
    relaxed = check(old, "SET 'table.optimizer.state-compatibility.ignore-filter' = 'true';\n" + new)

    assert strict.compatibility == "incompatible"
    assert relaxed.compatibility == "fully compatible"
    assert any("ignore-filter" in note for note in relaxed.notes)


# ----- joins: the input schema is what the join keeps --------------------------------------------


def test_a_column_added_to_a_join_input_but_not_used_is_fully_compatible() -> None:
    query = "SELECT o.id, c.name FROM orders AS o JOIN customers AS c ON o.customer = c.cid;"
    verdict = check(query, query, new_tables=ORDERS.replace("tier INT", "tier INT, email STRING"))

    assert verdict.compatibility == "fully compatible"
    [added] = verdict.columns
    assert (added.column, added.used) == ("email", False)


def test_a_column_newly_selected_from_a_join_input_is_incompatible() -> None:
    verdict = check(
        "SELECT o.id, c.name FROM orders AS o JOIN customers AS c ON o.customer = c.cid;",
        "SELECT o.id, c.name, c.tier FROM orders AS o JOIN customers AS c ON o.customer = c.cid;",
    )

    join = verdict.operator("query#1/join[orders, customers]")
    assert join is not None and join.outcome == "incompatible"
    assert join.reasons == (
        "right input schema changed: cid STRING, name STRING -> cid STRING, name STRING, tier INT",
    )


def test_changing_the_join_condition_or_type_is_incompatible() -> None:
    old = "SELECT o.id, c.name FROM orders AS o JOIN customers AS c ON o.customer = c.cid;"

    condition = check(old, "SELECT o.id, c.name FROM orders AS o JOIN customers AS c ON o.customer = c.name;")
    kind = check(old, "SELECT o.id, c.name FROM orders AS o LEFT JOIN customers AS c ON o.customer = c.cid;")

    assert condition.compatibility == "incompatible"
    assert kind.compatibility == "incompatible"
    join = kind.operator("query#1/join[orders, customers]")
    assert join is not None and "join type changed: INNER JOIN -> LEFT JOIN" in join.reasons


# ----- statements ----------------------------------------------------------------------------------

SINKS = """
CREATE TABLE totals (customer STRING, total BIGINT) WITH ('connector' = 'print');
CREATE TABLE copy (id BIGINT, amount BIGINT) WITH ('connector' = 'print');
"""


def test_a_new_stateful_statement_is_incompatible_and_a_new_stateless_one_is_not() -> None:
    aggregate = "INSERT INTO totals SELECT customer, SUM(amount) FROM orders GROUP BY customer;\n"
    copy = "INSERT INTO copy SELECT id, amount FROM orders WHERE amount > 0;\n"

    stateless_added = check(aggregate, aggregate + copy, old_tables=ORDERS + SINKS)
    stateful_added = check(copy, copy + aggregate, old_tables=ORDERS + SINKS)

    assert stateless_added.compatibility == "fully compatible"
    assert stateful_added.compatibility == "incompatible"
    aggregate_op = stateful_added.operator("totals/aggregate[orders]")
    assert aggregate_op is not None
    assert "new statement totals adds state" in aggregate_op.reasons[0]


def test_deleting_a_statement_discards_its_state_and_stays_fully_compatible() -> None:
    aggregate = "INSERT INTO totals SELECT customer, SUM(amount) FROM orders GROUP BY customer;\n"
    copy = "INSERT INTO copy SELECT id, amount FROM orders;\n"

    verdict = check(aggregate + copy, copy, old_tables=ORDERS + SINKS)

    assert verdict.compatibility == "fully compatible"
    removed = verdict.operator("totals/aggregate[orders]")
    assert removed is not None and removed.outcome == "removed"


# ----- OVER, pattern matching, ranking -------------------------------------------------------------


def test_over_calls_are_flexible_but_the_over_input_schema_is_not() -> None:
    old = "SELECT id, SUM(amount) OVER w FROM orders WINDOW w AS (PARTITION BY customer ORDER BY ts);"
    added_call = (
        "SELECT id, SUM(amount) OVER w, MAX(amount) OVER w FROM orders "
        "WINDOW w AS (PARTITION BY customer ORDER BY ts);"
    )
    more_input = (
        "SELECT id, price, SUM(amount) OVER w FROM orders WINDOW w AS (PARTITION BY customer ORDER BY ts);"
    )

    assert check(old, added_call).compatibility == "partially compatible"
    verdict = check(old, more_input)
    assert verdict.compatibility == "incompatible"
    over = verdict.operator("query#1/over[orders]")
    assert over is not None and over.reasons[0].startswith("input schema changed")


def test_changing_a_lag_offset_resets_that_call() -> None:
    old = "SELECT id, LAG(amount, 1) OVER (PARTITION BY customer ORDER BY ts) FROM orders;"
    new = "SELECT id, LAG(amount, 2) OVER (PARTITION BY customer ORDER BY ts) FROM orders;"

    verdict = check(old, new)

    assert verdict.compatibility == "partially compatible"
    assert outcomes(verdict) == {"LAG(amount, 2)": "added", "LAG(amount, 1)": "removed"}


def test_changing_a_match_recognize_pattern_is_incompatible() -> None:
    query = (
        "SELECT * FROM orders MATCH_RECOGNIZE (PARTITION BY customer ORDER BY ts "
        "MEASURES A.amount AS first_amount ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
        "PATTERN ({pattern}) DEFINE B AS B.amount > A.amount) AS T;"
    )

    verdict = check(query.format(pattern="A B+"), query.format(pattern="A B{2,}"))

    assert verdict.compatibility == "incompatible"
    operator = verdict.operator("query#1/match-recognize[orders]")
    assert operator is not None and operator.reasons == ("pattern changed: A B+ -> A B{2,}",)


# ----- options, settings and keys ------------------------------------------------------------------


def test_an_ordinary_option_change_is_judged_by_itself_and_is_fully_compatible() -> None:
    query = "SELECT customer, SUM(amount) FROM orders GROUP BY customer;"
    new_tables = ORDERS.replace(
        "'topic' = 'orders', 'format' = 'json'",
        "'topic' = 'orders', 'format' = 'json', 'properties.group.id' = 'g2', "
        "'scan.startup.mode' = 'earliest-offset'",
    )

    verdict = check(query, query, new_tables=new_tables)

    assert verdict.compatibility == "fully compatible"
    effects = {option.key: option.effect for option in verdict.options}
    assert effects["properties.group.id"] == "does not affect state"
    assert effects["scan.startup.mode"].startswith("ignored when the job restarts from state")


def test_an_options_hint_change_is_judged_like_a_with_option() -> None:
    old = "SELECT customer, SUM(amount) FROM orders /*+ OPTIONS('format' = 'json') */ GROUP BY customer;"
    new = (
        "SELECT customer, SUM(amount) FROM orders /*+ OPTIONS('format' = 'debezium-json') */ "
        "GROUP BY customer;"
    )

    verdict = check(old, new)

    [limitation] = verdict.limitations
    assert limitation.kind == "changelog-mode"
    aggregate = verdict.operator("query#1/aggregate[orders]")
    assert aggregate is not None and aggregate.outcome == "incompatible"


def test_a_changelog_change_without_state_downstream_is_only_flagged() -> None:
    tables = ORDERS + SINKS
    query = "INSERT INTO copy SELECT id, amount FROM orders;"

    verdict = check(query, query, old_tables=tables, new_tables=tables.replace("'json'", "'canal-json'", 1))

    assert verdict.compatibility == "fully compatible"
    assert [lim.kind for lim in verdict.limitations] == ["changelog-mode"]


def test_an_upsert_source_key_change_breaks_its_changelog_normalize() -> None:
    table = """
        CREATE TABLE ev (k STRING, region STRING, v INT, PRIMARY KEY ({key}) NOT ENFORCED)
        WITH ('connector' = 'upsert-kafka', 'topic' = 'ev', 'key.format' = 'json', 'value.format' = 'json');
        CREATE TABLE out_ev (k STRING, v INT) WITH ('connector' = 'print');
    """
    query = "INSERT INTO out_ev SELECT k, v FROM ev;"

    verdict = check(query, query, old_tables=table.format(key="k"), new_tables=table.format(key="k, region"))

    assert verdict.compatibility == "incompatible"
    normalize = verdict.operator("out_ev/changelog-normalize[ev]")
    assert normalize is not None and normalize.reasons[0] == "primary key changed: k -> k, region"
    assert [lim.kind for lim in verdict.limitations] == ["primary-key"]


def test_a_sink_key_change_moves_the_upsert_materializer() -> None:
    tables = """
        CREATE TABLE users (id BIGINT, name STRING, score INT, PRIMARY KEY (id) NOT ENFORCED)
        WITH ('connector' = 'mysql-cdc', 'table-name' = 'users');
        CREATE TABLE by_name (name STRING, score INT, PRIMARY KEY ({key}) NOT ENFORCED)
        WITH ('connector' = 'jdbc');
    """
    query = "INSERT INTO by_name SELECT name, score FROM users;"

    verdict = check(
        query, query, old_tables=tables.format(key="name"), new_tables=tables.format(key="name, score")
    )

    materializer = verdict.operator("by_name/upsert-materializer")
    assert materializer is not None and materializer.outcome == "incompatible"
    assert materializer.reasons == ("sink primary key changed: name -> name, score",)
    assert any("primary key of sink by_name" in lim.message for lim in verdict.limitations)


def test_switching_state_ttl_on_is_incompatible() -> None:
    query = "SELECT customer, SUM(amount) FROM orders GROUP BY customer;"

    verdict = check(query, "SET 'table.exec.state.ttl' = '1 d';\n" + query)

    assert verdict.compatibility == "incompatible"
    aggregate = verdict.operator("query#1/aggregate[orders]")
    assert aggregate is not None and aggregate.reasons[0].startswith("state TTL changed")


def test_early_fire_settings_are_part_of_a_window_aggregate() -> None:
    query = "SELECT customer, COUNT(*) FROM orders GROUP BY TUMBLE(ts, INTERVAL '1' HOUR), customer;"
    early = (
        "SET 'table.exec.emit.early-fire.enabled' = 'true';\n"
        "SET 'table.exec.emit.early-fire.delay' = '1 min';\n"
    )

    verdict = check(query, early + query)

    assert verdict.compatibility == "incompatible"


def test_dropping_an_unused_column_and_changing_the_watermark_is_fully_compatible() -> None:
    query = "SELECT customer, SUM(amount) FROM orders GROUP BY customer;"
    new_tables = ORDERS.replace("  price DOUBLE,\n", "").replace("INTERVAL '5' SECOND", "INTERVAL '1' MINUTE")

    verdict = check(query, query, new_tables=new_tables)

    assert verdict.compatibility == "fully compatible"
    [removed] = verdict.columns
    assert (removed.column, removed.change, removed.used) == ("price", "removed", False)


def test_a_table_no_longer_read_by_a_surviving_statement_is_incompatible() -> None:
    old = "SELECT o.id FROM orders AS o UNION ALL SELECT c.cid FROM customers AS c;"
    new = "SELECT o.id FROM orders AS o;"

    verdict = check(old, new)

    source = verdict.operator("source customers")
    assert source is not None and source.outcome == "incompatible"
    assert "no longer read by query#1" in source.reasons[0]
