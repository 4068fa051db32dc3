"""Executed-instruction evidence: what a profiled kernel actually ran on, and whether that
meets a required instruction family (``--expect-isa``).

Read from ncu's raw CSV (``ncu.parse_raw_csv``), per kernel, strongest source first:

1. **per-opcode executed counts** -- ``sass__inst_executed_per_opcode`` with its instances
   (``--print-metric-instances details``): warp-level instructions executed per SASS
   opcode, grouped into the tensor families (``hmma``: ``HMMA``/``IMMA``/``DMMA``/``BMMA``/
   ``QMMA``, warp-level ``mma.sync``; ``wgmma``: ``HGMMA``/``IGMMA``/``QGMMA``/``BGMMA``,
   Hopper's warpgroup MMA; ``tcgen05``: the ``UTC*MMA`` opcodes of Blackwell's tensor
   memory MMA), TMA and bulk copies (``UTMA*``, ``UBLK*``), FP32 arithmetic (``FFMA``,
   ``FADD``, ``FMUL``...) against packed half precision (``HFMA2``, ``HADD2``...);
2. **per-pipe executed counts** -- ``ncu.EXECUTED_METRICS`` (documented names, not yet seen
   in a capture of ours), e.g. ``sm__inst_executed_pipe_tensor_op_gmma.sum``;
3. **pipe activity** -- the percentages of peak the H200 log does hold
   (``sm__pipe_tensor_cycles_active``, ``sm__pipe_tma_cycles_active``,
   ``sm__pipe_fma_cycles_active``, ``sm__inst_executed_pipe_lsu`` ...): enough to say a
   kernel never touched the tensor pipe, never which family it used.

``evidence`` makes the per-kernel record and ``hot`` picks the kernel that took the most
time; ``expect`` decides a required family: met, not met (with what the kernel did execute),
or undetermined when the metrics at hand cannot tell (then it never fails a candidate).
Opcode names are SASS's as ``cuobjdump`` prints them (those of ``dumps.py``); the
``UTC*MMA`` names come from public Blackwell disassemblies, not from a capture here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .ncu import KernelProfile

# --expect-isa's choices: a family, "tensor" (any tensor family), "tma", or "none"
FAMILY_OPCODES: dict[str, tuple[str, ...]] = {
    "hmma": ("HMMA", "IMMA", "DMMA", "BMMA", "QMMA"),
    "wgmma": ("HGMMA", "IGMMA", "QGMMA", "BGMMA"),
    "tcgen05": ("UTCHMMA", "UTCIMMA", "UTCQMMA", "UTCOMMA", "UTCMMA"),
}
ALIASES = {"hgmma": "wgmma", "mma.sync": "hmma", "utcmma": "tcgen05"}
CHOICES = ("none", "tensor", "hmma", "wgmma", "hgmma", "tcgen05", "tma")
TMA_OPCODES = ("UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "UBLKCP", "UBLKRED", "UBLKPF")
FP32_OPCODES = ("FFMA", "FADD", "FMUL", "FMNMX", "FFMA2", "FADD2", "FMUL2")
HALF_OPCODES = ("HFMA2", "HADD2", "HMUL2", "HMNMX2")
FP64_OPCODES = ("DFMA", "DADD", "DMUL")

PER_OPCODE = "sass__inst_executed_per_opcode"  # total seen in the H200 log; instances not yet
# per-pipe executed counts (ncu.EXECUTED_METRICS: documented, not yet in a capture)
PIPE_COUNTS = {
    "hmma": "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "wgmma": "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "imma": "sm__inst_executed_pipe_tensor_op_imma.sum",
    "tma": "sm__inst_executed_pipe_tma.sum",
    "fma": "sm__inst_executed_pipe_fma.sum",
    "fp16": "sm__inst_executed_pipe_fp16.sum",
}
# pipe activity, percent of peak: every one of these is in the H200 log
# (tests/harness/fixtures/ncu/h200_vector_add_raw.csv), with the suffixes of _PCT_SUFFIXES
PIPE_ACTIVITY = {
    "tensor": "sm__pipe_tensor_cycles_active",
    "tensor (HMMA/HGMMA/IMMA/...)": (
        "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active"
    ),
    "tensor (DMMA)": "sm__pipe_tensor_op_dmma_cycles_active",
    "TMA": "sm__pipe_tma_cycles_active",
    "FMA": "sm__pipe_fma_cycles_active",
    "FMA heavy": "sm__pipe_fmaheavy_cycles_active",
    "ALU": "sm__pipe_alu_cycles_active",
    "FP64": "sm__pipe_fp64_cycles_active",
    "shared": "sm__pipe_shared_cycles_active",
    "ADU": "sm__inst_executed_pipe_adu",
    "LSU": "sm__inst_executed_pipe_lsu",
    "XU": "sm__inst_executed_pipe_xu",
    "uniform": "sm__inst_executed_pipe_uniform",
    "branch": "sm__inst_executed_pipe_cbu_pred_on_any",
    "TEX": "sm__inst_executed_pipe_tex",
}
_TENSOR_ACTIVITY = ("tensor", "tensor (HMMA/HGMMA/IMMA/...)", "tensor (DMMA)")
_PCT_SUFFIXES = (
    ".avg.pct_of_peak_sustained_elapsed",
    ".avg.pct_of_peak_sustained_active",
    ".sum.pct_of_peak_sustained_elapsed",
)
USED_PCT = 0.5  # a pipe below this percent of peak is not named as one the kernel ran on


@dataclass
class Executed:
    """What one kernel executed, as far as its metrics say."""

    kernel: str
    duration_s: float | None
    source: str  # "opcodes" | "pipe counts" | "pipe activity" | "none"
    instructions: float | None = None  # warp instructions executed in all
    opcodes: dict[str, float] = field(default_factory=dict)  # base opcode -> warp instructions
    families: dict[str, float] = field(default_factory=dict)  # tensor family -> instructions
    tma_ops: float | None = None
    fp32_ops: float | None = None
    half_ops: float | None = None
    fp64_ops: float | None = None
    pipe_counts: dict[str, float] = field(default_factory=dict)
    activity: dict[str, float] = field(default_factory=dict)  # pipe -> percent of peak

    @property
    def tensor_idle(self) -> bool | None:
        """True when the tensor pipe provably did nothing, None when unknown."""
        if self.source == "opcodes":
            return not any(self.families.values())
        seen = [self.activity[k] for k in _TENSOR_ACTIVITY if k in self.activity]
        counts = [self.pipe_counts[k] for k in ("hmma", "wgmma", "imma") if k in self.pipe_counts]
        if not seen and not counts:
            return None
        return not any(v > 0 for v in seen + counts)

    def as_dict(self) -> dict[str, Any]:
        top = sorted(self.opcodes.items(), key=lambda kv: -kv[1])[:8]
        out: dict[str, Any] = {
            "kernel": self.kernel[:120],
            "what": self.words(),
            "source": self.source,
            "instructions": self.instructions,
            "tensor_families": {k: v for k, v in self.families.items() if v},
            "tma_ops": self.tma_ops,
            "fp32_ops": self.fp32_ops,
            "half_ops": self.half_ops,
            "fp64_ops": self.fp64_ops,
            "top_opcodes": dict(top),
            "pipe_counts": self.pipe_counts,
            "pipes_pct": {k: round(v, 2) for k, v in self.activity.items() if v >= USED_PCT},
        }
        return {k: v for k, v in out.items() if v not in (None, {}, [])}

    def words(self) -> str:
        """What it ran on, in one line: the tensor family, TMA, FP32 vs half, pipes."""
        bits: list[str] = []
        if self.instructions:
            bits.append(f"{_count(self.instructions)} warp instructions")
        if self.source == "opcodes":
            fams = [f"{_count(v)} {k}" for k, v in self.families.items() if v]
            bits.append("tensor: " + (", ".join(fams) if fams else "none"))
            bits.append(f"TMA ops {_count(self.tma_ops or 0)}")
            bits.append(f"FP32 {_count(self.fp32_ops or 0)} vs half {_count(self.half_ops or 0)}")
            top = sorted(self.opcodes.items(), key=lambda kv: -kv[1])[:4]
            bits.append("top opcodes " + ", ".join(f"{k} {_count(v)}" for k, v in top))
        elif self.source == "pipe counts":
            bits.append(", ".join(f"{k} {_count(v)}" for k, v in self.pipe_counts.items()))
        if self.source in ("pipe counts", "pipe activity") or not bits:
            idle = self.tensor_idle
            if idle:
                bits.append("tensor pipe idle")
            used = self.busiest()
            if used:
                bits.append(
                    "busiest pipes (of peak) " + ", ".join(f"{k} {v:.1f}%" for k, v in used)
                )
        return "; ".join(bits) if bits else "no executed-instruction metrics"

    def busiest(self, n: int = 5) -> list[tuple[str, float]]:
        ranked = sorted(self.activity.items(), key=lambda kv: -kv[1])
        return [(k, v) for k, v in ranked if v >= USED_PCT][:n]


def _count(value: float) -> str:
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.3g}{unit}"
    return f"{value:.0f}"


def _pct(profile: KernelProfile, base: str) -> float | None:
    for suffix in _PCT_SUFFIXES:
        if base + suffix in profile.values:
            return profile.values[base + suffix]
    return None


def evidence(profile: KernelProfile) -> Executed:
    """One kernel's executed-instruction record from its ncu row."""
    activity = {k: v for k, m in PIPE_ACTIVITY.items() if (v := _pct(profile, m)) is not None}
    counts = {k: profile.values[m] for k, m in PIPE_COUNTS.items() if m in profile.values}
    per_opcode = profile.instances.get(PER_OPCODE)
    instructions = profile.values.get(PER_OPCODE, profile.values.get("inst_executed"))
    if per_opcode:
        opcodes: dict[str, float] = {}
        for name, value in per_opcode.items():
            base = name.split(".")[0].strip().upper()
            opcodes[base] = opcodes.get(base, 0.0) + value

        def total(names: tuple[str, ...]) -> float:
            return sum(opcodes.get(n, 0.0) for n in names)

        return Executed(
            kernel=profile.name,
            duration_s=profile.duration_s,
            source="opcodes",
            instructions=instructions,
            opcodes=opcodes,
            families={fam: total(names) for fam, names in FAMILY_OPCODES.items()},
            tma_ops=total(TMA_OPCODES),
            fp32_ops=total(FP32_OPCODES),
            half_ops=total(HALF_OPCODES),
            fp64_ops=total(FP64_OPCODES),
            pipe_counts=counts,
            activity=activity,
        )
    source = "pipe counts" if counts else ("pipe activity" if activity else "none")
    return Executed(
        kernel=profile.name,
        duration_s=profile.duration_s,
        source=source,
        instructions=instructions,
        families={k: counts[k] for k in ("hmma", "wgmma") if k in counts},
        tma_ops=counts.get("tma"),
        fp32_ops=counts.get("fma"),
        half_ops=counts.get("fp16"),
        pipe_counts=counts,
        activity=activity,
    )


