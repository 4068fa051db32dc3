"""Aggregating a ``Trace``: each section's share of the kernel, its cycles, its imbalance.

Per unit (a warp or a CTA) the *span* is its first record to its last. Sections nest by
containment within a unit (a scope opened inside another); the sections at the top level
share the span, and what they leave is ``(untraced)`` time, so the top-level shares plus
``(untraced)`` are 100% (unless top-level sections overlap, which is noted). A section
that alone covers (nearly) every unit's span with others nested inside -- a ``"kernel"``
scope around everything -- is the *envelope*: it is reported but not ranked, and its
children are the top level.

Per section: ``share`` = its cycles over all units / all units' spans; per-unit totals
(all its visits in that unit) give ``mean``/``p50``/``p95``/``min``/``max`` cycles;
imbalance is max/mean -- across CTAs (a CTA's value is its slowest unit's) and across
the warps of a CTA (averaged over CTAs). The ``sentence`` is what an agent reads first
("mainloop 71%, epilogue 22% with 3.1x imbalance across CTAs").
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from .model import Trace

ENVELOPE_COVER = 0.9  # share of a unit's span a section must cover to be its envelope
NOTABLE_IMBALANCE = 1.1  # below this max/mean the sentence does not mention imbalance
UNTRACED = "(untraced)"


@dataclass
class SectionStats:
    name: str
    depth: int  # 0: top level (below the envelope, if any)
    parent: str | None
    share: float  # of all units' spans, 0..1
    units: int  # units that entered it
    calls: int  # visits (begin/end pairs) over all units
    mean: float  # cycles per unit (sum of its visits)
    p50: float
    p95: float
    min: float
    max: float
    imbalance_cta: float | None = None
    imbalance_warp: float | None = None
    envelope: bool = False

    @property
    def imbalance(self) -> tuple[float | None, str]:
        """The larger of the two imbalances and what it is across."""
        cta, warp = self.imbalance_cta, self.imbalance_warp
        if cta is None and warp is None:
            return None, ""
        if warp is None or (cta is not None and cta >= warp):
            return cta, "CTAs"
        return warp, "warps"


@dataclass
class Overhead:
    instrumented_ms: float
    baseline_ms: float
    baseline_source: str  # "benchmark rung median" | "uninstrumented worker median"
    method: str  # how the instrumented time was measured

    @property
    def pct(self) -> float:
        return (self.instrumented_ms / self.baseline_ms - 1.0) * 100.0 if self.baseline_ms else 0.0


@dataclass
class TraceSummary:
    backend: str
    granularity: str
    units: int
    ctas: int
    launches: int
    kernels: list[str]
    sections: list[SectionStats]
    untraced: float
    span_mean: float  # cycles per unit
    span_p95: float
    span_imbalance_cta: float | None
    ns_per_cycle: float | None
    clock_source: str
    dropped: int = 0
    overlap: bool = False
    notes: list[str] = field(default_factory=list)
    overhead: Overhead | None = None

    # -- views --------------------------------------------------------------------------

    def ranked(self) -> list[SectionStats]:
        """Top-level sections, largest share first."""
        return sorted(
            (s for s in self.sections if s.depth == 0 and not s.envelope),
            key=lambda s: -s.share,
        )

    @property
    def dominant(self) -> SectionStats | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def share_total(self) -> float:
        """Top-level shares plus untraced time: about 1.0 unless sections overlap."""
        return sum(s.share for s in self.ranked()) + self.untraced

    def sentence(self) -> str:
        ranked = self.ranked()
        if not ranked:
            return "no section was recorded"
        top = ranked[0]
        text = f"{top.name} {top.share * 100:.0f}%"
        value, across = top.imbalance
        if value is not None and value >= NOTABLE_IMBALANCE:
            text += f" with {value:.1f}x imbalance across {across}"
        others = [s for s in ranked[1:3] if s.share >= 0.01]
        for other in others:
            text += f", {other.name} {other.share * 100:.0f}%"
        if self.untraced >= 0.05:
            text += f", {self.untraced * 100:.0f}% outside any section"
        if self.overhead is not None:
            text += f"; instrumented {self.overhead.pct:+.1f}% vs uninstrumented"
        return text

    def lines(self, max_sections: int = 8) -> list[str]:
        """The compact table an agent gets (a dozen lines at most)."""
        layout = f"{self.ctas} CTAs" + (
            f" x {self.units // max(1, self.ctas)} warps" if self.granularity == "warp" else ""
        )
        clock = (
            f", {1.0 / self.ns_per_cycle:.2f} GHz ({self.clock_source})"
            if self.ns_per_cycle
            else ""
        )
        out = [
            f"trace ({self.backend}, {self.granularity} records, {layout}, "
            f"{self.launches} launch{'es' if self.launches != 1 else ''}{clock}):"
        ]
        out.append(
            f"  {'section':<18} {'share':>6} {'mean':>8} {'p50':>8} {'p95':>8} {'imb CTA':>8} {'imb warp':>8}"
        )
        ordered: list[SectionStats] = []
        for top in self.ranked():
            ordered.append(top)
            ordered.extend(s for s in self.sections if s.parent == top.name and s.depth > 0)
        ordered += [s for s in self.sections if s not in ordered and not s.envelope]
        ordered = [s for s in self.sections if s.envelope] + ordered
        for s in ordered[:max_sections]:
            label = (("  " * s.depth + s.name) + (" (all)" if s.envelope else ""))[:18]
            out.append(
                f"  {label:<18} {s.share * 100:5.1f}% {_cyc(s.mean):>8} {_cyc(s.p50):>8} "
                f"{_cyc(s.p95):>8} {_x(s.imbalance_cta):>8} {_x(s.imbalance_warp):>8}"
            )
        out.append(
            f"  {UNTRACED:<18} {self.untraced * 100:5.1f}%   (cycles per unit; imbalance = max/mean)"
        )
        if self.overhead is not None:
            o = self.overhead
            out.append(
                f"overhead: instrumented {o.instrumented_ms:.4g} ms ({o.method}) vs "
                f"{o.baseline_ms:.4g} ms uninstrumented ({o.baseline_source}): {o.pct:+.1f}%"
            )
        for note in self.notes[:3]:
            out.append(f"note: {note}")
        return out

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = _finite(asdict(self))
        doc["sentence"] = self.sentence()
        doc["share_total"] = self.share_total()
        doc["dominant"] = self.dominant.name if self.dominant else None
        if self.overhead is not None:
            doc["overhead"]["pct"] = self.overhead.pct
        return doc


def _finite(value: Any) -> Any:
    """NaN and infinities become ``None``: the JSON stays strict."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _cyc(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def imbalance(values: list[float]) -> float | None:
    """max / mean; ``None`` for fewer than two values or a zero mean."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return max(values) / mean if mean > 0 else None


# -- the aggregation ---------------------------------------------------------------------


def summarize(trace: Trace) -> TraceSummary:
    by_unit: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for interval in trace.intervals:
        by_unit[interval.unit].append((interval.start, interval.end, interval.section))
    spans: dict[int, int] = {}
    depth_votes: dict[int, Counter[int]] = defaultdict(Counter)
    parent_votes: dict[int, Counter[int | None]] = defaultdict(Counter)
    totals: dict[tuple[int, int], int] = defaultdict(int)  # (section, unit) -> cycles
    calls: Counter[int] = Counter()
    overlap = False
    for unit, items in by_unit.items():
        items.sort(key=lambda r: (r[0], -r[1]))
        spans[unit] = max(r[1] for r in items) - min(r[0] for r in items)
        stack: list[tuple[int, int, int]] = []
        for start, end, section in items:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                overlap = True  # partial overlap: not nested; treat as a sibling
                stack.clear()
            depth_votes[section][len(stack)] += 1
            parent_votes[section][stack[-1][2] if stack else None] += 1
            totals[(section, unit)] += end - start
            calls[section] += 1
            stack.append((start, end, section))
    depth = {s: min(votes) for s, votes in depth_votes.items()}
    parent = {s: votes.most_common(1)[0][0] for s, votes in parent_votes.items()}
    span_total = sum(spans.values()) or 1
    envelope = _envelope(trace, depth, parent, totals, spans)
    units = trace.units
    stats: list[SectionStats] = []
    for section in sorted(depth):
        per_unit = {u: c for (s, u), c in totals.items() if s == section}
        values = [float(v) for v in per_unit.values()]
        by_cta: dict[tuple[int, int], list[float]] = defaultdict(list)
        for u, cycles in per_unit.items():
            by_cta[units[u].cta_key].append(float(cycles))
        cta_values = [max(v) for v in by_cta.values()]
        warp_ratios = [r for v in by_cta.values() if (r := imbalance(v)) is not None]
        level = depth[section] - (1 if envelope is not None and section != envelope else 0)
        stats.append(
            SectionStats(
                name=trace.sections[section],
                depth=max(0, level),
                parent=trace.sections[p]
                if (p := parent[section]) is not None and p != envelope
                else None,
                share=sum(values) / span_total,
                units=len(values),
                calls=calls[section],
                mean=sum(values) / len(values),
                p50=percentile(values, 0.5),
                p95=percentile(values, 0.95),
                min=min(values),
                max=max(values),
                imbalance_cta=imbalance(cta_values),
                imbalance_warp=(
                    sum(warp_ratios) / len(warp_ratios)
                    if warp_ratios and trace.granularity != "cta"
                    else None
                ),
                envelope=section == envelope,
            )
        )
    top = [s for s in stats if s.depth == 0 and not s.envelope]
    covered = sum(s.share for s in top)
    if covered > 1.0 + 1e-6:
        overlap = True
    span_values = [float(v) for v in spans.values()]
    cta_spans: dict[tuple[int, int], float] = defaultdict(float)
    for u, span in spans.items():
        key = units[u].cta_key
        cta_spans[key] = max(cta_spans[key], float(span))
    notes = list(trace.notes)
    if overlap:
        notes.append("some sections overlap without nesting; their shares may add past 100%")
    return TraceSummary(
        backend=trace.backend,
        granularity=trace.granularity,
        units=len(by_unit),
        ctas=len({units[u].cta_key for u in by_unit}),
        launches=len({units[u].launch for u in by_unit}),
        kernels=list(trace.kernels),
        sections=stats,
        untraced=max(0.0, 1.0 - covered),
        span_mean=sum(span_values) / len(span_values) if span_values else float("nan"),
        span_p95=percentile(span_values, 0.95),
        span_imbalance_cta=imbalance(list(cta_spans.values())),
        ns_per_cycle=trace.ns_per_cycle,
        clock_source=trace.clock_source,
        dropped=trace.dropped,
        overlap=overlap,
        notes=notes,
    )


def _envelope(
    trace: Trace,
    depth: dict[int, int],
    parent: dict[int, int | None],
    totals: dict[tuple[int, int], int],
    spans: dict[int, int],
) -> int | None:
    """A top-level section covering (nearly) every unit's whole span, with children."""
    roots = [s for s, d in depth.items() if d == 0]
    if len(roots) != 1 or not any(p == roots[0] for p in parent.values()):
        return None
    root = roots[0]
    covered = sum(
        1 for u, span in spans.items() if span and totals.get((root, u), 0) >= ENVELOPE_COVER * span
    )
    return root if covered >= ENVELOPE_COVER * len(spans) else None
