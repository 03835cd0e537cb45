"""What the control-plane tests share: a control plane with a supervisor on a real broker."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from ferry.control.service import ControlPlane, ControlSettings
from ferry.control.supervisor import Supervisor
from ferry.local import debezium as dbz
from tests.integration.helpers import iceberg_rows
from tests.support.waiting import wait_for

ENV = "default"


@dataclass
class Control:
    plane: ControlPlane
    supervisor: Supervisor
    tmp_path: Path

    def phase(self, name: str) -> str:
        return str(self.plane.get_pipeline(ENV, name).status.phase)

    def wait_phase(self, name: str, *phases: str, timeout: float = 180.0) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            resource = self.plane.get_pipeline(ENV, name).document()
            return resource if resource["status"]["phase"] in phases else None

        return wait_for(
            ready,
            timeout,
            lambda: f"{name} in {phases}: {self.plane.get_pipeline(ENV, name).document()['status']}",
        )

    def create(self, name: str, job: str, **spec: Any) -> dict[str, Any]:
        return self.plane.create_pipeline(
            ENV, {"metadata": {"name": name}, "spec": {"job": job, **spec}}
        ).document()


@contextmanager
def running_control(
    tmp_path: Path,
    *,
    carry_over: bool = True,
    timeout: timedelta = timedelta(minutes=15),
    state_url: str | None = None,
) -> Iterator[Control]:
    settings = ControlSettings(
        state_url=state_url or f"sqlite:///{tmp_path}/state.db",
        carry_over_enabled=carry_over,
        carry_over_timeout=timeout,
    )
    plane = ControlPlane(settings)
    for row in plane.store.pipelines():  # a database shared by the session: only this test's run
        plane.store.update_pipeline(row, phase="DELETED")
    supervisor = Supervisor(plane, data_dir=tmp_path / "pipelines", interval_s=0.2, worker="test-worker")
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield Control(plane, supervisor, tmp_path)
    finally:
        stop.set()
        thread.join(90)
        plane.close()


def events_table() -> dbz.DebeziumTable:
    """No primary key: rows are appended, so a row written twice shows as a duplicate."""
    return dbz.DebeziumTable(
        "s",
        "app",
        "events",
        [dbz.ConnectColumn("id", dbz.INT64, optional=False), dbz.ConnectColumn("payload", dbz.STRING)],
        key=(),
    )


def job_text(bootstrap: str, topic: str, warehouse: Path, *, extra: str = "", source_extra: str = "") -> str:
    return f"""
source:
  type: kafka
  properties.bootstrap.servers: {bootstrap}
  topic: {topic}
  scan.startup.mode: earliest-offset
{source_extra}
sink:
  type: iceberg
  catalog.properties.warehouse: {warehouse}
pipeline:
  checkpoint.interval: 200ms
{extra}
"""


def wait_rows(warehouse: Path, name: str, count: int, timeout: float = 180.0) -> list[dict[str, Any]]:
    return wait_for(
        lambda: rows if len(rows := iceberg_rows(warehouse, name)) >= count else None,
        timeout,
        lambda: f"{count} rows in {name} (have {len(iceberg_rows(warehouse, name))})",
    )
