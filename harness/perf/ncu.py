"""Nsight Compute: the command that profiles a candidate's kernels, and what its CSV says.

``command`` builds ``ncu --clock-control none`` with the SpeedOfLight,
MemoryWorkloadAnalysis, Occupancy and WarpStateStats sections, ``--csv --page raw
--print-units base``, filtered to the NVTX range the worker opens around the candidate's
calls (``--nvtx --nvtx-include ctxkernel_candidate/``), writing to a log file so the
candidate's own stdout never mixes in. ``parse_raw_csv`` reads that file (``==PROF==``
lines skipped, a units row when present, numbers with thousands separators);
``summarize`` turns rows into what an agent can act on: duration, DRAM and SM throughput
percent, achieved vs theoretical occupancy, L1/L2 hit rates, DRAM bytes, the top stall
reasons. ``unavailable_reason`` recognises a missing ncu and refused counters.
"""

from __future__ import annotations

import csv
import glob
import io
import re
import shutil
from dataclasses import dataclass, field
from typing import Any

NVTX_RANGE = "ctxkernel_candidate"
SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "WarpStateStats")

DURATION = "gpu__time_duration.sum"
METRICS = {
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "l1_hit_pct": "l1tex__t_sector_hit_rate.pct",
    "dram_bytes": "dram__bytes.sum",
    "dram_bytes_per_s": "dram__bytes.sum.per_second",
    "registers": "launch__registers_per_thread",
    "block_size": "launch__block_size",
    "grid_size": "launch__grid_size",
}
_STALL = re.compile(r"^smsp__average_warps?_issue_stalled_(\w+?)_per_issue_active\.ratio$")
_TIME_UNITS = {
    "ns": 1e-9,
    "nsecond": 1e-9,
    "us": 1e-6,
    "usecond": 1e-6,
    "ms": 1e-3,
    "msecond": 1e-3,
    "s": 1.0,
    "second": 1.0,
}
_BYTE_UNITS = {
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
    "kib": 1024.0,
    "mib": 1024.0**2,
    "gib": 1024.0**3,
}


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def command(ncu: str, log_file: str, sections: tuple[str, ...] = SECTIONS) -> list[str]:
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        f"{NVTX_RANGE}/",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--log-file",
        log_file,
    ]
    for section in sections:
        cmd += ["--section", section]
    return cmd


def _number(text: str) -> float | None:
    value = text.strip().replace(",", "")
    if not value or value.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _scale(value: float, unit: str, table: dict[str, float]) -> float:
    return value * table.get(unit.strip().lower(), 1.0)


@dataclass
class KernelProfile:
    name: str
    values: dict[str, float] = field(default_factory=dict)
    duration_s: float | None = None
    stalls: dict[str, float] = field(default_factory=dict)


def parse_raw_csv(text: str) -> list[KernelProfile]:
    """Rows of ``ncu --csv --page raw`` output (tool messages and blank lines skipped)."""
    lines = [
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith(("==PROF==", "==WARNING==", "==ERROR==", "=="))
    ]
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    body = rows[1:]
    units: list[str] = [""] * len(header)
    if body and (not body[0] or not body[0][0].strip()):
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]
    try:
        name_col = header.index("Kernel Name")
    except ValueError:
        name_col = None
    out = []
    for row in body:
        if not row or not row[0].strip().isdigit():
            continue
        profile = KernelProfile(name=row[name_col] if name_col is not None else "?")
        for col, metric in enumerate(header):
            if col >= len(row):
                break
            value = _number(row[col])
            if value is None or "__" not in metric:
                continue
            unit = units[col] if col < len(units) else ""
            if metric == DURATION:
                profile.duration_s = _scale(value, unit or "ns", _TIME_UNITS)
            elif metric.endswith("bytes.sum"):
                value = _scale(value, unit or "byte", _BYTE_UNITS)
            profile.values[metric] = value
            match = _STALL.match(metric)
            if match:
                profile.stalls[match.group(1)] = value
        out.append(profile)
    return out