def hot(profiles: list[KernelProfile]) -> KernelProfile | None:
    """The kernel that took the most time (the first when none has a duration)."""
    if not profiles:
        return None
    return max(profiles, key=lambda p: p.duration_s or 0.0)


def family_of(choice: str | None) -> str | None:
    """--expect-isa's value as a family name; None for no requirement."""
    if not choice:
        return None
    name = ALIASES.get(choice.lower(), choice.lower())
    return None if name == "none" else name


@dataclass(frozen=True)
class Expectation:
    """``ok``: True met, False not met, None undetermined (the metrics cannot tell)."""

    ok: bool | None
    reason: str


def _executed(ex: Executed, family: str) -> float | None:
    """How many instructions of ``family`` ran, or None when the record cannot say."""
    if family == "tma":
        if ex.tma_ops is not None:
            return ex.tma_ops
        pct = ex.activity.get("TMA")
        return 0.0 if pct == 0 else None
    if ex.source == "opcodes":
        if family == "tensor":
            return sum(ex.families.values())
        return ex.families.get(family, 0.0)
    if ex.tensor_idle:
        return 0.0
    if family == "wgmma" and "wgmma" in ex.pipe_counts:
        return ex.pipe_counts["wgmma"]
    if family == "tensor":
        counts = [ex.pipe_counts[k] for k in ("hmma", "wgmma", "imma") if k in ex.pipe_counts]
        return sum(counts) if counts else None
    return None  # hmma and wgmma share pipe counters on Hopper; tcgen05 has no count here


