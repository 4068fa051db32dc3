"""The ``trace`` rung: skipped on a CPU, its parent side against a scripted worker, the worker's
``trace`` request on a CPU, and the feedback an agent reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.problems.candidate import load_candidate
from harness.problems.problem import load_problem
from harness.process.session import Reply, WorkerGone
from harness.rungs.context import LadderContext
from harness.rungs.ladder import Ladder
from harness.rungs.results import Earlier, ShapeTiming, Timings, TraceReport
from harness.rungs.trace import TraceRung
from harness.runner import LocalRunner, RunOptions, check
from harness.tracing.buffers import parse_buffers
from harness.tracing.proton import parse_chrome_trace
from harness.verdict import RungResult, Verdict

from .conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


class FakeSession:
    """A scripted worker: answers ``load`` (or fails it), then the trace requests."""

    def __init__(self, tag: str, script: Script) -> None:
        self.tag = tag
        self.script = script

    @property
    def logs(self) -> dict[str, Path]:
        return {"stderr": self.script.logdir / "worker.stderr.log"}

    def request(
        self, header: dict[str, Any], tensors: Any, timeout_s: float, max_bytes: int
    ) -> Reply:
        if header["op"] == "load":
            error = {"message": self.script.load_error} if self.script.load_error else None
            return Reply({"ok": error is None, "op": "load", "error": error, "integrity": []})
        self.script.sent.append(header)
        return self.script.replies["instrumented" if header.get("instrument", True) else "plain"]

    def close(self) -> dict[str, Any]:
        self.script.closed.append(self.tag)
        return {"integrity": []}


class Script:
    """The auxiliary workers a real LadderContext opens, scripted; what they were sent."""

    def __init__(self, tmp: Path, replies: dict[str, Reply], load_error: str = "") -> None:
        self.replies = replies
        self.load_error = load_error
        self.logdir = tmp / "logs"
        self.logdir.mkdir()
        self.sent: list[dict[str, Any]] = []
        self.opened: list[tuple[str, dict[str, str] | None]] = []
        self.closed: list[str] = []

    def open(self, tag: str = "", env: dict[str, str] | None = None) -> FakeSession:
        self.opened.append((tag, env))
        if self.load_error == "gone":
            raise WorkerGone("crashed with SIGSEGV")
        return FakeSession(tag, self)


CANDIDATES = {
    "cuda_inline": EXAMPLES / "matmul_bf16" / "solution_cuda_traced.py",
    "triton": EXAMPLES / "matmul_bf16" / "solution_triton_traced.py",
}
TORCH_CANDIDATE = (
    "def custom_kernel(inputs):\n    a, b = inputs\n    return (a.float() @ b.float()).bfloat16()\n"
)


def make_ctx(
    tmp: Path, script: Script, backend: str = "cuda_inline", device: str = "cuda", **options: Any
) -> LadderContext:
    """A real LadderContext for the matmul example whose workers are scripted."""
    problem = load_problem(EXAMPLES / "matmul_bf16")
    path = CANDIDATES.get(backend)
    if path is None:
        path = tmp / "solution_torch.py"
        path.write_text(TORCH_CANDIDATE)
    candidate = load_candidate(path, problem, backend=backend)
    run = RunOptions(
        device=device, trace=True, bench_shapes=[{"m": 64, "k": 64, "n": 64}], **options
    )
    return LadderContext(problem, candidate, run, device, script.open)


def _timings(median_ms: float) -> Timings:
    shape = {"m": 64, "k": 64, "n": 64}
    record = {"label": "m=64 k=64 n=64", "shape": shape, "candidate": {"median_ms": median_ms}}
    return Timings([ShapeTiming.from_record(record)])


def _reply_from(trace: Any, timing: dict[str, Any]) -> Reply:
    header, tensors = trace.to_wire()
    return Reply({"ok": True, "op": "trace", "trace": header, "timing": timing,
                  "clock": {"sm_mhz": 1980.0}, "notes": [], "integrity": []}, tensors)  # fmt: skip


def test_rung_skips_on_cpu_with_the_reason(tmp_path: Path) -> None:
    script = Script(tmp_path, {})
    ctx = make_ctx(tmp_path, script, device="cpu")
    result = TraceRung().run(ctx, Earlier())
    assert result.ok is None and result.status == "skipped"
    assert result.reason.startswith("no GPU")
    assert script.opened == []
    (tmp_path / "t").mkdir()
    torch_ctx = make_ctx(tmp_path / "t", Script(tmp_path / "t", {}), backend="torch")
    assert "no kernel of its own" in TraceRung().run(torch_ctx, Earlier()).reason
    assert TraceRung().enabled(ctx) is True


def test_rung_reports_sections_overhead_and_writes_the_timeline(
    tmp_path: Path, ck_fixture: dict
) -> None:
    trace = parse_buffers([ck_fixture])
    replies = {"instrumented": _reply_from(trace, {"median_ms": 2.2, "method": "events"})}
    script = Script(tmp_path, replies)
    ctx = make_ctx(tmp_path, script)
    result = TraceRung().run(ctx, Earlier(_timings(2.0)))  # the benchmark's median is the baseline
    assert result.ok is True and result.gating is False
    assert script.opened == [("trace", {"CTXKERNEL_TRACE": "1"})] and script.closed == ["trace"]
    sent = script.sent[0]
    assert sent["op"] == "trace" and sent["shape"] == {"m": 64, "k": 64, "n": 64}
    assert result.metrics["dominant_pct"] == pytest.approx(90.6, abs=0.1)
    assert result.metrics["overhead_pct"] == pytest.approx(10.0)
    assert result.reason.startswith("m=64 k=64 n=64: mainloop 91% with 1.5x imbalance across CTAs")
    assert "+10.0% vs uninstrumented" in result.reason
    summary = result.details["summary"]
    assert summary["overhead"]["baseline_source"] == "benchmark rung median"
    assert isinstance(result.output, TraceReport)
    perf = Earlier(result.output).performance()["trace"]
    assert perf["dominant"] == "mainloop" and perf["lines"][0].startswith("trace (ck_trace")
    files = [Path(f) for f in result.details["files"]]
    assert files and files[0].parent == tmp_path / "logs" and files[0].name.endswith(".trace.json")
    doc = json.loads(files[0].read_text())
    assert doc["otherData"]["ctxkernel"]["problem"] == "matmul_bf16"
    assert perf["files"] == [files[0].name]


def test_rung_times_a_plain_worker_when_no_benchmark_ran(tmp_path: Path) -> None:
    trace = parse_chrome_trace(FIXTURES / "proton_v36.chrome_trace")
    replies = {
        "instrumented": _reply_from(trace, {"median_ms": 1.05, "method": "globaltimer span"}),
        "plain": Reply({"ok": True, "op": "trace", "timing": {"median_ms": 1.0}}, []),
    }
    script = Script(tmp_path, replies)
    ctx = make_ctx(tmp_path, script, backend="triton", dump_dir=tmp_path / "dump")
    result = TraceRung().run(ctx, Earlier())
    assert [role for role, _ in script.opened] == ["trace", "trace_base"]
    assert script.opened[1][1] == {}  # the baseline worker is a plain one
    assert result.metrics["overhead_pct"] == pytest.approx(5.0)
    assert result.details["summary"]["overhead"]["baseline_source"] == "plain worker, same protocol"
    assert len(result.details["files"]) == 2 and (tmp_path / "dump").is_dir()


@pytest.mark.parametrize(
    ("replies", "load_error", "expect"),
    [
        ({"instrumented": Reply({"ok": False, "error": {"message": "no Proton scope was recorded"}})},
         "", "no trace: no Proton scope was recorded"),
        ({}, "nvcc failed", "no trace: loading the candidate failed: nvcc failed"),
        ({}, "gone", "the instrumented worker crashed with SIGSEGV"),
    ],
)  # fmt: skip
def test_rung_never_fails_the_verdict(
    tmp_path: Path, replies: dict, load_error: str, expect: str
) -> None:
    ctx = make_ctx(tmp_path, Script(tmp_path, replies, load_error=load_error))
    result = TraceRung().run(ctx, Earlier())
    assert result.ok is None and result.reason.startswith(expect)


def test_feedback_names_the_dominant_section(tmp_path: Path, ck_fixture: dict) -> None:
    trace = parse_buffers([ck_fixture])
    ctx = make_ctx(tmp_path, Script(tmp_path, {"instrumented": _reply_from(trace, {})}))
    rung = TraceRung().run(ctx, Earlier())
    verdict = Verdict(ok=True, problem="matmul_bf16", problem_format="native", candidate="c.py",
                      backend="cuda_inline", device="cuda", interpreter=False,
                      rungs=[RungResult("correctness", True), rung],
                      performance=Earlier(rung.output).performance())  # fmt: skip
    feedback = verdict.feedback()
    assert "trace on m=64 k=64 n=64: mainloop 91% with 1.5x imbalance across CTAs" in feedback
    assert "mainloop" in feedback and "epilogue" in feedback
    assert len(feedback.splitlines()) <= 40
    again = Verdict.from_json(json.loads(json.dumps(verdict.to_json())))
    assert again.performance["trace"]["dominant"] == "mainloop"


def test_check_with_trace_on_cpu_says_skipped_no_gpu() -> None:
    """The whole ladder on a CPU (Triton interpreter): the traced example passes (its
    Proton scopes are no-ops under the interpreter) and the trace rung is skipped."""
    verdict = check(
        EXAMPLES / "matmul_bf16",
        EXAMPLES / "matmul_bf16" / "solution_triton_traced.py",
        RunOptions(
            device="cpu",
            trials=1,
            burst=2,
            record=False,
            trace=True,
            shapes=[{"m": 32, "k": 64, "n": 48}, {"m": 65, "k": 257, "n": 33}],
        ),
    )
    assert verdict.ok, verdict.feedback()
    rung = next(r for r in verdict.rungs if r.name == "trace")
    assert rung.status == "skipped" and rung.reason.startswith("no GPU")
    assert "[trace] skipped  -- no GPU" in "\n".join(verdict.lines())
    assert verdict.options["trace"] is True


class _AskTrace:
    """A rung that sends the worker the trace request (what the rung does on a GPU)."""

    name = "ask-trace"
    gating = False

    def run(self, ctx: Any, earlier: Any) -> RungResult:
        session, _ = ctx.workers.aux("trace", env={"CTXKERNEL_TRACE": "1"})
        reply = session.request({"op": "trace", "shape": {"n": 8}, "seed": 1}, [], 60.0, 1 << 20)
        ctx.workers.close_aux("trace")
        return RungResult.passed(self, reason=json.dumps(reply.header, default=str))


def test_worker_answers_the_trace_request_on_cpu() -> None:
    """The worker dispatches ``trace`` to harness/tracing/collect.py (and ``import ck_trace``
    works in a candidate's worker): on a CPU it answers that traces need a GPU."""
    from harness.problems.candidate import load_candidate
    from harness.problems.problem import load_problem
    from harness.rungs.compile import CompileRung
    from harness.rungs.precheck import PreCheckRung

    problem = load_problem(EXAMPLES / "vector_add")
    candidate = load_candidate(EXAMPLES / "vector_add" / "solution_triton.py", problem)
    options = RunOptions(device="cpu", trials=1, record=False, shapes=[{"n": 8}])
    verdict = LocalRunner(Ladder([PreCheckRung(), CompileRung(), _AskTrace()])).run(
        problem, candidate, options
    )
    answer = json.loads(verdict.rungs[-1].reason)
    assert answer["ok"] is False and answer["op"] == "trace"
    assert answer["error"]["message"].startswith("no GPU")
