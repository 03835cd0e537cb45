"""Loading the two versions of a job from files: SQL scripts, directories of them, or pipeline YAML."""

from __future__ import annotations

from pathlib import Path

from ferry.check.pipeline import parse_pipeline
from ferry.sql.exceptions import SqlError
from ferry.sql.model import Plan
from ferry.sql.parser import Script, Statement, TableDef, ViewDef, parse_script
from ferry.sql.plan import build_plan

__all__ = ["load_plan", "load_script", "merge_scripts"]

_YAML_SUFFIXES = {".yaml", ".yml"}


def merge_scripts(scripts: list[Script], path: str | None = None) -> Script:
    """Scripts read one after the other, as one job (later definitions win)."""
    tables: dict[str, TableDef] = {}
    views: dict[str, ViewDef] = {}
    settings: dict[str, str] = {}
    statements: list[Statement] = []
    for script in scripts:
        tables.update(script.tables)
        views.update(script.views)
        settings.update(script.settings)
        statements.extend(script.statements)
    return Script(tables=tables, views=views, settings=settings, statements=tuple(statements), path=path)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SqlError(f"cannot read {path}: {error}") from error


def load_script(path: Path) -> Script:
    """A job from a SQL file, a directory of ``*.sql`` files (read in name order) or a pipeline YAML."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.sql") if p.is_file())
        if not files:
            raise SqlError(f"{path} holds no .sql file")
        return merge_scripts([parse_script(_read(f), str(f)) for f in files], str(path))
    if not path.is_file():
        raise SqlError(f"{path} is not a file or a directory")
    if path.suffix.lower() in _YAML_SUFFIXES:
        return parse_pipeline(_read(path), str(path))
    return parse_script(_read(path), str(path))


def load_plan(path: Path) -> Plan:
    """The operator plan of the job at ``path``."""
    return build_plan(load_script(path))
