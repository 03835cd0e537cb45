"""A user-defined function that is a class is opened once with its options before its first row
and closed when the pipeline stops (Flink's ``open``/``close``), on the session's real broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.pipeline.phase import Phase
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table

pytestmark = pytest.mark.integration

MODULE = '''
from pathlib import Path


class Tally:
    """Counts the rows it sees; says so in a file when opened and closed."""

    def open(self, options):
        self.log = Path(options["log"])
        self.rows = 0
        with self.log.open("a") as out:
            out.write("open\\n")

    def eval(self, n: int) -> int:
        self.rows += 1
        return n * 10

    def close(self):
        with self.log.open("a") as out:
            out.write(f"close after {self.rows} rows\\n")
'''


def test_a_class_function_is_closed_when_the_pipeline_stops(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    (tmp_path / "ferry_tally_udf.py").write_text(MODULE)
    log = tmp_path / "tally.log"
    table = orders_table(f"s{group_id[-8:]}")
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 4)]
    topic = topic_factory()
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    functions = (
        "  user-defined-function:\n"
        "    - name: tally\n"
        "      classpath: ferry_tally_udf:Tally\n"
        f"      python-files: [{tmp_path}]\n"
        f"      options: {{log: {log}}}\n"
    )
    transform = "transform:\n  - source-table: inventory.orders\n    projection: \\*, tally(qty) AS qty10\n"
    job = load_job_text(
        job_yaml(kafka_bootstrap, topic, tmp_path, group_id, pipeline_extra=functions, top_extra=transform)
    )
    runner = build_runner(job)
    runner.run()

    assert runner.status.phase is Phase.STOPPED, runner.status.detail
    assert log.read_text().splitlines() == ["open", "close after 3 rows"]
    rows = runner.sink.tables  # type: ignore[attr-defined]
    [written] = rows.values()
    assert sorted(r["qty10"] for r in written.all_rows()) == [10, 20, 30]
