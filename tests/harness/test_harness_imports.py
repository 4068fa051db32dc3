"""The harness's import graph, read from the source (``ast``): no cycles, and the walls hold.

An edge is every ``import`` of a harness module, inside functions too (a cycle closed by a
function-level import is still a cycle); imports under ``if TYPE_CHECKING:`` are not
edges. Importing ``harness.a.b`` also runs ``harness.a`` (its package), so that is an edge
as well, except to the importer's own packages (already loaded before it)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"

# Cycles not broken yet, each with the reason it is still allowed: none. A cycle not listed
# here fails the test, and so does a listed one that is gone.
KNOWN_CYCLES: dict[frozenset[str], str] = {}
WORKER_SIDE = (
    "harness.worker.serve",
    "harness.worker.benchworker",
    "harness.worker.guards",
    "harness.tracing.collect",
)
LADDER_SIDE = (
    "harness.rungs",
    "harness.runner",
    "harness.runners",
    "harness.verdict",
    "harness.cli",
)
RETRIEVAL = {"ctxkernel", "chromadb", "sentence_transformers", "bm25s", "anthropic", "mcp"}


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted(HARNESS.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, package)
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, package: bool, tree: ast.Module) -> list[str]:
    """Dotted names this module imports at run time (``TYPE_CHECKING`` blocks left out)."""
    skipped = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _type_checking(node)
        for sub in ast.walk(node)
    }
    names: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                prefix = ".".join([*base, *([node.module] if node.module else [])])
            else:
                prefix = node.module or ""
            names.append(prefix)
            names.extend(f"{prefix}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        for target in _imports(name, package, ast.parse(path.read_text())):
            parts = target.split(".")
            for cut in range(len(parts), 0, -1):
                dep = ".".join(parts[:cut])
                if dep in modules and dep != name and not name.startswith(dep + "."):
                    graph[name].add(dep)
    return graph


def third_party_imports() -> dict[str, set[str]]:
    """Top-level names of everything each harness module imports, at any level."""
    out: dict[str, set[str]] = {}
    for name, (path, _) in _modules().items():
        tree = ast.parse(path.read_text())
        tops = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                tops.add(node.module.split(".")[0])
        out[name] = tops
    return out


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


def test_the_graph_sees_function_level_imports_and_skips_type_checking_ones() -> None:
    graph = import_graph()
    assert (
        "harness.problems.importers.gpumode" in graph["harness.problems.problem"]
    )  # inside load_problem
    assert (
        "harness.worker.serve" not in graph["harness.worker.benchworker"]
    )  # only under TYPE_CHECKING
    assert "harness.backends" not in graph["harness.backends.triton"]  # its own package
    assert "harness.tracing" in graph["harness.backends.cutedsl"]  # importing tracing.cute_trace
    assert {frozenset({"a", "b"})} == set(cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}))


def test_no_import_cycles_in_the_harness() -> None:
    """Regression (issue 13): runner <-> every rung, worker <-> benchworker <-> tracing,
    problem <-> importers and ck_trace <-> cute_trace were cycles closed by imports inside
    functions."""
    found = set(cycles(import_graph()))
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert new == [], f"import cycles: {new}"
    gone = [reason for c, reason in KNOWN_CYCLES.items() if c not in found]
    assert gone == [], f"no longer a cycle, drop it from KNOWN_CYCLES: {gone}"


def test_the_worker_side_imports_nothing_of_the_ladder() -> None:
    """The code that runs beside the candidate needs none of the parent's ladder (it used to
    import rungs/context.py for reference_precision)."""
    graph = import_graph()
    for start in WORKER_SIDE:
        reached = reachable(graph, start)
        bad = sorted(m for m in reached if m.startswith(LADDER_SIDE))
        assert bad == [], f"{start} reaches {bad}"


def test_the_harness_never_imports_the_retrieval_stack() -> None:
    bad = {m: sorted(t & RETRIEVAL) for m, t in third_party_imports().items() if t & RETRIEVAL}
    assert bad == {}
