"""Parsing ``ck_trace`` buffers (CUDA C++ and CuTeDSL candidates) into a ``Trace``.

Each buffer is one kernel launch: a header (magic, nonce, units, capacity) and one slot
per unit that the kernel's writer filled (its nonce, event count, SM, CTA, warp, the
globaltimer and clock64 at open, then ``tag, clock64, globaltimer`` per event). A slot
whose nonce is not the buffer's was never opened (the memory is not zeroed), and an event
whose tag lacks the buffer's mark was never written (a CuTeDSL call site in a branch not
taken). Events pair up per section in program order; an ``end`` without a ``begin`` and a ``begin`` never
ended are counted in the notes.

Timeline: a unit's events are placed at ``globaltimer(open) + cycles since open x
ns_per_cycle``; ``ns_per_cycle`` is measured from the buffers themselves (globaltimer
span over clock64 span of the long-lived units) or taken from the caller (NVML's SM
clock), else unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from . import ck_trace
from .model import Interval, Trace, Unit

MIN_SPAN_NS = 2000  # globaltimer ticks coarsely (up to ~1 us): only long spans estimate the clock
MIN_TOTAL_NS = 50_000
PLAUSIBLE_NS_PER_CYCLE = (0.25, 4.0)  # 250 MHz .. 4 GHz


def _unit_rows(buffer: Any) -> tuple[list[int], list[list[int]]]:
    """The header and the rows of the opened units, cut to the events they hold: done
    with tensor ops so a buffer of a large grid never becomes a Python list whole."""
    import torch

    t = buffer if isinstance(buffer, torch.Tensor) else torch.tensor(list(buffer))
    t = t.detach().to("cpu", torch.int64).reshape(-1)
    if t.numel() < ck_trace.HEADER_WORDS:
        return [], []
    header = [int(w) for w in t[: ck_trace.HEADER_WORDS].tolist()]
    units, cap = max(0, header[2]), max(0, header[3])
    stride = ck_trace.UNIT_WORDS + ck_trace.EVENT_WORDS * cap
    units = min(units, (t.numel() - ck_trace.HEADER_WORDS) // max(1, stride))
    if units == 0 or header[0] != ck_trace.MAGIC:
        return header, []
    slots = t[ck_trace.HEADER_WORDS : ck_trace.HEADER_WORDS + units * stride].view(units, stride)
    slots = slots[slots[:, 0] == header[1]]
    if slots.shape[0] == 0:
        return header, []
    used = int(slots[:, 1].clamp(0, cap).max())
    return header, slots[:, : ck_trace.UNIT_WORDS + ck_trace.EVENT_WORDS * used].tolist()


def parse_buffers(
    entries: Sequence[dict[str, Any]], ns_per_cycle: float | None = None, clock_source: str = ""
) -> Trace:
    """``entries``: what ``ck_trace.take()`` returned (``buffer`` a tensor or a list of
    int64 words, ``sections``, ``label``); one launch each."""
    trace = Trace(backend="ck_trace", granularity="warp")
    granularities: set[str] = set()
    raw: list[tuple[int, int, int, int, int, int]] = []  # unit, section, start, end, gt0, clk0
    unclosed = unmatched = holes = 0
    spans_ns = spans_cyc = 0
    for launch, entry in enumerate(entries):
        header, rows = _unit_rows(entry["buffer"])
        if len(header) < ck_trace.HEADER_WORDS:
            trace.notes.append(f"launch {launch}: empty buffer")
            continue
        if header[0] != ck_trace.MAGIC:
            trace.notes.append(f"launch {launch}: not a ck_trace buffer (bad magic)")
            continue
        cap = header[3]
        mark = header[1] & ck_trace.MARK_MASK
        kernel = trace.kernel_id(str(entry.get("label") or f"kernel{launch}"))
        names = [str(s) for s in entry.get("sections") or []]
        section_ids: dict[int, int] = {}
        for row in rows:
            count, sm, cta, warp, gt0, clk0 = row[1:7]
            if count > cap:
                trace.dropped += count - cap
            kept = max(0, min(count, cap))
            events = []
            for i in range(kept):
                e = ck_trace.UNIT_WORDS + ck_trace.EVENT_WORDS * i
                events.append((row[e], row[e + 1], row[e + 2]))
            granularities.add("cta" if warp < 0 else "warp")
            trace.units.append(Unit(launch, kernel, int(cta), int(warp), int(sm)))
            unit_index = len(trace.units) - 1
            stacks: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for tag, clk, gt in events:
                if tag >> ck_trace.MARK_SHIFT != mark:
                    holes += 1  # a slot this unit never wrote (a branch not taken)
                    continue
                low = tag & ((1 << ck_trace.MARK_SHIFT) - 1)
                raw_section, is_end = low >> 1, low & 1
                if raw_section not in section_ids:
                    label = (
                        names[raw_section]
                        if 0 <= raw_section < len(names)
                        else f"section_{raw_section}"
                    )
                    section_ids[raw_section] = trace.section_id(label)
                section = section_ids[raw_section]
                if not is_end:
                    stacks[section].append((clk, gt))
                elif stacks[section]:
                    start, _ = stacks[section].pop()
                    raw.append((unit_index, section, start, clk, gt0, clk0))
                else:
                    unmatched += 1
            unclosed += sum(len(s) for s in stacks.values())
            if events:
                last_clk, last_gt = events[-1][1], events[-1][2]
                if last_gt - gt0 >= MIN_SPAN_NS and last_clk > clk0:
                    spans_ns += last_gt - gt0
                    spans_cyc += last_clk - clk0
    estimate = spans_ns / spans_cyc if spans_cyc > 0 and spans_ns >= MIN_TOTAL_NS else None
    if estimate is not None and PLAUSIBLE_NS_PER_CYCLE[0] <= estimate <= PLAUSIBLE_NS_PER_CYCLE[1]:
        trace.ns_per_cycle = estimate
        trace.clock_source = "globaltimer/clock64 over the trace"
    elif ns_per_cycle:
        trace.ns_per_cycle = ns_per_cycle
        trace.clock_source = clock_source or "given"
    npc = trace.ns_per_cycle or 1.0
    origin = min((r[4] for r in raw), default=0)
    for unit_index, section, start, end, gt0, clk0 in raw:
        ts = round(gt0 - origin + (start - clk0) * npc)
        trace.intervals.append(Interval(unit_index, section, int(start), int(end), ts))
    if len(granularities) == 1:
        trace.granularity = granularities.pop()
    elif granularities:
        trace.granularity = "mixed"
    if trace.dropped:
        trace.notes.append(
            f"{trace.dropped} events dropped: a unit recorded more than its capacity "
            "(raise capacity= in ck_trace.buffer, or time a whole loop instead of each iteration)"
        )
    if unclosed:
        trace.notes.append(f"{unclosed} sections were entered and never left (no END recorded)")
    if unmatched:
        trace.notes.append(f"{unmatched} section ends had no matching begin")
    if not trace.units and entries:
        trace.notes.append(
            "no unit recorded anything: the kernel did not call CK_TRACE_OPEN with this buffer "
            "(or was built without tracing)"
        )
    return trace
