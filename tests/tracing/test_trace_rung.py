"""The ``trace`` rung: skipped on a CPU, its parent side against a scripted worker, the worker's
``trace`` request on a CPU, and the feedback an agent reads."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.backends import get_backend
from harness.rungs.ladder import Ladder
from harness.rungs.trace import TraceRung
from harness.runner import LocalRunner, Reply, RunOptions, WorkerGone, check
from harness.tracing.buffers import parse_buffers
from harness.tracing.proton import parse_chrome_trace
from harness.verdict import RungResult, Verdict

from .conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


class FakeSession:
    def __init__(self, replies: dict[str, Reply]) -> None:
        self.replies = replies
        self.sent: list[dict[str, Any]] = []

    def request(
        self, header: dict[str, Any], tensors: Any, timeout_s: float, max_bytes: int
    ) -> Reply:
        self.sent.append(header)
        return self.replies["instrumented" if header.get("instrument", True) else "plain"]


class FakeCtx:
    """What the rung reads from a LadderContext, with scripted auxiliary workers."""

    def __init__(self, tmp: Path, replies: dict[str, Reply], backend: str = "cuda_inline",
                 device: str = "cuda", load_error: str = "") -> None:  # fmt: skip
        self.device = device
        self.candidate = SimpleNamespace(backend=backend, path=tmp / "cand.py")
        self.backend = get_backend(backend)
        self.options = SimpleNamespace(trace=True, bench_shapes=None, dump_dir=None)
        self.problem = SimpleNamespace(
            name="matmul_bf16", bench_shapes=[{"m": 64, "k": 64, "n": 64}], public_seed=lambda i: 11
        )
        self.shapes = [{"m": 8, "k": 8, "n": 8}]
        self.secret = 5
        self.bench_results: list[dict[str, Any]] = []
        self.performance: dict[str, Any] = {}
        logdir = tmp / "logs"
        logdir.mkdir()
        self.logs = {"stderr": logdir / "worker.stderr.log"}
        self.session = FakeSession(replies)
        self.opened: list[tuple[str, dict[str, str] | None]] = []
        self.closed: list[str] = []
        self.load_error = load_error

    def aux(self, role: str, env: dict[str, str] | None = None) -> tuple[Any, dict[str, Any]]:
        self.opened.append((role, env))
        if self.load_error == "gone":
            raise WorkerGone("crashed with SIGSEGV")
        return self.session, ({"error": {"message": self.load_error}} if self.load_error else {})

    def close_aux(self, role: str) -> list[str]:
        self.closed.append(role)
        return []


def _reply_from(trace: Any, timing: dict[str, Any]) -> Reply:
    header, tensors = trace.to_wire()
    return Reply({"ok": True, "op": "trace", "trace": header, "timing": timing,
                  "clock": {"sm_mhz": 1980.0}, "notes": [], "integrity": []}, tensors)  # fmt: skip


def test_rung_skips_on_cpu_with_the_reason(tmp_path: Path) -> None:
    ctx = FakeCtx(tmp_path, {}, device="cpu")
    result = TraceRung().run(ctx)  # type: ignore[arg-type]
    assert result.ok is None and result.status == "skipped"
    assert result.reason.startswith("no GPU")
    assert ctx.opened == []
    torch_ctx = (
        FakeCtx(tmp_path / "t", {}, backend="torch") if (tmp_path / "t").mkdir() is None else None
    )
    assert torch_ctx is not None
    assert "no kernel of its own" in TraceRung().run(torch_ctx).reason  # type: ignore[arg-type]
    assert TraceRung().enabled(ctx) is True  # type: ignore[arg-type]


def test_rung_reports_sections_overhead_and_writes_the_timeline(
    tmp_path: Path, ck_fixture: dict
) -> None:
    trace = parse_buffers([ck_fixture])
    replies = {"instrumented": _reply_from(trace, {"median_ms": 2.2, "method": "events"})}
    ctx = FakeCtx(tmp_path, replies)
    ctx.bench_results = [{"shape": {"m": 64, "k": 64, "n": 64}, "candidate": {"median_ms": 2.0}}]
    result = TraceRung().run(ctx)  # type: ignore[arg-type]
    assert result.ok is True and result.gating is False
    assert ctx.opened == [("trace", {"CTXKERNEL_TRACE": "1"})] and ctx.closed == ["trace"]
    sent = ctx.session.sent[0]
    assert sent["op"] == "trace" and sent["shape"] == {"m": 64, "k": 64, "n": 64}
    assert result.metrics["dominant_pct"] == pytest.approx(90.6, abs=0.1)
    assert result.metrics["overhead_pct"] == pytest.approx(10.0)
    assert result.reason.startswith("m=64 k=64 n=64: mainloop 91% with 1.5x imbalance across CTAs")
    assert "+10.0% vs uninstrumented" in result.reason
    summary = result.details["summary"]
    assert summary["overhead"]["baseline_source"] == "benchmark rung median"
    perf = ctx.performance["trace"]
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
    ctx = FakeCtx(tmp_path, replies, backend="triton")
    ctx.options.dump_dir = tmp_path / "dump"
    result = TraceRung().run(ctx)  # type: ignore[arg-type]
    assert [role for role, _ in ctx.opened] == ["trace", "trace_base"]
    assert ctx.opened[1][1] == {}  # the baseline worker is a plain one
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
    ctx = FakeCtx(tmp_path, replies, load_error=load_error)
    result = TraceRung().run(ctx)  # type: ignore[arg-type]
    assert result.ok is None and result.reason.startswith(expect)


def test_feedback_names_the_dominant_section(tmp_path: Path, ck_fixture: dict) -> None:
    trace = parse_buffers([ck_fixture])
    ctx = FakeCtx(tmp_path, {"instrumented": _reply_from(trace, {})})
    rung = TraceRung().run(ctx)  # type: ignore[arg-type]
    verdict = Verdict(ok=True, problem="matmul_bf16", problem_format="native", candidate="c.py",
                      backend="cuda_inline", device="cuda", interpreter=False,
                      rungs=[RungResult("correctness", True), rung], performance=ctx.performance)  # fmt: skip
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

    def run(self, ctx: Any) -> RungResult:
        session, _ = ctx.aux("trace", env={"CTXKERNEL_TRACE": "1"})
        reply = session.request({"op": "trace", "shape": {"n": 8}, "seed": 1}, [], 60.0, 1 << 20)
        ctx.close_aux("trace")
        return RungResult(self.name, True, False, {}, json.dumps(reply.header, default=str))


def test_worker_answers_the_trace_request_on_cpu() -> None:
    """The worker dispatches ``trace`` to harness/tracing/collect.py (and ``import ck_trace``
    works in a candidate's worker): on a CPU it answers that traces need a GPU."""
    from harness.candidate import load_candidate
    from harness.problem import load_problem
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
