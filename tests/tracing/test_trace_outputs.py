"""What a trace becomes: the summary's edge cases, the Perfetto JSON, the PNG, the model's wire form."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

from harness.tracing.buffers import parse_buffers
from harness.tracing.model import Interval, Trace, Unit
from harness.tracing.perfetto import to_chrome_trace, write_chrome_trace
from harness.tracing.plot import plot_timeline
from harness.tracing.proton import parse_chrome_trace
from harness.tracing.summary import Overhead, summarize

from .conftest import FIXTURES


def _trace(rows: list[tuple[int, int, str, int, int]], granularity: str = "warp") -> Trace:
    """rows: (cta, warp, section, start, end)."""
    trace = Trace(backend="ck_trace", granularity=granularity)
    index: dict[tuple[int, int], int] = {}
    for cta, warp, name, start, end in rows:
        if (cta, warp) not in index:
            trace.units.append(Unit(0, trace.kernel_id("k"), cta, warp, cta))
            index[(cta, warp)] = len(trace.units) - 1
        trace.intervals.append(
            Interval(index[(cta, warp)], trace.section_id(name), start, end, start)
        )
    return trace


def test_nested_sections_report_their_parent_and_leave_untraced_time() -> None:
    trace = _trace(
        [
            (0, 0, "mainloop", 0, 700),
            (0, 0, "wait", 100, 300),  # inside mainloop
            (0, 0, "epilogue", 800, 1000),  # 100 cycles between: untraced
        ]
    )
    summary = summarize(trace)
    by = {s.name: s for s in summary.sections}
    assert by["wait"].depth == 1 and by["wait"].parent == "mainloop"
    assert [s.name for s in summary.ranked()] == ["mainloop", "epilogue"]
    assert summary.untraced == pytest.approx(0.1)
    assert summary.share_total() == pytest.approx(1.0)
    assert summary.sentence() == "mainloop 70%, epilogue 20%, 10% outside any section"
    table = summary.lines()
    assert table.index(next(x for x in table if "mainloop" in x)) < table.index(
        next(x for x in table if x.lstrip().startswith("wait"))
    )  # a nested section follows its parent, indented
    assert any(x.startswith("    wait") for x in table)


def test_untraced_time_is_said_and_overlap_is_noted() -> None:
    summary = summarize(_trace([(0, 0, "a", 0, 50), (0, 0, "b", 80, 100)]))
    assert "30% outside any section" in summary.sentence()
    overlapping = summarize(_trace([(0, 0, "a", 0, 60), (0, 0, "b", 40, 100)]))
    assert overlapping.overlap
    assert any("overlap" in n for n in overlapping.notes)


def test_overhead_in_sentence_lines_and_json() -> None:
    summary = summarize(_trace([(c, 0, "main", 0, 100 * (c + 1)) for c in range(4)]))
    summary.overhead = Overhead(1.1, 1.0, "benchmark rung median", "events")
    assert summary.overhead.pct == pytest.approx(10.0)
    assert summary.sentence().endswith("; instrumented +10.0% vs uninstrumented")
    assert any(line.startswith("overhead: instrumented 1.1 ms") for line in summary.lines())
    doc = summary.to_json()
    json.dumps(doc, allow_nan=False)
    assert doc["overhead"]["pct"] == pytest.approx(10.0)
    assert doc["dominant"] == "main" and doc["share_total"] == pytest.approx(1.0)
    assert len(summary.lines()) <= 15


def test_empty_trace_summary_is_valid_json() -> None:
    summary = summarize(Trace(backend="ck_trace", granularity="warp"))
    assert summary.sentence() == "no section was recorded"
    json.dumps(summary.to_json(), allow_nan=False)


def test_perfetto_json_is_valid_trace_events(tmp_path: Path, ck_fixture: dict) -> None:
    trace = parse_buffers([ck_fixture])
    summary = summarize(trace)
    path = write_chrome_trace(trace, tmp_path / "x.trace.json", summary.to_json())
    doc = json.loads(path.read_text())  # strict: no NaN
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(trace.intervals)
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= set(e)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["dur"] >= 0 and e["ts"] >= 0
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"CTA 0 (SM 5)", "CTA 1 (SM 6)", "CTA 2 (SM 7)"}
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads == {"warp 0", "warp 1", "warp 2", "warp 3"}
    # durations in microseconds from cycles x ns_per_cycle
    mainloop = next(
        e for e in complete if e["name"] == "mainloop" and e["pid"] == 1 and e["tid"] == 1
    )
    assert mainloop["dur"] == pytest.approx(mainloop["args"]["cycles"] * 0.5 / 1000)
    other = doc["otherData"]["ctxkernel"]
    assert other["summary"]["dominant"] == "mainloop" and other["lanes_sampled"] is False
    json.dumps(doc, allow_nan=False)


def test_perfetto_samples_lanes_of_a_large_grid_keeping_the_slowest() -> None:
    rows = [
        (c, w, "main", 0, 1000 + (50_000 if c == 137 else c)) for c in range(300) for w in range(4)
    ]
    doc = to_chrome_trace(_trace(rows), max_lanes=64)
    pids = {e["pid"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert len(pids) * 4 <= 64
    other = doc["otherData"]["ctxkernel"]
    assert other["lanes_sampled"] is True and other["ctas_total"] == 300
    labels = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert "CTA 137 (SM 137)" in labels


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_png_renders_our_trace_at_the_requested_size(tmp_path: Path, ck_fixture: dict) -> None:
    trace = parse_buffers([ck_fixture])
    path = write_chrome_trace(trace, tmp_path / "t.trace.json", summarize(trace).to_json())
    png = plot_timeline(path, tmp_path / "t.png", title="test", width_px=900, height_px=500)
    assert png.stat().st_size > 5000
    assert _png_size(png) == (900, 500)


def test_png_renders_protons_own_file_and_samples_rows(tmp_path: Path) -> None:
    png = plot_timeline(FIXTURES / "proton_v36.chrome_trace", tmp_path / "p.png", max_rows=5)
    width, height = _png_size(png)
    assert width == 1400 and height >= 400
    with pytest.raises(ValueError, match="no complete"):
        plot_timeline({"traceEvents": []}, tmp_path / "none.png")


def test_wire_and_json_round_trips(ck_fixture: dict) -> None:
    trace = parse_buffers([ck_fixture])
    header, tensors = trace.to_wire()
    assert all(t.dtype == torch.int64 for t in tensors)
    back = Trace.from_wire(json.loads(json.dumps(header)), tensors)
    assert back.units == trace.units and back.intervals == trace.intervals
    assert back.sections == trace.sections and back.ns_per_cycle == trace.ns_per_cycle
    again = Trace.from_json(json.loads(json.dumps(trace.to_json())))
    assert again.intervals == trace.intervals
    empty_header, empty_tensors = Trace(backend="proton", granularity="warp").to_wire()
    assert Trace.from_wire(empty_header, empty_tensors).is_empty()
    bad = dict(header, n_units=1)
    with pytest.raises(ValueError, match="unit that does not exist"):
        Trace.from_wire(bad, tensors)


def test_proton_fixture_through_every_output(tmp_path: Path) -> None:
    trace = parse_chrome_trace(FIXTURES / "proton_v39.chrome_trace")
    doc = to_chrome_trace(trace, summarize(trace).to_json())
    labels = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert any(label.startswith("launch 1 · CTA") for label in labels)
    out = tmp_path / "v39.trace.json"
    out.write_text(json.dumps(doc))
    assert _png_size(plot_timeline(out, tmp_path / "v39.png"))[0] == 1400
