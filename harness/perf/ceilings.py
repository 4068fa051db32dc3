"""Device ceilings and the roofline: what the hardware can do, and how close a kernel gets.

Ceilings are measured once per GPU model, driver and clocks (the cache key) and kept in
``<cache_dir>/ceilings.json``: DRAM bandwidth from a large device-to-device copy (bytes
read plus bytes written), and dense matmul TFLOP/s through cuBLAS (``torch.matmul``) for
bf16, fp16, tf32 and fp32, on random data, in short bursts (the power cap pulls sustained
matmul ~15% lower on an H200: the burst rate is the ceiling, the sustained rate is what a
long benchmark sees).

The roofline of a measurement: achieved GB/s and TFLOP/s, arithmetic intensity, which
ceiling binds at that intensity, and the percent of the roofline (the time the binding
ceiling allows over the measured time; what the agent loop stops on). The physics floor:
a time below ``max(FLOPs / (peak * margin), bytes / (bandwidth * margin))`` is impossible
and fails the candidate as a timing exploit. Measuring runs in a worker (``measure``);
everything else is pure and runs in the parent.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..paths import cache_dir

PRECISIONS = ("bf16", "fp16", "tf32", "fp32")
# Over the measured ceilings: cuBLAS bursts reach ~80% of the datasheet's dense bf16 rate on
# an H200 (786 of 989 TFLOP/s), and a read-mostly kernel can beat a copy (4.33 vs 4.24 TB/s
# seen; the datasheet says 4.8): a time is impossible only past these margins.
COMPUTE_MARGIN = 1.5
BANDWIDTH_MARGIN = 1.3
SPEEDUP_REVIEW = 10.0
CACHE_VERSION = 1


@dataclass
class Ceilings:
    key: str
    gpu: str
    dram_gbps: float
    tflops: dict[str, float]
    l2_bytes: int = 0
    measured_at: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceilings:
        return cls(
            key=str(data["key"]),
            gpu=str(data.get("gpu", "")),
            dram_gbps=float(data["dram_gbps"]),
            tflops={str(k): float(v) for k, v in (data.get("tflops") or {}).items()},
            l2_bytes=int(data.get("l2_bytes") or 0),
            measured_at=str(data.get("measured_at", "")),
            details=dict(data.get("details") or {}),
        )


# -- cache ------------------------------------------------------------------------------------


def cache_key(identity: dict[str, Any]) -> str:
    """GPU model, driver and clocks: a new driver or a changed power limit re-measures."""
    parts = [
        str(identity.get("gpu", "?")),
        f"cc {identity.get('capability', '?')}",
        f"driver {identity.get('driver', '?')}",
        f"sm {identity.get('max_sm_clock_mhz', '?')} MHz",
        f"mem {identity.get('max_mem_clock_mhz', '?')} MHz",
        f"power {identity.get('power_limit_w', '?')} W",
        f"sms {identity.get('sm_count', '?')}",
    ]
    return " | ".join(parts)


def cache_file() -> Path:
    return cache_dir() / "ceilings.json"


def load_cached(key: str, path: Path | None = None) -> Ceilings | None:
    file = path or cache_file()
    try:
        doc = json.loads(file.read_text())
    except (OSError, ValueError):
        return None
    if doc.get("version") != CACHE_VERSION:
        return None
    entry = (doc.get("entries") or {}).get(key)
    if not entry:
        return None
    try:
        return Ceilings.from_dict(entry)
    except (KeyError, TypeError, ValueError):
        return None


def latest_cached(gpu: str = "", path: Path | None = None) -> Ceilings | None:
    """The newest ceilings cached for the GPU model ``gpu`` (any model when empty), without
    measuring anything; None when none were measured on this machine yet."""
    try:
        doc = json.loads((path or cache_file()).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != CACHE_VERSION:
        return None
    found = []
    for entry in (doc.get("entries") or {}).values():
        try:
            ceilings = Ceilings.from_dict(entry)
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
        if not gpu or ceilings.gpu == gpu:
            found.append(ceilings)
    return max(found, key=lambda c: c.measured_at) if found else None


def store(ceilings: Ceilings, path: Path | None = None) -> Path:
    file = path or cache_file()
    file.parent.mkdir(parents=True, exist_ok=True)
    try:
        doc = json.loads(file.read_text())
        if doc.get("version") != CACHE_VERSION:
            doc = {}
    except (OSError, ValueError):
        doc = {}
    doc["version"] = CACHE_VERSION
    doc.setdefault("entries", {})[ceilings.key] = ceilings.as_dict()
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(file)
    return file


# -- measuring (worker side) ----------------------------------------------------------------


def device_identity() -> dict[str, Any]:
    """What the cache key is built from, read on the device (runs where torch sees the GPU)."""
    import torch

    from ..worker.timing import Nvml

    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    identity: dict[str, Any] = {
        "gpu": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
        "memory_bytes": int(props.total_memory),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
    }
    nvml = Nvml()
    identity.update(nvml.static())
    if nvml.handle is not None:
        try:
            version = nvml.nvml.nvmlSystemGetDriverVersion()
            identity["driver"] = version.decode() if isinstance(version, bytes) else str(version)
        except Exception:  # NVML's errors vary by driver: the key goes without it
            pass
    return identity


def _time_ms(fn: Any, reps: int, warmup: int = 3) -> list[float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end))
    return out


def measure(copy_bytes: int = 4 << 30, matmul_n: int = 8192, reps: int = 10) -> dict[str, Any]:
    """Copy bandwidth and cuBLAS matmul rates on this GPU (random data, short bursts)."""
    import torch

    from ..worker.timing import ClockLog, Nvml
    from .benchstats import quantile

    identity = device_identity()
    free, _ = torch.cuda.mem_get_info()
    size = min(copy_bytes, int(free * 0.3)) // 2 // 4 * 4
    src = torch.randn(size // 4, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = sorted(_time_ms(lambda s=src, d=dst: d.copy_(s), reps))
    del src, dst
    dram_gbps = 2 * size / (quantile(copy_ms, 0.5) * 1e-3) / 1e9
    clocks = ClockLog(Nvml())
    tflops: dict[str, float] = {}
    matmul_ms: dict[str, float] = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        n = matmul_n
        for precision in PRECISIONS:
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            count = reps if precision in ("bf16", "fp16") else max(3, reps // 2)
            clocks.take()
            ms = quantile(
                sorted(_time_ms(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c), count)), 0.5
            )
            clocks.take()
            matmul_ms[precision] = ms
            tflops[precision] = 2.0 * n**3 / (ms * 1e-3) / 1e12
            del a, b, c
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return {
        "identity": identity,
        "dram_gbps": dram_gbps,
        "tflops": tflops,
        "details": {
            "copy_bytes_each_way": size,
            "copy_ms_median": quantile(copy_ms, 0.5),
            "matmul_n": matmul_n,
            "matmul_ms_median": matmul_ms,
            "reps": reps,
            "clocks": clocks.summary(),
            "method": "torch copy_ (read+write bytes) and torch.matmul (cuBLAS) on random data; median of short bursts",
        },
    }


def from_measurement(result: dict[str, Any]) -> Ceilings:
    identity = result.get("identity") or {}
    return Ceilings(
        key=cache_key(identity),
        gpu=str(identity.get("gpu", "")),
        dram_gbps=float(result["dram_gbps"]),
        tflops={k: float(v) for k, v in (result.get("tflops") or {}).items()},
        l2_bytes=int(identity.get("l2_bytes") or 0),
        measured_at=time.strftime("%Y-%m-%d %H:%M:%S"),
        details=dict(result.get("details") or {}) | {"identity": identity},
    )


# -- roofline (pure) --------------------------------------------------------------------------


def precision_of(dtype_name: str | None, declared: str | None = None) -> str | None:
    """Which matmul ceiling applies: the problem's PRECISION, else its output dtype."""
    if declared in PRECISIONS:
        return declared
    return {
        "bfloat16": "bf16",
        "float16": "fp16",
        "float32": "fp32",
        "float64": "fp32",
        "complex64": "fp32",
    }.get(dtype_name or "")


