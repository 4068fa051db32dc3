"""The gap to the best known implementation (``harness/perf/baselines.py``): the SOL score's
arithmetic, which problems have a library path and whether the reference is it, the skip
without a GPU, and the verdict's summary carrying it all.
"""

from __future__ import annotations

import pytest

from harness.perf import baselines
from harness.perf.baselines import library_baseline, problem_kind, sol_score
from harness.rungs.benchmark import _library_entry
from harness.rungs.ladder import summarize
from harness.rungs.results import Earlier, Roofline, ShapeTiming, Timings
from harness.verdict import PerformanceSummary, Verdict


def test_sol_is_the_share_of_the_baseline_to_roofline_gap_closed() -> None:
    half = sol_score(1.5, {"library": 2.0, "compiled": None}, 1.0)
    assert half.score == pytest.approx(0.5) and half.baseline == "library"
    assert "closes 50% of the gap" in half.reason
    assert sol_score(1.0, {"library": 2.0}, 1.0).score == pytest.approx(1.0)  # at the roofline
    assert sol_score(2.0, {"library": 2.0}, 1.0).score == pytest.approx(0.0)  # at the baseline
    assert sol_score(1.0, {"library": 1.12}, 1.0).score == pytest.approx(1.0)  # a gap of 11 %
    slower = sol_score(3.0, {"library": 2.0}, 1.0)
    assert slower.score == pytest.approx(-1.0) and "slower than the library" in slower.reason


def test_sol_takes_the_better_baseline() -> None:
    best = sol_score(1.5, {"library": 2.0, "compiled": 1.75}, 1.0)
    assert best.baseline == "compiled" and best.score == pytest.approx(0.25 / 0.75)


@pytest.mark.parametrize(
    ("cand", "bases", "roof", "words"),
    [
        (1.5, {"library": 0.9}, 1.0, "already meets the roofline"),
        (1.5, {"library": 1.0}, 1.0, "already meets the roofline"),
        # the H100's 8192^3 bf16 GEMM: cuBLASLt 1.396 ms against a 1.381 ms roofline
        (1.975, {"library": 1.396, "compiled": 21.69}, 1.381, "within 1.1% of the roofline"),
        (1.5, {"library": 1.09}, 1.0, "speedup_vs_library is the number"),
        (1.5, {"library": None, "compiled": float("nan")}, 1.0, "no baseline was timed"),
        (None, {"library": 2.0}, 1.0, "candidate was not timed"),
        (1.5, {"library": 2.0}, None, "no roofline time"),
    ],
)
def test_sol_is_undefined_with_a_reason(
    cand: float | None, bases: dict[str, float | None], roof: float | None, words: str
) -> None:
    found = sol_score(cand, bases, roof)
    assert found.score is None and words in found.reason


def test_problem_kinds_from_the_reference_ops() -> None:
    assert problem_kind(["aten::mm.out", "aten::add"]) == "gemm"
    assert problem_kind(["aten::addmm"]) == "gemm"
    assert problem_kind(["aten::convolution", "aten::relu"]) == "conv"
    assert problem_kind(["aten::scaled_dot_product_attention"]) == "attention"
    assert problem_kind(["aten::bmm", "aten::_softmax", "aten::bmm"]) == "attention"
    assert problem_kind(["aten::mm", "aten::_softmax"]) == "gemm"  # not batched: a GEMM
    assert problem_kind(["aten::add", "aten::_softmax"]) is None
    assert problem_kind([]) is None


def test_the_library_baseline_is_the_reference_only_when_it_calls_the_library() -> None:
    gemm = library_baseline("gemm", ["aten::mm"], "cuda")
    assert gemm.subject == "reference" and "cuBLAS" in gemm.reason
    sdpa = library_baseline("attention", ["aten::scaled_dot_product_attention"], "cuda")
    assert sdpa.subject == "reference"
    handmade = library_baseline("attention", ["aten::bmm", "aten::_softmax"], "cuda")
    assert handmade.subject is None and "does not call scaled_dot_product_attention" in (
        handmade.reason
    )
    none = library_baseline(None, ["aten::add"], "cuda")
    assert none.kind is None and "no library baseline" in none.reason


