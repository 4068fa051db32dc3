"""ck_trace buffers (CUDA C++ / CuTeDSL helper): the Python API, parsing, and the aggregation."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from harness.tracing import ck_trace
from harness.tracing.buffers import parse_buffers
from harness.tracing.collect import trace_buffers
from harness.tracing.summary import imbalance, percentile, summarize

from .conftest import emulate_kernel


def _params(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["params"]


def _mainloop(p: dict[str, Any], cta: int, warp: int) -> int:
    return p["mainloop_base"] * (cta + 1) + p["mainloop_step"] * warp


def test_fixture_parses_to_one_unit_per_opened_warp(ck_fixture: dict[str, Any]) -> None:
    p = _params(ck_fixture)
    trace = parse_buffers([ck_fixture])
    assert len(trace.units) == p["ctas"] * p["warps"]  # the stale slot (other nonce) is skipped
    assert {(u.cta, u.warp) for u in trace.units} == {
        (c, w) for c in range(p["ctas"]) for w in range(p["warps"])
    }
    assert trace.sections == ["setup", "mainloop", "epilogue"]
    assert trace.kernels == ["tiled_matmul"]
    assert trace.granularity == "warp"
    assert len(trace.intervals) == 3 * len(trace.units)
    assert trace.ns_per_cycle == pytest.approx(p["ns_per_cycle"], rel=1e-3)
    assert "globaltimer" in trace.clock_source
    assert trace.dropped == 0 and not trace.notes
    assert {u.sm for u in trace.units} == {5, 6, 7}


def test_fixture_shares_cycles_and_imbalance(ck_fixture: dict[str, Any]) -> None:
    p = _params(ck_fixture)
    summary = summarize(parse_buffers([ck_fixture]))
    units = [(c, w) for c in range(p["ctas"]) for w in range(p["warps"])]
    spans = [p["setup"] + _mainloop(p, c, w) + p["epilogue"] for c, w in units]
    main = [_mainloop(p, c, w) for c, w in units]
    by_name = {s.name: s for s in summary.sections}
    assert by_name["mainloop"].share == pytest.approx(sum(main) / sum(spans))
    assert by_name["epilogue"].share == pytest.approx(len(units) * p["epilogue"] / sum(spans))
    assert summary.share_total() == pytest.approx(1.0, abs=1e-9)  # sections tile every span
    assert summary.untraced == pytest.approx(0.0, abs=1e-9)
    assert by_name["mainloop"].mean == pytest.approx(sum(main) / len(main))
    assert by_name["mainloop"].p50 == pytest.approx(percentile([float(m) for m in main], 0.5))
    assert by_name["mainloop"].p95 == pytest.approx(percentile([float(m) for m in main], 0.95))
    assert by_name["mainloop"].units == len(units) and by_name["mainloop"].calls == len(units)
    # across CTAs: each CTA counts its slowest warp; max / mean
    per_cta = [_mainloop(p, c, p["warps"] - 1) for c in range(p["ctas"])]
    assert by_name["mainloop"].imbalance_cta == pytest.approx(max(per_cta) / (sum(per_cta) / 3))
    # across the warps of a CTA: max / mean inside each CTA, averaged over CTAs
    ratios = []
    for c in range(p["ctas"]):
        values = [_mainloop(p, c, w) for w in range(p["warps"])]
        ratios.append(max(values) / (sum(values) / len(values)))
    assert by_name["mainloop"].imbalance_warp == pytest.approx(sum(ratios) / len(ratios))
    assert by_name["epilogue"].imbalance_cta == pytest.approx(1.0)
    assert summary.dominant is not None and summary.dominant.name == "mainloop"
    assert summary.sentence().startswith(
        "mainloop 91% with 1.5x imbalance across CTAs, epilogue 9%"
    )


def test_percentile_and_imbalance_helpers() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5)
    assert percentile([10.0], 0.95) == 10.0
    assert percentile(list(map(float, range(101))), 0.95) == pytest.approx(95.0)
    assert imbalance([1.0, 1.0, 4.0]) == pytest.approx(2.0)
    assert imbalance([3.0]) is None
    assert imbalance([0.0, 0.0]) is None


def test_overflow_holes_unclosed_and_unknown_sections(ck_fixture: dict[str, Any]) -> None:
    words = list(ck_fixture["buffer"])
    cap = ck_fixture["params"]["capacity"]
    stride = 8 + 3 * cap
    mark = (words[1] & ck_trace.MARK_MASK) << ck_trace.MARK_SHIFT
    # unit 0 claims 11 events with room for 8: 3 dropped
    words[8 + 1] = cap + 3
    # unit 1: its first event slot was never written (stale memory): a hole, skipped
    words[8 + stride + 8] = 12345
    # unit 2: the epilogue's end is replaced by a begin of an unnamed section 7
    words[8 + 2 * stride + 8 + 3 * 5] = mark | (7 << 1)
    trace = parse_buffers([dict(ck_fixture, buffer=words)])
    assert trace.dropped == 3
    assert any("dropped" in n for n in trace.notes)
    assert any("never left" in n for n in trace.notes)  # unit 2's epilogue and section 7
    assert "section_7" in trace.sections
    per_unit: dict[int, int] = {}
    for interval in trace.intervals:
        per_unit[interval.unit] = per_unit.get(interval.unit, 0) + 1
    assert per_unit[1] == 2  # the hole took setup's begin: setup never starts
    assert per_unit[2] == 2


def test_cta_granularity_and_bad_buffers() -> None:
    assert parse_buffers([{"buffer": [0] * 8}]).notes[0] == (
        "launch 0: not a ck_trace buffer (bad magic)"
    )
    assert "empty buffer" in parse_buffers([{"buffer": []}]).notes[0]
    with _tracing():
        buf = ck_trace.buffer(4, ["body"], capacity=4, device="cpu")
    emulate_kernel(buf, grid=4, warps=4, program=lambda c, w: [(0, 0, 0), (0, 1, 100 * (c + 1))],
                   granularity="cta")  # fmt: skip
    trace = parse_buffers(ck_trace.take())
    assert trace.granularity == "cta"
    assert [u.warp for u in trace.units] == [-1] * 4
    summary = summarize(trace)
    assert summary.sections[0].imbalance_warp is None
    assert summary.sections[0].imbalance_cta == pytest.approx(400 / 250)
    assert "4 CTAs" in summary.lines()[0] and " x " not in summary.lines()[0]


class _tracing:
    """``CTXKERNEL_TRACE=1`` for a block (what the trace rung's worker has)."""

    def __enter__(self) -> None:
        import os

        self.saved = os.environ.get(ck_trace.ENV)
        os.environ[ck_trace.ENV] = "1"
        ck_trace.reset()

    def __exit__(self, *exc: Any) -> None:
        import os

        if self.saved is None:
            os.environ.pop(ck_trace.ENV, None)
        else:
            os.environ[ck_trace.ENV] = self.saved


def test_candidate_api_is_inert_without_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ck_trace.ENV, raising=False)
    ck_trace.reset()
    assert not ck_trace.enabled()
    empty = ck_trace.buffer(1000, ["a"], device="cpu")
    assert empty.numel() == 0 and empty.dtype == torch.int64
    assert ck_trace.buffer(5, device="cpu") is empty  # no allocation per call
    assert ck_trace.take() == []
    assert "#define CK_TRACE 1" not in ck_trace.cuda_header()
    assert "CK_TRACE_OPEN" in ck_trace.cuda_header()
    assert ck_trace.cuda_flags() == []
    assert ck_trace.name("ext") == "ext"
    assert ck_trace.warp_units((3, 2), 256) == 48
    assert ck_trace.warp_units(10, (100, 1, 1)) == 40
    assert ck_trace.cta_units((4, 4, 2)) == 32


