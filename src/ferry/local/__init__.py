"""What runs ferry on one machine with nothing else installed: a local Apache Kafka broker (the demo,
``scripts/kafka``, the benchmark) and a generator of Debezium change events. The memory source and
sinks are :mod:`ferry.connectors.memory` and :mod:`ferry.sinks.memory`."""
