"""Proton's instrumentation-mode Chrome traces (Triton candidates): parsing and aggregation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.tracing.collect import launch_spans_ns
from harness.tracing.proton import load_chrome_events, parse_chrome_trace
from harness.tracing.summary import summarize

from .conftest import FIXTURES

PROTON = {"ctas": 4, "warps": 4, "mainloop": [40_000, 41_000, 60_000, 80_000], "epilogue": 8_000}


def test_proton_36_trace_parses_per_warp() -> None:
    trace = parse_chrome_trace(FIXTURES / "proton_v36.chrome_trace")
    assert trace.backend == "proton"
    assert trace.kernels == ["matmul_kernel"]
    assert trace.sections == ["mainloop", "epilogue"]
    assert len(trace.units) == PROTON["ctas"] * PROTON["warps"]
    assert {u.sm for u in trace.units} == {5, 6, 7, 8}
    assert trace.launches == 1
    assert trace.ns_per_cycle is None and "1 GHz" in trace.clock_source
    durations = sorted(
        {i.cycles for i in trace.intervals if trace.sections[i.section] == "mainloop"}
    )
    assert durations == sorted(PROTON["mainloop"])  # dur (us at 1 GHz) x 1000 = cycles


def test_proton_36_aggregation() -> None:
    summary = summarize(parse_chrome_trace(FIXTURES / "proton_v36.chrome_trace"))
    main = PROTON["mainloop"]
    gap = 200
    spans = [m + gap + PROTON["epilogue"] for m in main]
    mainloop = next(s for s in summary.sections if s.name == "mainloop")
    assert mainloop.share == pytest.approx(sum(main) / sum(spans))
    assert summary.untraced == pytest.approx(4 * gap / sum(spans))
    assert summary.share_total() == pytest.approx(1.0)
    assert mainloop.imbalance_cta == pytest.approx(max(main) / (sum(main) / 4))
    assert mainloop.imbalance_warp == pytest.approx(1.0)
    assert mainloop.p50 == pytest.approx((41_000 + 60_000) / 2)
    assert summary.sentence() == "mainloop 87% with 1.4x imbalance across CTAs, epilogue 13%"


def test_proton_newer_writer_envelope_launches_and_skipped_records() -> None:
    trace = parse_chrome_trace(FIXTURES / "proton_v39.chrome_trace")
    assert trace.launches == 2
    assert len(trace.units) == 2 * 2 * 2
    assert any("3 non-scope records skipped" in n for n in trace.notes)
    summary = summarize(trace)
    kernel = next(s for s in summary.sections if s.name == "kernel")
    assert kernel.envelope and kernel.depth == 0
    ranked = [s.name for s in summary.ranked()]
    assert ranked == ["mainloop", "epilogue"]  # the envelope's children are the top level
    assert all(s.parent is None for s in summary.ranked())
    assert summary.share_total() == pytest.approx(1.0)
    assert "kernel (all)" in "\n".join(summary.lines())
    # launches are told apart by each CTA's Init Time: the mean is per unit and launch
    mainloop = next(s for s in summary.sections if s.name == "mainloop")
    assert mainloop.units == 8 and mainloop.mean == pytest.approx(35_000)


def test_clock_correction_and_launch_spans() -> None:
    events = load_chrome_events(FIXTURES / "proton_v36.chrome_trace")
    trace = parse_chrome_trace(events, ns_per_cycle=0.5, clock_source="NVML")
    assert trace.ns_per_cycle == 0.5 and trace.clock_source == "NVML"
    first = min(trace.intervals, key=lambda i: i.ts_ns)
    assert first.ts_ns == 0
    # CTA 3 starts 450 ns after CTA 0 (its Init Time); its cycles count at 0.5 ns each
    cta3 = [i for i in trace.intervals if trace.units[i.unit].cta == 3]
    assert min(i.ts_ns for i in cta3) == 450
    spans = launch_spans_ns(events)
    assert len(spans) == 1
    last_end = max(int(e["args"]["Post Final Time (ns)"]) for e in events if e.get("ph") == "X")
    assert spans[0] == pytest.approx(last_end - 1_700_000_000_000)


def test_json_lines_and_array_forms(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "proton_v36.chrome_trace").read_text())
    lines = tmp_path / "two.chrome_trace"
    half = len(doc["traceEvents"]) // 2
    lines.write_text(
        json.dumps({"traceEvents": doc["traceEvents"][:half]})
        + "\n"
        + json.dumps({"traceEvents": doc["traceEvents"][half:]})
        + "\n"
    )
    assert len(load_chrome_events(lines)) == len(doc["traceEvents"])
    assert len(load_chrome_events(doc["traceEvents"])) == len(doc["traceEvents"])
    empty = parse_chrome_trace({"traceEvents": [{"ph": "M", "name": "process_name"}]})
    assert empty.is_empty() and "no scope records" in empty.notes[0]


@pytest.mark.parametrize("bad", ["not a core", "k Core1 CTA"])
def test_foreign_events_are_skipped(bad: str) -> None:
    trace = parse_chrome_trace(
        {"traceEvents": [{"ph": "X", "pid": bad, "tid": "warp 0", "ts": 1, "dur": 1, "name": "x"}]}
    )
    assert trace.is_empty()
