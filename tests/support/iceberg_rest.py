"""A local Apache Iceberg REST catalog: Iceberg's own ``RESTCatalogServer`` (the server of its REST
compatibility kit, from ``iceberg-open-api``'s test fixtures) on a free port, its catalog in
SQLite and its files in a local warehouse, for the tests of the Iceberg sink's ``rest`` catalog.

Its jars are those of ``jars/iceberg-rest/pom.xml``, fetched once with Maven into
``<repo>/.cache/iceberg-rest/lib``. The server binds every interface (it takes no host); it runs
for one test session on a free port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Self

from ferry.exceptions import FerryError
from ferry.local import jvm
from ferry.process import parent_death_hook

POM = jvm.POM_FOLDER / "iceberg-rest" / "pom.xml"
REQUIRED_JARS = ("iceberg-open-api", "iceberg-core", "jetty-server", "hadoop-client-api", "sqlite-jdbc")
MAIN_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"


class IcebergRestError(FerryError):
    """The REST catalog server could not be fetched or started."""


JARS = jvm.MavenJars("Iceberg-REST", POM, "FERRY_ICEBERG_REST_CACHE", REQUIRED_JARS, IcebergRestError)


class IcebergRestCatalog:
    """``with IcebergRestCatalog() as catalog:`` ``catalog.uri`` is the REST endpoint,
    ``catalog.warehouse`` the local folder of its tables."""

    def __init__(self, *, startup_timeout: float = 180.0) -> None:
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.root: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise IcebergRestError("the REST catalog is not started")
        return f"http://{jvm.HOST}:{self.port}"

    @property
    def warehouse(self) -> Path:
        if self.root is None:
            raise IcebergRestError("the REST catalog is not started")
        return self.root / "warehouse"

    @property
    def log(self) -> Path:
        assert self.root is not None
        return self.root / "server.log"

    def start(self) -> Self:
        lib = JARS.ensure()
        java = jvm.find_java("the Iceberg REST catalog", IcebergRestError)
        self.root = Path(tempfile.mkdtemp(prefix="iceberg-rest-")).resolve()
        self.warehouse.mkdir()
        [self.port] = jvm.free_ports(1)
        env = {
            **os.environ,
            # the server's catalog properties: CATALOG_<NAME> with _ for . and __ for -
            "CATALOG_WAREHOUSE": self.warehouse.as_uri(),
            "CATALOG_URI": f"jdbc:sqlite:file:{self.root / 'catalog.db'}",
            "CATALOG_JDBC_USER": "ferry",
            "CATALOG_JDBC_PASSWORD": "ferry",
            "CATALOG_REST_PORT": str(self.port),
        }
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                [java, "-Xmx512m", "-cp", str(lib / "*"), MAIN_CLASS],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                env=env,
                start_new_session=True,
                preexec_fn=parent_death_hook(),  # noqa: PLW1509 - PR_SET_PDEATHSIG only
            )
        deadline = time.monotonic() + self.startup_timeout
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = jvm.read_tail(self.log)
                self.stop()
                raise IcebergRestError(f"the Iceberg REST catalog did not start:\n{log}")
            time.sleep(0.2)
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

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
