"""Real change-data-capture producers for the end-to-end tests: a Kafka Connect worker running the
Debezium connectors, the source databases they capture, the workloads run against them and the
source's own final state to compare the sinks with. The pytest fixtures are in
:mod:`tests.support.fixtures` (registered by ``tests/conftest.py``)."""
