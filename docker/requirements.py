"""The requirements of ferry and of the extras named in the first argument, one a line, read from
pyproject.toml: the image installs them in a layer of their own, before the sources are copied, so
that a change to the code does not download and install every dependency again.

    python requirements.py iceberg,postgres,server > requirements.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PROJECT = tomllib.loads(Path("pyproject.toml").read_text())["project"]
#: a requirement on ferry itself with extras (``ferry-cdc[iceberg,server]``), as ``all`` is written
SELF = re.compile(re.escape(PROJECT["name"]) + r"\[(?P<extras>[^\]]+)\]")


def requirements(extras: list[str], seen: set[str] | None = None) -> list[str]:
    seen = set() if seen is None else seen
    out: list[str] = []
    for extra in extras:
        if extra in seen:
            continue
        seen.add(extra)
        if extra not in PROJECT["optional-dependencies"]:
            raise SystemExit(f"pyproject.toml has no extra {extra!r}")
        for requirement in PROJECT["optional-dependencies"][extra]:
            own = SELF.fullmatch(requirement)
            out += requirements(own["extras"].split(","), seen) if own else [requirement]
    return out


if __name__ == "__main__":
    named = [e.strip() for e in (sys.argv[1] if len(sys.argv) > 1 else "").split(",") if e.strip()]
    print("\n".join(dict.fromkeys([*PROJECT["dependencies"], *requirements(named)])))
