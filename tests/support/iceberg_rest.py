"""A local Apache Iceberg REST catalog: Iceberg's own ``RESTCatalogServer`` (the server of its REST
compatibility kit, from ``iceberg-open-api``'s test fixtures) on a free port, its catalog in
SQLite and its files in a local warehouse, for the tests of the Iceberg sink's ``rest`` catalog.

Its jars are those of ``jars/iceberg-rest/pom.xml``, fetched once with Maven into
``<repo>/.cache/iceberg-rest/lib``. The server binds every interface (it takes no host); it runs
for one test session on a free port.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from ferry.exceptions import FerryError
from ferry.local import jvm
from tests.support.jvm_server import JvmServer

POM = jvm.POM_FOLDER / "iceberg-rest" / "pom.xml"
REQUIRED_JARS = ("iceberg-open-api", "iceberg-core", "jetty-server", "hadoop-client-api", "sqlite-jdbc")
MAIN_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"


class IcebergRestError(FerryError):
    """The REST catalog server could not be fetched or started."""


JARS = jvm.MavenJars("Iceberg-REST", POM, "FERRY_ICEBERG_REST_CACHE", REQUIRED_JARS, IcebergRestError)


class IcebergRestCatalog(JvmServer):
    """``with IcebergRestCatalog() as catalog:`` ``catalog.uri`` is the REST endpoint,
    ``catalog.warehouse`` the local folder of its tables."""

    title = "the Iceberg REST catalog"
    error = IcebergRestError
    folder_prefix = "iceberg-rest-"
    log_name = "server.log"

    def __init__(self, *, startup_timeout: float = 180.0) -> None:
        super().__init__(startup_timeout=startup_timeout)

    @property
    def uri(self) -> str:
        if self.port is None:
            raise IcebergRestError("the REST catalog is not started")
        return f"http://{jvm.HOST}:{self.port}"

    def command(self, java: str) -> tuple[list[str], dict[str, str]]:
        lib = JARS.ensure()
        assert self.root is not None
        env = {
            # the server's catalog properties: CATALOG_<NAME> with _ for . and __ for -
            "CATALOG_WAREHOUSE": self.warehouse.as_uri(),
            "CATALOG_URI": f"jdbc:sqlite:file:{self.root / 'catalog.db'}",
            "CATALOG_JDBC_USER": "ferry",
            "CATALOG_JDBC_PASSWORD": "ferry",
            "CATALOG_REST_PORT": str(self.port),
        }
        return [java, "-Xmx512m", "-cp", str(lib / "*"), MAIN_CLASS], env

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False
