"""Adding columns through Fluss's Java client: the Python client has no call that alters a table.

The sink runs ``FlussAlterTable.java`` (next to this module) as a single-file program of a JDK,
on the classpath ``alter-table.classpath`` (the ``org.apache.fluss:fluss-client`` jar), which calls
``Admin.alterTable`` with ``TableChange.addColumn(..., ColumnPosition.last())``. The request, with
the client's options and credentials, goes to the program's standard input as a properties file,
never on its command line.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PROGRAM = Path(__file__).with_name("FlussAlterTable.java")
#: Exit code of the program when the server or the client refused the change.
REFUSED = 1


class AlterTableError(Exception):
    """The column could not be added; ``refused`` when Fluss said no (rather than Java failing)."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True, slots=True)
class NewColumn:
    name: str
    #: In Fluss SQL spelling (``DECIMAL(10, 2)``).
    type: str
    comment: str | None = None


def escape(text: str) -> str:
    """``text`` as a key or value of a ``java.util.Properties`` file read as UTF-8."""
    out = []
    for ch in text:
        if ch in "\\=:#! ":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\f":
            out.append("\\f")
        else:
            out.append(ch)
    return "".join(out)


def request(
    client: Mapping[str, str], database: str, table: str, columns: Sequence[NewColumn], timeout: float
) -> str:
    """The program's standard input: the client's options, then the table and its new columns."""
    entries: list[tuple[str, str]] = list(client.items())
    entries += [
        ("ferry.database", database),
        ("ferry.table", table),
        ("ferry.timeout-seconds", str(max(1, int(timeout)))),
    ]
    for i, column in enumerate(columns):
        entries += [(f"ferry.column.{i}.name", column.name), (f"ferry.column.{i}.type", column.type)]
        if column.comment is not None:
            entries.append((f"ferry.column.{i}.comment", column.comment))
    return "".join(f"{escape(key)}={escape(value)}\n" for key, value in entries)


def add_columns(
    *,
    java: str,
    classpath: Sequence[str],
    client: Mapping[str, str],
    database: str,
    table: str,
    columns: Sequence[NewColumn],
    timeout: float,
) -> None:
    """Append ``columns`` to ``database.table``; raises :class:`AlterTableError` saying why not."""
    if not classpath:
        raise AlterTableError(
            "adding a column needs Fluss's Java client (the Python client cannot alter a table): "
            "set alter-table.classpath to the org.apache.fluss:fluss-client jar",
            refused=False,
        )
    command = [
        java,
        "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "-cp",
        ":".join(classpath),
        str(PROGRAM),
    ]
    try:
        result = subprocess.run(
            command,
            input=request(client, database, table, columns, timeout),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as e:
        raise AlterTableError(f"cannot run {java} (alter-table.java): {e}", refused=False) from e
    except subprocess.TimeoutExpired as e:
        raise AlterTableError(f"the Java client did not finish within {timeout:.0f} s", refused=False) from e
    if result.returncode == 0:
        return
    raise AlterTableError(_reason(result.stderr, result.returncode), refused=result.returncode == REFUSED)


def _reason(stderr: str, code: int) -> str:
    """The program's own ``error:`` line (first line of it), else the end of what Java printed."""
    lines = stderr.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("error: "):
            return lines[i].removeprefix("error: ").strip()
    tail = " | ".join(line.strip() for line in lines[-5:] if line.strip())
    return f"the Java client failed (exit {code}): {tail or 'no output'}"
