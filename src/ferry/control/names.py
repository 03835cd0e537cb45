"""Names that become paths, topics and consumer groups: environments and pipelines.

Both follow one rule (1 to 100 lower-case letters, digits and ``-``, starting and ending with a
letter or digit), checked where a name enters (the API, the server file, a new pipeline), and
every path built from names goes through :func:`within`, so that no name can lead outside the
data folder even if it got into the state store some other way.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["NAME_RULE", "is_name", "name_error", "within"]

_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,98}[a-z0-9])?")

#: The rule, as error messages state it.
NAME_RULE = "1 to 100 lower-case letters, digits and '-', starting and ending with a letter or digit"


def is_name(value: object) -> bool:
    return isinstance(value, str) and _NAME_RE.fullmatch(value) is not None


def name_error(kind: str, value: object) -> str | None:
    """Why ``value`` is not a valid ``kind`` name ("environment", "pipeline"), or None."""
    if is_name(value):
        return None
    shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:60] + "...")
    return f"{shown} is not a valid {kind} name: a {kind} name is {NAME_RULE}"


def within(base: Path, *names: str) -> Path:
    """``base / name / ...``, refused (``ValueError``) unless each part is a valid name and the
    result stays inside ``base``."""
    for name in names:
        error = name_error("path", name)
        if error is not None:
            raise ValueError(error)
    root = base.resolve()
    path = root.joinpath(*names).resolve()
    if not path.is_relative_to(root) or path == root:
        raise ValueError(f"{path} is outside the data folder {root}")
    return path
