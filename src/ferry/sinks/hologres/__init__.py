"""Hologres: type normalisation strategies (the writer over the PostgreSQL protocol is not written yet)."""
