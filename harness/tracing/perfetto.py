"""Writing a ``Trace`` as a Chrome / Perfetto trace JSON: one process per CTA, one thread per warp.

Open the file in https://ui.perfetto.dev or ``chrome://tracing``. Each recorded section
visit is a complete event (``ph: "X"``) with ``ts``/``dur`` in microseconds on the
trace's shared timeline and its cycle count in ``args``; ``process_name``/``thread_name``
metadata events name the lanes ("CTA 17 (SM 3)", "warp 2"). The summary and the trace's
clock go under ``otherData.ctxkernel`` so ``ctxkernel runs trace-plot`` can title a
picture from the file alone.

Grids with more lanes than ``max_lanes`` keep the slowest CTAs and an even sample of the
rest (said in ``otherData``); the summary always covers every unit.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from .model import Trace

MAX_LANES = 4096


def _pick_ctas(trace: Trace, max_lanes: int) -> tuple[set[tuple[int, int]], bool]:
    lanes_per_cta: dict[tuple[int, int], int] = defaultdict(int)
    for unit in trace.units:
        lanes_per_cta[unit.cta_key] += 1
    if sum(lanes_per_cta.values()) <= max_lanes:
        return set(lanes_per_cta), False
    per = max(1, max(lanes_per_cta.values()))
    budget = max(1, max_lanes // per)
    spans: dict[tuple[int, int], int] = defaultdict(int)
    for interval in trace.intervals:
        key = trace.units[interval.unit].cta_key
        spans[key] = max(spans[key], interval.end - interval.start)
    slowest = sorted(spans, key=lambda k: -spans[k])[: max(1, budget // 8)]
    rest = sorted(k for k in lanes_per_cta if k not in slowest)
    keep = budget - len(slowest)
    step = max(1, len(rest) // max(1, keep))
    return set(slowest) | set(rest[::step][:keep]), True


def to_chrome_trace(
    trace: Trace, summary: dict[str, Any] | None = None, max_lanes: int = MAX_LANES
) -> dict[str, Any]:
    npc = trace.ns_per_cycle or 1.0
    keep, sampled = _pick_ctas(trace, max_lanes)
    pids: dict[tuple[int, int], int] = {}
    events: list[dict[str, Any]] = []
    multi_launch = trace.launches > 1
    for key in sorted(keep):
        pid = len(pids) + 1
        pids[key] = pid
    named: set[tuple[int, int]] = set()
    for unit in trace.units:
        if unit.cta_key not in pids:
            continue
        pid = pids[unit.cta_key]
        tid = unit.warp + 1 if unit.warp >= 0 else 0
        if (pid, -1) not in named:
            named.add((pid, -1))
            label = f"CTA {unit.cta}" + (f" (SM {unit.sm})" if unit.sm >= 0 else "")
            if multi_launch:
                label = f"launch {unit.launch} · {label}"
            events.append(
                {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}}
            )
            events.append(
                {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                 "args": {"sort_index": pid}}
            )  # fmt: skip
        if (pid, tid) not in named:
            named.add((pid, tid))
            events.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                 "args": {"name": f"warp {unit.warp}" if unit.warp >= 0 else "CTA"}}
            )  # fmt: skip
    for interval in trace.intervals:
        unit = trace.units[interval.unit]
        if unit.cta_key not in pids:
            continue
        events.append(
            {
                "name": trace.sections[interval.section],
                "cat": trace.backend,
                "ph": "X",
                "ts": interval.ts_ns / 1000.0,
                "dur": interval.cycles * npc / 1000.0,
                "pid": pids[unit.cta_key],
                "tid": unit.warp + 1 if unit.warp >= 0 else 0,
                "args": {"cycles": interval.cycles, "kernel": trace.kernels[unit.kernel]
                         if 0 <= unit.kernel < len(trace.kernels) else "?"},
            }
        )  # fmt: skip
    other: dict[str, Any] = {
        "backend": trace.backend,
        "granularity": trace.granularity,
        "kernels": trace.kernels,
        "ns_per_cycle": trace.ns_per_cycle,
        "clock_source": trace.clock_source or "unknown: durations assume 1 GHz",
        "lanes_sampled": sampled,
        "ctas_total": trace.ctas,
        "ctas_shown": len(pids),
    }
    if summary is not None:
        other["summary"] = summary
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"ctxkernel": other}}


def write_chrome_trace(
    trace: Trace,
    path: str | Path,
    summary: dict[str, Any] | None = None,
    max_lanes: int = MAX_LANES,
) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = to_chrome_trace(trace, summary, max_lanes)
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return path