def test_candidate_api_when_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ck_trace.ENV, "1")
    ck_trace.reset()
    assert ck_trace.cuda_header().startswith("#define CK_TRACE 1\n")
    assert ck_trace.cuda_flags() == ["-DCK_TRACE=1"]
    assert ck_trace.name("ext") == "ext_cktrace"
    buf = ck_trace.buffer(3, ["x", "y"], capacity=5, device="cpu", label="k")
    assert buf.numel() == 8 + 3 * (8 + 3 * 5)
    assert buf[:4].tolist()[0] == ck_trace.MAGIC and buf[2] == 3 and buf[3] == 5
    taken = ck_trace.take()
    assert [t["label"] for t in taken] == ["k"] and taken[0]["sections"] == ["x", "y"]
    assert ck_trace.take() == []
    with pytest.raises(ValueError, match="MiB"):
        ck_trace.buffer(1 << 30, capacity=64, device="cpu")
    with pytest.raises(ValueError):
        ck_trace.buffer(4, capacity=0, device="cpu")


def test_trace_buffers_end_to_end_with_an_emulated_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """collect.trace_buffers: warm-up, one traced call, parse -- the worker's path for CUDA
    C++ and CuTeDSL candidates, with the device writes emulated on CPU tensors."""
    monkeypatch.setenv(ck_trace.ENV, "1")
    ck_trace.reset()
    calls: list[int] = []

    def candidate(inputs: Any) -> Any:
        grid, warps = 6, 2
        buf = ck_trace.buffer(ck_trace.warp_units(grid, warps * 32), ["load", "math"],
                              capacity=4, device="cpu")  # fmt: skip
        skew = 1 + len(calls)  # later calls differ: only the traced one must be parsed
        emulate_kernel(buf, grid, warps, lambda c, w: [
            (0, 0, 0), (0, 1, 300 * skew), (1, 0, 300 * skew), (1, 1, 300 * skew + 900 * (c + 1)),
        ])  # fmt: skip
        calls.append(1)
        return inputs

    result = trace_buffers(candidate, None, warmup=2)
    assert not isinstance(result, str), result
    trace, timing, clock = result
    assert len(calls) == 3 and timing == {} and clock is None
    summary = summarize(trace)
    assert summary.units == 12 and summary.ctas == 6
    math = next(s for s in summary.sections if s.name == "math")
    load = next(s for s in summary.sections if s.name == "load")
    assert load.mean == 900  # the third call's skew
    assert math.imbalance_cta == pytest.approx(5400 / 3150)
    assert summary.share_total() == pytest.approx(1.0)
    json.dumps(summary.to_json(), allow_nan=False)


def test_trace_buffers_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ck_trace.ENV, raising=False)
    assert "CTXKERNEL_TRACE" in str(trace_buffers(lambda x: x, None, 1))
    monkeypatch.setenv(ck_trace.ENV, "1")
    ck_trace.reset()
    message = trace_buffers(lambda x: x, None, 1)
    assert isinstance(message, str) and "ck_trace.buffer" in message

    def unopened(_: Any) -> None:
        ck_trace.buffer(4, ["a"], capacity=2, device="cpu").zero_()

    message = trace_buffers(unopened, None, 1)
    assert isinstance(message, str) and "bad magic" in message
