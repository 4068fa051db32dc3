"""Reference timings, cached: the reference's benchmark per problem, shape, device and clocks.

Timing the problem's reference takes as long as timing the candidate, and an agent loop
checks hundreds of candidates of one problem: the reference's times are kept in
``<cache_dir>/reference-times.json`` and reused when everything that could change them is
the same -- the problem's files (their hash), the shape, the subject (``reference`` or
``reference_compiled``), the device (the ceilings' key: GPU model, driver, clocks, power
limit), torch's version, the L2 mode and timing mode, the stopping rule's precision --
and the SM clock the candidate was just timed at is within ``CLOCK_TOLERANCE`` of the
one the reference was timed at (a card whose clock moved is timed again). Entries are
dropped after ``MAX_AGE_S``. Only the memory-bound protocol uses it: the compute-bound
one interleaves candidate and reference on purpose. ``CTXKERNEL_REF_CACHE=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from .. import envvars
from ..paths import cache_dir

VERSION = 1
MAX_AGE_S = 7 * 86400.0
CLOCK_TOLERANCE = 0.02
MAX_ENTRIES = 512
ENV = envvars.CTXKERNEL_REF_CACHE.name


def enabled() -> bool:
    return envvars.CTXKERNEL_REF_CACHE.get()


def cache_file() -> Path:
    return cache_dir() / "reference-times.json"


def problem_hash(path: str | Path) -> str:
    """The problem's files: its folder's ``*.py`` (or the one file), by content."""
    p = Path(path)
    files = sorted(p.glob("*.py")) if p.is_dir() else [p]
    digest = hashlib.sha256()
    for file in files:
        try:
            digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
        except OSError:
            continue
    return digest.hexdigest()[:20]


def key(
    problem_path: str | Path,
    subject: str,
    shape: dict[str, Any],
    device_key: str,
    l2: str,
    mode: str,
    rel_ci: float,
) -> str:
    import torch

    parts = [
        problem_hash(problem_path),
        subject,
        json.dumps(shape, sort_keys=True, default=str),
        device_key,
        f"torch {torch.__version__}",
        l2,
        mode,
        f"ci {rel_ci:g}",
    ]
    return hashlib.sha256(" | ".join(parts).encode()).hexdigest()[:32]


def observed_clock(report: dict[str, Any]) -> float | None:
    """The median SM clock (MHz) NVML saw while ``report``'s calls were timed."""
    clock = ((report.get("clocks") or {}).get("sm_clock_mhz") or {}).get("median")
    return float(clock) if clock else None


def _read(file: Path) -> dict[str, Any]:
    try:
        doc = json.loads(file.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("version") == VERSION else {}


def lookup(
    entry_key: str, clock_mhz: float | None, path: Path | None = None, now: float | None = None
) -> dict[str, Any] | None:
    """The cached entry (``times_s``, ``summary``, ``clock_mhz``, ``stored``), or None when
    there is none, it is too old, or the clock moved."""
    if not enabled():
        return None
    entry = (_read(path or cache_file()).get("entries") or {}).get(entry_key)
    if not isinstance(entry, dict) or not entry.get("times_s"):
        return None
    if (now or time.time()) - float(entry.get("stored") or 0) > MAX_AGE_S:
        return None
    cached_clock = entry.get("clock_mhz")
    if clock_mhz and cached_clock:
        if abs(clock_mhz - float(cached_clock)) / float(cached_clock) > CLOCK_TOLERANCE:
            return None
    elif clock_mhz or cached_clock:
        return None  # one side has no clock: cannot tell that it did not move
    return entry


def remember(
    entry_key: str,
    times_s: list[float],
    summary: dict[str, Any],
    clock_mhz: float | None,
    path: Path | None = None,
) -> None:
    """Keep a reference timing (best effort: a read-only cache dir is not an error)."""
    if not enabled() or not times_s:
        return
    file = path or cache_file()
    doc = _read(file) or {"version": VERSION}
    entries = doc.setdefault("entries", {})
    entries[entry_key] = {
        "times_s": [float(t) for t in times_s],
        "summary": summary,
        "clock_mhz": clock_mhz,
        "stored": time.time(),
    }
    while len(entries) > MAX_ENTRIES:  # oldest first
        entries.pop(min(entries, key=lambda k: float(entries[k].get("stored") or 0)))
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc) + "\n")
        tmp.replace(file)
    except OSError:
        pass


__all__ = ["ENV", "key", "lookup", "observed_clock", "problem_hash", "remember"]
