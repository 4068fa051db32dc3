"""On a GPU: where does an event median above the kernel records come from?

The harness's witness takes kernel records in a phase of its own, before the timed loop,
so a difference between the two timers could be the launch (the GPU idle between the
start event and the kernel), the kernel itself running slower in the timed loop, or the
events. This probe times the *same calls* with both: CUDA events around each call, and
the GPU's kernel records (``harness/worker/kernelrecords.py``) with a marker kernel on each side,
for the vector adds of ``examples/vector_add`` (Triton, CUDA C++ through ``load_inline``,
and torch's own add) under several leads, interleaved in rounds:

- ``lead``: the L2 flush, then a spin of 1.5x the call's host time + 30 us (the harness now);
- ``flush``: the flush alone (the harness before ca2ca5c, for a short host call);
- ``long``: the flush, then 0.5 ms of spin;
- ``lead-no-records``: as ``lead`` with no profiler running (do records change the events?).

Per call: events ms, the records' span ms (first kernel start to last kernel end), the
launch gap (opening marker's end to the first kernel) and the tail (last kernel's end to
the closing marker). Writes one JSON and prints a table.

    python3 bench/harness/timing_probe.py --out probe.json [--n 268435456] [--rounds 3] [--calls 60]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.perf.benchstats import quantile  # noqa: E402
from harness.worker import kernelrecords  # noqa: E402
from harness.worker.timing import Bench, slotted  # noqa: E402

EXAMPLE = REPO / "examples" / "vector_add"


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _median(values: list[float]) -> float | None:
    return quantile(sorted(values), 0.5) if values else None


def host_call_s(fn: Any, make: Any, calls: int = 10) -> float:
    times = []
    for i in range(calls):
        inputs = make(10_000 + i)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn(inputs)
        times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        del out
    return quantile(sorted(times), 0.5)


def one_pass(
    bench: Bench, fn: Any, make: Any, lead_s: float, calls: int, records: bool, first: int
) -> dict[str, Any]:
    """``calls`` timed calls with the flush and a spin of ``lead_s`` ahead of each."""
    events: list[float] = []
    clocks: list[float] = []
    recorder = kernelrecords.KernelRecorder() if records else None
    if recorder is not None:
        recorder.__enter__()
    for i in range(calls):
        inputs = make(first + i)
        torch.cuda.synchronize()
        bench.flush_buffer.zero_()
        if lead_s > 0:
            torch.cuda._sleep(int(lead_s * bench.sm_hz))  # the opening marker
        else:
            kernelrecords.mark()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn(inputs)
        end.record()
        kernelrecords.mark()
        torch.cuda.synchronize()
        events.append(start.elapsed_time(end))
        if i % 20 == 0:
            clock = bench.nvml.sample().get("sm_clock_mhz")
            if clock:
                clocks.append(float(clock))
        del out, inputs
    doc: dict[str, Any] = {
        "events_ms": _median(events),
        "sm_clock_mhz": _median(clocks),
    }
    if recorder is None:
        return doc
    recorder.__exit__(None, None, None)
    if recorder.error:
        doc["records_error"] = recorder.error
        return doc
    windows = kernelrecords.split_windows(recorder.records) or []
    spans, gaps, tails, ratios = [], [], [], []
    for window, ev in zip(windows, events, strict=False):
        span = kernelrecords.span_ns(window) * 1e-6
        if span <= 0:
            continue
        spans.append(span)
        gap = kernelrecords.launch_gap_ns(window)
        if gap is not None:
            gaps.append(gap * 1e-3)
        work = [r for r in window if not r.is_marker]
        tails.append(max(0, window[-1].start_ns - max(r.end_ns for r in work)) * 1e-3)
        ratios.append(ev / span)
    doc.update(
        {
            "windows": len(windows),
            "records_ms": _median(spans),
            "events_over_records": _median(ratios),
            "events_over_records_p90": quantile(sorted(ratios), 0.9) if ratios else None,
            "launch_gap_us": _median(gaps),
            "launch_gap_us_p90": quantile(sorted(gaps), 0.9) if gaps else None,
            "tail_us": _median(tails),
        }
    )
    return doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 28)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--backends", default="triton,cuda,torch")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("timing_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    problem = _load(EXAMPLE / "problem.py")
    fns: dict[str, Any] = {}
    for name in args.backends.split(","):
        t0 = time.perf_counter()
        if name == "torch":
            fns[name] = problem.ref_kernel
        else:
            fns[name] = _load(EXAMPLE / f"solution_{name}.py").custom_kernel
        print(f"{name}: loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    bench = Bench()
    clock = bench.nvml.sample().get("sm_clock_mhz")
    if clock:
        bench.sm_hz = float(clock) * 1e6
    make = slotted(lambda i: problem.generate_input(i, args.n, device="cuda"), 1)
    hosts = {}
    for name, fn in fns.items():
        for _ in range(3):  # warm: JIT, allocator
            fn(make(0))
        torch.cuda.synchronize()
        hosts[name] = host_call_s(fn, make)
    variants = {
        "lead": (lambda h: min(2e-3, 1.5 * h + 30e-6), True),
        "flush": (lambda h: 0.0, True),
        "long": (lambda h: 0.5e-3, True),
        "lead-no-records": (lambda h: min(2e-3, 1.5 * h + 30e-6), False),
    }
    rows: list[dict[str, Any]] = []
    index = 1
    for round_ in range(args.rounds):
        for name, fn in fns.items():
            for variant, (lead, records) in variants.items():
                lead_s = lead(hosts[name])
                doc = one_pass(bench, fn, make, lead_s, args.calls, records, index)
                index += args.calls
                doc.update(
                    {
                        "round": round_,
                        "backend": name,
                        "variant": variant,
                        "lead_ms": lead_s * 1e3,
                        "host_call_ms": hosts[name] * 1e3,
                    }
                )
                rows.append(doc)
                print(json.dumps(doc), flush=True)
    out = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "n": args.n,
        "calls": args.calls,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rows": rows,
    }
    args.out.write_text(json.dumps(out, indent=1))
    print(
        "| round | backend | variant | lead ms | events ms | records ms | ev/rec | gap us | tail us |"
    )

    def cell(row: dict[str, Any], key: str, fmt: str = "{:.4f}") -> str:
        value = row.get(key)
        return fmt.format(value) if isinstance(value, float) else "-"

    for r in rows:
        f = lambda key, fmt="{:.4f}", row=r: cell(row, key, fmt)  # noqa: E731
        print(
            f"| {r['round']} | {r['backend']} | {r['variant']} | {r['lead_ms']:.3f} "
            f"| {f('events_ms')} | {f('records_ms')} | {f('events_over_records')} "
            f"| {f('launch_gap_us', '{:.1f}')} | {f('tail_us', '{:.1f}')} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
