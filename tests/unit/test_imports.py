"""Dependencies point one way: no import cycle among ferry's modules, ``ferry.pipeline`` knows the
sinks and the sources only through their interfaces, the event and schema model (``ferry.model``)
and the transforms (``ferry.transform``) stand below everything that uses them, and no module grows
past :data:`MAX_LINES`.

The graph is read from the source (every ``import`` and ``from ... import``, at module level or in
a function; imports under ``if TYPE_CHECKING:`` are left out of the cycles that would fail at
import time, and counted in the cycles of type-only imports, which a reader follows all the same). Importing
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
        # a PostgreSQL column dropped and added again is told by its move: the rows are placed by
        # the column names of Debezium JSON records (to be passed in beside the source order)
        ("ferry.pipeline.truncates", "ferry.connectors.formats.source_order"),
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


def imported(
    module: str, path: Path, known: dict[str, Path], *, type_checking: bool = False
) -> Iterator[str]:
    """The ferry modules ``module`` names in its imports (a name imported from a package is the
    package; a submodule imported from it is the submodule); with ``type_checking``, also those
    imported under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set() if type_checking else _type_checking_only(tree)
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


def import_graph(*, type_checking: bool = False) -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        own = {*_ancestors(name), name}
        for target in imported(name, path, known, type_checking=type_checking):
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


#: What the event and schema model may import of ferry beyond itself: the base error and offsets.
MODEL_MAY_IMPORT = frozenset({"ferry.exceptions", "ferry.offsets"})
#: What the transforms may import of ferry beyond themselves: the model, the Flink SQL front end.
TRANSFORM_MAY_IMPORT_PACKAGES = ("ferry.model", "ferry.sql")


def _imports_of(package: str) -> set[tuple[str, str]]:
    """Every (module, imported module) of ``package`` going outside it, type-only imports counted."""
    known = modules()
    return {
        (name, target)
        for name, path in known.items()
        if _within(name, (package,))
        for target in imported(name, path, known, type_checking=True)
        if not _within(target, (package,))
    }


def test_the_model_imports_only_the_base_error_and_offsets() -> None:
    outside = sorted((n, t) for n, t in _imports_of("ferry.model") if t not in MODEL_MAY_IMPORT)
    assert outside == [], "ferry.model is what every other part speaks: it depends on none of them"


def test_the_transforms_import_only_the_model_and_the_sql_front_end() -> None:
    outside = sorted(
        (n, t)
        for n, t in _imports_of("ferry.transform")
        if t != "ferry.exceptions" and not _within(t, TRANSFORM_MAY_IMPORT_PACKAGES)
    )
    assert outside == [], "ferry.transform takes its schemas from a lookup, not from the pipeline"


#: What the sinks, the sources, the state and the configuration import of ``ferry.pipeline`` (the
#: model they speak is ``ferry.model``): each entry to be removed by the change that removes it.
PIPELINE_IMPORTED_BY_OTHERS = frozenset(
    {
        # SchemaChangeBehavior, the behaviour a job names; the router the support matrix is read from;
        # change_kind, which the memory sink checks its capabilities with
        ("ferry.config", "ferry.pipeline.router"),
        ("ferry.config.checks", "ferry.pipeline.router"),
        ("ferry.config.job", "ferry.pipeline.router"),
        ("ferry.sinks.base.matrix", "ferry.pipeline.router"),
        ("ferry.sinks.memory", "ferry.pipeline.router"),
        # RouteMode and UnroutedTables, options of a job's routes
        ("ferry.config.job", "ferry.pipeline.route"),
        # the decoder pauses the garbage collector while a batch is decoded
        ("ferry.connectors.formats.debezium", "ferry.pipeline.collector"),
        # the state store is the runner's CheckpointStore and saves the schema tracker's tables
        ("ferry.state.store", "ferry.pipeline.checkpoints"),
        ("ferry.state.store", "ferry.pipeline.tracker"),
    }
)


def test_sinks_sources_state_and_config_take_only_known_parts_of_the_pipeline() -> None:
    found = {
        (n, t)
        for package in ("ferry.sinks", "ferry.connectors", "ferry.state", "ferry.config")
        for n, t in _imports_of(package)
        if _within(t, ("ferry.pipeline",)) and t != "ferry.pipeline"
    }
    assert sorted(found - PIPELINE_IMPORTED_BY_OTHERS) == [], "import the model from ferry.model"
    assert sorted(PIPELINE_IMPORTED_BY_OTHERS - found) == [], "no longer imported: remove the entry"


#: The import cycles that type-only imports (``if TYPE_CHECKING:``) close, each a part that holds a
#: reference to its owner (a planner to the planner above it, the runner's helpers to the runner).
#: There were five before ``ferry.model``, ``ferry.transform`` and ``ferry.api.access`` broke three
#: of them; a cycle not listed here fails, and so does a listed one that is gone.
KNOWN_TYPE_ONLY_CYCLES = [
    [
        "ferry.pipeline.bad_records",
        "ferry.pipeline.barriers",
        "ferry.pipeline.buffers",
        "ferry.pipeline.commits",
        "ferry.pipeline.metrics",
        "ferry.pipeline.partitions",
        "ferry.pipeline.runner",
        "ferry.pipeline.schema_operator",
        "ferry.pipeline.shaping",
        "ferry.pipeline.status",
        "ferry.pipeline.truncates",
    ],
    ["ferry.sql.plan", "ferry.sql.query", "ferry.sql.select"],
]


def test_type_only_imports_close_no_cycle_but_the_known_ones() -> None:
    found = sorted(cycles(import_graph(type_checking=True)))
    new = [c for c in found if c not in KNOWN_TYPE_ONLY_CYCLES]
    gone = [c for c in KNOWN_TYPE_ONLY_CYCLES if c not in found]
    assert new == [], "import cycles through type-only imports:\n" + "\n".join(" → ".join(c) for c in new)
    assert gone == [], "no longer a cycle: remove from KNOWN_TYPE_ONLY_CYCLES"


#: The most lines a module of ferry has: past it, a module holds more than one thing.
MAX_LINES = 800
#: The modules longer than :data:`MAX_LINES` today, with their length: none may grow, and one that
#: shrinks under the bound leaves the list.
LONG_MODULES = {
    "ferry.config.job": 937,
    "ferry.connectors.formats.debezium": 1343,
    "ferry.pipeline.schema_operator": 990,
    "ferry.pipeline.tracker": 1134,
    "ferry.sinks.iceberg.sink": 1011,
}


def test_no_module_grows_past_the_bound() -> None:
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    too_long = {
        name: n for name, n in lengths.items() if n > max(MAX_LINES, LONG_MODULES.get(name, MAX_LINES))
    }
    assert too_long == {}, f"modules past {MAX_LINES} lines (or past their listed length): {too_long}"
    shrunk = sorted(name for name, limit in LONG_MODULES.items() if lengths.get(name, 0) <= MAX_LINES)
    assert shrunk == [], "within the bound now: remove from LONG_MODULES"
