"""The benchmark's second timer (``harness/worker/witness.py``) and its scaled wall budget.

Record lists are built by hand in the shape torch.profiler returns (a spin-kernel marker
before and after each call); collecting real ones needs a GPU
(``test_harness_gpu_perf.py``)."""

from __future__ import annotations

import pytest

from harness.perf.benchstats import StopRule
from harness.worker import witness
from harness.worker.kernelrecords import KernelRecord

SPIN = "at::cuda::(anonymous namespace)::spin_kernel(long)"


def _k(name: str, start: int, end: int) -> KernelRecord:
    return KernelRecord(name=name, kind="kernel", start_ns=start, end_ns=end, stream=7)


def _calls(spans_ns: list[int], gap_ns: int) -> list[KernelRecord]:
    """One call per span: flush, the spin lead (opening marker), the kernel after
    ``gap_ns`` of idle, the closing marker."""
    records, t = [], 0
    for span in spans_ns:
        records.append(_k("flush", t, t + 50))
        records.append(_k(SPIN, t + 50, t + 150))
        start = t + 150 + gap_ns
        records.append(_k("add_kernel", start, start + span))
        records.append(_k(SPIN, start + span + 1, start + span + 2))
        t = start + span + 1000
    return records


def test_the_witness_reads_kernel_time_and_launch_gap_from_the_records() -> None:
    doc = witness.summarize_windows(_calls([100_000, 101_000, 99_000], gap_ns=30_000))
    assert doc["calls"] == 3
    assert doc["median_ms"] == pytest.approx(0.1)
    assert doc["launch_gap_us"] == pytest.approx(30.0)
    assert doc["kernels_per_call"] == 1


def test_stray_markers_are_an_error_not_a_number() -> None:
    records = [*_calls([100000], gap_ns=0), _k(SPIN, 10**7, 10**7 + 1)]
    assert "did not pair" in witness.summarize_windows(records)["error"]


def test_a_launch_the_gpu_waited_for_lengthens_the_lead() -> None:
    waited = witness.summarize_windows(_calls([700_000] * 5, gap_ns=100_000))  # 0.1 ms idle
    longer = witness.lead_for(waited, lead_s=0.2e-3)
    assert longer is not None and longer >= 0.2e-3 + 0.15e-3
    covered = witness.summarize_windows(_calls([700_000] * 5, gap_ns=1_000))  # scheduling
    assert witness.lead_for(covered, lead_s=0.2e-3) is None
    assert witness.lead_for({"error": "no CUDA device"}, lead_s=0.2e-3) is None


def test_two_timers_more_than_three_percent_apart_are_said_with_the_one_reported() -> None:
    seen = {"calls": 12, "median_ms": 0.728, "launch_gap_us": 0.5}
    apart = witness.compare(seen, events_median_ms=0.821)
    assert apart["disagree"] and apart["reported"] == "events"
    text = witness.words(apart)
    assert "0.728 ms" in text and "12.8%" in text and "disagree, reporting the events" in text
    close = witness.compare(seen, events_median_ms=0.735)
    assert not close["disagree"]
    assert "disagree" not in witness.words(close) and "1.0% from the events" in witness.words(close)
    assert "no second timer (no CUDA device)" in witness.words({"error": "no CUDA device"})
    assert witness.words(None) == ""


def test_the_wall_budget_scales_with_the_call() -> None:
    rule = StopRule(budget_s=3.0)
    assert rule.scaled(0.9e-3).budget_s == pytest.approx(0.25)  # floor: a sub-ms call
    assert rule.scaled(3e-3).budget_s == pytest.approx(0.75)  # 250 calls' wall
    assert rule.scaled(50e-3).budget_s == pytest.approx(3.0)  # never past the given budget
    assert StopRule(budget_s=3.0, scale_calls=0).scaled(50e-3).budget_s == 3.0
    again = StopRule.from_dict(rule.scaled(3e-3).as_dict())
    assert again.budget_s == pytest.approx(0.75) and again.scale_calls == 250
