"""Error metrics between a candidate's output and the reference, computed in the parent.

Every element is compared in float64: max abs error, max rel error (over elements whose
magnitude exceeds atol), MSE, RMSE, PSNR (peak = max |expected|), cosine similarity, the
number of elements outside ``atol + rtol * |expected|``, and the worst mismatches with
their indices, expected and got. NaN/Inf never pass unless the reference has the same
non-finite value at that element. Low-precision tolerances add PSNR and cosine floors.
A per-element ``slack`` widens the bound element by element (the mixed-scale stress
inputs: how far the reference itself moves there when its inputs move by ``rtol``).
Past ``CHUNK_ELEMENTS`` elements the same numbers are gathered a chunk at a time, so a
comparison holds a few chunks' float64 copies, not twenty of the whole output (an upstream
KernelBench softmax's 1.6 G elements need 6.4 GB a tensor).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .problems.problemspec import Tolerance

CHUNK_ELEMENTS = 1 << 22  # past this many elements a comparison goes a chunk at a time
SMALL_OP_ELEMENTS = 1 << 22  # under this many, CPU comparisons run on one thread


@dataclass
class Comparison:
    ok: bool
    tolerance: Tolerance
    total: int = 0
    mismatches: int = 0
    nonfinite: int = 0  # elements non-finite in got where expected is finite (or vice versa)
    max_abs: float = 0.0
    max_rel: float = 0.0
    mse: float = 0.0
    rmse: float = 0.0
    psnr: float = math.inf
    cossim: float = 1.0
    worst: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""

    def metrics(self) -> dict[str, Any]:
        return {
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "mse": self.mse,
            "rmse": self.rmse,
            "psnr": self.psnr,
            "cossim": self.cossim,
            "mismatches": self.mismatches,
            "elements": self.total,
        }


def _as_float64(t: torch.Tensor, device: Any = "cpu") -> torch.Tensor:
    t = t.detach().to(device)
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.to(torch.float64)


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    if not shape:
        return []
    return [int(i) for i in np.unravel_index(flat, shape)]


def compare(
    got: torch.Tensor,
    expected: torch.Tensor,
    tol: Tolerance,
    k_worst: int = 5,
    on_device: bool = False,
    slack: torch.Tensor | None = None,
) -> Comparison:
    """Compare two tensors of the same shape element by element, in float64: on the CPU,
    or with ``on_device`` where ``expected`` lives (a GPU: the benchmark's re-check of a
    million sampled elements takes milliseconds there, 0.15 s on one CPU thread).
    ``slack``: an extra absolute tolerance per element, of ``expected``'s shape."""
    device = expected.device if on_device else "cpu"
    with one_thread_if_small(expected.numel()):
        if expected.numel() > CHUNK_ELEMENTS:
            return _compare_chunked(got, expected, tol, k_worst, device, slack)
        return _compare(got, expected, tol, k_worst, device, slack)


@contextlib.contextmanager
def one_thread_if_small(numel: int) -> Iterator[None]:
    """CPU work on a tensor under ``SMALL_OP_ELEMENTS`` elements on one torch thread.
    With a busy second core, OpenMP barriers make a 30k-element op 50x slower on two
    threads than on one; three pool slots each running their comparisons on every core of
    a 16-core machine spent 3.4 s a check in them instead of 0.2 (bench/RESULTS.md,
    2026-12-06 06:00). Only the main thread changes the (process-wide) setting."""
    threads = torch.get_num_threads()
    main = threading.current_thread() is threading.main_thread()
    if main and numel < SMALL_OP_ELEMENTS and threads > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def _elements(
    e: torch.Tensor,
    g: torch.Tensor,
    tol: Tolerance,
    extra: torch.Tensor | None,
    floating: bool,
) -> tuple[torch.Tensor, ...]:
    """Per element, of float64 ``e`` (expected) and ``g``: finite in each, a non-finite
    mismatch, finite in both, the error there, the bound (``extra``: slack added), and
    whether it lies outside the bound."""
    fe, fg = torch.isfinite(e), torch.isfinite(g)
    same_nonfinite = (~fe) & ((torch.isnan(e) & torch.isnan(g)) | (e == g))
    bad_nonfinite = ((~fe) & ~same_nonfinite) | (fe & ~fg)
    both = fe & fg
    diff = torch.where(both, (g - e).abs(), torch.zeros_like(e))
    bound = tol.atol + tol.rtol * e.abs()
    if extra is not None:
        bound = bound + torch.where(torch.isfinite(extra), extra.abs(), torch.zeros_like(extra))
    outside = both & ((diff > bound) if floating else (diff != 0))
    return fe, fg, bad_nonfinite, both, diff, bound, outside


