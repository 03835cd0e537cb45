"""A local Apache Hive Metastore: Hive's standalone metastore 3.1.3 (its Thrift service) on a free
port, its catalog in an embedded Derby database and its tables' files in a local warehouse, for the
tests of the Iceberg sink's ``hive`` catalog.

Its jars are those of ``jars/hive-metastore/pom.xml``, fetched once with Maven into
``<repo>/.cache/hive-metastore/lib``. It starts through ``jars/hive-metastore/TransactionalMetastore.java``
(run by ``java`` as a source file), which first creates the transaction tables every Iceberg commit's
table lock needs, then runs the metastore. It runs for one test session (the ``hive_metastore``
fixture; this module is a plugin of ``tests/conftest.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self
from xml.sax.saxutils import escape

import pytest

from ferry.exceptions import FerryError
from ferry.local import jvm
from ferry.process import parent_death_hook

POM = jvm.POM_FOLDER / "hive-metastore" / "pom.xml"
LAUNCHER = POM.parent / "TransactionalMetastore.java"
REQUIRED_JARS = ("hive-standalone-metastore", "hadoop-common", "derby", "datanucleus-rdbms", "libthrift")


class HiveMetastoreError(FerryError):
    """The Hive Metastore could not be fetched or started."""


JARS = jvm.MavenJars("Hive-Metastore", POM, "FERRY_HIVE_METASTORE_CACHE", REQUIRED_JARS, HiveMetastoreError)


def site_xml(root: Path, warehouse: Path, port: int) -> str:
    """The metastore's ``metastore-site.xml``: Derby under ``root``, tables under ``warehouse``."""
    properties = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        # the catalog's tables, made by DataNucleus (the transaction tables by the launcher)
        "datanucleus.schema.autoCreateAll": "true",
        "metastore.schema.verification": "false",
        "metastore.warehouse.dir": warehouse.as_uri(),
        "metastore.thrift.port": str(port),
        # what the standalone jar has of the defaults that name classes of Hive's query engine
        "metastore.expression.proxy": "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy",
        "metastore.task.threads.always": "org.apache.hadoop.hive.metastore.events.EventCleanerTask,"
        "org.apache.hadoop.hive.metastore.RuntimeStatsCleanerTask",
    }
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


class HiveMetastore:
    """``with HiveMetastore() as metastore:`` ``metastore.uri`` is its ``thrift://`` address,
    ``metastore.warehouse`` the local folder of its tables."""

    def __init__(self, *, startup_timeout: float = 300.0) -> None:
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.root: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise HiveMetastoreError("the Hive Metastore is not started")
        return f"thrift://{jvm.HOST}:{self.port}"

    @property
    def warehouse(self) -> Path:
        if self.root is None:
            raise HiveMetastoreError("the Hive Metastore is not started")
        return self.root / "warehouse"

    @property
    def log(self) -> Path:
        assert self.root is not None
        return self.root / "metastore.log"

    def start(self) -> Self:
        lib = JARS.ensure()
        root_of_checkout = JARS.repo_root()
        if root_of_checkout is None:
            raise HiveMetastoreError(f"no checkout holds {LAUNCHER}")
        java = jvm.find_java("the Hive Metastore", HiveMetastoreError)
        self.root = Path(tempfile.mkdtemp(prefix="hive-metastore-")).resolve()
        self.warehouse.mkdir()
        conf = self.root / "conf"
        conf.mkdir()
        [self.port] = jvm.free_ports(1)
        (conf / "metastore-site.xml").write_text(
            site_xml(self.root, self.warehouse, self.port), encoding="utf-8"
        )
        command = [
            java,
            "-Xmx512m",
            f"-Dderby.stream.error.file={self.root / 'derby.log'}",
            "-cp",
            f"{conf}{os.pathsep}{lib / '*'}",
            str(root_of_checkout / LAUNCHER),
            "-p",
            str(self.port),
        ]
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
                preexec_fn=parent_death_hook(),  # noqa: PLW1509 - PR_SET_PDEATHSIG only
            )
        deadline = time.monotonic() + self.startup_timeout
        while not jvm.port_open(self.port):
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = jvm.read_tail(self.log)
                self.stop()
                raise HiveMetastoreError(f"the Hive Metastore did not start:\n{log}")
            time.sleep(0.2)
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


@pytest.fixture(scope="session")
def hive_metastore() -> Iterator[HiveMetastore]:
    """A real Hive Metastore on 127.0.0.1 for the whole session: ``hive_metastore.uri``."""
    with HiveMetastore() as metastore:
        yield metastore