@dataclass
class Roofline:
    time_s: float
    flops: float | None
    bytes: float
    precision: str | None
    peak_tflops: float | None
    peak_gbps: float
    achieved_gbps: float
    achieved_tflops: float | None
    intensity: float | None  # FLOP per byte
    ridge: float | None  # FLOP per byte where the two ceilings meet
    bound: str  # "memory" | "compute"
    roof_time_s: float
    pct: float  # roof time / measured time, in percent

    def as_metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pct_of_roofline": self.pct,
            "bound": self.bound,
            "achieved_gbps": self.achieved_gbps,
            "peak_gbps": self.peak_gbps,
        }
        if self.achieved_tflops is not None:
            out["achieved_tflops"] = self.achieved_tflops
        if self.peak_tflops is not None:
            out["peak_tflops"] = self.peak_tflops
        if self.intensity is not None:
            out["intensity"] = self.intensity
        return out

    def sentence(self) -> str:
        used = (
            f"{self.achieved_gbps:.0f} GB/s of {self.peak_gbps:.0f}"
            if self.bound == "memory"
            else f"{self.achieved_tflops or 0:.1f} TFLOP/s of {self.peak_tflops or 0:.1f} ({self.precision})"
        )
        ai = f", {self.intensity:.2f} FLOP/B" if self.intensity is not None else ""
        return f"{self.pct:.1f}% of roofline ({self.bound}-bound{ai}: {used})"


