"""A topic named in ``source.topic`` that does not exist is never taken for a healthy pipeline: after
the start-up timeout the run fails naming it (exit 1, one line), or, with ``topic-missing: wait``,
the pipeline is PENDING and not ready, saying which topic it waits for, until the topic is created.
On the session's real broker."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ferry.api.status import readiness
from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import create_topic, delete_topic, produce
from ferry.pipeline.phase import Phase
from ferry.worker import build_runner
from tests.integration.control_helpers import wait_for
from tests.integration.helpers import job_yaml, orders_table
from tests.integration.outages import running

pytestmark = pytest.mark.integration


def test_a_bounded_run_of_a_topic_that_does_not_exist_fails_naming_it(
    kafka_bootstrap: str, tmp_path: Path, group_id: str
) -> None:
    missing = f"ods_db.ods_users_{uuid.uuid4().hex[:8]}"
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(kafka_bootstrap, missing, tmp_path, group_id, bounded="latest-offset"))
    result = subprocess.run(
        [sys.executable, "-m", "ferry.cli.main", "run", str(job), "--startup-timeout", "20"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert f"topic '{missing}' of source.topic does not exist" in errors[0]
    assert "source.topic-missing: wait" in errors[0]


def test_a_topic_waited_for_is_pending_and_not_ready_until_it_exists(
    kafka_bootstrap: str, tmp_path: Path, group_id: str
) -> None:
    missing = f"ods_db.ods_users_{uuid.uuid4().hex[:8]}"
    text = job_yaml(
        kafka_bootstrap,
        missing,
        tmp_path,
        group_id,
        bounded="unbounded",  # bounded, the run may take the new topic's end before the records arrive
        source_extra="  topic-missing: wait",
    )
    runner = build_runner(load_job_text(text), startup_timeout_s=0.5)
    table = orders_table(f"s{group_id[-8:]}")
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 4)]
    try:
        with running(runner) as errors:
            wait_for(
                lambda: "(source.topic-missing: wait)" in runner.status.detail or bool(errors),
                60,
                lambda: f"the pipeline to wait on for the topic ({runner.status.detail!r}, {errors})",
            )
            assert runner.status.phase is Phase.PENDING and not errors
            assert repr(missing) in runner.status.detail
            code, body = readiness(runner)
            assert code == 503 and body["status"] == "not ready"

            create_topic(kafka_bootstrap, missing)
            produce(kafka_bootstrap, missing, [v for _, v in records], keys=[k for k, _ in records])
            wait_for(
                lambda: runner.metrics.records_read == 3 or bool(errors),
                60,
                lambda: f"the records to be read ({runner.status.detail!r}, {errors})",
            )
            assert not errors, errors
            assert runner.status.phase is Phase.RUNNING
    finally:
        delete_topic(kafka_bootstrap, missing)
    assert runner.metrics.records_read == 3
