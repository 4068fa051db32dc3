"""The gap to the best known implementation: which library path a problem has, and the SOL
score of a candidate against it.

A problem is GEMM-, convolution- or attention-like by the compute ops its reference ran
once under the op recorder (``problems/library.py`` records them before any candidate
call): ``problem_kind``. Its best library path is what torch reaches for that work --
cuBLAS/cuBLASLt (``aten::mm``, ``addmm``, ``bmm``...), cuDNN (``aten::convolution``),
fused attention (``aten::scaled_dot_product_attention``). ``library_baseline`` says which
timing stands for it: the reference's own, when the reference already calls that path
(``torch.matmul``, ``F.conv2d``, ``F.scaled_dot_product_attention``); none, with the
reason, when it does not (an attention written as matmuls and a softmax: timing SDPA
instead needs the problem to say which inputs are q, k and v), or without a GPU.

``sol_score``: the share of the gap between the better baseline (library path or
``torch.compile`` of the reference) and the roofline that the candidate closes,
``(t_base - t_cand) / (t_base - t_roof)``: 1 at the roofline, 0 at the baseline, negative
when slower than it; undefined (None, with the reason) when the baseline already meets
the roofline, or when nothing was timed. Pure functions: tested without a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..problems.policy import GROUPS

GEMM_OPS = GROUPS["matmul"].aten
CONV_OPS = frozenset(
    "aten::" + name
    for name in (
        "convolution",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cudnn_convolution",
        "cudnn_convolution_transpose",
    )
)
SDPA_OPS = frozenset(
    "aten::" + name
    for name in (
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_attention_math",
        "_flash_attention_forward",
        "_efficient_attention_forward",
    )
)
SOFTMAX_OPS = GROUPS["softmax"].aten
BATCHED_MATMUL_OPS = frozenset({"aten::bmm", "aten::baddbmm", "aten::matmul", "aten::einsum"})
LIBRARY_PATH = {
    "gemm": "cuBLAS/cuBLASLt",
    "conv": "cuDNN",
    "attention": "scaled_dot_product_attention",
}


def _stem(op: str) -> str:
    """``aten::mm.out`` and ``aten::mm`` are one op here."""
    return op.split(".")[0]


def problem_kind(ops: Iterable[str]) -> str | None:
    """'attention', 'conv' or 'gemm' from the reference's recorded ATen ops (None: none).
    Attention: SDPA itself, or a batched matmul with a softmax (QK^T, softmax, PV)."""
    seen = {_stem(op) for op in ops}
    if seen & SDPA_OPS or (seen & SOFTMAX_OPS and seen & BATCHED_MATMUL_OPS):
        return "attention"
    if seen & CONV_OPS:
        return "conv"
    if seen & GEMM_OPS:
        return "gemm"
    return None


@dataclass(frozen=True)
class LibraryBaseline:
    """Which timing is the library path's: ``subject`` 'reference' (the reference calls
    it) or None (not timed, ``reason`` says why)."""

    kind: str | None
    path: str | None
    subject: str | None
    reason: str


def library_baseline(
    kind: str | None,
    ops: Iterable[str],
    device: str,
    op_dtypes: Mapping[str, Iterable[str]] | None = None,
    input_dtypes: Iterable[str] = (),
) -> LibraryBaseline:
    """The library path of a problem of this kind, and whether the reference is it: not
    when the reference runs that path in another precision than its inputs' (a bf16 GEMM
    whose reference multiplies float32 copies runs the float32 GEMM, many times slower
    than the library's bf16 one: a speedup over it says nothing of the library)."""
    if kind is None:
        return LibraryBaseline(
            None, None, None, "not GEMM-, convolution- or attention-like: no library baseline"
        )
    path = LIBRARY_PATH[kind]
    if device != "cuda":
        return LibraryBaseline(
            kind, path, None, f"needs a GPU ({path} is timed on CUDA); this check ran on {device}"
        )
    seen = {_stem(op) for op in ops}
    calls = {"gemm": GEMM_OPS, "conv": CONV_OPS, "attention": SDPA_OPS}[kind]
    used = sorted(seen & calls)
    inputs = sorted(set(input_dtypes))
    given = sorted({str(d) for op in used for d in (op_dtypes or {}).get(op, ())})
    floating = [d for d in given if _floating(d)]
    if used and inputs and floating and not set(floating) & set(inputs):
        return LibraryBaseline(
            kind,
            path,
            None,
            f"the reference runs {path} ({', '.join(used[:3])}) in {_names(floating)}, its "
            f"inputs are {_names(inputs)}: not the library's path at the problem's precision; "
            "timing that path needs the problem to say how its inputs map onto it",
        )
    if used:
        return LibraryBaseline(
            kind, path, "reference", f"the reference runs {path} ({', '.join(used[:3])})"
        )
    return LibraryBaseline(
        kind,
        path,
        None,
        f"the reference does not call {path} (it computes the {kind} from "
        f"{', '.join(sorted(seen)[:4]) or 'other ops'}); timing {path} instead needs the problem "
        "to say how its inputs map onto it",
    )


def _names(dtypes: list[str]) -> str:
    return "/".join(d.replace("torch.", "") for d in dtypes)


def _floating(dtype: str) -> bool:
    name = dtype.replace("torch.", "")
    return name.startswith(("float", "bfloat", "complex"))


@dataclass(frozen=True)
class SolScore:
    """``score``: the share of the baseline-to-roofline gap closed (None: undefined, and
    ``reason`` says why); ``baseline``: which baseline was the better one."""

    score: float | None
    baseline: str | None
    baseline_ms: float | None
    roof_ms: float | None
    reason: str


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def sol_score(
    candidate_ms: float | None, baselines: Mapping[str, float | None], roof_ms: float | None
) -> SolScore:
    """SOL = (t_base - t_cand) / (t_base - t_roof), with t_base the better (faster) of the
    timed ``baselines`` (name -> ms)."""
    timed = {name: ms for name, ms in baselines.items() if _positive(ms)}
    if not _positive(candidate_ms):
        return SolScore(None, None, None, roof_ms, "the candidate was not timed")
    if not timed:
        return SolScore(None, None, None, roof_ms, "no baseline was timed")
    if not _positive(roof_ms):
        return SolScore(None, None, None, roof_ms, "no roofline time (no FLOP or byte count)")
    name, base = min(timed.items(), key=lambda kv: float(kv[1] or math.inf))
    cand, roof, base_ms = float(candidate_ms or 0.0), float(roof_ms or 0.0), float(base or 0.0)
    gap = base_ms - roof
    if gap <= 0:
        return SolScore(
            None,
            name,
            base_ms,
            roof,
            f"the {name} baseline ({base_ms:.4g} ms) already meets the roofline "
            f"({roof:.4g} ms): no gap to close",
        )
    score = (base_ms - cand) / gap
    if score < 0:
        words = f"{cand:.4g} ms, slower than the {name} baseline ({base_ms:.4g} ms)"
    else:
        words = (
            f"{cand:.4g} ms closes {score * 100:.0f}% of the gap from the {name} baseline "
            f"({base_ms:.4g} ms) to the roofline ({roof:.4g} ms)"
        )
    return SolScore(score, name, base_ms, roof, f"SOL {score:.2f}: {words}")


__all__ = [
    "LibraryBaseline",
    "SolScore",
    "library_baseline",
    "problem_kind",
    "sol_score",
]
