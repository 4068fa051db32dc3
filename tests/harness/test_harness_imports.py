"""The harness's import graph, read from the source (``ast``): no cycles, and the walls hold.

An edge is every ``import`` of a harness module, inside functions too (a cycle closed by a
function-level import is still a cycle) and under ``if TYPE_CHECKING:`` too (a type-only
cycle is still two modules that cannot be read apart). Importing ``harness.a.b`` also runs
``harness.a`` (its package), so that is an edge as well, except to the importer's own
packages (already loaded before it).

The walls are the folders: ``harness/worker/`` (what runs beside the candidate) reaches
nothing of the ladder, the runners, the CLI or the check server; ``problems/``, ``perf/``
and ``process/`` reach nothing of the ladder, the runners, the CLI or the server either."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"

# Cycles not broken yet, each with the reason it is still allowed: none. A cycle not listed
# here fails the test, and so does a listed one that is gone.
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# the ladder and what drives it: the parent's top, which the rooms below never reach
LADDER_SIDE = (
    "harness.rungs",
    "harness.runner",
    "harness.runners",
    "harness.cli",
    "harness.server",
)
# rooms and what they may not reach (a module or its submodules)
WALLS: dict[str, tuple[str, ...]] = {
    "harness.worker": (*LADDER_SIDE, "harness.verdict"),
    "harness.tracing.collect": (*LADDER_SIDE, "harness.verdict"),  # the worker's trace request
    "harness.backends": (*LADDER_SIDE, "harness.verdict"),  # imported by the worker
    "harness.problems": LADDER_SIDE,
    "harness.perf": LADDER_SIDE,
    "harness.process": LADDER_SIDE,
}
RETRIEVAL = {"ctxkernel", "chromadb", "sentence_transformers", "bm25s", "anthropic", "mcp"}


def _modules(root: Path = HARNESS) -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted(root.rglob("*.py")):
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


def _imports(module: str, package: bool, tree: ast.Module, type_only: bool = True) -> list[str]:
    """Dotted names this module imports (``TYPE_CHECKING`` blocks left out unless
    ``type_only``)."""
    skipped = (
        set()
        if type_only
        else {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and _type_checking(node)
            for sub in ast.walk(node)
        }
    )
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


def import_graph(type_only: bool = True, root: Path = HARNESS) -> dict[str, set[str]]:
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        for target in _imports(name, package, ast.parse(path.read_text()), type_only):
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


def test_the_graph_sees_function_level_and_type_checking_imports() -> None:
    graph = import_graph()
    assert (
        "harness.problems.importers.gpumode" in graph["harness.problems.problem"]
    )  # in load_problem
    assert "harness.worker.timing" in graph["harness.worker.benchworker"]
    assert "harness.worker.state" in graph["harness.worker.benchworker"]  # type-only
    assert "harness.worker.state" not in import_graph(type_only=False)["harness.worker.benchworker"]
    assert "harness.backends" not in graph["harness.backends.triton"]  # its own package
    assert "harness.tracing" in graph["harness.backends.cutedsl"]  # importing tracing.cute_trace
    assert "harness.worker" not in graph["harness.worker.serve"]  # its own package: no edge
    assert {frozenset({"a", "b"})} == set(cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}))


def test_no_import_cycles_in_the_harness() -> None:
    """Regression: runner <-> every rung, worker <-> benchworker <-> tracing,
    problem <-> importers and ck_trace <-> cute_trace were cycles closed by imports inside
    functions; worker <-> benchworker <-> tracing/collect (the handlers' ``Worker`` type),
    rungs/checks <-> rungs/workers (``CallRecord``) and rungs/common <-> rungs/context
    (``DeviceCeilings``) were cycles of type-only imports."""
    found = set(cycles(import_graph()))
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert new == [], f"import cycles: {new}"
    gone = [reason for c, reason in KNOWN_CYCLES.items() if c not in found]
    assert gone == [], f"no longer a cycle, drop it from KNOWN_CYCLES: {gone}"


def test_no_import_cycles_in_ctxkernel() -> None:
    """The retrieval side too, type-only imports included (the embedders once imported
    each other in a ring; steering and the re-check imported the loop for its type)."""
    found = cycles(import_graph(root=REPO / "ctxkernel"))
    assert found == [], f"import cycles: {[sorted(c) for c in found]}"


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_each_room_reaches_nothing_behind_its_walls() -> None:
    """Read from the folders: every module under a room, and everything it reaches, type-only
    imports included (the worker side used to import rungs/context.py for
    reference_precision)."""
    graph = import_graph()
    crossed = {}
    for room, forbidden in WALLS.items():
        members = [m for m in graph if _in(m, (room,))]
        assert members, f"{room}: no such room"
        for start in members:
            bad = sorted(m for m in reachable(graph, start) if _in(m, forbidden))
            if bad:
                crossed[start] = bad
    assert crossed == {}


def test_the_launcher_imports_nothing_of_the_harness() -> None:
    """``process/sandbox.py`` is run by path (``python -I -S .../sandbox.py``) and loads
    ``seccomp.py``, ``walls.py``, ``lifetime.py`` and ``namespaces.py`` by path from its
    own folder: at module level each imports only the standard library (the harness's
    imports live inside the parent's functions, the siblings' in a fallback)."""
    for name in ("sandbox.py", "seccomp.py", "walls.py", "lifetime.py", "namespaces.py"):
        tree = ast.parse((HARNESS / "process" / name).read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        relative = [ast.unparse(n) for n in top if isinstance(n, ast.ImportFrom) and n.level]
        absolute = [
            ast.unparse(n)
            for n in top
            if (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "harness")
            or (
                isinstance(n, ast.Import)
                and any(a.name.split(".")[0] == "harness" for a in n.names)
            )
        ]
        assert relative == [] and absolute == [], name
    assert (HARNESS / "process" / "walls.py").is_file()


def test_the_harness_never_imports_the_retrieval_stack() -> None:
    bad = {m: sorted(t & RETRIEVAL) for m, t in third_party_imports().items() if t & RETRIEVAL}
    assert bad == {}


def _harness_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """Every ``from harness... import names`` / ``import harness...`` of a file, any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "harness":
                out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.startswith("harness")]
    return out


def test_the_agent_uses_the_harness_through_its_public_api() -> None:
    """The agent imports what ``harness/__init__`` exports and the harness's top-level
    modules (errors, options, envvars, paths, redact...); the rooms behind them (worker/,
    process/, problems/, perf/, server/, rungs/, backends/, runners/, tracing/) are the
    harness's own business and may move."""
    import harness

    top_modules = {p.stem for p in HARNESS.glob("*.py")} - {"__init__", "__main__"}
    exported = set(harness.__all__)
    bad = []
    for path in sorted((REPO / "ctxkernel" / "agent").rglob("*.py")):
        for line, module, names in _harness_imports(path):
            parts = module.split(".")
            if parts == ["harness"]:
                wrong = [n for n in names if n not in exported and n not in top_modules]
            else:
                wrong = [] if parts[1] in top_modules and len(parts) == 2 else [module]
            if wrong:
                bad.append(f"{path.relative_to(REPO)}:{line}: {', '.join(wrong)}")
    assert not bad, bad
    for name in exported:  # every exported name resolves
        assert getattr(harness, name) is not None, name