def _compare(
    got: torch.Tensor,
    expected: torch.Tensor,
    tol: Tolerance,
    k_worst: int,
    device: Any = "cpu",
    slack: torch.Tensor | None = None,
) -> Comparison:
    shape = tuple(expected.shape)
    e = _as_float64(expected, device).reshape(-1)
    g = _as_float64(got, device).reshape(-1)
    n = e.numel()
    result = Comparison(ok=True, tolerance=tol, total=n)
    if n == 0:
        return result
    extra = _as_float64(slack, device).reshape(-1) if slack is not None else None
    floating = expected.dtype.is_floating_point or expected.dtype.is_complex
    fe, fg, bad_nonfinite, both, diff, bound, outside = _elements(e, g, tol, extra, floating)
    mism = outside | bad_nonfinite
    result.mismatches = int(mism.sum())
    result.nonfinite = int(bad_nonfinite.sum())

    ef, gf = e[both], g[both]
    if ef.numel():
        d = (gf - ef).abs()
        result.max_abs = float(d.max())
        big = ef.abs() > max(tol.atol, 1e-30)
        result.max_rel = float((d[big] / ef[big].abs()).max()) if bool(big.any()) else 0.0
        result.mse = float((d * d).mean())
        result.rmse = math.sqrt(result.mse)
        peak = float(ef.abs().max()) or 1.0
        result.psnr = math.inf if result.mse == 0 else 10.0 * math.log10(peak * peak / result.mse)
        ne, ng = float(ef.norm()), float(gf.norm())
        if ne == 0 and ng == 0:
            result.cossim = 1.0
        elif ne == 0 or ng == 0:
            result.cossim = 0.0
        else:
            result.cossim = float((ef * gf).sum()) / (ne * ng)
    if result.nonfinite or bool(bad_nonfinite.any()):
        result.max_abs = math.inf if bool((fe & ~fg).any()) else result.max_abs

    reasons = _reasons(result, tol, int(outside.sum()), n, slack is not None)
    result.ok = not reasons
    result.reason = "; ".join(reasons)

    # worst elements: the mismatches by how far past the bound they are, else the largest errors
    score = torch.where(
        mism,
        torch.where(bad_nonfinite, torch.full_like(e, math.inf), diff - bound),
        torch.full_like(e, -math.inf),
    )
    if result.mismatches == 0:
        score = torch.where(both, diff, torch.full_like(e, -math.inf))
    k = min(k_worst, n)
    top = torch.topk(score, k).indices.tolist()
    for flat in top:
        if score[flat] == -math.inf:
            break
        result.worst.append(
            {
                "index": _index(flat, shape if not expected.is_complex() else (*shape, 2)),
                "expected": float(e[flat]),
                "got": float(g[flat]),
                "abs_err": float((g[flat] - e[flat]).abs()) if bool(both[flat]) else math.inf,
            }
        )
    return result


