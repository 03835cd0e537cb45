"""Where the project's shared specification and fixtures are: ``FERRY_SHARED``, the ``shared``
folder beside the checkout, or ``/work/shared``. A test that needs them fails (never skips) when
none exists."""

from __future__ import annotations

import os
from pathlib import Path

_CANDIDATES = [
    os.environ.get("FERRY_SHARED"),
    str(Path(__file__).resolve().parents[2] / "shared"),
    "/work/shared",
]


def shared_dir() -> Path:
    for candidate in _CANDIDATES:
        if candidate and (Path(candidate) / "spec" / "schema-change-matrix.tsv").is_file():
            return Path(candidate)
    raise FileNotFoundError(
        "the shared specification folder is missing: set FERRY_SHARED to the folder holding "
        f"spec/ and fixtures/ (looked in {', '.join(c for c in _CANDIDATES if c)})"
    )


SHARED = shared_dir()
