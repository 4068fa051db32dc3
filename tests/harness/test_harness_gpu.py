"""On a CUDA GPU (marked ``gpu``: skipped where none is present; run on the H200).

The honest examples pass compiled (not interpreted) over every SHAPE, and the cheats that
only exist on a GPU are rejected: work left on a side stream, a kernel's illegal memory
access (the worker dies, the harness carries on), uninitialised memory from the caching
allocator (poisoned with NaN before every call), Triton's default TF32 ``tl.dot`` on an
fp32 problem.
"""

from __future__ import annotations

import json
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
    if expect.rung == "none":  # passes, and what it was after is withheld, by the words
        assert failed is None, verdict.lines()
        said = json.dumps(verdict.to_json())
        assert expect.named_in(said), verdict.lines()
        return
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


def test_a_large_output_is_compared_on_the_gpu_as_on_the_cpu() -> None:
    """The correctness rung compares a large output where its reference lives (one
    of GPU MODE's, an 8192 x 8192 add, took seconds on the parent's CPU); the numbers are the CPU's."""
    import torch

    from harness.problems.problemspec import Tolerance
    from harness.rungs.common import DEVICE_COMPARE_ELEMENTS, compare_where_it_lives

    gen = torch.Generator(device="cuda").manual_seed(3)
    n = DEVICE_COMPARE_ELEMENTS + 5
    expected = torch.randn(n, device="cuda", generator=gen, dtype=torch.float16)
    got = expected.cpu().clone()  # as it comes back through the worker's pipe
    got[[7, n // 2, n - 1]] += 1.0
    got[11] = float("nan")
    tol = Tolerance(atol=1e-2, rtol=1e-2)
    on_gpu = compare_where_it_lives(got, expected, tol)
    on_cpu = compare_where_it_lives(got, expected.cpu(), tol)
    assert (on_gpu.mismatches, on_gpu.nonfinite) == (on_cpu.mismatches, on_cpu.nonfinite) == (4, 1)
    assert on_gpu.max_abs == on_cpu.max_abs and on_gpu.rmse == pytest.approx(on_cpu.rmse)
    assert not on_gpu.ok and on_gpu.reason == on_cpu.reason
    assert sorted(w["index"] for w in on_gpu.worst) == sorted(w["index"] for w in on_cpu.worst)