def roofline(
    time_s: float,
    flops: float | None,
    nbytes: float,
    ceilings: Ceilings,
    precision: str | None,
) -> Roofline:
    peak_gbps = ceilings.dram_gbps
    peak_tflops = ceilings.tflops.get(precision) if precision else None
    mem_time = nbytes / (peak_gbps * 1e9) if nbytes > 0 else 0.0
    compute_time = flops / (peak_tflops * 1e12) if flops and peak_tflops else 0.0
    bound = "compute" if compute_time > mem_time else "memory"
    roof = max(mem_time, compute_time)
    intensity = flops / nbytes if flops and nbytes > 0 else None
    ridge = peak_tflops * 1e12 / (peak_gbps * 1e9) if peak_tflops else None
    return Roofline(
        time_s=time_s,
        flops=flops,
        bytes=nbytes,
        precision=precision,
        peak_tflops=peak_tflops,
        peak_gbps=peak_gbps,
        achieved_gbps=nbytes / time_s / 1e9 if time_s > 0 else math.inf,
        achieved_tflops=(flops / time_s / 1e12 if time_s > 0 else math.inf) if flops else None,
        intensity=intensity,
        ridge=ridge,
        bound=bound,
        roof_time_s=roof,
        pct=100.0 * roof / time_s if time_s > 0 else math.inf,
    )


def floor_bytes(nbytes: float, output_bytes: float, l2_bytes: int, flushed: bool) -> float:
    """The DRAM bytes a call cannot avoid: with L2 flushed, everything it reads (its output
    may stay in L2 as dirty lines, up to L2's size); with a hot L2, what does not fit."""
    if flushed:
        return max(0.0, nbytes - min(output_bytes, float(l2_bytes)))
    return max(0.0, nbytes - 2.0 * l2_bytes)


def physics_floor(
    flops: float | None,
    min_bytes: float,
    ceilings: Ceilings,
    precision: str | None,
    compute_margin: float = COMPUTE_MARGIN,
    bandwidth_margin: float = BANDWIDTH_MARGIN,
) -> tuple[float, str]:
    """(seconds, what binds): no honest call of this size can be faster."""
    bw_floor = min_bytes / (ceilings.dram_gbps * 1e9 * bandwidth_margin) if min_bytes > 0 else 0.0
    peak = ceilings.tflops.get(precision) if precision else None
    if peak is None and flops and ceilings.tflops:
        peak = max(ceilings.tflops.values())  # unknown precision: the fastest matmul
    compute_floor = flops / (peak * 1e12 * compute_margin) if flops and peak else 0.0
    if compute_floor >= bw_floor:
        return (
            compute_floor,
            f"{flops:.3g} FLOP at {compute_margin}x the measured {peak:.0f} TFLOP/s",
        )
    return (
        bw_floor,
        f"{min_bytes / 1e6:.3g} MB at {bandwidth_margin}x the measured {ceilings.dram_gbps:.0f} GB/s",
    )
