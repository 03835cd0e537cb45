"""Every example of the source-table compatibility document, with the verdict the document gives.

The code examples are in ``cases/seed/`` as the document writes them; the cases the document only
lists (a watermark interval change, the limitations) are written out here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.check import Verdict, check_compatibility

SEED = Path(__file__).parent / "cases" / "seed"


def seed(name: str) -> str:
    return (SEED / f"{name}.sql").read_text(encoding="utf-8")


def verdict_of(old: str, new: str) -> Verdict:
    return check_compatibility(seed(old), seed(new))


# ----- fully compatible ----------------------------------------------------------------------------


def test_adding_an_unreferenced_field_is_fully_compatible() -> None:
    verdict = verdict_of("original", "add_unused_field")

    assert verdict.compatibility == "fully compatible"
    assert verdict.exit_code == 0
    assert {op.label: op.outcome for op in verdict.operators if op.parent} == {
        "SUM(b)": "kept",
        "MAX(c)": "kept",
    }
    [added] = verdict.columns
    assert (added.table, added.column, added.change, added.used) == ("MyTable", "d", "added", False)
    assert any("d added and not referenced by the query" in note for note in verdict.notes)


def test_changing_the_watermark_interval_is_fully_compatible() -> None:
    old = """
        CREATE TABLE MyTable (a INT, b BIGINT, c VARCHAR, ts TIMESTAMP(3),
          WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'datagen');
        SELECT a, SUM(b), MAX(c) FROM MyTable GROUP BY a;
    """
    new = old.replace("INTERVAL '5' SECOND", "INTERVAL '30' SECOND")

    verdict = check_compatibility(old, new)

    assert verdict.compatibility == "fully compatible"
    assert any("watermark of MyTable changed" in note for note in verdict.notes)


# ----- partially compatible ------------------------------------------------------------------------


def test_redefining_a_field_as_a_computed_column_is_partially_compatible() -> None:
    verdict = verdict_of("original", "computed_column")

    assert verdict.compatibility == "partially compatible"
    assert verdict.exit_code == 1
    sum_b = verdict.operator("query#1/aggregate[MyTable]/SUM(b)")
    max_c = verdict.operator("query#1/aggregate[MyTable]/MAX(c)")
    assert sum_b is not None and sum_b.outcome == "reset"
    assert "treated as deleted" in sum_b.reasons[0]
    assert "starts from zero" in sum_b.reasons[0]
    assert max_c is not None and max_c.outcome == "kept"
    aggregate = verdict.operator("query#1/aggregate[MyTable]")
    assert aggregate is not None and aggregate.outcome == "kept"
    assert any("keep their state: MAX(c)" in reason for reason in verdict.reasons)


# ----- incompatible --------------------------------------------------------------------------------


def test_changing_the_connector_type_is_incompatible() -> None:
    verdict = verdict_of("original", "connector_kafka")

    assert verdict.compatibility == "incompatible"
    assert verdict.exit_code == 2
    source = verdict.operator("source MyTable")
    assert source is not None and source.outcome == "incompatible"
    assert "connector changed from datagen to kafka" in source.reasons[0]


def test_the_other_kafka_options_are_judged_by_themselves() -> None:
    verdict = verdict_of("original", "connector_kafka")

    effects = {option.key: option.effect for option in verdict.options}
    assert effects["topic"] == "does not affect state"
    assert effects["properties.bootstrap.servers"] == "does not affect state"
    # json is not a change-log format: no changelog-mode limitation for the format option.
    assert effects["format"] == "does not affect state"
    assert not verdict.limitations


def test_renaming_the_source_table_is_incompatible() -> None:
    verdict = verdict_of("original", "rename_table")

    assert verdict.compatibility == "incompatible"
    source = verdict.operator("source MyTable2")
    assert source is not None and source.outcome == "incompatible"
    assert "table MyTable was renamed to MyTable2" in source.reasons[0]
    aggregate = verdict.operator("query#1/aggregate[MyTable2]")
    assert aggregate is not None and aggregate.outcome == "incompatible"
    assert "renamed table" in aggregate.reasons[0]


def test_adding_a_field_that_changes_a_join_input_schema_is_incompatible() -> None:
    verdict = verdict_of("join_original", "join_add_field")

    assert verdict.compatibility == "incompatible"
    join = verdict.operator("query#1/join[MyTable1, MyTable2]")
    assert join is not None and join.outcome == "incompatible"
    assert join.reasons == ("right input schema changed: c INT, d BIGINT -> c INT, d BIGINT, e VARCHAR",)
    [added] = verdict.columns
    assert (added.column, added.used) == ("e", True)


def test_the_unchanged_examples_are_fully_compatible_with_themselves() -> None:
    for name in ("original", "join_original", "computed_column"):
        assert check_compatibility(seed(name), seed(name)).compatibility == "fully compatible"


# ----- limitations ---------------------------------------------------------------------------------

_CDC_TABLE = """
    CREATE TABLE orders (id BIGINT, region STRING, amount BIGINT, PRIMARY KEY ({key}) NOT ENFORCED)
    WITH ('connector' = 'mysql-cdc', 'hostname' = 'db', 'table-name' = 'orders'{extra});
    SELECT region, SUM(amount) FROM orders GROUP BY region;
