"""Hologres: the sink over the PostgreSQL protocol (psycopg 3), its dialect and type strategies."""
