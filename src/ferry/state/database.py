"""What ferry's own tables need of the database they live in, beyond SQLAlchemy's ``create_all``.

``create_all`` creates missing tables but leaves an existing table as it is, so a state store
written by an earlier version of ferry lacks the columns added since. :func:`add_missing_columns`
adds them (each one nullable or with a default, so existing rows stay valid). Hand-written: no
migration framework is a dependency, and adding a column is the only change these tables get.
"""

from __future__ import annotations

from sqlalchemy import MetaData, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.schema import CreateColumn


def add_missing_columns(engine: Engine, metadata: MetaData) -> list[str]:
    """``ALTER TABLE ... ADD COLUMN`` for every column of ``metadata``'s tables the database's
    tables lack; the ``table.column`` names added."""
    inspector = inspect(engine)
    added: list[str] = []
    for table in metadata.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                continue
            assert column.nullable or column.server_default is not None, column
            ddl = CreateColumn(column).compile(dialect=engine.dialect)
            with engine.begin() as conn:
                conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {ddl}"))
            added.append(f"{table.name}.{column.name}")
    return added