"""


def test_a_primary_key_change_is_flagged() -> None:
    old = _CDC_TABLE.format(key="id", extra="")
    new = _CDC_TABLE.format(key="id, region", extra="")

    verdict = check_compatibility(old, new)

    [limitation] = verdict.limitations
    assert limitation.kind == "primary-key"
    assert "primary key of orders changed from (id) to (id, region)" in limitation.message
    assert "upsert key" in limitation.message


def test_a_chunk_key_column_change_for_mysql_is_flagged() -> None:
    old = _CDC_TABLE.format(key="id", extra=", 'scan.incremental.snapshot.chunk.key-column' = 'id'")
    new = _CDC_TABLE.format(key="id", extra=", 'scan.incremental.snapshot.chunk.key-column' = 'region'")

    verdict = check_compatibility(old, new)

    [limitation] = verdict.limitations
    assert limitation.kind == "sharding"
    assert "snapshot (full-scan) phase" in limitation.message
    source = verdict.operator("source orders")
    assert source is not None and source.outcome == "at-risk"
    assert verdict.compatibility == "partially compatible"


_HOLOGRES = """
    CREATE TABLE h (id BIGINT, v BIGINT, PRIMARY KEY (id) NOT ENFORCED)
    WITH ('connector' = 'hologres', 'tablename' = 'h', 'binlog' = 'true', 'cdcMode' = '{mode}');
    SELECT id, SUM(v) FROM h GROUP BY id;
"""


def test_a_hologres_cdc_mode_change_is_flagged_and_breaks_downstream_state() -> None:
    verdict = check_compatibility(_HOLOGRES.format(mode="true"), _HOLOGRES.format(mode="false"))

    [limitation] = verdict.limitations
    assert limitation.kind == "changelog-mode"
    assert limitation.message.startswith("cdcMode: 'true' -> 'false'")
    aggregate = verdict.operator("query#1/aggregate[h]")
    assert aggregate is not None and aggregate.outcome == "incompatible"
    assert "input changelog changed: updates and deletes -> inserts only" in aggregate.reasons
    assert verdict.compatibility == "incompatible"


def test_switching_mongodb_to_upsert_reading_is_flagged() -> None:
    old = """
        CREATE TABLE m (_id STRING, v BIGINT, PRIMARY KEY (_id) NOT ENFORCED)
        WITH ('connector' = 'mongodb-cdc', 'collection' = 'm', 'scan.full-changelog' = 'true');
        CREATE TABLE out_m (_id STRING, v BIGINT) WITH ('connector' = 'print');
        INSERT INTO out_m SELECT _id, v FROM m;
    """
    new = old.replace("'scan.full-changelog' = 'true'", "'scan.full-changelog' = 'false'")

    verdict = check_compatibility(old, new)

    assert [lim.kind for lim in verdict.limitations] == ["changelog-mode"]
    normalize = verdict.operator("out_m/changelog-normalize[m]")
    assert normalize is not None and normalize.outcome == "incompatible"
    assert verdict.compatibility == "incompatible"


def test_switching_postgres_to_upsert_reading_is_flagged() -> None:
    old = """
        CREATE TABLE p (id INT, v INT, PRIMARY KEY (id) NOT ENFORCED)
        WITH ('connector' = 'postgres-cdc', 'table-name' = 'p', 'changelog-mode' = 'all');
        CREATE TABLE out_p (id INT, v INT) WITH ('connector' = 'print');
        INSERT INTO out_p SELECT id, v FROM p;
    """
    new = old.replace("'changelog-mode' = 'all'", "'changelog-mode' = 'upsert'")

    verdict = check_compatibility(old, new)

    [limitation] = verdict.limitations
    assert limitation.kind == "changelog-mode"
    assert "upserts and deletes" in limitation.message
    assert verdict.new_stateless.stateless is False
    assert verdict.old_stateless.stateless is True


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("original", "add_unused_field", "fully compatible"),
        ("original", "computed_column", "partially compatible"),
        ("original", "connector_kafka", "incompatible"),
        ("original", "rename_table", "incompatible"),
        ("join_original", "join_add_field", "incompatible"),
    ],
)
def test_seed_verdicts(old: str, new: str, expected: str) -> None:
    assert verdict_of(old, new).compatibility == expected
