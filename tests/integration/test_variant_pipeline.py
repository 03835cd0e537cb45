"""VARIANT columns made by PARSE_JSON and TRY_PARSE_JSON, from a real broker through ``ferry run``:
Paimon stores them as its VARIANT type (read back through pypaimon's variant decoding), Iceberg as
their JSON text; a row PARSE_JSON cannot read goes to the dead-letter topic with the reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import create_topic, produce
from tests.integration.helpers import read_all

pytestmark = pytest.mark.integration

TRANSFORM = r"""
transform:
  - source-table: shop.events
    projection: >-
      id, PARSE_JSON(doc) AS body, TRY_PARSE_JSON(doc)['tags'][1] AS first_tag,
      TRY_PARSE_JSON(doc, TRUE)['n'] AS n
"""

DOCS = {
    1: '{"tags": ["red", "big"], "n": 1.50, "who": {"name": "Ada"}}',
    2: '{"n": null, "n": 7}',  # duplicate key: PARSE_JSON refuses it, the row goes to the dead letter
    3: "[1, 2, 3]",
    4: "",  # empty: NULL
    5: '{"tags": [], "n": 12345678901234567890123}',
}


def _run(kafka_bootstrap: str, tmp_path: Path, group_id: str, sink_type: str) -> Path:
    server = f"s{group_id[-8:]}"
    events = dbz.DebeziumTable(
        server,
        "shop",
        "events",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("doc", dbz.STRING)],
    )
    create_topic(kafka_bootstrap, events.topic)
    records = [events.insert({"id": i, "doc": doc}) for i, doc in DOCS.items()]
    records.append(events.delete({"id": 3, "doc": DOCS[3]}))
    produce(kafka_bootstrap, events.topic, [v for _, v in records], keys=[k for k, _ in records])
    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {events.topic}
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: {sink_type}
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: {group_id}
  state.url: sqlite:///{tmp_path}/state.db
  checkpoint.interval: 100ms
{TRANSFORM}""")
    for command in ("validate", "run"):
        result = subprocess.run(
            [sys.executable, "-m", "ferry.cli.main", command, str(job)],
            check=False,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            env=dict(os.environ),
        )
        assert result.returncode == 0, result.stderr[-3000:]
    [bad] = read_all(kafka_bootstrap, f"{group_id}.dlq", 1)
    headers = dict(bad.headers() or [])
    assert "Failed to parse json string" in headers["ferry.reason"].decode()
    assert "duplicate key 'n'" in headers["ferry.reason"].decode()
    return warehouse


def _expected(rows: list[dict[str, Any]]) -> None:
    by_id = {r["id"]: r for r in rows}
    assert sorted(by_id) == [1, 4, 5]
    assert by_id[1]["body"] == {"n": 1.5, "tags": ["red", "big"], "who": {"name": "Ada"}}
    assert (by_id[1]["first_tag"], by_id[1]["n"]) == ("red", 1.5)
    assert by_id[4] == {"id": 4, "body": None, "first_tag": None, "n": None}
    assert (by_id[5]["first_tag"], by_id[5]["n"]) == (None, 12345678901234567890123)


def test_variants_into_paimon_are_paimons_variant_type(
    kafka_bootstrap: str, tmp_path: Path, group_id: str
) -> None:
    from pypaimon import CatalogFactory
    from pypaimon.data.generic_variant import GenericVariant

    warehouse = _run(kafka_bootstrap, tmp_path, group_id, "paimon")
    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table("shop.events")
    types = {f.name: str(f.type) for f in table.table_schema.fields}
    assert {k: types[k] for k in ("id", "body", "first_tag", "n")} == {
        "id": "INT NOT NULL",
        "body": "VARIANT",
        "first_tag": "VARIANT",
        "n": "VARIANT",
    }
    builder = table.new_read_builder()
    read = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    rows = [
        {
            k: (None if r[k] is None else _plain(GenericVariant.from_arrow_struct(r[k]).to_python()))
            for k in ("body", "first_tag", "n")
        }
        | {"id": r["id"]}
        for r in read
    ]
    _expected(rows)


def test_variants_into_iceberg_are_their_json_text(
    kafka_bootstrap: str, tmp_path: Path, group_id: str
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import StringType

    warehouse = _run(kafka_bootstrap, tmp_path, group_id, "iceberg")
    catalog = SqlCatalog("ferry", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    table = catalog.load_table("shop.events")
    assert [(f.name, f.field_type) for f in table.schema().fields][1:] == [
        ("body", StringType()),
        ("first_tag", StringType()),
        ("n", StringType()),
    ]
    read = table.scan().to_arrow().to_pylist()
    assert {r["id"]: r["body"] for r in read}[1] == '{"n":1.50,"tags":["red","big"],"who":{"name":"Ada"}}'
    _expected([{k: None if v is None else _json(k, v) for k, v in r.items()} for r in read])


def _json(key: str, value: Any) -> Any:
    return value if key == "id" else _plain(json.loads(value))


def _plain(value: Any) -> Any:
    """Numbers as floats or ints, whatever decimal type the reader gives them as."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    as_float = float(value)
    return int(value) if as_float.is_integer() and abs(as_float) > 2**53 else as_float
