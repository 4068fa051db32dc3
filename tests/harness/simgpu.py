"""A GPU on the CPU for the timing protocol's tests: ``FakeGPU`` (a timeline the timing
module's events, syncs and clock read, patched in by the ``fake_gpu`` fixture) and
``simulated_bench``, the benchmark rung's context against workers answering in-process on
that clock, whose frames reach the parent in the order they were written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import torch
from cheatspec import EXAMPLES

from harness.perf import benchstats
from harness.problems.problem import load_problem
from harness.runner import RunOptions
from harness.worker import timing


class FakeGPU:
    """A timeline: stream work advances the clock at once, side-stream work only when the
    device is synchronised; events read the clock when recorded."""

    def __init__(self) -> None:
        self.now = 0.0  # ms
        self.side = 0.0

    def record(self, event: Any) -> None:
        event.t = self.now

    def sync(self) -> None:
        self.now += self.side + 0.005  # side work, then the host wakes up
        self.side = 0.0

    def event(self, enable_timing: bool = True) -> Any:
        return SimpleNamespace(t=None)


def install_fake_gpu(monkeypatch: pytest.MonkeyPatch) -> FakeGPU:
    """The timing module's events, syncs and clock read ``FakeGPU``'s timeline (the
    ``fake_gpu`` fixture of tests/harness/conftest.py)."""
    gpu = FakeGPU()
    monkeypatch.setattr(timing, "_Event", gpu.event)
    monkeypatch.setattr(timing, "_record", gpu.record)
    monkeypatch.setattr(timing, "_synchronize", gpu.sync)
    monkeypatch.setattr(timing, "_event_synchronize", lambda event: None)
    monkeypatch.setattr(timing, "_elapsed_time", lambda a, b: b.t - a.t)
    monkeypatch.setattr(timing, "_perf_counter", lambda: gpu.now / 1e3)
    original = timing.Bench._busy_ahead

    def busy(self: timing.Bench, l2: str) -> None:
        original(self, l2)
        gpu.now += 0.09 + self.lead_s * 1e3  # the flush, then the spin

    monkeypatch.setattr(timing.Bench, "_busy_ahead", busy)
    monkeypatch.setattr(
        timing.Bench, "_harness_kernel", lambda self, _: gpu.__setattr__("now", gpu.now + 0.002)
    )
    return gpu


def _config(**rule: Any) -> timing.BenchConfig:
    return timing.BenchConfig(
        rule=benchstats.StopRule(**{"rel_ci": 0.01, "min_runs": 10, "budget_s": 1.0, **rule}),
        keep_key=99,
        keep_bytes=1 << 20,
        calibrate=5,
    )


Frames = list[tuple[dict[str, Any], list[torch.Tensor]]]


def simulated_bench(
    fake_gpu: FakeGPU,
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    on_call: Callable[[str, int, Frames], None] | None = None,
    root_of: Callable[[str], int | None] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """(a ladder context for the benchmark and roofline rungs, the ceilings it reports) for
    the vector add at size ``n``: the reference costs 0.2 ms a call, the candidate 0.1 ms on
    ``fake_gpu``'s clock; ``on_call(subject, calls so far, frames)`` runs in each call and
    may put frames of its own on the channel (a candidate writing onto the pipe);
    ``root_of(role)`` names a real process standing for the worker's launcher (its tree is
    what the rung freezes while the reference is timed; None: no process of this machine)."""
    from harness.problems.candidate import load_candidate
    from harness.process.session import Reply
    from harness.rungs.context import LadderContext
    from harness.worker import benchworker
    from harness.worker.guards import OpRecorder
    from harness.worker.serve import Worker, answer

    monkeypatch.setattr(benchworker, "BENCH_DEVICE", "cpu")
    problem = load_problem(EXAMPLES / "vector_add")
    generate = problem.generate
    problem.generate = lambda seed, shape, device: generate(seed, shape, "cpu")  # type: ignore[method-assign]
    candidate = load_candidate(EXAMPLES / "vector_add" / "solution_triton.py", problem)
    measured = {
        "identity": {"gpu": "Simulated", "l2_bytes": 1 << 20},
        "dram_gbps": 100.0,
        "tflops": {"fp32": 10.0},
    }

    class Session:
        def __init__(self, role: str) -> None:
            self.frames: Frames = []  # the result channel, as the parent reads it
            self.pid = root_of(role) if root_of is not None else None
            self.worker = Worker(None, "/tmp", "cpu")  # type: ignore[arg-type]
            self.worker.device = "cuda"
            self.worker.subject = "reference" if role.startswith("reference") else "candidate"
            self.worker.problem = problem
            self.worker.recorder = OpRecorder()
            self.worker.bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)
            subject, calls, frames = self.worker.subject, [0], self.frames
            cost = 0.2 if subject == "reference" else 0.1

            def kernel(inputs: Any) -> torch.Tensor:
                fake_gpu.now += cost
                calls[0] += 1
                if on_call is not None:
                    on_call(subject, calls[0], frames)
                return torch.add(inputs[0], inputs[1])

            self.worker.entry = kernel
            monkeypatch.setattr(benchworker, "_reference_call", lambda w, shape: kernel)

        def request(self, header: dict[str, Any], tensors: Any, *_: Any) -> Reply:
            op = header["op"]
            if op == "identity":
                return Reply({"ok": True, "identity": measured["identity"]})
            if op == "ceilings":
                return Reply({"ok": True, "result": measured})
            if op in ("load", "bye"):
                return Reply({"ok": True, "op": op, "env": {}, "integrity": []})
            self.frames.append(answer(self.worker, header, list(tensors)))  # as serve does
            head, out = self.frames.pop(0)  # the parent reads the first whole frame
            return Reply(head, out)

        def close(self) -> dict[str, Any]:
            return {"integrity": []}

        logs: ClassVar[dict[str, Path]] = {}

    options = RunOptions(device="cuda", bench=True, bench_shapes=[{"n": n}], bench_budget_s=1.0)
    ctx = LadderContext(problem, candidate, options, "cuda", lambda tag="", env=None: Session(tag))
    return ctx, measured
