"""The SelectDB (Apache Doris) sink: DDL over the MySQL protocol, rows through Stream Load."""
