"""The ``compile`` rung: import the candidate in its worker and launch it once.

Import errors, backend compile errors (Triton ``CompilationError``, CUDA extension build
failures, errors raised inside kernel code -- the pre-checks' ``jit_ranges`` -- under the
Triton interpreter) fail here with the offending candidate line. The first call gets the
run timeout: the time it spends compiling is budgeted apart (``harness/worker/jitclock.py``). A backend that needs a
GPU fails here on a CPU, saying so. A first call that fails at run time passes this rung
and is reported by ``run``. Result for the rungs after it: ``FirstCall``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..process.session import WorkerGone
from ..staticscan.findings import ScanResult
from ..verdict import RungResult
from .checks import in_kernel
from .common import first_line
from .results import FirstCall

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier


class CompileRung:
    name = "compile"
    gating = True

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        if ctx.backend.requires_gpu and ctx.device == "cpu":
            return RungResult.fail(
                self, f"backend {ctx.candidate.backend} needs a CUDA GPU; this check runs on cpu"
            )
        explain = ctx.findings.explain
        try:
            reply = ctx.workers.load()
        except WorkerGone as gone:
            return RungResult.fail(
                self,
                explain(f"{gone.reason} while importing the candidate"),
                details=ctx.checks.gone_details(gone),
            )
        metrics: dict[str, Any] = {"import_s": float(reply.get("import_s") or 0.0)}
        error = reply.get("error")
        if error:
            error = ctx.checks.locate_error(error)
            what = (
                "compile error" if error.get("compile_error") else "importing the candidate failed"
            )
            return RungResult.fail(
                self, explain(f"{what}: {first_line(error)}"), metrics, {"error": error}
            )
        # on a GPU the first launch JIT-compiles (and autotunes): the worker reports its
        # compiles, which are timed apart from the run (harness/worker/jitclock.py); a backend
        # whose compiles are not all reported keeps a long first call
        first_timeout = ctx.options.timeout_s
        if ctx.device != "cpu" and not ctx.backend.compile_hooks_complete:
            first_timeout = max(first_timeout, ctx.options.first_call_timeout_s)
        first = ctx.workers.call(ctx.inputs.make(0, 0), timeout_s=first_timeout)
        scan = earlier.get(ScanResult)
        kernel = bool(first.error) and in_kernel(first.error or {}, scan.jit_ranges if scan else [])
        if first.error and (first.error.get("compile_error") or kernel):
            label = "compile error" if first.error.get("compile_error") else "error in kernel code"
            return RungResult.fail(
                self,
                explain(f"{label}: {first_line(first.error)}"),
                metrics,
                {"error": {**first.error, "in_kernel": kernel}, "where": first.inputs.label},
            )
        if first.calls:
            metrics["first_call_s"] = float(first.calls[0].get("elapsed_s") or 0.0)
            launches = first.calls[0].get("launches")
            if launches is not None:
                metrics["launches"] = int(launches)
        note = "first call failed at run time (see run)" if first.failed else ""
        return RungResult.passed(self, metrics, note, output=FirstCall(first))
