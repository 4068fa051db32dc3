"""The ``anti-cheat`` rung: behaviour under repetition, who did the work, and what the guards saw.

A burst of back-to-back calls on the same inputs (the shape of a timing loop) must give
the reference every time — a candidate that behaves differently after the first calls
or in "benchmark mode" fails here. Where the outputs are large the burst is shorter
(``BURST_BYTES``; never below two calls) and the rung's note says how many calls it made.
Then one call measures the library share (on a GPU at
the largest benchmark shape that is not huge, ``Inputs.share_shape``; else the largest
checked shape) (``harness/problems/library_share.py``: on a GPU the device time in the
candidate's own kernels against library kernels, on a CPU the share of the data that
library compute ops did not read); below the problem's ``MIN_KERNEL_SHARE`` (default 80 %) the rung fails naming the
library kernels. A plain PyTorch candidate fails here unless it was asked for
(``harness/problems/library.py``). Then the worker is closed and every integrity finding of the
whole session fails the rung, named: forbidden library ops at run time (the problem's and
the reference's own), no kernel of the declared backend launched, monkeypatched
timers/validators/harness internals, guard refusals (threads, processes, writes outside
the temp dir, network, frame walking), inputs modified, output changed after return, an
earlier call's output changed later, threads or signal handlers left behind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..problems.library_share import Share, measure_cpu, measure_gpu
from ..verdict import RungResult
from .common import call_failure, check_output

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier

BURST_TRIAL = 1000  # trial index for the burst's seed: distinct from the correctness trials
# what the burst's outputs may take: each call's output and the worker's copy of it at return
# are held until the burst is over (and all come back to the parent); at an upstream
# KernelBench size (6.4 GB an output) six calls would hold about 77 GB, so a burst of large
# outputs is shortened, never below two calls
BURST_BYTES = 8 << 30
SHARE_TRIAL = 1500  # ... and for the call that measures the library share


class AntiCheatRung:
    name = "anti-cheat"
    gating = True

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        asked = burst = max(2, ctx.options.burst)
        held = ctx.inputs.output_bytes(0)
        if held:
            burst = min(asked, max(2, BURST_BYTES // (2 * held)))
        shortened = (
            f"{burst} back-to-back calls, not {asked}: each returns {_bytes(held)}"
            if burst < asked and held
            else ""
        )
        inputs = ctx.inputs.make(0, BURST_TRIAL)
        record = ctx.workers.call(inputs, repeat=burst, burst=True)
        failure = call_failure(ctx, record)
        if failure is not None:
            reason = f"during {burst} back-to-back calls: {failure[0]}"
            return RungResult.fail(self, reason, details=failure[1])
        reference = ctx.inputs.reference(record.inputs)
        for index, output in enumerate(record.outputs):
            problems = ctx.checks.structure_problems(output, reference)
            problems += ctx.checks.late_changes(record, index)
            passed, bad, reason, _ = (
                check_output(ctx, record, output, reference)
                if not problems
                else (False, None, problems[0], [])
            )
            if not passed:
                details: dict[str, Any] = {
                    "where": f"{record.inputs.label}, call {index + 1} of {burst}"
                }
                if bad is not None:
                    details["worst"] = bad.worst
                return RungResult.fail(
                    self,
                    ctx.findings.explain(
                        f"call {index + 1} of {burst} back-to-back calls on the same inputs returned a wrong result "
                        f"(behaves differently when called repeatedly, as a benchmark does): {reason}"
                    ),
                    details=details,
                )
        share, share_note = self.share(ctx)
        ctx.workers.finish()
        metrics: dict[str, Any] = {"calls": ctx.workers.calls_made, "burst": burst}
        if share is not None:
            metrics["own_share"] = round(share.own, 4)
        found = list(ctx.findings.messages)
        refusal = ctx.library.plain_torch_refusal()
        if refusal:  # after the findings: they name something more specific
            found.append(refusal)
        if share is not None and share.own < ctx.library.min_share:
            found.append(  # after the findings: a forbidden op named is the clearer reason
                f"the candidate's own kernels did only {100 * share.own:.0f}% of the work "
                f"({share.basis}; at least {100 * ctx.library.min_share:.0f}% required): "
                f"library {share.describe()}"
            )
        details = {"library": ctx.library.describe()}
        if share is not None:
            details["share"] = {
                "own": share.own,
                "basis": share.basis,
                "library": share.library[:10],
                "own_kernels": share.own_kernels[:10],
            }
        if found:
            more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
            details.update({"findings": [], "integrity": list(found)})
            return RungResult.fail(self, found[0] + more, metrics, details)
        note = "; ".join(n for n in (ctx.library.note() or share_note, shortened) if n)
        return RungResult.passed(self, metrics, note, details)

    def share(self, ctx: LadderContext) -> tuple[Share | None, str]:
        """The library share of one call (None: not measured)."""
        if not ctx.library.custom_kernel_required or not ctx.backend.compiles_kernels:
            return None, ""
        index = ctx.inputs.largest_shape_index()
        shape = ctx.inputs.share_shape() if ctx.device == "cuda" else None
        record = ctx.workers.call(
            ctx.inputs.make(index, SHARE_TRIAL, shape=shape, record=False), kernels=True
        )
        if record.failed or not record.calls:
            return None, ""
        call = record.calls[-1]
        if ctx.device == "cuda":
            how = ctx.backend.own_kernel_names
            share = measure_gpu(call, ctx.candidate.source, exact=how != "defined")
            if share is None:
                return None, "library share not measured: the profiler recorded no kernel"
            if not how:  # own kernels not known well enough by name: report, do not judge
                return None, (
                    f"own kernels {100 * share.own:.0f}% of device time "
                    f"(not judged for {ctx.backend.label})"
                )
            return share, ""
        return measure_cpu(call), ""


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"
