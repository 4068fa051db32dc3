"""Every example problem's honest Triton solution passes on CPU (Triton interpreter)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cheatspec import EXAMPLES, FIXTURES
from conftest import VerdictPool

from harness.runner import LocalRunner, RunOptions, check
from harness.verdict import Verdict

HONEST = [
    EXAMPLES / "vector_add",
    EXAMPLES / "softmax",
    EXAMPLES / "rmsnorm",
    EXAMPLES / "matmul_bf16",
    FIXTURES / "matmul_fp32",
]


def _run(problem: Path) -> Verdict:
    # every SHAPE (odd sizes included), two trials each (the second in place), a short burst
    options = RunOptions(device="cpu", trials=2, burst=2, record=False)
    return check(problem, problem / "solution_triton.py", options, runner=LocalRunner())


@pytest.fixture(scope="module")
def honest_verdicts(verdict_pool: VerdictPool) -> Iterator[VerdictPool]:
    for problem in HONEST:
        verdict_pool.submit(f"honest:{problem}", lambda p=problem: _run(p))
    yield verdict_pool


@pytest.mark.parametrize("problem", HONEST, ids=lambda p: p.name)
def test_honest_solution_passes_on_cpu(problem: Path, honest_verdicts: VerdictPool) -> None:
    verdict = honest_verdicts.get(f"honest:{problem}", lambda: _run(problem))
    assert verdict.ok, verdict.feedback()
    assert [r.name for r in verdict.rungs] == [
        "pre-checks",
        "compile",
        "run",
        "correctness",
        "anti-cheat",
    ]
    assert verdict.interpreter and verdict.device == "cpu"
    assert verdict.integrity == []


def test_bf16_matmul_passes_with_error_near_1e_2() -> None:
    """The interpreter truncates fp32->bf16: a legitimate relative error near 1e-2 must pass."""
    problem = EXAMPLES / "matmul_bf16"
    options = RunOptions(
        device="cpu", trials=1, burst=2, record=False, shapes=[{"m": 100, "k": 72, "n": 130}]
    )
    verdict = check(problem, problem / "solution_triton.py", options)
    assert verdict.ok, verdict.feedback()
    correctness = next(r for r in verdict.rungs if r.name == "correctness")
    assert 1e-3 < correctness.metrics["max_rel"] < 2e-2
    assert correctness.metrics["cossim"] > 0.999


def test_run_is_recorded(tmp_path: Path) -> None:
    problem = EXAMPLES / "vector_add"
    options = RunOptions(
        device="cpu", trials=1, burst=2, shapes=[{"n": 100}], runs_dir=tmp_path / "runs"
    )
    verdict = check(problem, problem / "solution_triton.py", options)
    assert verdict.run_dir is not None
    run_dir = Path(verdict.run_dir)
    assert run_dir.parent == tmp_path / "runs" / "vector_add"
    doc = json.loads((run_dir / "result.json").read_text())
    assert doc["type"] == "verdict" and doc["ok"] is True
    assert (run_dir / "solution_triton.py").read_text() == (
        problem / "solution_triton.py"
    ).read_text()
    assert (run_dir / "worker.stderr.log").exists()
    assert (run_dir / "feedback.txt").read_text().startswith("PASSED")
