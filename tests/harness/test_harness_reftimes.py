"""The reference-timing cache (``harness/perf/reftimes.py``): reused only when nothing moved."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.perf import reftimes

DEVICE = "NVIDIA H200 | cc 9.0 | driver 580 | sm 1980 MHz | mem 3201 MHz | power 700 W | sms 132"


def _problem(tmp_path: Path, body: str = "def reference(x):\n    return x\n") -> Path:
    folder = tmp_path / "p"
    folder.mkdir(exist_ok=True)
    (folder / "problem.py").write_text(body)
    return folder


def _key(problem: Path, **changes: object) -> str:
    args: dict[str, object] = {
        "subject": "reference",
        "shape": {"n": 1 << 28},
        "device_key": DEVICE,
        "l2": "flush",
        "mode": "events",
        "rel_ci": 0.01,
        **changes,
    }
    return reftimes.key(problem, **args)  # type: ignore[arg-type]


def test_the_key_changes_with_everything_that_changes_the_timing(tmp_path: Path) -> None:
    problem = _problem(tmp_path)
    base = _key(problem)
    assert base == _key(problem)
    for change in (
        {"shape": {"n": 1 << 20}},
        {"subject": "reference_compiled"},
        {"device_key": DEVICE.replace("700 W", "500 W")},
        {"l2": "hot"},
        {"mode": "graph"},
        {"rel_ci": 0.005},
    ):
        assert _key(problem, **change) != base, change
    _problem(tmp_path, "def reference(x):\n    return x + 0\n")  # the problem was edited
    assert _key(problem) != base


def test_a_cached_timing_is_reused_only_at_the_same_clock(tmp_path: Path) -> None:
    cache = tmp_path / "ref.json"
    key = _key(_problem(tmp_path))
    assert reftimes.lookup(key, 1980.0, path=cache) is None
    reftimes.remember(key, [1e-3, 1.1e-3, 1.05e-3], {"median_ms": 1.05}, 1980.0, path=cache)
    found = reftimes.lookup(key, 1975.0, path=cache)
    assert found is not None and found["times_s"] == [1e-3, 1.1e-3, 1.05e-3]
    assert reftimes.lookup(key, 1755.0, path=cache) is None  # the card's clock moved
    assert reftimes.lookup(key, None, path=cache) is None  # cannot tell
    later = time.time() + reftimes.MAX_AGE_S + 1
    assert reftimes.lookup(key, 1980.0, path=cache, now=later) is None


def test_the_cache_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "ref.json"
    key = _key(_problem(tmp_path))
    reftimes.remember(key, [1e-3], {}, 1980.0, path=cache)
    monkeypatch.setenv(reftimes.ENV, "0")
    assert reftimes.lookup(key, 1980.0, path=cache) is None


def test_observed_clock_reads_the_median_sm_clock() -> None:
    report = {"clocks": {"sm_clock_mhz": {"min": 1900, "median": 1980, "max": 1980}}}
    assert reftimes.observed_clock(report) == 1980.0
    assert reftimes.observed_clock({"clocks": {"nvml": "unavailable"}}) is None
