"""A function transforms do not evaluate is refused by ``ferry validate`` (exit 2) at its line and
column, in the job file's spelling."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ferry.cli.main import main
from ferry.config import ConfigError
from ferry.config.loader import load_job_text

HEAD = """\
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9092
  topic: orders
sink:
  type: memory
transform:
  - source-table: db.orders
"""


def refusal(body: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_job_text(HEAD + body, file="job.yaml", env={})
    return info.value


@pytest.mark.parametrize(
    ("body", "line", "column", "key", "words"),
    [
        # sqlglot reads LOCATE, POSITION and INSTR alike; the job's own spelling is named
        (
            "    projection: \\*, LOCATE('a', name, 2) AS p, SOUNDEX(name) AS s\n",
            9,
            48,
            "projection",
            "SOUNDEX",
        ),
        ("    projection: \\*, soundex(name) AS s\n", 9, 21, "projection", "soundex is not a function"),
        ('    filter: "id > 1 AND JSON_STRING(name) IS NULL"\n', 9, 25, "filter", "JSON_STRING"),
        ("    filter: id > 1 AND Levenshtein(a, b) < 3\n", 9, 24, "filter", "Levenshtein"),
        ("    projection: |\n      id,\n      NVL2(a, b, c) AS x\n", 11, 7, "projection", "NVL2"),
    ],
)
def test_an_unknown_function_is_named_as_written_at_its_place(
    body: str, line: int, column: int, key: str, words: str
) -> None:
    e = refusal(body)
    assert (e.line, e.column, e.key_path) == (line, column, f"transform[0].{key}")
    assert words in str(e)
    assert "STR_POSITION" not in str(e)


def test_the_functions_flink_cdc_documents_validate() -> None:
    body = (
        "    projection: \\*, DATE_FORMAT(ts, 'yyyy') AS y, LOCATE('a', name) AS p, "
        "TIMESTAMPDIFF(DAY, ts, NOW()) AS age, REGEXP_REPLACE(name, 'a', 'b') AS r\n"
        "    filter: CONCAT_WS('-', name, 'x') <> '' AND arr[1] IS NOT NULL\n"
    )
    job = load_job_text(HEAD + body, file="job.yaml", env={})
    assert job.transform[0].projection is not None


def test_ferry_validate_exits_2_with_the_position(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + "    projection: \\*, SOUNDEX(name) AS s\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert f"{path}:9:21: transform[0].projection: SOUNDEX is not a function" in result.output


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("    projection: \\*, LOCATE('a', name, 1, 2) AS p\n", "LOCATE takes 2 to 3 arguments, not 4"),
        ("    projection: \\*, DATE_FORMAT(ts, 'yyyy-qq') AS d\n", "unknown letter 'q'"),
        ("    projection: \\*, TIMESTAMPADD(FORTNIGHT, 1, ts) AS d\n", "FORTNIGHT is not a time unit"),
        ("    filter: DATE_FORMAT(ts) = 'x'\n", "DATE_FORMAT takes 2 arguments"),
    ],
)
def test_what_a_function_cannot_take_is_refused_before_a_table_is_seen(body: str, words: str) -> None:
    e = refusal(body)
    assert e.key_path.startswith("transform[0].") and words in str(e)


@pytest.mark.parametrize(
    ("body", "line", "key", "words"),
    [
        ("    projection: id, SUM(price) AS s\n", 9, "projection", "SUM(price) is an aggregate"),
        ("    projection: id\n    filter: price > AVG(price)\n", 10, "filter", "AVG(price) is an aggregate"),
        ("    projection: id, price * 2\n", 9, "projection", "needs a name"),
    ],
)
def test_ferry_validate_refuses_what_keeps_state_at_its_key_with_exit_2(
    tmp_path: Path, body: str, line: int, key: str, words: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + body)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:{line}:5: transform[0].{key}: " in result.output and words in result.output


def test_ferry_run_refuses_it_the_same_way_before_reaching_for_the_brokers(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + "    projection: id, COUNT(*) AS n\n")
    result = CliRunner().invoke(main, ["run", str(path), "--no-worker", "--startup-timeout", "1"])
    assert result.exit_code == 2, result.output
    assert (
        f"{path}:9:5: transform[0].projection: " in result.output
        and "COUNT(*) is an aggregate" in result.output
    )
