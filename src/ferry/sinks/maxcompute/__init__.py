"""MaxCompute: the sink over pyodps (SQL instances for DDL, the Tunnel for rows), its dialect and types."""
