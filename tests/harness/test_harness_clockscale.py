"""Clocks in the numbers (``harness/perf/clockscale.py``): roofline at the observed SM clock."""

from __future__ import annotations

import pytest

from harness.perf import clockscale


def _record(*clocks: float) -> dict[str, object]:
    return {
        "rounds": [
            {"candidate": {"clocks": {"sm_clock_mhz": {"min": c, "median": c, "max": c}}}}
            for c in clocks
        ]
    }


def test_a_compute_bound_kernel_at_a_lower_clock_scores_higher_against_its_clock() -> None:
    observed = clockscale.observed_clock(_record(1700.0, 1750.0, 1760.0))
    assert observed == 1750.0
    metrics = {"pct_of_roofline": 70.0, "bound": "compute"}
    extra = clockscale.at_observed_clock(metrics, observed, 1980.0)
    assert extra["pct_of_roofline_at_observed_clock"] == pytest.approx(70.0 * 1980 / 1750)
    text = clockscale.words(extra, "compute")
    assert "SM clock 1750 MHz" in text and "79.2% of roofline at the observed clock" in text


def test_memory_bound_percent_does_not_move_with_the_sm_clock() -> None:
    metrics = {"pct_of_roofline": 90.0, "bound": "memory"}
    extra = clockscale.at_observed_clock(metrics, 1500.0, 1980.0)
    assert extra["pct_of_roofline_at_observed_clock"] == 90.0
    assert "at the observed clock" not in clockscale.words(extra, "memory")


def test_no_clock_no_claim() -> None:
    extra = clockscale.at_observed_clock({"pct_of_roofline": 50.0, "bound": "compute"}, None, 1980)
    assert "pct_of_roofline_at_observed_clock" not in extra
    assert clockscale.words(extra, "compute") == ""
    assert clockscale.observed_clock({"rounds": [{"candidate": {}}]}) is None


def test_round_spread_is_the_largest_relative_difference() -> None:
    assert clockscale.spread([1.00, 1.02, 1.01]) == pytest.approx(0.02)
    assert clockscale.spread([1.0]) is None
