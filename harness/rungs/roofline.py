"""The ``roofline`` rung: percent of the hardware limit, and the physics floor.

For each shape the benchmark timed (its ``Timings``): FLOPs and bytes from the problem
(``flops``/``bytes``; bytes fall back to the inputs' plus the outputs' sizes), achieved
GB/s and TFLOP/s against the device ceilings (``ceilings.py``: measured once per GPU,
driver and clocks, cached in the user cache dir), the binding ceiling at that arithmetic
intensity, and the percent of the roofline -- the number the agent loop stops on, in the
verdict's ``summary`` and ``performance`` and in the feedback text. A median below the
physics floor fails the candidate as a timing exploit (gating); a speedup over the
reference above ``speedup_review`` (10x) is flagged for review. Result: ``Roofline``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..perf import clockscale
from ..perf.ceilings import Ceilings, floor_bytes, physics_floor, precision_of, roofline
from ..verdict import RungResult
from .results import Roofline, ShapeTiming, Timings

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier


class RooflineRung:
    name = "roofline"
    gating = True

    def enabled(self, ctx: LadderContext) -> bool:
        return bool(ctx.options.bench)

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        timings = earlier.get(Timings)
        if timings is None or not timings.shapes:
            return RungResult.skip(self, "nothing was benchmarked")
        ceilings, how = ctx.ceilings.get()
        if ceilings is None:
            return RungResult.skip(self, how)
        shapes = []
        review: list[str] = []
        for timing in timings.shapes:
            entry = analyse(ctx, timing, ceilings)
            shapes.append(entry)
            if entry.get("exploit"):
                details = {"shapes": shapes, "ceilings": ceilings.as_dict()}
                return RungResult.fail(self, entry["exploit"], entry["metrics"], details)
            review += entry.get("review", [])
        first = shapes[0]
        result = Roofline(
            pct_of_roofline=first["metrics"]["pct_of_roofline"],
            bound=first["metrics"]["bound"],
            sentence=first["sentence"],
            shape=first["label"],
            ceilings={
                "gpu": ceilings.gpu,
                "dram_gbps": ceilings.dram_gbps,
                "tflops": ceilings.tflops,
                "source": how,
            },
            shapes=[
                {"shape": s["label"], **s["metrics"], "roofline": s["sentence"]} for s in shapes
            ],
            review=review,
        )
        reason = f"{first['label']}: {first['sentence']}"
        if review:
            reason += "; REVIEW: " + "; ".join(review)
        details = {"shapes": shapes, "ceilings": ceilings.as_dict(), "ceilings_source": how}
        return RungResult.passed(self, first["metrics"], reason, details, output=result)


def analyse(ctx: LadderContext, timing: ShapeTiming, ceilings: Ceilings) -> dict[str, Any]:
    shape = timing.shape
    median_s = timing.median_ms * 1e-3
    flops = ctx.problem.flops(shape)
    nbytes = ctx.problem.bytes(shape)
    source = "problem"
    if not nbytes:
        nbytes = float((timing.input_bytes or 0) + (timing.output_bytes or 0))
        source = "inputs + outputs"
    precision = precision_of(timing.output_dtype, ctx.problem.precision)
    roof = roofline(median_s, flops, nbytes, ceilings, precision)
    min_bytes = floor_bytes(
        nbytes, float(timing.output_bytes or 0), ceilings.l2_bytes, timing.flushed
    )
    floor_s, why = physics_floor(flops, min_bytes, ceilings, precision)
    metrics = roof.as_metrics()
    metrics["floor_ms"] = floor_s * 1e3
    clocks = clockscale.at_observed_clock(
        metrics,
        clockscale.observed_clock(timing.record),
        clockscale.ceiling_clock(ceilings.details),
    )
    metrics.update(clocks)
    entry: dict[str, Any] = {
        "label": timing.label,
        "metrics": metrics,
        "sentence": roof.sentence() + clockscale.words(clocks, roof.bound),
        "bytes_source": source,
        "floor": {"seconds": floor_s, "because": why, "min_bytes": min_bytes},
    }
    if median_s > 0 and median_s < floor_s:
        entry["exploit"] = (
            f"timing exploit: the measured median {median_s * 1e3:.4g} ms is below the physics floor "
            f"{floor_s * 1e3:.4g} ms ({why}) for shape {timing.label}; no honest kernel can be this fast"
        )
    speedup = timing.speedup
    if speedup is not None and speedup > ctx.options.speedup_review:
        entry["review"] = [
            f"{speedup:.1f}x faster than the reference on {timing.label} "
            f"(over {ctx.options.speedup_review:g}x): check the timing and the work done"
        ]
    return entry
