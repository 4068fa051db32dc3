"""Planted cheats against the evidence a kernel engineer trusts on a GPU, under ``evidence_cheats/``.

Each file's header names its problem, options and the rung and reason that must reject it
(``# expect: rung: words``; ``none`` for the honest counterparts, which must pass every
rung, and for the calibration-phase detector, which the protocol must leave no better off):

- ``e01``, ``e02``: an uninitialised shared-memory read right by luck, a producer/consumer
  hand-off with no barrier (the ``sanitize`` rung: racecheck), CUDA C++ built with NVRTC;
- ``e03``: a tensor-core path compiled and never taken, a SIMT path run (the ``isa`` rung,
  ``--expect-isa wgmma``);
- ``e04``: a well-formed benchmark frame the candidate writes onto the result channel itself,
  its real reply then read as the answer to the next request (the ``benchmark`` rung);
- ``e05``: slow only while the benchmark calibrates (timed to the floor, at its real speed);
- ``e06``: a CUDA graph captured on the first call and replayed blind to where the inputs
  are (wrong once the inputs move: a new trial, the benchmark's rotating input sets);
- ``h01``, ``h02``: a pipelined Triton matmul and the staged add written right.

On a CPU: the forged frame end to end on the simulated GPU clock of ``test_harness_perf.py``
(the worker's requests answered in-process, frames in the order the pipe would carry them),
the calibration-phase detector on the same clock, and the CPU ladder for the Triton ones.
The rest is marked ``gpu`` (``bench/gpu/gpu_evidence.sh`` runs it on the H200).
"""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch
from cheatspec import EXAMPLES, Expectation, problem_path, read_expectation
from simgpu import FakeGPU, _config, simulated_bench

from harness.perf.benchstats import MIN_TIMED_SAMPLES, StopRule, summarize
from harness.problems.problem import load_problem
from harness.process import channel
from harness.runner import LocalRunner, RunOptions, check
from harness.verdict import Verdict
from harness.worker import timing

FOLDER = Path(__file__).resolve().parent / "evidence_cheats"
ALL = sorted(FOLDER.glob("[eh]*.py"))
REJECTED = [p for p in ALL if read_expectation(p).rung != "none"]
HONEST = [p for p in ALL if p.name.startswith("h")]
CALIBRATION = FOLDER / "e05_calibration_detector.py"
TRITON_ON_CPU = [  # correct on a CPU (e06 captures no graph there): only the GPU rung catches them
    FOLDER / "e03_unused_tensor_core_path.py",
    FOLDER / "e06_self_captured_graph.py",
    FOLDER / "h01_honest_pipelined_matmul.py",
]


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"evidence_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_class_of_the_issue_has_a_planted_cheat_and_names_its_rung() -> None:
    names = {p.stem[:3] for p in ALL}
    assert {"e01", "e02", "e03", "e04", "e05", "e06", "h01", "h02"} <= names, names
    for path in ALL:
        expect = read_expectation(path)
        assert expect.problem and problem_path(expect.problem).is_dir(), path.name
        assert expect.words, path.name


# -- the forged benchmark frame (e04), on the simulated GPU clock ---------------------------


def _decoded(data: bytes) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """A frame as the candidate writes it (``os.write`` on the pipe), decoded as the parent
    decodes it, so only a well-formed frame gets in."""
    prefix = channel._PREFIX
    magic, head_len, payload_len = prefix.unpack(data[: prefix.size])
    assert magic == channel.MAGIC and payload_len == 0
    frame = channel.decode(data[prefix.size : prefix.size + head_len], memoryview(b""))
    return frame.header, frame.tensors