def expect(ex: Executed, choice: str | None) -> Expectation:
    """Whether the kernel executed any instruction of the required family."""
    family = family_of(choice)
    if family is None:
        return Expectation(True, "no instruction family required")
    label = {
        "wgmma": "wgmma (HGMMA/IGMMA/QGMMA/BGMMA)",
        "hmma": "mma.sync (HMMA/IMMA/DMMA/QMMA)",
        "tcgen05": "tcgen05 (UTC*MMA)",
        "tensor": "tensor-core",
        "tma": "TMA (UTMA*/UBLK*)",
    }.get(family, family)
    count = _executed(ex, family)
    if count is None:
        return Expectation(
            None,
            f"cannot tell whether {ex.kernel[:80]} executed {label} instructions from "
            f"{ex.source} alone ({ex.words()}); ncu gave no per-opcode counts",
        )
    if count > 0:
        return Expectation(True, f"{ex.kernel[:80]} executed {_count(count)} {label} instructions")
    return Expectation(
        False,
        f"the hot kernel {ex.kernel[:80]} executed no {label} instruction; "
        f"what it ran: {ex.words()}",
    )


__all__ = [
    "CHOICES",
    "Executed",
    "Expectation",
    "evidence",
    "expect",
    "family_of",
    "hot",
]
