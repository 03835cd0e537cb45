"""A table folder that cannot take writes — a full disk (a file-size limit on the pipeline's
process: its writes fail with EFBIG) or a folder made read-only — is waited for under the restart
strategy like the other outages, shown in the status, and once it takes writes again the table
holds every row once. Iceberg tables on disk, the session's real broker; the table is read back
with pyiceberg and compared with the rows produced."""

from __future__ import annotations

import os
import random
import re
import resource
import shutil
import signal
import string
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.pipeline.phase import Phase
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.control_helpers import wait_for
from tests.integration.helpers import iceberg_rows, job_yaml, orders_table
from tests.integration.outages import RETRIES, running

pytestmark = pytest.mark.integration

#: The largest file the pipeline's process may write while the disk is "full": its state store and
#: the first rows' files fit, the file of the big rows does not.
FILE_LIMIT = 1 << 20


def iceberg_sink(warehouse: Path) -> str:
    return f"type: iceberg\ncatalog.properties.warehouse: {warehouse}"


def payloads(count: int, size: int, seed: int) -> list[str]:
    """Text that does not compress: the rows' data file is about ``count * size`` bytes."""
    rng = random.Random(seed)
    return ["".join(rng.choices(string.ascii_letters, k=size)) for _ in range(count)]


def waiting_on_storage(detail: str, reason: str) -> bool:
    return (
        re.search(rf"flushing the sink: attempt ([2-9]|\d\d+) of \d+ failed .*{reason}", detail) is not None
    )


def test_a_full_disk_is_waited_for_and_the_table_ends_exact(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    items = ["small"] * 10 + payloads(3000, 1000, seed=7)
    records = [table.insert({"id": i, "item": item, "qty": i}) for i, item in enumerate(items, 1)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(
        job_yaml(
            kafka_bootstrap, topic, tmp_path, group_id, sink=iceberg_sink(warehouse), pipeline_extra=RETRIES
        )
    )

    def full_disk() -> None:  # in the child, before it runs ferry
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        # the soft limit only: the test lifts it again up to the hard one, which needs no privilege
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, resource.RLIM_INFINITY))

    process = subprocess.Popen(
        [sys.executable, "-m", "ferry.cli.main", "run", str(job), "--no-worker"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=full_disk,  # noqa: PLW1509 - only limits set before exec
    )
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:

        def status() -> dict[str, Any]:
            return store.get_status(group_id) or {"phase": "?", "detail": "no status yet"}

        wait_for(
            lambda: waiting_on_storage(status()["detail"], "File too large") or process.poll() is not None,
            180,
            lambda: f"the pipeline to wait for the disk ({status()['detail']!r})",
        )
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert status()["phase"] == Phase.RUNNING
        assert status()["metrics"]["retry"]["what"] == "flushing the sink"
        # space freed: the limit lifted on the running process
        resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        _out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
        store.close()
    rows = iceberg_rows(warehouse, "inventory.orders")
    assert sorted((r["id"], r["item"]) for r in rows) == list(enumerate(items, 1))


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` takes no new file: its write permissions removed, or, for root (whom permissions
    do not stop), the file system's immutable attribute set."""
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        assert chattr is not None, "chattr (e2fsprogs) makes a folder read-only for root"
        subprocess.run([chattr, "+i", str(folder)], check=True)
        try:
            yield
        finally:
            subprocess.run([chattr, "-i", str(folder)], check=True)
    else:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(mode)


def test_a_read_only_table_folder_is_waited_for_and_the_table_ends_exact(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    first = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 11)]
    second = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(11, 31)]
    produce(kafka_bootstrap, topic, [v for _, v in first], keys=[k for k, _ in first])
    warehouse = tmp_path / "warehouse"
    text = job_yaml(
        kafka_bootstrap,
        topic,
        tmp_path,
        group_id,
        sink=iceberg_sink(warehouse),
        bounded="unbounded",
        pipeline_extra=RETRIES,
    )
    runner = build_runner(load_job_text(text))
    with running(runner) as errors:
        wait_for(
            lambda: len(iceberg_rows(warehouse, "inventory.orders")) == 10 or bool(errors),
            120,
            lambda: f"the first rows ({runner.status.detail!r}, {errors})",
        )
        [data] = [p for p in warehouse.rglob("data") if p.is_dir()]
        with read_only(data):
            produce(kafka_bootstrap, topic, [v for _, v in second], keys=[k for k, _ in second])
            reason = "Operation not permitted" if os.geteuid() == 0 else "Permission denied"
            wait_for(
                lambda: waiting_on_storage(runner.status.detail, reason) or bool(errors),
                120,
                lambda: f"the pipeline to wait for the folder ({runner.status.detail!r}, {errors})",
            )
            assert runner.status.phase is Phase.RUNNING and not errors
        wait_for(
            lambda: len(iceberg_rows(warehouse, "inventory.orders")) == 30 or bool(errors),
            120,
            lambda: f"every row ({runner.status.detail!r}, {errors})",
        )
        assert not errors
    assert runner.status.phase is Phase.STOPPED, runner.status.detail
    rows = iceberg_rows(warehouse, "inventory.orders")
    assert sorted((r["id"], r["item"]) for r in rows) == [(i, f"i{i}") for i in range(1, 31)]
