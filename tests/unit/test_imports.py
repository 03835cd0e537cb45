"""Dependencies point one way: no import cycle among ferry's modules, and ``ferry.pipeline`` knows
the sinks and the sources only through their interfaces.

The graph is read from the source (every ``import`` and ``from ... import``, at module level or in
a function; imports under ``if TYPE_CHECKING:`` are left out, since they never run). Importing
``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, so it is also an edge to each of those
packages that does not already contain the importer: a package whose ``__init__`` imports a module
that, in turn, imports a module of that package is a cycle too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import ferry

SOURCE = Path(ferry.__file__).parent.parent

#: What ``ferry.pipeline`` may import beyond itself: the interfaces of sinks and sources.
PIPELINE_MAY_IMPORT = frozenset(
    {"ferry.sinks.base", "ferry.connectors.base", "ferry.exceptions", "ferry.retry", "ferry.offsets"}
)
#: Packages ``ferry.pipeline`` may import any module of: the event and schema model, the transforms
#: and the Flink SQL front end (sqlglot, no I/O).
PIPELINE_MAY_IMPORT_PACKAGES = ("ferry.model", "ferry.transform", "ferry.sql")

#: Imports by ``ferry.pipeline`` outside :data:`PIPELINE_MAY_IMPORT` that exist today, each to be
#: removed from this list by the change that removes it (the test fails on an entry no longer needed).
PIPELINE_EXCEPTIONS = frozenset(
    {
        # the schema operator raises the sinks' terminal error when an ALTER does not finish in time
        ("ferry.pipeline.schema_operator", "ferry.sinks.base.exceptions"),
    }
)


def modules() -> dict[str, Path]:
    """Every module of the ``ferry`` package, by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((SOURCE / "ferry").rglob("*.py")):
        parts = list(path.relative_to(SOURCE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def imported(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The ferry modules ``module`` names in its imports (a name imported from a package is the
    package; a submodule imported from it is the submodule)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            if base not in known:
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield submodule if submodule in known else base


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        own = {*_ancestors(name), name}
        for target in imported(name, path, known):
            graph[name].add(target)
            graph[name].update(a for a in _ancestors(target) if a not in own)
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_ferry_is_on_an_import_cycle() -> None:
    graph = import_graph()
    described = [
        " → ".join(c) + "; edges: " + ", ".join(f"{a} → {b}" for a in c for b in sorted(graph[a]) if b in c)
        for c in cycles(graph)
    ]
    assert described == [], "import cycles:\n" + "\n".join(described)


def test_the_cycle_finder_finds_a_cycle_through_a_package() -> None:
    graph = {"p": {"p.job"}, "p.job": {"q.model"}, "q.model": {"p"}, "q": set()}
    assert cycles(graph) == [["p", "p.job", "q.model"]]


def test_the_pipeline_imports_only_the_interfaces_of_sinks_and_sources() -> None:
    known = modules()
    outside = {
        (name, target)
        for name, path in known.items()
        if name == "ferry.pipeline" or name.startswith("ferry.pipeline.")
        for target in imported(name, path, known)
        if not (target == "ferry.pipeline" or target.startswith("ferry.pipeline."))
        and target not in PIPELINE_MAY_IMPORT
        and not _within(target, PIPELINE_MAY_IMPORT_PACKAGES)
    }
    assert sorted(outside - PIPELINE_EXCEPTIONS) == [], "ferry.pipeline imports more than the interfaces"
    assert sorted(PIPELINE_EXCEPTIONS - outside) == [], "no longer imported: remove from PIPELINE_EXCEPTIONS"


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_flink_sql_front_end_imports_nothing_of_ferry_but_the_base_error() -> None:
    known = modules()
    outside = sorted(
        (name, target)
        for name, path in known.items()
        if _within(name, ("ferry.sql",))
        for target in imported(name, path, known)
        if not _within(target, ("ferry.sql",)) and target != "ferry.exceptions"
    )
    assert outside == [], "ferry.sql is shared by ferry check and the pipeline: it depends on neither"


def test_the_control_plane_does_not_import_the_worker() -> None:
    known = modules()
    found = sorted(
        name
        for name, path in known.items()
        if name.startswith(("ferry.control", "ferry.api"))
        and "ferry.worker" in set(imported(name, path, known))
    )
    assert found == [], "the control plane runs pipelines as processes: it needs no worker"


def test_the_runner_holds_only_the_hot_loop_and_the_checkpoint() -> None:
    # barrier, lease, routing and history live in the schema operator, partitions and truncates in
    # their own modules: a runner that grows past this has taken one of them back
    runner = Path(ferry.__file__).parent / "pipeline" / "runner.py"
    assert len(runner.read_text(encoding="utf-8").splitlines()) < 400
