"""``ferry check OLD NEW``: text and JSON reports, exit codes 0 / 1 / 2, and 3 for unreadable input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ferry.check.cli import check

SEED = Path(__file__).parent / "cases" / "seed"


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(check, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("new", "code", "headline"),
    [
        ("add_unused_field", 0, "FULLY COMPATIBLE"),
        ("computed_column", 1, "PARTIALLY COMPATIBLE"),
        ("connector_kafka", 2, "INCOMPATIBLE"),
    ],
)
def test_exit_code_and_headline_follow_the_verdict(new: str, code: int, headline: str) -> None:
    exit_code, out, _ = run(SEED / "original.sql", SEED / f"{new}.sql")

    assert exit_code == code
    assert out.splitlines()[0].startswith(headline)


def test_the_text_report_names_the_operators_that_lose_and_keep_state() -> None:
    _, out, _ = run(SEED / "original.sql", SEED / "computed_column.sql")

    lines = out.splitlines()
    assert any(line.split() == ["keeps", "state", "MAX(c)"] for line in lines)
    assert any(line.split() == ["RESETS", "SUM(b)"] for line in lines)
    assert "  ~ MyTable: b BIGINT -> b AS d + 1 (read by the query)" in lines
    assert "State: old job stateful: aggregate" in lines


def test_json_output() -> None:
    exit_code, out, _ = run(SEED / "join_original.sql", SEED / "join_add_field.sql", "--output", "json")

    report = json.loads(out)
    assert exit_code == 2
    assert report["compatibility"] == "incompatible"
    assert report["exit_code"] == 2
    join = next(op for op in report["operators"] if op["kind"] == "join")
    assert join["outcome"] == "incompatible"
    assert join["id"] == "query#1/join[MyTable1, MyTable2]"
    assert report["columns"] == [
        {
            "table": "MyTable2",
            "column": "e",
            "change": "added",
            "old": None,
            "new": "e VARCHAR",
            "used_by_query": True,
        }
    ]
    assert report["stateless"]["new"]["stateless"] is False
    assert report["stateless"]["new"]["stateful_operators"][0]["kind"] == "join"


def test_directories_of_sql_files(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for directory, query in ((old, "original"), (new, "computed_column")):
        directory.mkdir()
        text = (SEED / f"{query}.sql").read_text(encoding="utf-8")
        ddl, _, select = text.rpartition(";")
        (directory / "01_tables.sql").write_text(ddl + ";\n", encoding="utf-8")
        (directory / "02_query.sql").write_text(select.strip() or "SELECT 1", encoding="utf-8")
        shutil.copy(SEED / f"{query}.sql", directory / "00_all.sql.txt")

    exit_code, out, _ = run(old, new)

    assert exit_code == 1, out
    assert "RESETS" in out


def test_pipeline_yaml_files(tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(
        "source:\n  type: mysql-cdc\n  scan.incremental.snapshot.chunk.key-column: id\n"
        "sink:\n  type: print\n"
        "transform:\n  - source-table: db.orders\n    projection: id, amount\n    filter: amount > 0\n",
        encoding="utf-8",
    )
    new = tmp_path / "new.yaml"
    new.write_text(
        old.read_text(encoding="utf-8").replace("key-column: id", "key-column: amount"), encoding="utf-8"
    )

    exit_code, out, _ = run(old, new, "-o", "json")

    report = json.loads(out)
    assert exit_code == 1
    assert [lim["kind"] for lim in report["limitations"]] == ["sharding"]
    assert report["stateless"]["old"]["stateless"] is True


def test_a_parse_error_exits_3_with_file_line_and_column(tmp_path: Path) -> None:
    broken = tmp_path / "broken.sql"
    broken.write_text("CREATE TABLE t (a INT) WITH ('connector' = 'datagen');\nSELECT a FROM WHERE a > 1;\n")

    exit_code, out, err = run(SEED / "original.sql", broken)

    assert exit_code == 3
    assert out == ""
    assert err.startswith(f"error: {broken}:2:15: syntax error near 'WHERE'")


def test_an_unknown_column_exits_3_with_its_position(tmp_path: Path) -> None:
    broken = tmp_path / "unknown.sql"
    broken.write_text("CREATE TABLE t (a INT) WITH ('connector' = 'datagen');\nSELECT a,\n  zz FROM t;\n")

    exit_code, _, err = run(broken, broken)

    assert exit_code == 3
    assert f"{broken}:3:3: column zz not found" in err


def test_a_missing_file_exits_3(tmp_path: Path) -> None:
    exit_code, _, err = run(SEED / "original.sql", tmp_path / "nope.sql")

    assert exit_code == 3
    assert "is not a file or a directory" in err
