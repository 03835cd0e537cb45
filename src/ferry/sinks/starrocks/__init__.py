"""The StarRocks sink: DDL over the MySQL protocol, rows through Stream Load."""
