"""Rungs in isolation: the typed results they hand each other, the ``RungResult`` helpers,
the typed performance summary, and the walls between rung modules."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.problems.candidate import load_candidate
from harness.problems.problem import load_problem
from harness.rungs.checks import CallRecord, OutputLeaf
from harness.rungs.compile import CompileRung
from harness.rungs.context import LadderContext
from harness.rungs.ladder import Ladder, summarize
from harness.rungs.results import Earlier, FirstCall, Roofline, ShapeTiming, Timings
from harness.rungs.run import RunRung
from harness.runner import LocalRunner, RunOptions
from harness.staticscan.findings import ScanResult
from harness.verdict import PerformanceSummary, RungResult, Verdict

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
RUNGS = REPO / "harness" / "rungs"
RUNG_MODULES = {p.stem for p in RUNGS.glob("*.py")} - {
    "__init__", "ladder", "context", "inputs", "edges", "stress", "workers", "checks",
    "common", "results",
}  # fmt: skip


def test_no_rung_module_imports_another_rung_module() -> None:
    """Regression: rungs imported helpers from sibling rungs (run <- compile,
    correctness <- run, profile/trace <- benchmark, benchmark <-> roofline)."""
    found = []
    for stem in sorted(RUNG_MODULES):
        tree = ast.parse((RUNGS / f"{stem}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in RUNG_MODULES:
                found.append(f"{stem} imports {node.module}")
    assert found == []


def test_rungs_build_results_with_the_helpers_only() -> None:
    """Regression: 48 hand-written RungResult(...) constructions."""
    found = []
    for path in sorted(RUNGS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RungResult":
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


class _Gate:
    name, gating = "gate", True


def test_rung_result_helpers_and_json() -> None:
    ok = RungResult.passed(_Gate(), {"n": 1}, "fine", output=object())
    assert (ok.ok, ok.gating, ok.status, ok.metrics, ok.reason) == (
        True,
        True,
        "ok",
        {"n": 1},
        "fine",
    )
    bad = RungResult.fail(_Gate(), "broken", details={"where": "here"})
    assert bad.ok is False and bad.gating and bad.details == {"where": "here"}
    skipped = RungResult.skip(_Gate(), "no GPU")
    assert skipped.ok is None and skipped.gating is False and skipped.status == "skipped"
    later = RungResult.not_run(_Gate())
    assert later.ok is None and later.gating is True and later.reason == ""
    doc = ok.to_json()
    assert "output" not in doc and doc["status"] == "ok"
    json.dumps(doc)


def test_earlier_hands_on_results_by_type() -> None:
    timings = Timings([ShapeTiming.from_record({"label": "n=8", "shape": {"n": 8},
                                                "candidate": {"median_ms": 1.5}})])  # fmt: skip
    earlier = Earlier(None, timings)
    assert earlier.get(Timings) is timings and earlier.get(Roofline) is None
    assert timings.for_shape({"n": 8}) is timings.shapes[0] and timings.for_shape({"n": 9}) is None
    assert earlier.performance()["benchmark"][0]["label"] == "n=8"
    summary = summarize(earlier)
    assert summary == PerformanceSummary("n=8", 1.5, None, None, None)
    assert summarize(Earlier()) is None


def _context(candidate: str = "solution_triton.py") -> LadderContext:
    problem = load_problem(EXAMPLES / "vector_add")
    cand = load_candidate(EXAMPLES / "vector_add" / candidate, problem)
    options = RunOptions(device="cpu", shapes=[{"n": 8}], trials=1, record=False)

    def no_worker(**_: Any) -> Any:
        raise AssertionError("this rung needs no worker")

    return LadderContext(problem, cand, options, "cpu", no_worker)


def _first_call(ctx: LadderContext, output: torch.Tensor) -> FirstCall:
    inputs = ctx.inputs.make(0, 0)
    meta = {"dtype": str(output.dtype).replace("torch.", ""), "shape": list(output.shape),
            "device": "cpu", "dense": True, "stride": list(output.stride()), "aliases": []}  # fmt: skip
    record = CallRecord(inputs, outputs=[OutputLeaf("tensor", meta, output)],
                        calls=[{"elapsed_s": 0.01, "launches": 1}])  # fmt: skip
    return FirstCall(record)


def test_run_rung_reads_the_compile_rungs_first_call() -> None:
    """A rung tested on its own: a real context (no worker) and the typed result it reads."""
    ctx = _context()
    x, y = ctx.inputs.make(0, 0).pristine
    good = RunRung().run(ctx, Earlier(_first_call(ctx, x + y)))
    assert good.ok, good.reason
    wrong_dtype = RunRung().run(ctx, Earlier(_first_call(ctx, (x + y).double())))
    assert wrong_dtype.ok is False and "has dtype float64, expected float32" in wrong_dtype.reason
    nan = (x + y).clone()
    nan[3] = float("nan")
    failed = RunRung().run(ctx, Earlier(_first_call(ctx, nan)))
    assert failed.ok is False and "1 NaN/Inf element" in failed.reason
    assert RunRung().run(ctx, Earlier()).reason == "no first call was made"


def test_the_first_calls_tensors_go_once_correctness_has_judged_them() -> None:
    """Neither ``Earlier`` nor the verdict's results keep the first call (its inputs and
    output) past correctness: at an upstream size they were two more tensors of the
    input's size on the GPU through every later trial."""
    import weakref

    seen: dict[str, Any] = {}

    class Watch:  # a rung of this test's own, after compile and after correctness
        gating = False

        def __init__(self, name: str) -> None:
            self.name = name

        def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
            first = earlier.get(FirstCall)
            if first is not None:
                seen["output"] = weakref.ref(first.record.outputs[0].tensor)
            seen[self.name] = first is not None
            return RungResult.passed(self)

    ladder = Ladder.default()
    at = [r.name for r in ladder.rungs].index("correctness")
    ladder.rungs[at + 1 : at + 1] = [Watch("after-correctness")]
    ladder.rungs[at:at] = [Watch("before-correctness")]
    problem = load_problem(EXAMPLES / "vector_add")
    cand = load_candidate(EXAMPLES / "vector_add" / "solution_triton.py", problem)
    options = RunOptions(device="cpu", shapes=[{"n": 100}], trials=2, record=False)
    verdict = LocalRunner(ladder).run(problem, cand, options)
    assert verdict.ok, verdict.feedback()
    assert seen["before-correctness"] and not seen["after-correctness"]
    assert seen["output"]() is None  # nothing else held the first call's output
    assert all(r.output is None for r in verdict.rungs)


