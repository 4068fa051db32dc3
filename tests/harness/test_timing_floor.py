"""The floor of timed samples: neither the wall budget, nor its scaling to the first calls,
nor a rule sent with fewer runs can report a median from fewer than ``MIN_TIMED_SAMPLES``
calls. On the simulated GPU clock of ``test_harness_perf.py`` (no GPU needed).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from simgpu import FakeGPU, _config

from harness.perf import benchstats
from harness.perf.benchstats import MIN_TIMED_SAMPLES, StopRule
from harness.rungs.benchmark import short_series
from harness.worker import timing


def test_the_stop_rule_never_stops_below_the_floor() -> None:
    rule = StopRule(rel_ci=0.5, min_runs=2, max_runs=3, budget_s=0.01)
    for n in range(MIN_TIMED_SAMPLES):
        assert rule.done([1.0] * n, elapsed_s=100.0) is None, n
    assert rule.done([1.0] * MIN_TIMED_SAMPLES, elapsed_s=0.0) == "max_runs"  # 3 < floor
    assert rule.short_of_floor(3, 100.0) and not rule.short_of_floor(MIN_TIMED_SAMPLES, 100.0)
    # a rule the parent sends with fewer runs still stops only at the floor
    sent = StopRule.from_dict({"min_runs": 1, "max_runs": 2, "budget_s": 0.0})
    assert sent.done([1.0] * (MIN_TIMED_SAMPLES - 1), elapsed_s=9.0) is None


def test_a_call_slower_than_the_budget_is_still_timed_to_the_floor(
    fake_gpu: FakeGPU,
) -> None:
    """300 ms calls under a 1 s budget: the old rule stopped after 4 calls."""
    bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)

    def slow(inputs: Any) -> torch.Tensor:
        fake_gpu.now += 300.0
        return inputs

    report, _ = bench.run(slow, lambda i: torch.ones(4), _config(rel_ci=1e-9, budget_s=1.0))
    assert len(report["events_ms"]) == MIN_TIMED_SAMPLES
    assert report["stop"] == "budget"
    assert report["floor"]["min_runs"] == MIN_TIMED_SAMPLES
    assert report["floor"]["budget_spent_at"] == 4  # said, not hidden
    assert short_series(report) is None


def test_a_candidate_slow_only_after_calibration_still_gets_the_floor(
    fake_gpu: FakeGPU,
) -> None:
    """Fast for the first timed calls (the budget is scaled down to 0.25 s from them), then
    80 ms a call: the scaled budget runs out after a few slow calls, the floor does not."""
    timed = [0]

    class Counting(timing.Bench):  # counts the calls of the timed loop (not calibration's)
        def _one(self, fn: Any, inputs: Any, l2: str) -> Any:
            if fn != self._harness_kernel:
                timed[0] += 1
            return super()._one(fn, inputs, l2)

    bench = Counting(device="cpu", l2=1 << 20, flush_bytes=1 << 16)

    def sandbagger(inputs: Any) -> torch.Tensor:
        fast = timed[0] <= benchstats.StopRule.SCALE_AFTER  # warm-up and the first timed calls
        fake_gpu.now += 0.01 if fast else 80.0
        return inputs

    report, _ = bench.run(sandbagger, lambda i: torch.ones(4), _config(rel_ci=1e-9, budget_s=3.0))
    assert report["rule"]["budget_s"] == pytest.approx(0.25)  # scaled on the fast calls
    assert len(report["events_ms"]) >= MIN_TIMED_SAMPLES
    assert report["floor"].get("budget_spent_at", MIN_TIMED_SAMPLES) < MIN_TIMED_SAMPLES


def test_a_short_series_from_the_worker_fails_the_benchmark() -> None:
    """The parent does not take a shorter series: the loop cannot produce one, so one that
    arrives was cut short in the candidate's process."""
    few = {"events_ms": [1.0] * (MIN_TIMED_SAMPLES - 1)}
    reason = short_series(few)
    assert reason and f"floor of {MIN_TIMED_SAMPLES}" in reason and "9 sample(s)" in reason
    assert short_series({"events_ms": [1.0] * MIN_TIMED_SAMPLES}) is None
    assert benchstats.MIN_TIMED_SAMPLES >= 6  # below 6 the median's CI is the whole range
