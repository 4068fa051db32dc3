"""Clocks in the numbers: the roofline at the SM clock the kernel actually ran at.

The compute ceilings (``ceilings.py``) are measured at whatever SM clock the card held
during their short matmul bursts; a long benchmark often runs lower (the power cap pulls
an H200's clock down under sustained load). Percent of roofline against the burst ceiling
mixes the card's state into the kernel's score, so the verdict also gives it at the
observed clock: a compute ceiling scales with the SM clock (peak FLOP/s are SMs x clock x
FLOP per cycle), DRAM bandwidth does not. ``spread`` is the two-run difference of the
compute-bound protocol's rounds (the largest relative difference between round medians).
Pure; used by the roofline and benchmark rungs in the parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .benchstats import quantile


def _median_clock(clocks: dict[str, Any] | None) -> float | None:
    value = ((clocks or {}).get("sm_clock_mhz") or {}).get("median")
    return float(value) if value else None


def observed_clock(record: dict[str, Any]) -> float | None:
    """The median of the candidate's per-round median SM clocks (MHz) while timed."""
    values = [
        c
        for c in (
            _median_clock((r.get("candidate") or {}).get("clocks"))
            for r in record.get("rounds") or []
        )
        if c
    ]
    return quantile(sorted(values), 0.5) if values else None


def ceiling_clock(details: dict[str, Any]) -> float | None:
    """The SM clock the ceilings were measured at (MHz), if NVML saw it."""
    return _median_clock(details.get("clocks"))


def at_observed_clock(
    metrics: dict[str, Any], observed_mhz: float | None, ceiling_mhz: float | None
) -> dict[str, Any]:
    """Extra roofline metrics: the clocks, and the percent of roofline with the compute
    ceiling scaled to the observed clock (memory-bound: the same percent)."""
    out: dict[str, Any] = {}
    if observed_mhz:
        out["sm_clock_mhz"] = observed_mhz
    if ceiling_mhz:
        out["ceiling_sm_clock_mhz"] = ceiling_mhz
    pct = metrics.get("pct_of_roofline")
    if pct is None or not observed_mhz or not ceiling_mhz:
        return out
    if metrics.get("bound") == "compute":
        out["pct_of_roofline_at_observed_clock"] = float(pct) * ceiling_mhz / observed_mhz
    else:
        out["pct_of_roofline_at_observed_clock"] = float(pct)
    return out


def words(extra: dict[str, Any], bound: str | None) -> str:
    """The roofline sentence's clause about the clock ('' without one)."""
    observed, ceiling = extra.get("sm_clock_mhz"), extra.get("ceiling_sm_clock_mhz")
    at = extra.get("pct_of_roofline_at_observed_clock")
    if not observed:
        return ""
    text = f"; SM clock {observed:.0f} MHz while timed"
    if (
        ceiling
        and at is not None
        and bound == "compute"
        and abs(observed - ceiling) / ceiling > 0.01
    ):
        text += f" (ceilings at {ceiling:.0f} MHz): {at:.1f}% of roofline at the observed clock"
    return text


def spread(medians: Sequence[float]) -> float | None:
    """The largest relative difference between round medians (None for fewer than two)."""
    values = [m for m in medians if m and m > 0]
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / min(values)


__all__ = ["at_observed_clock", "ceiling_clock", "observed_clock", "spread", "words"]
