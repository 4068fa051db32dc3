"""On a CUDA GPU (marked ``gpu``: skipped where none is present; run on the H200).

The honest examples pass compiled (not interpreted) over every SHAPE, and the cheats that
only exist on a GPU are rejected: work left on a side stream, a kernel's illegal memory
access (the worker dies, the harness carries on), uninitialised memory from the caching
allocator (poisoned with NaN before every call), Triton's default TF32 ``tl.dot`` on an
fp32 problem.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cheatspec import EXAMPLES, FIXTURES, SMALL_SHAPES, problem_path, read_expectation

from harness.runner import LocalRunner, RunOptions, check

pytestmark = pytest.mark.gpu

GPU_CHEATS = sorted((Path(__file__).resolve().parent / "gpu_cheats").glob("g*.py"))
HONEST = [
    EXAMPLES / "vector_add",
    EXAMPLES / "softmax",
    EXAMPLES / "rmsnorm",
    EXAMPLES / "matmul_bf16",
    FIXTURES / "matmul_fp32",
]


@pytest.mark.parametrize("problem", HONEST, ids=lambda p: p.name)
def test_honest_solution_passes_on_gpu(problem: Path) -> None:
    verdict = check(
        problem,
        problem / "solution_triton.py",
        RunOptions(device="cuda", record=False),
        runner=LocalRunner(),
    )
    assert verdict.ok, verdict.feedback()
    assert not verdict.interpreter
    assert verdict.environment.get("gpu")


@pytest.mark.parametrize("cheat", GPU_CHEATS, ids=lambda p: p.stem)
def test_gpu_cheat_is_rejected(cheat: Path) -> None:
    expect = read_expectation(cheat)
    assert expect.problem
    options = {
        "device": "cuda",
        "trials": 2,
        "burst": 3,
        "record": False,
        "shapes": SMALL_SHAPES[expect.problem],
    }
    options.update(expect.options)
    verdict = check(
        problem_path(expect.problem), cheat, RunOptions(**options), runner=LocalRunner()
    )
    failed = verdict.failed_rung
    assert failed is not None, verdict.lines()
    assert failed.name in expect.rungs, failed.reason
    assert expect.named_in(failed.reason), failed.reason


def test_after_an_illegal_access_the_next_candidate_still_runs() -> None:
    bad = Path(__file__).resolve().parent / "gpu_cheats" / "g15_illegal_access.py"
    options = RunOptions(
        device="cuda", trials=1, burst=2, record=False, policy_scan=False, shapes=[{"n": 1000}]
    )
    assert not check(EXAMPLES / "vector_add", bad, options).ok
    good = check(EXAMPLES / "vector_add", EXAMPLES / "vector_add" / "solution_triton.py", options)
    assert good.ok, good.feedback()
