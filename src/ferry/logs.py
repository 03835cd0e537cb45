"""One log format for every process of ferry: ``text`` for a terminal, ``json`` (one object a line,
for a log collector) through python-json-logger. uvicorn's records reach the same root handler."""

from __future__ import annotations

import logging
import sys
from typing import Literal

from pythonjsonlogger.json import JsonFormatter

LogFormat = Literal["text", "json"]
FORMATS: tuple[LogFormat, ...] = ("text", "json")

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: JSON keys: time (ISO 8601, UTC), level, logger, message, and whatever ``extra`` a call passed.
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"


def formatter(log_format: LogFormat) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(
            JSON_FIELDS,
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            timestamp=False,
            datefmt="%Y-%m-%dT%H:%M:%S%z",
        )
    return logging.Formatter(TEXT)


def configure(level: str, log_format: LogFormat = "text") -> None:
    """Send every record at ``level`` or above to stderr in ``log_format``. As with
    :func:`logging.basicConfig`, a root logger that already has handlers (a host application's,
    a test runner's) keeps them."""
    root = logging.getLogger()
    root.setLevel(level.upper())
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter(log_format))
        root.addHandler(handler)
    for name in ("uvicorn", "uvicorn.access", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
