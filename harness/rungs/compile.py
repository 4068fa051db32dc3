"""The ``compile`` rung: import the candidate in its worker and launch it once.

Import errors, backend compile errors (Triton ``CompilationError``, CUDA extension build
failures, errors raised inside ``@triton.jit`` code under the interpreter) fail here with
the offending candidate line. A first call that fails at run time passes this rung and is
reported by ``run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..runner import WorkerGone
from ..verdict import RungResult

if TYPE_CHECKING:
    from .context import LadderContext


class CompileRung:
    name = "compile"
    gating = True

    def run(self, ctx: LadderContext) -> RungResult:
        if ctx.backend.requires_gpu and ctx.device == "cpu":
            return RungResult(
                self.name,
                False,
                self.gating,
                {},
                f"backend {ctx.candidate.backend} needs a CUDA GPU; this check runs on cpu",
            )
        try:
            reply = ctx.load()
        except WorkerGone as gone:
            return RungResult(
                self.name,
                False,
                self.gating,
                {},
                ctx.explain(f"{gone.reason} while importing the candidate"),
                ctx.gone_details(gone),
            )
        metrics = {"import_s": float(reply.get("import_s") or 0.0)}
        error = reply.get("error")
        if error:
            error = ctx.locate_error(error)
            what = (
                "compile error" if error.get("compile_error") else "importing the candidate failed"
            )
            return RungResult(
                self.name,
                False,
                self.gating,
                metrics,
                ctx.explain(f"{what}: {_first_line(error)}"),
                {"error": error},
            )
        # on a GPU the first launch JIT-compiles (and autotunes): it gets more time
        first_timeout = ctx.options.timeout_s
        if ctx.device != "cpu":
            first_timeout = max(first_timeout, ctx.options.first_call_timeout_s)
        first = ctx.call(ctx.make_inputs(0, 0), timeout_s=first_timeout)
        ctx.first = first
        if first.error and (first.error.get("compile_error") or first.error.get("in_kernel")):
            label = "compile error" if first.error.get("compile_error") else "error in kernel code"
            return RungResult(
                self.name,
                False,
                self.gating,
                metrics,
                ctx.explain(f"{label}: {_first_line(first.error)}"),
                {"error": first.error, "where": first.inputs.label},
            )
        if first.calls:
            metrics["first_call_s"] = float(first.calls[0].get("elapsed_s") or 0.0)
            launches = first.calls[0].get("launches")
            if launches is not None:
                metrics["launches"] = int(launches)
        note = "first call failed at run time (see run)" if first.failed else ""
        return RungResult(self.name, True, self.gating, metrics, note)


def _first_line(error: dict[str, object]) -> str:
    text = str(error.get("message") or "").strip()
    lines = text.splitlines() or ["unknown error"]
    # "CUDA error: an illegal memory access..." leads; a Triton CompilationError ("at 13:8:")
    # shows the source first and the error last
    first = lines[-1] if lines[0].rstrip().endswith(":") else lines[0]
    frames = error.get("candidate_frames") or []
    if isinstance(frames, list) and frames:
        last = frames[-1]
        return f"{first} (line {last.get('line')}: {last.get('code')})"
    return first
