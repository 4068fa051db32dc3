"""Nsight Compute: the command that profiles a candidate's kernels, and what its CSV says.

``command`` builds ``ncu --clock-control none`` with the SpeedOfLight,
MemoryWorkloadAnalysis, Occupancy, WarpStateStats, ComputeWorkloadAnalysis and
InstructionStats sections, the executed-instruction counts of ``EXECUTED_METRICS``,
``--csv --page raw --print-units base --print-metric-instances details`` (per-opcode
counts with their opcode names), filtered to the NVTX range the worker opens around the
candidate's calls (``--nvtx --nvtx-include ctxkernel_candidate/``), writing to a log file
so the candidate's own stdout never mixes in. ``parse_raw_csv`` reads that file
(``==PROF==`` lines skipped, a units row when present, numbers with thousands separators,
instanced cells ``total (name: value; ...)`` into ``KernelProfile.instances``);
``summarize`` turns rows into what an agent can act on: duration, DRAM and SM throughput
percent, achieved vs theoretical occupancy, L1/L2 hit rates, DRAM bytes, the top stall
reasons (what the kernels executed is ``isa.py``'s). ``unavailable_reason`` recognises a
missing ncu and refused counters; ``unknown_metric`` a metric name this ncu does not know.
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
# ComputeWorkloadAnalysis (the pipes' instruction shares) and InstructionStats (the
# per-opcode executed counts, ``sass__inst_executed_per_opcode``) are what the
# executed-instruction evidence reads (``isa.py``); a section's metrics are filtered to the
# GPU by ncu itself, so asking for one never fails on an architecture that lacks a metric.
SECTIONS = (
    "SpeedOfLight",
    "MemoryWorkloadAnalysis",
    "Occupancy",
    "WarpStateStats",
    "ComputeWorkloadAnalysis",
    "InstructionStats",
)
# Executed-instruction counts per pipe, asked for by name. NOT yet seen in a capture of
# ours: the names are NVIDIA's documented Hopper-era metrics (also in public sm_90
# profiles), while the H200 log in tests/harness/fixtures/ncu/ only holds the pipes'
# activity percentages. ncu refuses the whole run when it does not know a name
# ("Failed to find metric"), so the profile rung re-runs without these
# (``unknown_metric``) and says so.
EXECUTED_METRICS = (
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "sm__inst_executed_pipe_tensor_op_imma.sum",
    "sm__inst_executed_pipe_tma.sum",
    "sm__inst_executed_pipe_fma.sum",
    "sm__inst_executed_pipe_fp16.sum",
    "sm__inst_executed_pipe_alu.sum",
    "sm__inst_executed_pipe_lsu.sum",
)

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


def command(
    ncu: str,
    log_file: str,
    sections: tuple[str, ...] = SECTIONS,
    metrics: tuple[str, ...] = EXECUTED_METRICS,
) -> list[str]:
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
        # instanced metrics print as "total (name: value; ...)": the opcode names of
        # sass__inst_executed_per_opcode (the H200 log was taken without it: totals only)
        "--print-metric-instances",
        "details",
        "--log-file",
        log_file,
    ]
    for section in sections:
        cmd += ["--section", section]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
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
    # an instanced metric's values by instance name (``--print-metric-instances details``)
    instances: dict[str, dict[str, float]] = field(default_factory=dict)


_INSTANCED = re.compile(r"^\s*([-+0-9.,eE]+)\s*\((.*)\)\s*$", re.S)


def instanced(text: str) -> tuple[float, dict[str, float]] | None:
    """An instanced cell, ``total (name: value; name: value)``, as (total, values by name);
    None when the cell is not one. A name seen twice is summed."""
    match = _INSTANCED.match(text or "")
    if not match:
        return None
    total = _number(match.group(1))
    if total is None:
        return None
    values: dict[str, float] = {}
    for item in match.group(2).split(";"):
        name, sep, raw = item.strip().rpartition(":")
        value = _number(raw)
        if not sep or not name.strip() or value is None:
            continue
        values[name.strip()] = values.get(name.strip(), 0.0) + value
    return total, values


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
            if value is None and "__" in metric:
                found = instanced(row[col])
                if found is not None:
                    value, profile.instances[metric] = found
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


_UNKNOWN_METRIC = re.compile(r"Failed to find metric\s+(?:regex:)?\^?([A-Za-z0-9_.]+)")


def unknown_metric(log: str) -> str | None:
    """The metric name ncu refused as unknown on this GPU or version (None: none was)."""
    match = _UNKNOWN_METRIC.search(log or "")
    return match.group(1).rstrip(".") if match else None


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
