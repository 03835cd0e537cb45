"""What the tests run against: the test services (PostgreSQL and MariaDB servers in temporary
directories, a Fluss cluster, a schema registry, Kafka Connect with the Debezium connectors), the
stand-ins for services that cannot run here (Stream Load, MaxCompute; both on
:mod:`tests.support.http_server`), the workloads run against the captured databases and the
source's own final state to compare the sinks with. The modules that provide fixtures are plugins
registered by ``tests/conftest.py``."""
