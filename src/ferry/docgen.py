"""The documentation's generated parts, written from the code so that they cannot drift from it.

A page of ``docs/`` holds each generated part between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->``; :data:`BLOCKS` says which page and which function of the code gives it: the
schema-change matrix from the sinks' declarations (:mod:`ferry.sinks.base.matrix`), the transform
functions from :mod:`ferry.transform.function_catalog`, the job-file reference tables from the
pydantic models (:mod:`ferry.config.reference`).
``python -m ferry.docgen`` writes every part; ``python -m ferry.docgen --check`` lists the parts
that differ from what the code gives (exit 1), as ``tests/unit/test_docs.py`` does.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

#: The repository's ``docs/`` folder (the pages are not part of the installed package).
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _sink_matrix(_: str) -> str:
    from ferry.sinks.base.matrix import markdown  # noqa: PLC0415

    return markdown()


def _transform_functions(_: str) -> str:
    from ferry.transform.function_catalog import markdown  # noqa: PLC0415

    return markdown()


def _job_table(name: str) -> Callable[[str], str]:
    def table(committed: str) -> str:
        from ferry.config.reference import markdown  # noqa: PLC0415

        return markdown(name, committed)

    return table


#: Block name → (page under ``docs/``, the function that gives its text from the committed one:
#: the job-file tables keep the meanings the page gives each key, the other parts ignore it).
BLOCKS: dict[str, tuple[str, Callable[[str], str]]] = {
    "sink-matrix": ("schema-changes.md", _sink_matrix),
    "transform-functions": ("transforms.md", _transform_functions),
    **{
        f"job-{table}": (page, _job_table(table))
        for page, tables in {
            "job-file.md": (
                "source",
                "sink",
                "iceberg",
                "hologres",
                "starrocks-selectdb",
                "route",
                "pipeline",
            ),
            "transforms.md": ("transform", "user-defined-function"),
            "paimon.md": ("paimon",),
            "kafka-sink.md": ("kafka",),
            "maxcompute.md": ("maxcompute",),
            "fluss.md": ("fluss",),
        }.items()
        for table in tables
    },
}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- {re.escape(name)}:start -->\n(.*?)<!-- {re.escape(name)}:end -->", re.S)


def committed(name: str, docs: Path = DOCS) -> str:
    """The text of block ``name`` as its page holds it; :class:`LookupError` when the page lacks it."""
    page, _ = BLOCKS[name]
    match = _pattern(name).search((docs / page).read_text(encoding="utf-8"))
    if match is None:
        raise LookupError(f"docs/{page} lacks the markers <!-- {name}:start --> and <!-- {name}:end -->")
    return match.group(1)


def generated(name: str, docs: Path = DOCS) -> str:
    """The text of block ``name`` as the code gives it."""
    return BLOCKS[name][1](committed(name, docs))


def write(docs: Path = DOCS) -> list[str]:
    """Write every block into its page; returns the pages that changed."""
    changed: list[str] = []
    for name, (page, _) in BLOCKS.items():
        path = docs / page
        text = path.read_text(encoding="utf-8")
        if committed(name, docs) != (block := generated(name, docs)):
            match = _pattern(name).search(text)
            assert match is not None  # committed() found it
            path.write_text(text[: match.start(1)] + block + text[match.end(1) :], encoding="utf-8")
            changed += [page] if page not in changed else []
    return changed


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        stale = [f"docs/{BLOCKS[n][0]}: {n}" for n in BLOCKS if committed(n) != generated(n)]
        for line in stale:
            print(f"not current: {line} (run: python -m ferry.docgen)")
        return 1 if stale else 0
    if argv:
        print("usage: python -m ferry.docgen [--check]", file=sys.stderr)
        return 2
    for page in write():
        print(f"wrote docs/{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
