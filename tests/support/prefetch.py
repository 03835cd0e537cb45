"""Fetch what the test services run from Maven Central, once, before the suite starts.

Each service fetches its jars itself when they are missing (``MavenJars.ensure``), but inside a
test that fetch counts against the test's timeout, and on a fresh clone of a loaded machine Maven
can take longer than that. ``make test`` runs this first: every step is a no-op once its cache is
filled from the same pom, and each says what it fetched.

    python -m tests.support.prefetch
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from ferry.local import kafka_broker
from tests.support import connect, fluss, hive_metastore, iceberg_rest, registry

#: What each service needs, in the order the suite first needs it.
STEPS: tuple[tuple[str, Callable[[], Path]], ...] = (
    ("Kafka broker", kafka_broker.ensure_jars),
    ("Kafka Connect and the Debezium connectors", lambda: connect.ensure_plugins(connect.ensure_jars())),
    ("schema registry", registry.ensure_application),
    ("Apicurio Avro converter", registry.converter_plugin_path),
    ("Fluss cluster", fluss.ensure_jars),
    ("Iceberg REST catalog", iceberg_rest.JARS.ensure),
    ("Hive Metastore", hive_metastore.JARS.ensure),
)


def main() -> int:
    for name, ensure in STEPS:
        began = time.monotonic()
        folder = ensure()
        print(f"{name}: {folder} ({time.monotonic() - began:.1f} s)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
