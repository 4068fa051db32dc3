"""The ``roofline`` rung: percent of the hardware limit, and the physics floor.

For each benchmarked shape: FLOPs and bytes from the problem (``flops``/``bytes``; bytes
fall back to the inputs' plus the outputs' sizes), achieved GB/s and TFLOP/s against the
device ceilings (``ceilings.py``: measured once per GPU, driver and clocks, cached in the
user cache dir), the binding ceiling at that arithmetic intensity, and the percent of the
roofline -- the number the agent loop stops on, in the verdict JSON (``performance``) and
in the feedback text. A median below the physics floor fails the candidate as a timing
exploit (gating); a speedup over the reference above ``speedup_review`` (10x) is flagged
for review.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..ceilings import (
    Ceilings,
    cache_key,
    floor_bytes,
    from_measurement,
    load_cached,
    physics_floor,
    precision_of,
    roofline,
    store,
)
from ..runner import WorkerGone
from ..verdict import RungResult

if TYPE_CHECKING:
    from .context import LadderContext


def _identity(ctx: LadderContext) -> dict[str, Any] | None:
    try:
        session, reply = ctx.aux("reference")
    except WorkerGone:
        return None
    if reply.get("error"):
        return None
    try:
        answer = session.request({"op": "identity"}, [], 60.0, 1 << 20).header
    except WorkerGone:
        return None
    return answer.get("identity") if answer.get("ok") else None


def cached_ceilings(ctx: LadderContext) -> Ceilings | None:
    """The ceilings if known (this run or the cache); never measures."""
    if ctx.ceilings_cache is not None:
        return ctx.ceilings_cache  # type: ignore[no-any-return]
    identity = _identity(ctx)
    if identity is None:
        return None
    found = load_cached(cache_key(identity))
    if found is not None:
        ctx.ceilings_cache = found
    return found


def ceilings_for(ctx: LadderContext) -> tuple[Ceilings | None, str]:
    """Cached ceilings, else measure them now in the harness-only worker (a few seconds)."""
    found = cached_ceilings(ctx)
    if found is not None:
        return found, "cached"
    try:
        session, reply = ctx.aux("reference")
        if reply.get("error"):
            return None, "the harness worker could not start"
        answer = session.request({"op": "ceilings"}, [], 600.0, 1 << 20).header
    except WorkerGone as gone:
        return None, f"measuring the ceilings failed: {gone.reason}"
    if not answer.get("ok"):
        return None, f"measuring the ceilings failed: {str(answer.get('harness_error'))[-300:]}"
    ceilings = from_measurement(answer["result"])
    try:
        store(ceilings)
    except OSError:
        pass
    ctx.ceilings_cache = ceilings
    return ceilings, "measured now"


class RooflineRung:
    name = "roofline"
    gating = True

    def enabled(self, ctx: LadderContext) -> bool:
        return bool(ctx.options.bench)

    def run(self, ctx: LadderContext) -> RungResult:
        if not ctx.bench_results:
            return RungResult(self.name, None, False, {}, "nothing was benchmarked")
        ceilings, how = ceilings_for(ctx)
        if ceilings is None:
            return RungResult(self.name, None, False, {}, f"{how}")
        shapes = []
        review: list[str] = []
        for result in ctx.bench_results:
            entry = analyse(ctx, result, ceilings)
            shapes.append(entry)
            if entry.get("exploit"):
                return RungResult(
                    self.name,
                    False,
                    self.gating,
                    entry["metrics"],
                    entry["exploit"],
                    {"shapes": shapes, "ceilings": ceilings.as_dict()},
                )
            review += entry.get("review", [])
        first = shapes[0]
        ctx.performance.update(
            {
                "pct_of_roofline": first["metrics"]["pct_of_roofline"],
                "bound": first["metrics"]["bound"],
                "roofline": first["sentence"],
                "shape": first["label"],
                "ceilings": {
                    "gpu": ceilings.gpu,
                    "dram_gbps": ceilings.dram_gbps,
                    "tflops": ceilings.tflops,
                    "source": how,
                },
                "shapes": [
                    {"shape": s["label"], **s["metrics"], "roofline": s["sentence"]} for s in shapes
                ],
            }
        )
        if review:
            ctx.performance["review"] = review
        reason = f"{first['label']}: {first['sentence']}"
        if review:
            reason += "; REVIEW: " + "; ".join(review)
        return RungResult(
            self.name,
            True,
            self.gating,
            first["metrics"],
            reason,
            {"shapes": shapes, "ceilings": ceilings.as_dict(), "ceilings_source": how},
        )


def analyse(ctx: LadderContext, result: dict[str, Any], ceilings: Ceilings) -> dict[str, Any]:
    shape = result["shape"]
    median_s = float((result.get("candidate") or {}).get("median_ms") or 0.0) * 1e-3
    flops = ctx.problem.flops(shape)
    nbytes = ctx.problem.bytes(shape)
    source = "problem"
    if not nbytes:
        nbytes = float((result.get("input_bytes") or 0) + (result.get("output_bytes") or 0))
        source = "inputs + outputs"
    outputs = result.get("outputs") or [{}]
    precision = precision_of(outputs[0].get("dtype"), ctx.problem.precision)
    roof = roofline(median_s, flops, nbytes, ceilings, precision)
    min_bytes = floor_bytes(
        nbytes,
        float(result.get("output_bytes") or 0),
        ceilings.l2_bytes,
        bool(result.get("flushed")),
    )
    floor_s, why = physics_floor(flops, min_bytes, ceilings, precision)
    metrics = roof.as_metrics()
    metrics["floor_ms"] = floor_s * 1e3
    entry: dict[str, Any] = {
        "label": result["label"],
        "metrics": metrics,
        "sentence": roof.sentence(),
        "bytes_source": source,
        "floor": {"seconds": floor_s, "because": why, "min_bytes": min_bytes},
    }
    if median_s > 0 and median_s < floor_s:
        entry["exploit"] = (
            f"timing exploit: the measured median {median_s * 1e3:.4g} ms is below the physics floor "
            f"{floor_s * 1e3:.4g} ms ({why}) for shape {result['label']}; no honest kernel can be this fast"
        )
    speedup = result.get("speedup")
    if speedup is not None and speedup > ctx.options.speedup_review:
        entry["review"] = [
            f"{speedup:.1f}x faster than the reference on {result['label']} "
            f"(over {ctx.options.speedup_review:g}x): check the timing and the work done"
        ]
    return entry
