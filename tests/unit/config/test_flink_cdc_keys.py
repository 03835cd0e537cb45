"""Each key Flink CDC's documentation gives ``pipeline``, ``route`` and ``transform``
(``docs/content/docs/core-concept/{data-pipeline,route,transform}.md`` of apache/flink-cdc at
commit 23fb108e9bea7f689230fa188e5f80c6eef0dbc3) does in ferry what the table of docs/flink-cdc.md says."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from ferry.config import ConfigError
from ferry.config.job import JobConfig
from ferry.config.loader import read_job_text

PAGE = Path(__file__).resolve().parents[3] / "docs" / "flink-cdc.md"
BASE: dict[str, Any] = {
    "source": {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:9092", "topic": "t"},
    "sink": {"type": "memory"},
}
UDF = {"name": "py_double", "python-code": "def eval(x: int) -> int:\n    return x * 2\n"}

#: (section, key, a value from Flink CDC's docs, what ferry does: same, ignored or refused)
KEYS: list[tuple[str, str, Any, str]] = [
    ("pipeline", "name", "MySQL to Doris Pipeline", "same"),
    ("pipeline", "parallelism", 2, "same"),
    ("pipeline", "local-time-zone", "Asia/Shanghai", "same"),
    ("pipeline", "execution.runtime-mode", "BATCH", "same"),
    ("pipeline", "route-mode", "FIRST_MATCH", "same"),
    ("pipeline", "schema.change.behavior", "try_evolve", "same"),
    ("pipeline", "schema.operator.uid", "schema-operator", "ignored"),
    ("pipeline", "schema-operator.rpc-timeout", "1min", "same"),
    ("pipeline", "operator.uid.prefix", "cdc-", "ignored"),
    ("pipeline", "sink.partitioning.strategy", "TABLE_ID", "ignored"),
    ("pipeline", "transform.decimal.precision.mode", "UP_TO_19", "same"),
    ("pipeline", "user-defined-function", [UDF], "same"),
    ("pipeline", "model", [{"model-name": "CHAT", "class-name": "OpenAIChatModel"}], "refused"),
    ("route", "source-table", r"app_db.\.*", "same"),
    ("route", "sink-table", "ods_db.ods_<>", "same"),
    ("route", "replace-symbol", "<>", "same"),
    ("route", "description", "sync all tables", "same"),
    ("transform", "source-table", r"app_db.orders", "same"),
    ("transform", "projection", "\\*, py_double(id) AS id2, DATE_FORMAT(NOW(), 'yyyy') AS y", "same"),
    ("transform", "filter", "id > 10 AND __data_event_type__ <> '-D'", "same"),
    ("transform", "primary-keys", "id", "same"),
    ("transform", "partition-keys", "id", "same"),
    ("transform", "table-options", "comment=web order", "same"),
    ("transform", "table-options.delimiter", ";", "same"),
    ("transform", "converter-after-transform", "SOFT_DELETE", "same"),
    ("transform", "description", "project fields", "same"),
]


#: What a key's value does, where the job shows it.
EFFECTS: dict[tuple[str, str], Callable[[JobConfig], bool]] = {
    ("pipeline", "name"): lambda job: job.pipeline.name == "MySQL to Doris Pipeline",
    ("pipeline", "parallelism"): lambda job: job.pipeline.parallelism == 2,
    ("pipeline", "local-time-zone"): lambda job: job.pipeline.time_zone == ZoneInfo("Asia/Shanghai"),
    ("pipeline", "execution.runtime-mode"): lambda job: job.source.scan_bounded_mode.value == "latest-offset",
    ("pipeline", "route-mode"): lambda job: job.pipeline.route_mode.value == "FIRST_MATCH",
    ("pipeline", "schema.change.behavior"): lambda job: (
        job.pipeline.schema_change_behavior.value == "TRY_EVOLVE"
    ),
    ("pipeline", "schema-operator.rpc-timeout"): lambda job: (
        job.pipeline.schema_operator_rpc_timeout == timedelta(minutes=1)
    ),
    ("pipeline", "transform.decimal.precision.mode"): lambda job: job.pipeline.decimal_precision == 19,
    ("pipeline", "user-defined-function"): lambda job: list(job.user_functions()) == ["py_double"],
    ("transform", "table-options"): lambda job: job.transform[0].table_option_map == {"comment": "web order"},
    ("transform", "converter-after-transform"): lambda job: (
        job.transform[0].converter_after_transform == "SOFT_DELETE"
    ),
}


def job_with(section: str, key: str, value: Any) -> str:
    job: dict[str, Any] = {**BASE, "pipeline": {"user-defined-function": [UDF]}}
    if section == "pipeline":
        job["pipeline"] = {**job["pipeline"], key: value}
    elif section == "route":
        route = {"source-table": r"app_db.\.*", "sink-table": "ods_db.ods_<>", "replace-symbol": "<>"}
        job["route"] = [{**route, key: value}]
    else:
        job["transform"] = [{"source-table": r"app_db.orders", key: value}]
    return yaml.safe_dump(job, sort_keys=False)


@pytest.mark.parametrize(("section", "key", "value", "status"), KEYS, ids=lambda v: str(v)[:30])
def test_a_flink_cdc_key_does_what_the_readme_says(section: str, key: str, value: Any, status: str) -> None:
    text = job_with(section, key, value)
    if status == "refused":
        with pytest.raises(ConfigError) as e:
            read_job_text(text, file="job.yaml")
        assert e.value.key_path == f"{section}.{key}"
        return
    job, warnings = read_job_text(text, file="job.yaml")
    warned = [w.key_path for w in warnings]
    assert warned == ([f"{section}.{key}"] if status == "ignored" else [])
    effect = EFFECTS.get((section, key))
    if effect is not None:
        assert effect(job)


def test_the_docs_table_names_every_key() -> None:
    text = PAGE.read_text()
    block = text[text.index("## Flink CDC's keys of `pipeline`") :]
    block = block.split("\n## ")[0]
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    for section, key, _, _ in KEYS:
        assert any(
            row.startswith(f"| `{section}` |") and re.search(rf"`{re.escape(key)}`", row) for row in rows
        ), (section, key)
