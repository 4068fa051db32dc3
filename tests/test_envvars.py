"""Every ``CTXKERNEL_*`` environment variable is declared once (``harness/envvars.py``) and
read through that registry: the source names no variable it does not declare, no module
but the registry reads one from the environment (writing one into a child's environment
is fine), the reader parses each kind as the call sites did before there was a registry,
and ``ctxkernel env`` and the operations guide list exactly the declarations."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxkernel import indexer
from ctxkernel.cli import main as cli_main
from ctxkernel.embedders.embed import embed_spec
from harness import envvars
from harness.perf import reftimes
from harness.process import sandbox, templates
from harness.server import client as checkserver
from harness.server import daemon
from harness.tracing import ck_trace

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"CTXKERNEL_[A-Z0-9_]+")
CODE = ("ctxkernel", "harness")  # where only the registry may read a variable
# the rest of the tree that may name a variable: tests, benchmarks, guides, CI
ELSEWHERE = ("tests", "bench", "examples", "docs", "README.md", "Makefile", ".ci")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".rst", ".txt", ".yml", ".yaml", ""}
REGISTRY = ROOT / "harness" / "envvars.py"


def _files(*roots: str) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        path = ROOT / root
        found = [path] if path.is_file() else sorted(path.rglob("*"))
        out += [
            p
            for p in found
            if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts
        ]
    return out


def _named(files: list[Path]) -> dict[str, list[str]]:
    """Variable name -> the files (relative) that name it."""
    out: dict[str, list[str]] = {}
    for path in files:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for name in set(NAME.findall(text)):
            out.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return out


def test_every_variable_the_code_names_is_declared() -> None:
    named = _named(_files(*CODE))
    assert len(named) >= 25
    undeclared = {n: where for n, where in named.items() if n not in envvars.VARS}
    assert undeclared == {}, "declare these in harness/envvars.py"


def test_every_variable_tests_bench_docs_and_ci_name_is_declared() -> None:
    undeclared = {n: w for n, w in _named(_files(*ELSEWHERE)).items() if n not in envvars.VARS}
    assert undeclared == {}, "declare these in harness/envvars.py (reader: tests, bench or CI)"


def test_every_declaration_is_used_somewhere() -> None:
    """A declaration nothing names any more (besides the registry and the guide's table)
    is stale."""
    guide = ROOT / "docs" / "operations.md"
    files = [p for p in _files(*CODE, *ELSEWHERE) if p not in (REGISTRY, guide)]
    stale = sorted(set(envvars.VARS) - set(_named(files)))
    assert stale == []


# -- nothing but the registry reads a variable ---------------------------------------------

# a line that reads the environment (not a store: ``os.environ[K] = v`` writes)
READ_LINE = re.compile(
    r"environ\.get\(|getenv\(|environ\[[^\]]*\](?!\s*=[^=])|\bin\s+(os\.)?environ\b"
)


def _is_name_value(node: ast.AST) -> bool:
    """A string that is a variable's name, or ``envvars.CTXKERNEL_WARM.name``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(NAME.fullmatch(node.value))
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "name"
        and isinstance(node.value, ast.Attribute)
        and bool(NAME.fullmatch(node.value.attr))
    )


def name_constants(trees: list[ast.Module]) -> set[str]:
    """Module-level names bound to a variable's name (``ENV_MODE = "CTXKERNEL_..."``)."""
    out: set[str] = set()
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and _is_name_value(node.value):
                out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def _names_a_variable(node: ast.AST, constants: set[str]) -> bool:
    if _is_name_value(node):
        return True
    if isinstance(node, ast.Name):
        return node.id in constants
    return isinstance(node, ast.Attribute) and node.attr in constants


def reads(source: str, constants: set[str]) -> list[int]:
    """Lines that read a ``CTXKERNEL_`` variable from an environment: ``X.get(K)``,
    ``getenv(K)``, ``X[K]`` as a value, ``K in X`` (K a name, or a constant holding one),
    and any line that reads ``os.environ`` and names a variable."""
    tree = ast.parse(source)
    constants = constants | name_constants([tree])
    found: set[int] = set()
    for node in ast.walk(tree):
        key: ast.AST | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in ("get", "getenv")) or (
                isinstance(func, ast.Name) and func.id == "getenv"
            ):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.In | ast.NotIn) for op in node.ops
        ):
            key = node.left
        if key is not None and _names_a_variable(key, constants):
            found.add(node.lineno)
    for number, line in enumerate(source.splitlines(), 1):
        if NAME.search(line) and READ_LINE.search(line):
            found.add(number)
    return sorted(found)


