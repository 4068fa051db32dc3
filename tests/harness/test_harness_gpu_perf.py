"""The performance rungs on a CUDA GPU (marked ``gpu`` and ``slow``; ``bench/gpu/gpu_validate.sh`` runs the
full acceptance list with the numbers): the benchmark and roofline rungs on a vector add,
and a kernel hidden on a side stream timed with its real cost.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cheatspec import EXAMPLES

from harness.rungs.benchmark import BenchmarkRung
from harness.rungs.compile import CompileRung
from harness.rungs.ladder import Ladder
from harness.runner import LocalRunner, RunOptions, check

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
N = 1 << 26


def _bench_options(**more: object) -> RunOptions:
    base = {
        "device": "cuda",
        "record": False,
        "trials": 1,
        "burst": 2,
        "bench": True,
        "bench_shapes": [{"n": N}],
        "bench_budget_s": 1.0,
    }
    base.update(more)
    return RunOptions(**base)  # type: ignore[arg-type]


def test_vector_add_benchmark_and_roofline() -> None:
    verdict = check(
        EXAMPLES / "vector_add",
        EXAMPLES / "vector_add" / "solution_triton.py",
        _bench_options(shapes=[{"n": 4097}]),
    )
    assert verdict.ok, verdict.feedback()
    rungs = {r.name: r for r in verdict.rungs}
    bench = rungs["benchmark"]
    assert bench.ok and bench.metrics["runs"] >= 10 and bench.metrics["l2"] == "flushed"
    assert rungs["roofline"].ok and verdict.performance["pct_of_roofline"] > 50
    assert "% of roofline" in verdict.feedback()


def test_work_on_a_side_stream_is_timed_not_zero() -> None:
    honest = check(
        EXAMPLES / "vector_add",
        EXAMPLES / "vector_add" / "solution_triton.py",
        _bench_options(bench_reference=False, shapes=[{"n": 4097}]),
        runner=LocalRunner(Ladder([CompileRung(), BenchmarkRung()])),
    )
    hidden = check(
        EXAMPLES / "vector_add",
        REPO / "bench" / "candidates" / "side_stream_add.py",
        _bench_options(bench_reference=False, shapes=[{"n": 4097}], policy_scan=False),
        runner=LocalRunner(Ladder([CompileRung(), BenchmarkRung()])),
    )
    assert honest.ok, honest.feedback()
    rung = next(r for r in hidden.rungs if r.name == "benchmark")
    assert rung.ok is False and "escaped the timed stream" in rung.reason
    assert (
        rung.metrics["median_ms"]
        > 0.8 * next(r for r in honest.rungs if r.name == "benchmark").metrics["median_ms"]
    )


def test_the_witness_times_the_vector_add_beside_the_events_and_the_reference_is_cached() -> None:
    """Kernel records beside the events median (within 3% on a plain memory-bound
    kernel), a sub-millisecond kernel timed within its scaled budget, and the second check's
    reference timing taken from the cache."""
    options = _bench_options(shapes=[{"n": 4097}])
    first = check(EXAMPLES / "vector_add", EXAMPLES / "vector_add" / "solution_triton.py", options)
    assert first.ok, first.feedback()
    shape = next(r for r in first.rungs if r.name == "benchmark").details["shapes"][0]
    seen = shape["rounds"][0]["candidate"]["witness"]
    assert seen.get("median_ms"), seen
    assert seen["rel_diff"] < 0.03, seen
    assert shape["rounds"][0]["candidate"]["budget_s"] <= 1.0
    again = check(EXAMPLES / "vector_add", EXAMPLES / "vector_add" / "solution_triton.py", options)
    shape = next(r for r in again.rungs if r.name == "benchmark").details["shapes"][0]
    assert shape["rounds"][0]["reference"].get("cached"), shape["rounds"][0]
    assert "its timing cached" in shape["timing_note"]


@pytest.mark.parametrize("solution", ["solution_triton.py", "solution_cuda.py"])
def test_the_events_agree_with_the_kernel_records_at_two_to_the_28(solution: str) -> None:
    """The timing line, per run: with the flush counted as lead, the CUDA C++ and
    Triton vector adds' event medians were 1.3-5.5 % above their kernel records (which
    stayed within 0.8 % of ncu) in 5 of 10 runs on an H200; the 4 runs whose spin alone
    covered the host call were within 0.6 %. Two runs in one check."""
    n = 1 << 28
    options = _bench_options(bench_shapes=[{"n": n}, {"n": n}])
    verdict = check(EXAMPLES / "vector_add", EXAMPLES / "vector_add" / solution, options)
    assert verdict.ok, verdict.feedback()
    shapes = next(r for r in verdict.rungs if r.name == "benchmark").details["shapes"]
    for shape in shapes:
        seen = shape["rounds"][0]["candidate"]["witness"]
        assert seen["rel_diff"] < 0.015, (seen, shape["timing_note"])