def test_without_a_gpu_the_library_baseline_is_skipped_with_the_reason() -> None:
    skipped = library_baseline("gemm", ["aten::mm"], "cpu")
    assert skipped.subject is None and "needs a GPU" in skipped.reason and "cpu" in skipped.reason
    record: dict[str, object] = {"reference": {"median_ms": 2.0}, "speedup": 1.5}
    _library_entry(record, skipped)
    assert record["library"] == {"kind": "gemm", "path": "cuBLAS/cuBLASLt", "why": skipped.reason}
    assert "speedup_vs_library" not in record


def _timed(record: dict[str, object]) -> Timings:
    base = {"label": "m=4096", "shape": {"m": 4096}, "candidate": {"median_ms": 1.5}}
    return Timings([ShapeTiming.from_record({**base, **record})])


def test_the_verdict_summary_carries_the_speedups_and_the_sol() -> None:
    record: dict[str, object] = {
        "reference": {"median_ms": 2.0},
        "reference_compiled": {"median_ms": 1.8},
        "speedup": 2.0 / 1.5,
        "speedup_vs_compiled": 1.8 / 1.5,
    }
    _library_entry(record, library_baseline("gemm", ["aten::mm"], "cuda"))
    assert record["speedup_vs_library"] == pytest.approx(2.0 / 1.5)
    roof = Roofline(100.0 * 1.0 / 1.5, "compute", "", "m=4096", {}, [])  # roofline at 1 ms
    summary = summarize(Earlier(_timed(record), roof))
    assert summary is not None
    assert summary.sol == pytest.approx((1.8 - 1.5) / (1.8 - 1.0))  # compiled is better
    assert summary.sol_baseline == "compiled"
    assert summary.speedup_vs_library == pytest.approx(2.0 / 1.5)
    assert summary.speedup_vs_compiled == pytest.approx(1.2)
    again = PerformanceSummary.from_json(summary.to_json())
    assert again == summary
    verdict = Verdict(True, "p", "native", "c.py", "triton", "cuda", False, [], summary=summary)
    assert "vs the best known implementation: SOL 0.38" in verdict.feedback()


def test_no_sol_for_a_problem_without_a_library_path() -> None:
    summary = summarize(Earlier(_timed({"reference": {"median_ms": 2.0}, "speedup": 1.3})))
    assert summary is not None and summary.sol is None and summary.sol_note is None
    assert PerformanceSummary.from_json({"time_ms": 1.0, "shape": "s"}) == PerformanceSummary(
        "s", 1.0
    )
    assert baselines.LIBRARY_PATH.keys() == {"gemm", "conv", "attention"}


def test_a_reference_that_runs_the_library_in_another_precision_is_not_the_baseline() -> None:
    """The bf16 GEMM example's reference multiplies float32 copies (cuBLAS's float32 GEMM,
    ~10x slower than its bf16 one on an H100): its timing is no library baseline. The
    dtypes come from the reference's real run under the op recorder."""
    from pathlib import Path
    from typing import Any

    from harness.problems.candidate import load_candidate
    from harness.problems.problem import load_problem
    from harness.rungs.context import LadderContext
    from harness.runner import RunOptions

    example = Path(__file__).resolve().parents[2] / "examples" / "matmul_bf16"
    problem = load_problem(example)
    cand = load_candidate(example / "solution_triton.py", problem)
    options = RunOptions(device="cpu", shapes=[{"m": 32, "k": 64, "n": 48}], trials=1,
                         record=False)  # fmt: skip

    def no_worker(**_: Any) -> Any:
        raise AssertionError("the reference runs in this process")

    ctx = LadderContext(problem, cand, options, "cpu", no_worker)
    ctx.learn_reference()
    facts = ctx.inputs.study()
    assert facts.input_dtypes == ("torch.bfloat16",)
    given = facts.dtypes
    assert "torch.float32" in given["aten::mm"]
    ops = ctx.library.reference_ops
    upcast = library_baseline("gemm", ops, "cuda", given, facts.input_dtypes)
    assert upcast.subject is None
    assert "in float32, its inputs are bfloat16" in upcast.reason
    record: dict[str, object] = {"reference": {"median_ms": 21.8}, "speedup": 9.7}
    _library_entry(record, upcast)
    assert "speedup_vs_library" not in record
    # the same op on the inputs' own precision is the library's path
    native = library_baseline(
        "gemm", ["aten::mm"], "cuda", {"aten::mm": ["torch.bfloat16"]}, ["torch.bfloat16"]
    )
    assert native.subject == "reference"
    # nothing known of the dtypes: as before
    assert library_baseline("gemm", ["aten::mm"], "cuda").subject == "reference"