@pytest.mark.parametrize(
    "source",
    [
        'os.environ.get("CTXKERNEL_WARM")',
        'os.getenv("CTXKERNEL_WARM", "1")',
        'value = os.environ["CTXKERNEL_WARM"]',
        'if "CTXKERNEL_WARM" in os.environ:\n    pass',
        'ENV = "CTXKERNEL_WARM"\nwarm = os.environ.get(ENV, "1")',
        "ENV = envvars.CTXKERNEL_WARM.name\non = env.get(ENV) == '1'",
        "mode = env.get(sandbox.ENV_MODE)",  # a constant of another module
        'env = {k: os.environ[k] for k in ("CTXKERNEL_HOME",) if k}',
        'home = env["CTXKERNEL_HOME"]',  # a copy of the environment is read all the same
    ],
)
def test_the_scan_sees_a_read(source: str) -> None:
    assert reads(source, {"ENV_MODE"}) != []


@pytest.mark.parametrize(
    "source",
    [
        'env["CTXKERNEL_WORKER"] = "1"',
        'os.environ["CTXKERNEL_TRACE"] = "1"',
        'env = {"CTXKERNEL_DUMP": "1"}',
        'env = dict(os.environ, CTXKERNEL_CHECK_SERVER="0")',
        'env = {**os.environ, "CTXKERNEL_HOME": str(home)}',
        "warm = envvars.CTXKERNEL_WARM.get()",
        "on = envvars.CTXKERNEL_CHECK_SERVER.get(env)",
        'ENV_MODE = "CTXKERNEL_ISOLATION"\nwhy = f"{ENV_MODE}=none"',
    ],
)
def test_the_scan_lets_a_write_or_the_reader_pass(source: str) -> None:
    assert reads(source, {"ENV_MODE"}) == []


def test_no_module_but_the_registry_reads_a_variable() -> None:
    files = [p for p in _files(*CODE) if p.suffix == ".py" and p != REGISTRY]
    trees = {p: ast.parse(p.read_text()) for p in files}
    constants = name_constants(list(trees.values()))
    assert {"ENV_MODE", "ENV_WARM", "ENV_SWITCH"} <= constants  # the scan resolves them
    found = {
        str(p.relative_to(ROOT)): lines for p in files if (lines := reads(p.read_text(), constants))
    }
    assert found == {}, "read these through harness/envvars.py"


def test_the_registry_imports_only_the_standard_library() -> None:
    """The sandboxed worker imports it (the backends' dump switches, ck_trace)."""
    tree = ast.parse(REGISTRY.read_text())
    tops = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert all(node.level == 0 for node in ast.walk(tree) if isinstance(node, ast.ImportFrom))
    assert tops <= set(sys.stdlib_module_names) | {"__future__"}


# -- the declarations and the reader -------------------------------------------------------

PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "choice": (str,),
    "int": (int,),
    "float": (float,),
    "bool": (bool,),
    "path": (Path,),
}


@pytest.mark.parametrize("name", list(envvars.VARS))
def test_each_declaration_is_whole(name: str) -> None:
    var = envvars.VARS[name]
    assert var.kind in envvars.KINDS and var.meaning and var.reader
    assert "\n" not in var.meaning and not var.meaning.endswith(".")
    if var.default is not None:
        assert isinstance(var.default, PYTHON_TYPES[var.kind])
    else:
        assert var.kind in ("str", "path", "int")
    if var.kind == "choice":
        assert var.default in var.choices
    else:
        assert var.choices == ()
    assert var.get({}) == var.default  # unset: the default


