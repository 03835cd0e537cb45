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
from collections.abc import Iterator
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from ferry.exceptions import FerryError
from ferry.local import jvm
from tests.support.jvm_server import JvmServer

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


class HiveMetastore(JvmServer):
    """``with HiveMetastore() as metastore:`` ``metastore.uri`` is its ``thrift://`` address,
    ``metastore.warehouse`` the local folder of its tables."""

    title = "the Hive Metastore"
    error = HiveMetastoreError
    folder_prefix = "hive-metastore-"
    log_name = "metastore.log"

    def __init__(self, *, startup_timeout: float = 300.0) -> None:
        super().__init__(startup_timeout=startup_timeout)

    @property
    def uri(self) -> str:
        if self.port is None:
            raise HiveMetastoreError("the Hive Metastore is not started")
        return f"thrift://{jvm.HOST}:{self.port}"

    def command(self, java: str) -> tuple[list[str], None]:
        lib = JARS.ensure()
        root_of_checkout = JARS.repo_root()
        if root_of_checkout is None:
            raise HiveMetastoreError(f"no checkout holds {LAUNCHER}")
        assert self.root is not None and self.port is not None
        conf = self.root / "conf"
        conf.mkdir()
        (conf / "metastore-site.xml").write_text(
            site_xml(self.root, self.warehouse, self.port), encoding="utf-8"
        )
        return [
            java,
            "-Xmx512m",
            f"-Dderby.stream.error.file={self.root / 'derby.log'}",
            "-cp",
            f"{conf}{os.pathsep}{lib / '*'}",
            str(root_of_checkout / LAUNCHER),
            "-p",
            str(self.port),
        ], None

    def ready(self) -> bool:
        assert self.port is not None
        return jvm.port_open(self.port)


@pytest.fixture(scope="session")
def hive_metastore() -> Iterator[HiveMetastore]:
    """A real Hive Metastore on 127.0.0.1 for the whole session: ``hive_metastore.uri``."""
    with HiveMetastore() as metastore:
        yield metastore
