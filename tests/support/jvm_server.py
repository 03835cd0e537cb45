"""One JVM server process for the tests, on a free port, with its data in a temporary folder: what
the Iceberg REST catalog (:mod:`tests.support.iceberg_rest`) and the Hive Metastore
(:mod:`tests.support.hive_metastore`) share. A subclass says how to run it and when it is ready."""

from __future__ import annotations

import abc
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from ferry.exceptions import FerryError
from ferry.local import jvm
from ferry.process import parent_death_hook
from tests.support.waiting import Deadline


class JvmServer(abc.ABC):
    """``with Server() as server:`` ``server.warehouse`` is the local folder of its tables."""

    #: How messages name the server ("the Hive Metastore").
    title: ClassVar[str]
    #: What is raised when it cannot be fetched or started.
    error: ClassVar[type[FerryError]]
    #: The temporary folder's prefix, and the log's name in it.
    folder_prefix: ClassVar[str]
    log_name: ClassVar[str]

    def __init__(self, *, startup_timeout: float) -> None:
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.root: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    @abc.abstractmethod
    def uri(self) -> str:
        """Where a client reaches the server."""

    @property
    def warehouse(self) -> Path:
        if self.root is None:
            raise self.error(f"{self.title} is not started")
        return self.root / "warehouse"

    @property
    def log(self) -> Path:
        assert self.root is not None
        return self.root / self.log_name

    @abc.abstractmethod
    def command(self, java: str) -> tuple[Sequence[str], Mapping[str, str] | None]:
        """The command line (and environment, None: this one's) that runs the server; ``root``,
        ``warehouse`` and ``port`` are set."""

    @abc.abstractmethod
    def ready(self) -> bool:
        """Whether the server answers."""

    def start(self) -> Self:
        java = jvm.find_java(self.title, self.error)
        self.root = Path(tempfile.mkdtemp(prefix=self.folder_prefix)).resolve()
        try:
            self.warehouse.mkdir()
            [self.port] = jvm.free_ports(1)
            command, env = self.command(java)
            with self.log.open("ab") as out:
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=self.root,
                    env=None if env is None else {**os.environ, **env},
                    start_new_session=True,
                    preexec_fn=parent_death_hook(),  # noqa: PLW1509 - PR_SET_PDEATHSIG only
                )
            deadline = Deadline(self.startup_timeout)
            while not self.ready():
                if self._process.poll() is not None or deadline.expired():
                    raise self.error(f"{self.title} did not start:\n{jvm.read_tail(self.log)}")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._process is not None:
            jvm.stop_process(self._process, timeout=30.0)
            self._process = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
