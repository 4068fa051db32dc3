"""The benchmark's witness: a second timer (the GPU's own kernel records) beside the events.

Worker side, run by ``timing.Bench`` before its timed loop: ``observe`` makes a few calls
exactly as timed ones are made (fresh inputs, L2 flush, the spin lead, the call) under
``kernelrecords.KernelRecorder``, with the spin lead (a ``spin_kernel``) as the opening
marker of each call and one more marker after it. From each call's window it reads

- the work's span (first kernel start to last kernel end): the kernel time the GPU saw,
  whatever the launch path cost;
- the launch gap (end of the opening marker to the first kernel): how long the GPU sat
  idle waiting for the launch. Events would count that idle time as kernel time, so a gap
  means the lead was too short for this candidate's host cost; ``lead_for`` says by how
  much to lengthen it before timing.

``compare`` puts the records' median beside the events' median after the timed loop:
more than ``DISAGREE`` apart and the verdict says so (and which one it reports: events,
the protocol's number, unless the records show the launch was not covered).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..perf.benchstats import quantile, relative_difference
from . import kernelrecords

DISAGREE = 0.03  # the witness and the events differ by more than this: said in the verdict
CALLS = 12
GAP_FLOOR_S = 2e-6  # launch gaps under this are the GPU's own scheduling, not a short lead
GAP_SHARE = 0.01  # ...and under this share of the kernel time
MAX_LEAD_S = 5e-3  # the longest lead (also the cap of timing.Bench.run's doubling)


def observe(
    busy_ahead: Callable[[], float],
    call: Callable[[Any], Any],
    make_inputs: Callable[[int], Any],
    first_index: int,
    calls: int = CALLS,
) -> tuple[dict[str, Any], int]:
    """``calls`` calls under the recorder; (report, next input index). ``busy_ahead``
    queues the flush and the spin lead and returns the lead in seconds."""
    index = first_index
    sync = kernelrecords._synchronize  # captured when the worker started, before the candidate
    ok, why = kernelrecords.available()
    if not ok:
        return {"error": why}, index
    with kernelrecords.KernelRecorder() as recorder:
        for _ in range(max(1, calls)):
            inputs = make_inputs(index)
            index += 1
            sync()
            if busy_ahead() <= 0:
                kernelrecords.mark()
            out = call(inputs)
            kernelrecords.mark()
            sync()
            del out, inputs
    if recorder.error:
        return {"error": recorder.error}, index
    return summarize_windows(recorder.records), index


def summarize_windows(records: list[kernelrecords.KernelRecord]) -> dict[str, Any]:
    """Median span and launch gap of the calls in ``records`` (markers around each)."""
    windows = kernelrecords.split_windows(records)
    if windows is None:
        return {"error": "the marker kernels did not pair up (the call launches spin kernels?)"}
    spans = sorted(kernelrecords.span_ns(w) for w in windows if len(w) > 2)
    gaps = sorted(g for g in (kernelrecords.launch_gap_ns(w) for w in windows) if g is not None)
    if not spans:
        return {"error": "no GPU work recorded between the markers"}
    return {
        "calls": len(spans),
        "median_ms": quantile(spans, 0.5) * 1e-6,
        "launch_gap_us": quantile(gaps, 0.5) * 1e-3 if gaps else None,
        "kernels_per_call": quantile(sorted(len(w) - 2 for w in windows), 0.5),
    }


def lead_for(report: dict[str, Any], lead_s: float) -> float | None:
    """A longer lead when the records show the GPU waited for the launch, else None."""
    gap_us, median_ms = report.get("launch_gap_us"), report.get("median_ms")
    if gap_us is None or not median_ms:
        return None
    gap_s = gap_us * 1e-6
    if gap_s <= max(GAP_FLOOR_S, GAP_SHARE * median_ms * 1e-3):
        return None
    return min(MAX_LEAD_S, lead_s + 1.5 * gap_s + 10e-6)


def compare(report: dict[str, Any], events_median_ms: float) -> dict[str, Any]:
    """The witness beside the events' median: their difference, whether it is over
    ``DISAGREE``, which one the verdict reports."""
    doc = dict(report)
    median = report.get("median_ms")
    if not median or not events_median_ms:
        doc["reported"] = "events"
        return doc
    diff = relative_difference(events_median_ms, median)
    doc["events_median_ms"] = events_median_ms
    doc["rel_diff"] = diff
    doc["disagree"] = diff > DISAGREE
    doc["reported"] = "events"
    return doc


def words(witness: dict[str, Any] | None) -> str:
    """The verdict's sentence about the witness ('' when there was none)."""
    if not witness:
        return ""
    if witness.get("error"):
        return f"; no second timer ({witness['error']})"
    median, diff = witness.get("median_ms"), witness.get("rel_diff")
    if median is None or diff is None:
        return ""
    text = f"; kernel records {median:.4g} ms ({diff * 100:.1f}% from the events"
    if witness.get("disagree"):
        text += f", more than {DISAGREE * 100:.0f}%: the two timers disagree, reporting the events"
    text += ")"
    if witness.get("lead_raised_ms"):
        text += f"; lead lengthened by {witness['lead_raised_ms']:.3g} ms (the GPU waited for the launch)"
    return text


__all__ = ["CALLS", "DISAGREE", "compare", "lead_for", "observe", "summarize_windows", "words"]