@pytest.mark.parametrize(
    "var, raw, expected",
    [
        # a flag: on only with exactly 1
        (envvars.CTXKERNEL_ALLOW_DOWNLOAD, "1", True),
        (envvars.CTXKERNEL_ALLOW_DOWNLOAD, "true", False),
        (envvars.CTXKERNEL_ALLOW_DOWNLOAD, " 1", False),
        (envvars.CTXKERNEL_TRACE, "0", False),
        (envvars.CTXKERNEL_WORKER, "1", True),
        # a switch: off with 0, no, off, false (any case, spaces around)
        (envvars.CTXKERNEL_WARM, "0", False),
        (envvars.CTXKERNEL_WARM, " OFF ", False),
        (envvars.CTXKERNEL_CHECK_SERVER, "False", False),
        (envvars.CTXKERNEL_REF_CACHE, "no", False),
        (envvars.CTXKERNEL_WARM, "", True),
        (envvars.CTXKERNEL_WARM, "2", True),
        # set to anything
        (envvars.CTXKERNEL_FORCE_NO_GPU, "0", True),
        (envvars.CTXKERNEL_FORCE_NO_GPU, "", False),
        # text: empty is unset
        (envvars.CTXKERNEL_EMBED, "minilm", "minilm"),
        (envvars.CTXKERNEL_EMBED, "", None),
        (envvars.CTXKERNEL_EMBED_TEXT, "full", "full"),
        (envvars.CTXKERNEL_EMBED_TEXT, "", "compact"),
        (envvars.CTXKERNEL_STATIC_RECIPE, "", "default"),
        # a path: ~ expanded, empty is unset
        (envvars.CTXKERNEL_HOME, "~/ck", Path.home() / "ck"),
        (envvars.CTXKERNEL_HOME, "", None),
        (envvars.CTXKERNEL_EMBEDDERS_DIR, "/x/y", Path("/x/y")),
        # whole numbers
        (envvars.CTXKERNEL_EMBED_MAX_TOKENS, " 256 ", 256),
        (envvars.CTXKERNEL_TEST_JOBS, "4", 4),
        # the chunking processes: digits, at least 1; anything else is the default
        (envvars.CTXKERNEL_INDEX_WORKERS, "3", 3),
        (envvars.CTXKERNEL_INDEX_WORKERS, "0", 1),
        (envvars.CTXKERNEL_INDEX_WORKERS, "-2", None),
        (envvars.CTXKERNEL_INDEX_WORKERS, "two", None),
        # seconds: not a positive number is the default
        (envvars.CTXKERNEL_GIT_STALL_S, " 2.5 ", 2.5),
        (envvars.CTXKERNEL_GIT_STALL_S, "0", 60.0),
        (envvars.CTXKERNEL_GIT_STALL_S, "-1", 60.0),
        (envvars.CTXKERNEL_GIT_STALL_S, "soon", 60.0),
        (envvars.CTXKERNEL_CHECK_SERVER_IDLE, "", 600.0),
        (envvars.CTXKERNEL_CHECK_SERVER_IDLE, "nan", 600.0),
        (envvars.CTXKERNEL_CHECK_SERVER_IDLE, "30", 30.0),
        # a choice: any case, spaces around, empty is the default
        (envvars.CTXKERNEL_ISOLATION, " None ", "none"),
        (envvars.CTXKERNEL_ISOLATION, "", "auto"),
    ],
)
def test_the_reader_parses_each_kind(var: envvars.Var[Any], raw: str, expected: object) -> None:
    assert var.get({var.name: raw}) == expected
    assert envvars.get(var.name, {var.name: raw}) == expected


def test_bad_values_are_one_line_errors() -> None:
    with pytest.raises(envvars.EnvError, match=r"^CTXKERNEL_EMBED_MAX_TOKENS='lots': expected a"):
        envvars.CTXKERNEL_EMBED_MAX_TOKENS.get({"CTXKERNEL_EMBED_MAX_TOKENS": "lots"})
    # a ValueError, as ``int()`` raised before the registry
    assert issubclass(envvars.EnvError, ValueError)
    with pytest.raises(
        envvars.EnvError,
        match=r"^CTXKERNEL_ISOLATION='bogus': expected one of auto, userns, pidns, none$",
    ):
        envvars.CTXKERNEL_ISOLATION.get({"CTXKERNEL_ISOLATION": " Bogus"})


def test_an_undeclared_name_is_a_key_error() -> None:
    name = "CTXKERNEL_" + "NOT_DECLARED"
    with pytest.raises(KeyError, match="not declared"):
        envvars.get(name)
    with pytest.raises(KeyError):
        envvars.declared(name)


def test_the_reader_reads_this_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXKERNEL_WARM", "off")
    assert envvars.CTXKERNEL_WARM.get() is False and envvars.CTXKERNEL_WARM.raw() == "off"
    monkeypatch.delenv("CTXKERNEL_WARM")
    assert envvars.CTXKERNEL_WARM.get() is True and envvars.CTXKERNEL_WARM.raw() is None


def test_the_sandbox_modes_are_the_declared_choices() -> None:
    """The launcher cannot import the registry: its copy of the name and modes agrees."""
    assert envvars.CTXKERNEL_ISOLATION.name == sandbox.ENV_MODE
    assert {*sandbox.MODES, "auto"} == set(envvars.CTXKERNEL_ISOLATION.choices)


# -- the call sites behave as before -------------------------------------------------------


