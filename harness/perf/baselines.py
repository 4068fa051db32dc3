"""The gap to the best known implementation: which library path a problem has, and the SOL
score of a candidate against it.

A problem is GEMM-, convolution- or attention-like by the compute ops its reference ran
once under the op recorder (``problems/library.py`` records them before any candidate
call): ``problem_kind``. Its best library path is what torch reaches for that work --
cuBLAS/cuBLASLt (``aten::mm``, ``addmm``, ``bmm``...), cuDNN (``aten::convolution``),
fused attention (``aten::scaled_dot_product_attention``). ``library_baseline`` says which
timing stands for it: the reference's own, when the reference already calls that path
(``torch.matmul``, ``F.conv2d``, ``F.scaled_dot_product_attention``) at its inputs'
precision; for a GEMM whose reference does not (it multiplies float32 copies of bf16
inputs, or computes the product another way), ``torch.matmul`` of the two inputs whose
product has the output's shape (``gemm_operands``), at their own precision: the library's
GEMM for that data; none, with the reason, otherwise (an attention written as matmuls and a
softmax: timing SDPA instead needs the problem to say which inputs are q, k and v), or
without a GPU.

``sol_score``: the share of the gap between the better baseline (library path or
``torch.compile`` of the reference) and the roofline that the candidate closes,
``(t_base - t_cand) / (t_base - t_roof)``: 1 at the roofline, 0 at the baseline, negative
when slower than it; undefined (None, with the reason) when the baseline already meets
the roofline, or when nothing was timed. Pure functions: tested without a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
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
    it), 'library' (``torch.matmul`` of the inputs ``operands``, leaf indices, at their
    precision) or None (not timed, ``reason`` says why)."""

    kind: str | None
    path: str | None
    subject: str | None
    reason: str
    operands: tuple[int, int] | None = None


def gemm_operands(
    inputs: Sequence[tuple[str, tuple[int, ...]] | None], output: tuple[int, ...] | None
) -> tuple[int, int] | None:
    """The two input leaves (indices, in order) whose ``torch.matmul`` has the output's
    shape: both floating, of one dtype, at least 2-D, inner sizes equal, batch sizes
    broadcasting to the output's. ``inputs``: each leaf's (dtype, shape), None for a
    leaf that is not a tensor; ``output``: the reference's one output tensor's shape (None
    when it has several or none). Pairs of the same shapes and dtype cost the library the
    same (a square GEMM's A @ B and B @ A): the first is taken. None when no pair fits, or
    pairs of different shapes do: which product the problem means is then not known from
    shapes alone."""
    if output is None or len(output) < 2:
        return None
    found: dict[tuple[str, tuple[int, ...], tuple[int, ...]], tuple[int, int]] = {}
    for i, a in enumerate(inputs):
        for j, b in enumerate(inputs):
            if i == j or a is None or b is None or a[0] != b[0] or not _floating(a[0]):
                continue
            if _matmul_shape(a[1], b[1]) == tuple(output):
                found.setdefault((a[0], tuple(a[1]), tuple(b[1])), (i, j))
    return next(iter(found.values())) if len(found) == 1 else None


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    batch_a, batch_b = a[:-2], b[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a = (1,) * (width - len(batch_a)) + batch_a
    batch_b = (1,) * (width - len(batch_b)) + batch_b
    batch = []
    for x, y in zip(batch_a, batch_b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        batch.append(max(x, y))
    return (*batch, a[-2], b[-1])


def library_baseline(
    kind: str | None,
    ops: Iterable[str],
    device: str,
    op_dtypes: Mapping[str, Iterable[str]] | None = None,
    input_dtypes: Iterable[str] = (),
    operands: tuple[int, int] | None = None,
) -> LibraryBaseline:
    """The library path of a problem of this kind, and whether the reference is it: not
    when the reference runs that path in another precision than its inputs' (a bf16 GEMM
    whose reference multiplies float32 copies runs the float32 GEMM, many times slower
    than the library's bf16 one: a speedup over it says nothing of the library). A GEMM
    whose reference is not the path is timed as ``torch.matmul`` of ``operands`` (see
    ``gemm_operands``) when they are known."""
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
        why = (
            f"the reference runs {path} ({', '.join(used[:3])}) in {_names(floating)}, its "
            f"inputs are {_names(inputs)}: not the library's path at the problem's precision"
        )
    elif used:
        return LibraryBaseline(
            kind, path, "reference", f"the reference runs {path} ({', '.join(used[:3])})"
        )
    else:
        why = (
            f"the reference does not call {path} (it computes the {kind} from "
            f"{', '.join(sorted(seen)[:4]) or 'other ops'})"
        )
    if kind == "gemm" and operands is not None:
        i, j = operands
        return LibraryBaseline(
            kind,
            path,
            "library",
            f"{why}; timed instead: torch.matmul of input leaves {i} and {j} at their own "
            f"precision ({path})",
            operands,
        )
    return LibraryBaseline(
        kind,
        path,
        None,
        f"{why}; timing {path} instead needs the problem to say how its inputs map onto it",
    )


def _names(dtypes: list[str]) -> str:
    return "/".join(d.replace("torch.", "") for d in dtypes)


def _floating(dtype: str) -> bool:
    name = dtype.replace("torch.", "")
    return name.startswith(("float", "bfloat", "complex"))


# the least baseline-to-roofline gap, as a share of the baseline's time, that a SOL score
# is taken over. The compute ceiling is cuBLAS's own burst rate at 8192^3, so the library
# GEMM sits within a few percent of the roofline there, and the clock under the power cap
# moves a timing by 10-15 %: on the H100, two runs of the same kernel against a gap of 1 %
# gave SOL -38.6 and -49.9 (bench/RESULTS.md, 2026-12-06 07:43)
SOL_MIN_GAP = 0.10


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
    if gap < SOL_MIN_GAP * base_ms:
        return SolScore(
            None,
            name,
            base_ms,
            roof,
            f"the {name} baseline ({base_ms:.4g} ms) is within {gap / base_ms:.1%} of the "
            f"roofline ({roof:.4g} ms), less than the clock alone moves a timing: a share "
            f"of that gap is noise (speedup_vs_{name} is the number)",
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
