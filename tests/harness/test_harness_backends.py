"""The backend registry is the one home of what a backend is: every choice list reads it,
a backend added to it is detected, scanned, guarded and cached like the others, and no
backend's name is spelled out in the harness outside its own module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import harness.backends as backends
from harness.backends import Backend, LaunchCounter, backend_names, get_backend
from harness.problems.candidate import load_candidate
from harness.problems.policy import Policy
from harness.problems.problem import load_problem
from harness.process.workerenv import scrubbed_env
from harness.staticscan import scan

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def _choices(command: object, option: str) -> list[str]:
    for param in command.params:  # type: ignore[attr-defined]
        if param.name == option:
            return list(param.type.choices)
    raise AssertionError(f"no --{option} on {command}")


def test_every_backend_choice_list_is_the_registry() -> None:
    import click

    from ctxkernel.cli.agent import agent_cmd
    from ctxkernel.cli.check import check_cmd
    from ctxkernel.cli.context import init_cmd
    from ctxkernel.cli.mcp import mcp_cmd
    from harness.cli import check_options

    @click.command()
    @check_options
    def harness_check(**_: object) -> None: ...

    names = backend_names()
    assert names[-1] == backends.DEFAULT_BACKEND  # plain PyTorch claims everything: last
    for command in (harness_check, check_cmd, agent_cmd, init_cmd, mcp_cmd):
        assert _choices(command, "backend") == names


def test_every_backend_declares_a_label_and_a_primer_file() -> None:
    for backend in backends.all_backends():
        assert backend.label and backend.label != "base"
        assert backend.primer_path().is_file(), backend.primer_path()
        assert backend.primer_path().parent == Path(backends.__file__).parent
        assert backend.primer().strip()
        assert bool(backend.trace_primer()) == (backend.trace_recorder is not None)
        assert "## Tracing" not in backend.primer()


class _ToyBackend(Backend):
    """A backend as a newcomer would add one: its module, then one registry line."""

    name = "toy"
    label = "Toy"
    modules = ("toylang",)
    requires_gpu = True
    enforce_launches = True
    jit_decorators = ("toylang.kernel",)
    code_rewriters = ("toylang/compiler/",)
    env_passthrough = ("TOY_ARCH",)

    def cache_env(self, home: Path) -> dict[str, str]:
        return {"TOY_CACHE_DIR": str(home / ".toy-cache")}

    def dump_env(self) -> dict[str, str]:
        return {"TOY_KEEP": "1"}

    def prepare_worker(self, device: str) -> LaunchCounter | None:
        return LaunchCounter()


TOY_CANDIDATE = """\
import torch
import toylang

@toylang.kernel
def add(a, b):
    return a @ b  # kernel code: the static scan's forbidden-op rules do not apply here

def custom_kernel(inputs):
    x, y = inputs
    return add(x, y)
"""


def test_a_backend_added_to_the_registry_is_used_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toy = _ToyBackend()
    monkeypatch.setattr(backends, "REGISTRY", (toy, *backends.REGISTRY))
    monkeypatch.setenv("TOY_ARCH", "sm_90a")
    problem = load_problem(EXAMPLES / "matmul_bf16")
    path = tmp_path / "solution_toy.py"
    path.write_text(TOY_CANDIDATE)
    candidate = load_candidate(path, problem)
    assert candidate.backend == "toy" and not candidate.backend_declared
    declared = tmp_path / "declared.py"
    declared.write_text("# backend: toy\n" + TOY_CANDIDATE.replace("import toylang\n", ""))
    assert load_candidate(declared, problem).backend_declared
    assert "toy" in backend_names()
    # the body of its kernel decorator is kernel code; a matmul outside one is not
    policy = Policy.from_entries(problem.forbidden)
    assert not scan(TOY_CANDIDATE, policy, entry="custom_kernel").errors
    outside = TOY_CANDIDATE.replace("@toylang.kernel\n", "")
    assert any(f.rule == "P101" for f in scan(outside, policy, entry="custom_kernel").errors)
    # its caches land in the worker's temp dir; what it needs from the parent is kept
    env = scrubbed_env(tmp_path, {})
    assert env["TOY_CACHE_DIR"].startswith(str(tmp_path)) and env["TOY_ARCH"] == "sm_90a"
    assert backends.worker_env_for("toy", "cuda", dump=True)["TOY_KEEP"] == "1"
    assert "toylang/compiler/" in backends.code_rewriters()
    # a candidate file may not shadow its module
    shadow = tmp_path / "toylang.py"
    shadow.write_text(TOY_CANDIDATE)
    assert load_candidate(shadow, problem).module_name == "candidate"


def test_the_registry_rejects_an_unknown_backend_with_the_choices(tmp_path: Path) -> None:
    from harness.errors import UsageError

    problem = load_problem(EXAMPLES / "vector_add")
    path = tmp_path / "c.py"
    path.write_text("# backend: fortran\ndef custom_kernel(inputs):\n    return inputs[0]\n")
    with pytest.raises(UsageError) as info:
        load_candidate(path, problem)
    assert "fortran" in str(info.value) and ", ".join(backend_names()) in str(info.value)
    with pytest.raises(KeyError):
        get_backend("fortran")


BACKEND_NAMES_TO_FIND = {"triton", "cutedsl", "cuda_inline", "tilelang"}
ALLOWED = {
    # Proton's own API takes the language it instruments by name
    Path("harness/tracing/proton.py"),
}


def test_no_backend_name_is_spelled_out_in_the_harness_outside_its_module() -> None:
    """Regression: backend names were spelled out in 21 places of 13 modules."""
    found = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        relative = path.relative_to(REPO)
        if relative.parts[:2] == ("harness", "backends") or relative in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in BACKEND_NAMES_TO_FIND:
                found.append(f"{relative}:{node.lineno}: {node.value!r}")
    assert found == []
