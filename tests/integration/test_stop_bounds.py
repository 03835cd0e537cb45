"""Every process ``ferry run`` starts ends within a bound once its pipeline failed or was told to
stop: a worker that cannot end on its own (a thread a library left behind, a client's close that
waits on a broker) is ended after ``--stop-grace``, and ``ferry run`` with several workers ends
with the failure's exit code and line. On the session's real broker; the sink's database is a port
nothing listens on (Doris, StarRocks or Hologres not running)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ferry.local.kafka_broker import TopicFactory, produce
from ferry.local.ports import free_ports
from ferry.worker import run_instances
from tests.integration.helpers import job_yaml, orders_table

pytestmark = pytest.mark.integration

#: A module of user-defined functions whose import leaves a thread that never ends and is not a
#: daemon: the interpreter waits for it at exit, as for a client library's stuck close.
LINGERING = """
import threading

threading.Thread(target=threading.Event().wait, name="lingering", daemon=False).start()


def same(n: int) -> int:
    return n
"""

#: Long enough for a loaded machine to start two workers and fail them; the test waits for the
#: exit, it does not time it.
EXIT_WAIT_S = 240


def test_ferry_run_with_two_workers_exits_once_a_worker_failed_even_if_it_cannot_end(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    (tmp_path / "ferry_lingering_udf.py").write_text(LINGERING)
    topic = topic_factory(2)
    table = orders_table(f"s{group_id[-8:]}")
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 9)]
    for partition in (0, 1):
        mine = records[partition::2]
        produce(kafka_bootstrap, topic, [v for _, v in mine], keys=[k for k, _ in mine], partition=partition)
    [closed] = free_ports(1)  # nothing listens there: every connection is refused
    sink = (
        "type: hologres\n"
        f"endpoint: 127.0.0.1:{closed}\n"
        "dbname: ods_db\nusername: ferry\npassword: secret-not-shown"
    )
    pipeline = (
        "  parallelism: 2\n"
        "  restart-strategy.initial-backoff: 100ms\n"
        "  restart-strategy.max-backoff: 200ms\n"
        "  restart-strategy.timeout: 1s\n"
        "  user-defined-function:\n"
        "    - name: same\n"
        "      classpath: ferry_lingering_udf:same\n"
        f"      python-files: [{tmp_path}]\n"
    )
    transform = "transform:\n  - source-table: inventory.orders\n    projection: \\*, same(qty) AS q\n"
    job = tmp_path / "job.yaml"
    job.write_text(
        job_yaml(
            kafka_bootstrap,
            topic,
            tmp_path,
            group_id,
            sink=sink,
            bounded="unbounded",
            pipeline_extra=pipeline,
            top_extra=transform,
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "ferry.cli.main", "run", str(job), "--stop-grace", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the workers with it, so that a failed test kills them all
    )
    try:
        _out, err = process.communicate(timeout=EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _out, err = process.communicate()
        pytest.fail(f"ferry run did not exit after its workers failed: {err[-3000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the workers
    assert process.returncode == 1, err[-3000:]
    assert "giving up" in err and f"port {closed} failed: Connection refused" in err, err[-3000:]
    assert "secret-not-shown" not in err


def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    ignores = tmp_path / "ignores.py"
    ignores.write_text(
        "import signal, threading\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(tmp_path / 'ready')!r}, 'w').close()\n"
        "threading.Event().wait()\n"
    )
    fails = tmp_path / "fails.py"
    # the failing worker waits until the other ignores SIGTERM, then exits 3
    fails.write_text(
        "import os, sys, threading\n"
        f"while not os.path.exists({str(tmp_path / 'ready')!r}):\n"
        "    threading.Event().wait(0.05)\n"
        "sys.exit(3)\n"
    )
    code = run_instances([[sys.executable, str(ignores)], [sys.executable, str(fails)]], grace_s=1.0)
    assert code == 3