def test_the_harness_switches_read_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CTXKERNEL_WARM", "CTXKERNEL_REF_CACHE", "CTXKERNEL_TRACE"):
        monkeypatch.delenv(name, raising=False)
    assert templates.warm_allowed() and reftimes.enabled() and not ck_trace.enabled()
    monkeypatch.setenv("CTXKERNEL_WARM", " False")
    monkeypatch.setenv("CTXKERNEL_REF_CACHE", "0")
    monkeypatch.setenv("CTXKERNEL_TRACE", "1")
    assert not templates.warm_allowed() and not reftimes.enabled() and ck_trace.enabled()
    assert templates.ENV_WARM == "CTXKERNEL_WARM" and reftimes.ENV == "CTXKERNEL_REF_CACHE"
    assert ck_trace.ENV == "CTXKERNEL_TRACE"


def test_the_check_server_switch_reads_a_given_environment() -> None:
    assert checkserver.enabled({}) is True
    assert checkserver.enabled({"CTXKERNEL_CHECK_SERVER": " No"}) is False
    assert checkserver.enabled({"CTXKERNEL_WARM": "off"}) is False
    assert checkserver.enabled({"CTXKERNEL_WORKER": "1"}) is False
    assert checkserver.enabled({"CTXKERNEL_WORKER": "0"}) is True
    assert checkserver.ENV_SWITCH == "CTXKERNEL_CHECK_SERVER"


@pytest.mark.parametrize("raw, seconds", [("30", 30.0), ("", 600.0), ("-5", 600.0), ("x", 600.0)])
def test_the_check_server_idle_time(
    monkeypatch: pytest.MonkeyPatch, raw: str, seconds: float
) -> None:
    monkeypatch.setenv("CTXKERNEL_CHECK_SERVER_IDLE", raw)
    assert daemon.idle_setting() == seconds
    assert daemon.DEFAULT_IDLE_S == 600.0


def test_the_index_workers_and_the_embedder_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXKERNEL_INDEX_WORKERS", "0")
    assert indexer.index_workers() == 1
    monkeypatch.setenv("CTXKERNEL_INDEX_WORKERS", "many")
    assert 1 <= indexer.index_workers() <= 4
    monkeypatch.setenv("CTXKERNEL_EMBED", " minilm ")
    assert embed_spec() == "minilm"
    monkeypatch.setenv("CTXKERNEL_EMBED", "")
    monkeypatch.setenv("CTXKERNEL_EMBED_MODEL", "")
    assert embed_spec(configured="static") == "static"


# -- ctxkernel env and the operations guide -------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        cli_main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_ctxkernel_env_json_has_one_line_per_declaration(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXKERNEL_GIT_STALL_S", "5")
    monkeypatch.delenv("CTXKERNEL_MODEL", raising=False)
    code, out, err = _run(capsys, "env", "--json")
    assert code == 0 and err == ""
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["name"] for d in docs] == list(envvars.VARS)
    keys = {"type", "name", "value_type", "default", "value", "meaning", "reader"}
    assert all(d["type"] == "env" and keys <= set(d) for d in docs)
    by_name = {d["name"]: d for d in docs}
    assert by_name["CTXKERNEL_GIT_STALL_S"]["value"] == "5"
    assert by_name["CTXKERNEL_GIT_STALL_S"]["default"] == 60.0
    assert by_name["CTXKERNEL_MODEL"]["value"] is None
    assert by_name["CTXKERNEL_ISOLATION"]["choices"] == ["auto", "userns", "pidns", "none"]


def test_ctxkernel_env_prints_a_table_and_refuses_an_unknown_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXKERNEL_EMBED_TEXT", "")
    code, out, _ = _run(capsys, "env")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:2] == ["VARIABLE", "TYPE"]
    assert [line.split()[0] for line in lines[1:]] == list(envvars.VARS)
    assert "''" in next(line for line in lines if line.startswith("CTXKERNEL_EMBED_TEXT "))
    code, out, _ = _run(capsys, "env", "CTXKERNEL_WARM")
    assert code == 0 and len(out.splitlines()) == 2
    code, out, err = _run(capsys, "env", "CTXKERNEL_" + "NOT_DECLARED")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "not a ctxkernel environment variable" in err


def _guide_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "operations.md").read_text()
    start = text.index("\n## Environment variables\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| `CTXKERNEL_")
    ]


def test_the_operations_guide_lists_exactly_the_registry() -> None:
    """Name, default, reader and meaning, in the registry's order (the tests' last)."""
    expected = []
    for var in envvars.VARS.values():
        default = envvars.shown_default(var)
        expected.append(
            [f"`{var.name}`", default if default == "unset" else f"`{default}`", var.reader,
             var.meaning]
        )  # fmt: skip
    rows = _guide_rows()
    assert [r[0] for r in rows] == [e[0] for e in expected]
    wrong = [" | ".join(e) for r, e in zip(rows, expected, strict=True) if r != e]
    assert wrong == [], "the rows docs/operations.md should have"