def test_gemm_operands_are_the_pair_whose_product_has_the_output_shape() -> None:
    bf16, f32 = "torch.bfloat16", "torch.float32"
    a, b = (bf16, (32, 64)), (bf16, (64, 48))
    assert baselines.gemm_operands([a, b], (32, 48)) == (0, 1)
    assert baselines.gemm_operands([b, None, a], (32, 48)) == (2, 0)  # order from shapes
    # a square GEMM: A @ B and B @ A cost the same, the first pair is taken
    sq = (bf16, (128, 128))
    assert baselines.gemm_operands([sq, sq], (128, 128)) == (0, 1)
    # batched, with broadcasting
    assert baselines.gemm_operands([(bf16, (4, 8, 16)), (bf16, (16, 2))], (4, 8, 2)) == (0, 1)
    # nothing fits, mixed dtypes, integers, an unknown output, or two different products
    assert baselines.gemm_operands([a, b], (32, 64)) is None
    assert baselines.gemm_operands([a, (f32, (64, 48))], (32, 48)) is None
    assert baselines.gemm_operands([("torch.int8", (32, 64)), ("torch.int8", (64, 48))],
                                   (32, 48)) is None  # fmt: skip
    assert baselines.gemm_operands([a, b], None) is None
    c = (bf16, (32, 32))
    assert baselines.gemm_operands([c, (bf16, (32, 48)), (bf16, (32, 48))], (32, 48)) == (0, 1)
    wide = [(bf16, (32, 8)), (bf16, (8, 48)), (bf16, (32, 16)), (bf16, (16, 48))]
    assert baselines.gemm_operands(wide, (32, 48)) is None


def test_a_gemm_whose_reference_upcasts_is_timed_as_matmul_at_the_inputs_precision() -> None:
    """The bf16 GEMM example: its reference runs float32 cuBLAS, so the library baseline is
    torch.matmul of its two bf16 inputs (cuBLASLt's bf16 GEMM), found from the reference's
    real run; the worker's call is that product."""
    from pathlib import Path
    from types import SimpleNamespace
    from typing import Any

    import torch

    from harness.problems.candidate import load_candidate
    from harness.problems.problem import load_problem
    from harness.rungs.context import LadderContext
    from harness.runner import RunOptions
    from harness.worker.benchworker import _reference_call

    example = Path(__file__).resolve().parents[2] / "examples" / "matmul_bf16"
    problem = load_problem(example)
    cand = load_candidate(example / "solution_triton.py", problem)
    shape = {"m": 32, "k": 64, "n": 48}
    options = RunOptions(device="cpu", shapes=[shape], trials=1, record=False)

    def no_worker(**_: Any) -> Any:
        raise AssertionError("the reference runs in this process")

    ctx = LadderContext(problem, cand, options, "cpu", no_worker)
    ctx.learn_reference()
    facts = ctx.inputs.study()
    operands = facts.gemm_operands
    assert operands == (0, 1)
    ops = ctx.library.reference_ops
    own = library_baseline("gemm", ops, "cuda", facts.dtypes, facts.input_dtypes, operands)
    assert own.subject == "library" and own.operands == (0, 1)
    assert "in float32, its inputs are bfloat16" in own.reason
    assert "torch.matmul of input leaves 0 and 1" in own.reason
    # without the operands: no baseline, as before
    assert library_baseline("gemm", ops, "cuda", facts.dtypes, facts.input_dtypes).subject is None
    # a reference that is the library's path stays the baseline, operands or not
    assert library_baseline("gemm", ["aten::mm"], "cuda", None, (), (0, 1)).subject == "reference"

    worker = SimpleNamespace(problem=problem, compile_reference=False, library_operands=(0, 1))
    data = problem.generate_input(7, shape, "cpu")
    got = _reference_call(worker, shape)(data)  # type: ignore[arg-type]
    a, b = data[0], data[1]
    assert got.dtype == torch.bfloat16 and torch.equal(got, torch.matmul(a, b))

    record: dict[str, object] = {
        "reference": {"median_ms": 21.8},
        "reference_library": {"median_ms": 2.4},
        "speedup": 9.7,
    }
    _library_entry(record, own)
    assert record["library"] == {
        "kind": "gemm", "path": "cuBLAS/cuBLASLt", "why": own.reason, "median_ms": 2.4,
        "operands": [0, 1],
    }  # fmt: skip
