"""Benchmark statistics: the median, its confidence interval, the IQR, and when to stop.

Pure Python on lists of seconds, so the stopping rule and the summaries are tested on
synthetic samples without a GPU. The confidence interval of the median is the
distribution-free one from order statistics (no normality assumed: kernel timings are
skewed, with a long right tail of interrupted runs): with ``n`` samples sorted, the 95%
interval is ``[x_(l), x_(u)]`` with ``l, u = n/2 -/+ 1.96 * sqrt(n) / 2``. ``converged``
says the half-width of that interval is within ``rel_ci`` of the median. ``StopRule``
stops at that (after ``min_runs``) or when its wall budget is spent; ``scaled`` sets the
budget from the wall time of the first timed calls. Nothing stops it before
``MIN_TIMED_SAMPLES`` calls are timed: not the budget, not its scaling, not a rule sent
with fewer ``min_runs`` or ``max_runs``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

Z95 = 1.959964

# The fewest timed calls a median is ever reported from. Neither the wall budget, nor its
# scaling to the first calls' wall time (a candidate slow while it is being calibrated
# makes that budget short), nor a rule sent with fewer runs can stop the loop earlier:
# with fewer than 6 samples the median's 95% interval is the whole range (``median_ci``),
# and a median of 10 is held in the middle by six calls, so four interrupted or outlying
# ones cannot move it. A call slow enough that the floor outlasts the budget is timed to
# the floor anyway (the report's ``floor`` entry says when the budget ran out, and the
# verdict says so): a shorter series would be a number nobody should trust, and the
# worker request's own timeout still bounds the wait.
MIN_TIMED_SAMPLES = 10


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    if n == 1:
        return float(sorted_values[0])
    pos = q * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] * (1 - frac) + sorted_values[hi] * frac)


def median_ci(values: Sequence[float], z: float = Z95) -> tuple[float, float]:
    """The order-statistics confidence interval of the median: (low, high)."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return (math.nan, math.nan)
    if n < 6:  # too few for the interval to exclude the extremes
        return (xs[0], xs[-1])
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)  # 1-based rank -> 0-based index
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    return (xs[lo], xs[hi])


def relative_ci_halfwidth(values: Sequence[float]) -> float:
    """Half the width of the median's 95% interval over the median (inf when undefined)."""
    if len(values) < 2:
        return math.inf
    med = quantile(sorted(values), 0.5)
    lo, hi = median_ci(values)
    if med <= 0 or math.isnan(med):
        return math.inf
    return (hi - lo) / 2 / med


def converged(values: Sequence[float], rel_ci: float, min_runs: int) -> bool:
    return len(values) >= max(2, min_runs) and relative_ci_halfwidth(values) <= rel_ci


@dataclass(frozen=True)
class Summary:
    """Seconds: median, min, quartiles, mean; ``ci_rel`` the median's 95% half-width / median."""

    runs: int
    median: float
    min: float
    max: float
    q1: float
    q3: float
    mean: float
    ci_low: float
    ci_high: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def ci_rel(self) -> float:
        if self.median <= 0 or math.isnan(self.median):
            return math.inf
        return (self.ci_high - self.ci_low) / 2 / self.median

    def as_dict(self, unit: float = 1e3, suffix: str = "_ms") -> dict[str, Any]:
        """Times in milliseconds by default (``median_ms`` ...), ``runs`` and ``ci_rel``."""
        return {
            f"median{suffix}": self.median * unit,
            f"min{suffix}": self.min * unit,
            f"iqr{suffix}": self.iqr * unit,
            f"q1{suffix}": self.q1 * unit,
            f"q3{suffix}": self.q3 * unit,
            f"max{suffix}": self.max * unit,
            f"mean{suffix}": self.mean * unit,
            "ci_rel": self.ci_rel,
            "runs": self.runs,
        }


def summarize(values: Sequence[float]) -> Summary:
    xs = sorted(float(v) for v in values)
    if not xs:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan)
    lo, hi = median_ci(xs)
    return Summary(
        runs=len(xs),
        median=quantile(xs, 0.5),
        min=xs[0],
        max=xs[-1],
        q1=quantile(xs, 0.25),
        q3=quantile(xs, 0.75),
        mean=sum(xs) / len(xs),
        ci_low=lo,
        ci_high=hi,
    )


@dataclass
class StopRule:
    """Repeat until the median's CI is within ``rel_ci`` (after ``min_runs``), or the time
    budget or ``max_runs`` is spent, never before ``MIN_TIMED_SAMPLES`` calls.
    ``check_every`` bounds the cost of the check."""

    rel_ci: float = 0.01
    min_runs: int = 10
    max_runs: int = 2000
    budget_s: float = 3.0
    check_every: int = 5
    scale_calls: int = 250  # wall budget: this many calls' worth (0: budget_s as given)
    min_budget_s: float = 0.25

    SCALE_AFTER = 5  # timed calls before the budget is scaled to their wall time

    def scaled(self, call_wall_s: float) -> StopRule:
        """This rule with its wall budget scaled to the call: ``scale_calls`` calls' wall
        time, at least ``min_budget_s``, never more than ``budget_s`` (a sub-millisecond
        kernel is timed in about a second, a long one up to the budget)."""
        if self.scale_calls <= 0 or call_wall_s <= 0:
            return self
        budget = min(self.budget_s, max(self.min_budget_s, self.scale_calls * call_wall_s))
        return replace(self, budget_s=budget)

    def done(self, values: Sequence[float], elapsed_s: float) -> str | None:
        """Why to stop now ('converged', 'budget', 'max_runs'), or None to go on; always
        None below ``MIN_TIMED_SAMPLES`` (``short_of_floor`` says when the budget ran out
        first)."""
        n = len(values)
        if n < MIN_TIMED_SAMPLES:
            return None
        if n >= self.max_runs:
            return "max_runs"
        if elapsed_s >= self.budget_s:
            return "budget"
        least = max(self.min_runs, MIN_TIMED_SAMPLES)
        due = n >= least and (n - least) % max(1, self.check_every) == 0
        if due and converged(values, self.rel_ci, least):
            return "converged"
        return None

    def short_of_floor(self, runs: int, elapsed_s: float) -> bool:
        """Whether the wall budget is spent with fewer than ``MIN_TIMED_SAMPLES`` calls
        timed: the loop goes on to the floor, and the report says the budget was overrun."""
        return runs < MIN_TIMED_SAMPLES and elapsed_s >= self.budget_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "rel_ci": self.rel_ci,
            "min_runs": self.min_runs,
            "max_runs": self.max_runs,
            "budget_s": self.budget_s,
            "check_every": self.check_every,
            "scale_calls": self.scale_calls,
            "min_budget_s": self.min_budget_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StopRule:
        rule = cls()
        for key in ("rel_ci", "budget_s", "min_budget_s"):
            if key in data:
                setattr(rule, key, float(data[key]))
        for key in ("min_runs", "max_runs", "check_every", "scale_calls"):
            if key in data:
                setattr(rule, key, int(data[key]))
        return rule


def relative_difference(a: float, b: float) -> float:
    """|a - b| / min(a, b): how far two timings of the same kernel disagree."""
    low = min(a, b)
    if low <= 0:
        return math.inf
    return abs(a - b) / low