def _compare_chunked(
    got: torch.Tensor,
    expected: torch.Tensor,
    tol: Tolerance,
    k_worst: int,
    device: Any = "cpu",
    slack: torch.Tensor | None = None,
    chunk: int = CHUNK_ELEMENTS,
) -> Comparison:
    """``_compare``'s numbers, gathered ``chunk`` elements at a time: counts and maxima
    add up, MSE and cosine from sums of squares and products, the worst elements from
    each chunk's own worst."""
    shape = tuple(expected.shape)
    flat_e = expected.detach().reshape(-1)
    flat_g = got.detach().reshape(-1)
    flat_s = slack.detach().reshape(-1) if slack is not None else None
    if expected.is_complex():  # compared as (real, imag) pairs, as _as_float64 does
        flat_e = torch.view_as_real(flat_e).reshape(-1)
        flat_g = torch.view_as_real(flat_g.to(expected.dtype)).reshape(-1)
        shape = (*shape, 2)
    n = flat_e.numel()
    result = Comparison(ok=True, tolerance=tol, total=n)
    floating = expected.dtype.is_floating_point or expected.dtype.is_complex
    outside_count = both_count = 0
    got_nonfinite = False
    sum_d2 = sum_e2 = sum_g2 = sum_eg = peak = 0.0
    worst_mism: list[tuple[float, int, float, float, bool]] = []
    worst_diff: list[tuple[float, int, float, float, bool]] = []
    for start in range(0, n, chunk):
        e = flat_e[start : start + chunk].to(device, torch.float64)
        g = flat_g[start : start + chunk].to(device, torch.float64)
        extra = (
            flat_s[start : start + chunk].to(device, torch.float64) if flat_s is not None else None
        )
        fe, fg, bad_nonfinite, both, diff, bound, outside = _elements(e, g, tol, extra, floating)
        mism = outside | bad_nonfinite
        result.mismatches += int(mism.sum())
        result.nonfinite += int(bad_nonfinite.sum())
        outside_count += int(outside.sum())
        got_nonfinite = got_nonfinite or bool((fe & ~fg).any())
        ef, gf = e[both], g[both]
        if ef.numel():
            d = (gf - ef).abs()
            both_count += ef.numel()
            result.max_abs = max(result.max_abs, float(d.max()))
            big = ef.abs() > max(tol.atol, 1e-30)
            if bool(big.any()):
                result.max_rel = max(result.max_rel, float((d[big] / ef[big].abs()).max()))
            sum_d2 += float((d * d).sum())
            peak = max(peak, float(ef.abs().max()))
            sum_e2 += float((ef * ef).sum())
            sum_g2 += float((gf * gf).sum())
            sum_eg += float((ef * gf).sum())
        k = min(k_worst, e.numel())
        if k:
            for keep, score in (
                (
                    worst_mism,
                    torch.where(
                        mism,
                        torch.where(bad_nonfinite, torch.full_like(e, math.inf), diff - bound),
                        torch.full_like(e, -math.inf),
                    ),
                ),
                (worst_diff, torch.where(both, diff, torch.full_like(e, -math.inf))),
            ):
                values, where = torch.topk(score, k)
                for value, i in zip(values.tolist(), where.tolist(), strict=True):
                    keep.append((value, start + i, float(e[i]), float(g[i]), bool(both[i])))
    if both_count:
        result.mse = sum_d2 / both_count
        result.rmse = math.sqrt(result.mse)
        top = peak or 1.0
        result.psnr = math.inf if result.mse == 0 else 10.0 * math.log10(top * top / result.mse)
        ne, ng = math.sqrt(sum_e2), math.sqrt(sum_g2)
        if ne == 0 and ng == 0:
            result.cossim = 1.0
        elif ne == 0 or ng == 0:
            result.cossim = 0.0
        else:
            result.cossim = sum_eg / (ne * ng)
    if result.nonfinite:
        result.max_abs = math.inf if got_nonfinite else result.max_abs
    result.reason = "; ".join(_reasons(result, tol, outside_count, n, slack is not None))
    result.ok = not result.reason
    candidates = worst_mism if result.mismatches else worst_diff
    for value, flat, e_value, g_value, finite in sorted(candidates, key=lambda c: -c[0])[:k_worst]:
        if value == -math.inf:
            break
        result.worst.append(
            {
                "index": _index(flat, shape),
                "expected": e_value,
                "got": g_value,
                "abs_err": abs(g_value - e_value) if finite else math.inf,
            }
        )
    return result


def _reasons(result: Comparison, tol: Tolerance, outside: int, n: int, slack: bool) -> list[str]:
    """Why a comparison failed, one phrase a criterion: ``_compare``'s own wording."""
    reasons = []
    if result.nonfinite:
        reasons.append(
            f"{result.nonfinite} element(s) NaN/Inf where the reference is not (or the other way round)"
        )
    if outside:
        also = " and each element's slack" if slack else ""
        reasons.append(
            f"{outside} of {n} elements outside atol={tol.atol:g} rtol={tol.rtol:g}{also}"
        )
    if tol.min_psnr is not None and result.psnr < tol.min_psnr:
        reasons.append(
            f"PSNR {result.psnr:.1f} dB below the {tol.min_psnr:g} dB floor for {tol.precision}"
        )
    if tol.min_cossim is not None and result.cossim < tol.min_cossim:
        reasons.append(
            f"cosine similarity {result.cossim:.6f} below the {tol.min_cossim:g} floor for {tol.precision}"
        )
    return reasons


def combine(results: list[Comparison]) -> dict[str, Any]:
    """Worst-case metrics over several comparisons (shapes x trials x outputs)."""
    if not results:
        return {}
    return {
        "max_abs": max(r.max_abs for r in results),
        "max_rel": max(r.max_rel for r in results),
        "rmse": max(r.rmse for r in results),
        "psnr": min(r.psnr for r in results),
        "cossim": min(r.cossim for r in results),
        "compared": sum(r.total for r in results),
    }