def test_compile_rung_reads_kernel_lines_from_the_scan_result() -> None:
    """An error raised inside kernel code (the pre-checks' jit_ranges) fails at compile."""
    ctx = _context()
    first = ctx.inputs.make(0, 0)
    error = {"message": "IndexError: out of range", "frames": [
        {"file": f"/w/{ctx.candidate.filename}", "line": 12, "name": "add_kernel", "code": ""}]}  # fmt: skip
    record = CallRecord(first, error=ctx.checks.locate_error(error))

    class Workers:
        def load(self) -> dict[str, Any]:
            return {"ok": True, "import_s": 0.1}

        def call(self, *_: Any, **__: Any) -> CallRecord:
            return record

    ctx.workers = Workers()  # type: ignore[assignment]
    inside = CompileRung().run(ctx, Earlier(ScanResult([], [(10, 14)])))
    assert inside.ok is False and inside.reason.startswith("error in kernel code: IndexError")
    outside = CompileRung().run(ctx, Earlier(ScanResult([], [(20, 30)])))
    assert outside.ok is True and "see run" in outside.reason
    assert isinstance(outside.output, FirstCall) and outside.output.record is record


def test_verdict_summary_round_trips_and_stays_null_without_timing() -> None:
    summary = PerformanceSummary("n=268435456", 0.78, 1.9, 91.5, "memory")
    verdict = Verdict(ok=True, problem="vector_add", problem_format="native", candidate="c.py",
                      backend="triton", device="cuda", interpreter=False, rungs=[],
                      summary=summary)  # fmt: skip
    doc = json.loads(json.dumps(verdict.to_json()))
    assert doc["summary"]["pct_of_roofline"] == 91.5 and doc["summary"]["bound"] == "memory"
    assert Verdict.from_json(doc).summary == summary
    assert PerformanceSummary.from_json({"time_ms": "nan"}) is None


@pytest.mark.slow
def test_a_cpu_check_has_no_summary() -> None:
    """On a CPU nothing is timed: the verdict's summary is null (the agent reports no timing)."""
    problem = load_problem(EXAMPLES / "vector_add")
    cand = load_candidate(EXAMPLES / "vector_add" / "solution_triton.py", problem)
    options = RunOptions(device="cpu", shapes=[{"n": 100}], trials=1, burst=2, record=False,
                         bench=True)  # fmt: skip
    verdict = LocalRunner(Ladder.default()).run(problem, cand, options)
    assert verdict.ok, verdict.feedback()
    assert verdict.summary is None and verdict.to_json()["summary"] is None
    assert next(r for r in verdict.rungs if r.name == "benchmark").status == "skipped"


def test_a_burst_of_large_outputs_is_shortened_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each burst call's output and the worker's copy at return are held until the burst
    ends: past ``BURST_BYTES`` the burst is shortened (never below two calls) and the rung
    says how many calls it made; a candidate that turns wrong on its second call is still
    caught."""
    import harness.rungs.anticheat as anticheat

    problem = load_problem(EXAMPLES / "vector_add")
    n = 4096  # a 16 KiB output: with a 40 KiB budget, room for 40 / (2 * 16) -> 2 calls
    monkeypatch.setattr(anticheat, "BURST_BYTES", 40 << 10)
    options = RunOptions(device="cpu", shapes=[{"n": n}], trials=1, burst=6, record=False)
    honest = load_candidate(EXAMPLES / "vector_add" / "solution_triton.py", problem)
    verdict = LocalRunner(Ladder.default()).run(problem, honest, options)
    assert verdict.ok, verdict.feedback()
    rung = next(r for r in verdict.rungs if r.name == "anti-cheat")
    assert rung.metrics["burst"] == 2
    assert "2 back-to-back calls, not 6: each returns 16.0 KiB" in rung.reason
    # wrong only on a repeat with the very same input objects (what a burst hands it)
    source = (EXAMPLES / "vector_add" / "solution_triton.py").read_text()
    source = source.replace("def custom_kernel(", "def _honest(")
    source += (
        "\n\n_SEEN = []\n\n\ndef custom_kernel(inputs):\n"
        "    if _SEEN and _SEEN[-1] is inputs[0]:\n"
        "        return torch.zeros_like(inputs[0])\n"
        "    _SEEN.append(inputs[0])\n"
        "    return _honest(inputs)\n"
    )
    path = tmp_path / "repeat_wrong.py"
    path.write_text(source)
    cheat = load_candidate(path, problem)
    caught = LocalRunner(Ladder.default()).run(problem, cheat, options)
    assert not caught.ok
    failed = caught.failed_rung
    assert failed is not None and failed.name == "anti-cheat", caught.feedback()
    assert "call 2 of 2 back-to-back calls" in failed.reason, failed.reason