def summarize(profiles: list[KernelProfile], top_stalls: int = 3) -> dict[str, Any]:
    """One call's kernels: totals, duration-weighted percentages, per-kernel lines."""
    if not profiles:
        return {"kernels": 0}
    total = sum(p.duration_s or 0.0 for p in profiles)

    def weighted(metric: str) -> float | None:
        pairs = [(p.values[metric], p.duration_s or 0.0) for p in profiles if metric in p.values]
        if not pairs:
            return None
        weight = sum(w for _, w in pairs)
        if weight <= 0:
            return sum(v for v, _ in pairs) / len(pairs)
        return sum(v * w for v, w in pairs) / weight

    summary: dict[str, Any] = {"kernels": len(profiles), "duration_ms": total * 1e3}
    for key, metric in METRICS.items():
        if key in ("registers", "block_size", "grid_size", "dram_bytes"):
            continue
        value = weighted(metric)
        if value is not None:
            summary[key] = value
    dram = [p.values[METRICS["dram_bytes"]] for p in profiles if METRICS["dram_bytes"] in p.values]
    if dram:
        summary["dram_bytes"] = sum(dram)
    rate = summary.pop("dram_bytes_per_s", None)
    if rate is not None:
        summary["dram_gbps"] = rate / 1e9
    stalls: dict[str, float] = {}
    for p in profiles:
        for reason, value in p.stalls.items():
            stalls[reason] = stalls.get(reason, 0.0) + value * (
                (p.duration_s or 0.0) / total if total else 1.0
            )
    ranked = sorted(
        ((r, v) for r, v in stalls.items() if r not in ("selected",)),
        key=lambda item: -item[1],
    )
    summary["top_stalls"] = [{"reason": r, "cycles_per_issue": v} for r, v in ranked[:top_stalls]]
    summary["per_kernel"] = [
        {
            "name": p.name[:120],
            "duration_ms": (p.duration_s or 0.0) * 1e3,
            **{
                k: p.values[m]
                for k, m in METRICS.items()
                if m in p.values
                and k in ("registers", "block_size", "grid_size", "dram_pct", "sm_pct")
            },
        }
        for p in profiles[:8]
    ]
    return summary


def sentence(summary: dict[str, Any]) -> str:
    """The summary in one line for the agent."""
    if not summary.get("kernels"):
        return "ncu profiled no kernel"
    bits = [f"{summary['kernels']} kernel(s), {summary['duration_ms']:.4g} ms"]
    if summary.get("dram_gbps"):
        bits.append(f"{summary['dram_gbps']:.0f} GB/s DRAM")
    for key, label in (
        ("dram_pct", "DRAM"),
        ("sm_pct", "SM"),
        ("achieved_occupancy_pct", "occupancy"),
        ("l2_hit_pct", "L2 hit"),
    ):
        if key in summary:
            bits.append(f"{label} {summary[key]:.1f}%")
    if summary.get("theoretical_occupancy_pct") is not None and "achieved_occupancy_pct" in summary:
        bits[-1 if "l2_hit_pct" not in summary else -2] += (
            f" (theoretical {summary['theoretical_occupancy_pct']:.0f}%)"
        )
    stalls = summary.get("top_stalls") or []
    if stalls:
        bits.append(
            "top stalls: " + ", ".join(f"{s['reason']} {s['cycles_per_issue']:.2f}" for s in stalls)
        )
    return "; ".join(bits)


def unavailable_reason(log: str) -> str | None:
    """Why ncu could not profile, from its output (None: it could)."""
    text = log or ""
    if "ERR_NVGPUCTRPERM" in text:
        return "ncu: no permission to read the GPU performance counters (ERR_NVGPUCTRPERM)"
    if "LibraryNotLoaded" in text or "Failed to initialize the profiler" in text:
        return "ncu cannot read the hardware counters here (profiler library not loaded)"
    if "No kernels were profiled" in text:
        return "ncu profiled no kernel inside the candidate's NVTX range"
    match = re.search(r"==ERROR==\s*(.+)", text)
    if match:
        return f"ncu failed: {match.group(1).strip()[:200]}"
    return None