def _forger_bench(
    fake_gpu: FakeGPU,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """The benchmark rung against a worker answering in-process whose candidate, on its
    8th call, writes ``e04``'s forged frame onto the pipe ahead of the real reply."""
    from harness.rungs.benchmark import BenchmarkRung
    from harness.rungs.results import Earlier

    forger = _module(FOLDER / "e04_forged_bench_frame.py")
    n = 1 << 16

    def forge(subject: str, calls: int, frames: Any) -> None:
        if subject == "candidate" and calls == 8:  # mid-request, as e04 does
            frames.append(_decoded(forger.forged_frame(n)))

    ctx, _ = simulated_bench(fake_gpu, monkeypatch, n, forge)
    return BenchmarkRung().run(ctx, Earlier())


def test_a_forged_benchmark_frame_is_refused_not_read_as_the_reply(
    fake_gpu: FakeGPU,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = _forger_bench(fake_gpu, monkeypatch)
    assert result.ok is False
    assert "does not answer the request" in result.reason, result.reason
    assert read_expectation(FOLDER / "e04_forged_bench_frame.py").named_in(result.reason)


def test_without_the_nonce_the_forged_frame_was_the_verdicts_time(
    fake_gpu: FakeGPU,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Why the nonce: with the old checks (any frame of the right op, the re-check's answers
    zipped loosely) the real reply was read as the re-check's answer, no pick was compared,
    and the forged median (4.6 TB/s) was the one reported."""
    from harness.rungs import benchmark

    monkeypatch.setattr(benchmark, "unanswered", lambda reply, op, nonce: None)
    loose: Callable[..., Any] = benchmark._verify

    def old_verify(*args: Any, **kwargs: Any) -> Any:
        reason = loose(*args, **kwargs)
        return None if reason and "answered 0 of the" in reason else reason

    monkeypatch.setattr(benchmark, "_verify", old_verify)
    result = _forger_bench(fake_gpu, monkeypatch)
    assert result.ok, result.reason
    forged_ms = 12.0 * (1 << 16) / 4.6e12 * 1e3
    assert result.metrics["median_ms"] == pytest.approx(forged_ms, rel=0.01)


def test_the_worker_echoes_a_requests_nonce_and_only_then() -> None:
    from harness.worker.serve import Worker, answer

    worker = Worker(None, "/tmp", "cpu")  # type: ignore[arg-type]
    reply, _ = answer(worker, {"op": "bench", "nonce": 1234}, [])
    assert reply["op"] == "bench" and reply["nonce"] == 1234  # "needs a CUDA device", answered
    reply, _ = answer(worker, {"op": "no-such-op", "nonce": 5}, [])
    assert reply["nonce"] == 5 and "unknown request" in reply["harness_error"]
    reply, _ = answer(worker, {"op": "bench"}, [])
    assert "nonce" not in reply


def test_a_recheck_answer_that_belongs_to_another_request_fails() -> None:
    """The re-check of kept outputs, answered by a frame of another request (the shifted
    real benchmark reply) or by fewer picks than asked: a failure, never a silent pass."""
    from harness.rungs.benchmark import _verify

    problem = load_problem(EXAMPLES / "vector_add")
    ctx = SimpleNamespace(problem=problem, device="cpu")
    reply = {"report": {"kept": [3, 8, 11]}}

    class Shifted:
        def __init__(self, head: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
            self.head = head

        def request(self, header: dict[str, Any], *_: Any) -> Any:
            return SimpleNamespace(header=self.head(header), tensors=[])

    bench_reply = Shifted(lambda h: {"ok": True, "op": "bench", "report": {}})
    message = _verify(ctx, bench_reply, reply, {"n": 100}, 7, random.Random(0))  # type: ignore[arg-type]
    assert message and "does not answer the request" in message
    short = Shifted(lambda h: {"op": "bench_sample", "nonce": h["nonce"], "picks": []})
    message = _verify(ctx, short, reply, {"n": 100}, 7, random.Random(0))  # type: ignore[arg-type]
    assert message and "answered 0 of the 3 timed outputs" in message


# -- the calibration-phase detector (e05), on the simulated GPU clock -----------------------


def test_a_calibration_phase_detector_is_timed_to_the_floor_at_its_real_speed(
    fake_gpu: FakeGPU,
) -> None:
    """``e05``'s own test of the phase (its call count, the op recorder's dispatch mode)
    decides: 3 ms of host time and four kernels while calibrating, one 0.1 ms kernel after.
    The series is no shorter than the floor, the budget was not cut by the slow calls, and
    the median is the steady call's, not better."""
    from harness.worker.guards import OpRecorder

    cheat = _module(CALIBRATION)
    recorder = OpRecorder()
    bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)

    def sandbagger(inputs: Any) -> torch.Tensor:
        cheat._STATE["big_calls"] += 1
        if cheat.calibrating():
            fake_gpu.now += 3.0 + 4 * 0.1
        else:
            fake_gpu.now += 0.1
        return inputs * 2

    def under_recorder(inputs: Any) -> Any:
        with recorder:
            return sandbagger(inputs)

    config = _config(rel_ci=0.01, budget_s=3.0)
    report, _ = bench.run(sandbagger, lambda i: torch.ones(4), config, warm_fn=under_recorder)
    assert len(report["events_ms"]) >= MIN_TIMED_SAMPLES
    assert report["rule"]["budget_s"] >= StopRule.min_budget_s
    assert summarize(report["events_ms"]).median == pytest.approx(0.1)
    assert cheat._STATE["big_calls"] > cheat.CALIBRATION_CALLS  # it did sandbag, then stop


# -- the CPU ladder for the Triton ones: correct, so the GPU rung named is what catches them --


@pytest.mark.parametrize("path", TRITON_ON_CPU, ids=lambda p: p.stem)
def test_the_triton_ones_pass_every_cpu_rung(path: Path) -> None:
    expect = read_expectation(path)
    assert expect.problem
    options = RunOptions(device="cpu", record=False, trials=1, burst=2, unseen=False)
    verdict = check(problem_path(expect.problem), path, options, runner=LocalRunner())
    assert verdict.failed_rung is None, verdict.feedback()


# -- on the GPU ---------------------------------------------------------------------------


def _gpu_check(expect: Expectation, candidate: Path | None = None, **more: Any) -> Verdict:
    assert expect.problem
    options: dict[str, Any] = {"device": "cuda", "trials": 2, "burst": 3, "record": False}
    options.update(expect.options)
    options.update(more)
    return check(
        problem_path(expect.problem),
        candidate or expect.path,
        RunOptions(**options),
        runner=LocalRunner(),
    )


@pytest.mark.gpu
@pytest.mark.parametrize("cheat", REJECTED, ids=lambda p: p.stem)
def test_evidence_cheat_is_rejected_at_its_rung(cheat: Path) -> None:
    expect = read_expectation(cheat)
    verdict = _gpu_check(expect)
    failed = verdict.failed_rung or next(
        (r for r in verdict.rungs if r.ok is False), None
    )  # sanitize and isa do not gate: the first failed rung of any kind
    assert failed is not None, verdict.lines()
    assert failed.name in expect.rungs, (failed.name, failed.reason)
    assert expect.named_in(failed.reason), failed.reason


@pytest.mark.gpu
@pytest.mark.parametrize("honest", HONEST, ids=lambda p: p.stem)
def test_honest_counterpart_passes_every_new_rung(honest: Path) -> None:
    verdict = _gpu_check(read_expectation(honest))
    failed = [r for r in verdict.rungs if r.ok is False]
    assert not failed, verdict.feedback()
    ran = {r.name for r in verdict.rungs if r.ok is True}
    options = read_expectation(honest).options
    if options.get("sanitize"):
        assert "sanitize" in ran, verdict.lines()
    if options.get("expect_isa"):
        assert "isa" in ran, verdict.lines()


@pytest.mark.gpu
def test_the_calibration_phase_detector_is_no_better_off_than_honest() -> None:
    expect = read_expectation(CALIBRATION)
    cheat = _gpu_check(expect)
    assert cheat.ok, cheat.feedback()
    honest = _gpu_check(expect, EXAMPLES / "vector_add" / "solution_triton.py")
    assert honest.ok, honest.feedback()

    def bench(verdict: Verdict) -> dict[str, Any]:
        return next(r for r in verdict.rungs if r.name == "benchmark").metrics

    assert bench(cheat)["runs"] >= MIN_TIMED_SAMPLES
    assert bench(cheat)["median_ms"] >= 0.95 * bench(honest)["median_ms"], (
        bench(cheat),
        bench(honest),
    )
