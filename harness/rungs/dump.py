"""The ``dumps`` rung: the candidate's compiled code, written out and read (``--dump DIR``).

Not gating: it informs. The artefacts come from a candidate worker (the benchmark's when
one ran -- its caches hold every version compiled for the timed shapes -- else a fresh
``dump`` worker that calls the candidate once on the largest of the problem's shapes);
how is the backend's ``dump_plan``: with ``--target sm_90`` Triton kernels are compiled
ahead of time from the recorded launches, which needs no GPU. ``harness/perf/dumps.py`` writes them under
``DIR/<kernel>/<version>/``, disassembles them and lists what an expert would look at.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..backends import Backend, all_backends
from ..perf.dumps import write_dump
from ..process.session import WorkerGone
from ..verdict import RungResult
from .common import call_failure
from .results import DumpReport

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier

_MATMUL = re.compile(r"(matmul|gemm|bmm|\bmm\b|linear|attention|conv)", re.IGNORECASE)


RECORD_ONLY_MAX_BYTES = 512 << 20


def dump_shape(ctx: LadderContext) -> dict[str, Any]:
    """The shape whose launches are compiled ahead of time: the first bench shape when its
    inputs are small enough to build on a CPU (launches are recorded, not run), else the
    largest checked shape. Specialisation follows the sizes (a size divisible by 16 gets
    128-bit loads; n=1 becomes a constexpr), so a real workload's size matters."""
    if ctx.problem.bench_shapes:
        shape = ctx.problem.bench_shapes[0]
        nbytes = ctx.problem.bytes(shape)
        if nbytes is not None and nbytes <= RECORD_ONLY_MAX_BYTES:
            return dict(shape)

    return dict(max(ctx.inputs.shapes, key=_numel))


def expects_mma(ctx: LadderContext) -> bool:
    shape = ctx.problem.bench_shapes[0] if ctx.problem.bench_shapes else ctx.inputs.shapes[-1]
    flops, nbytes = ctx.problem.flops(shape), ctx.problem.bytes(shape)
    if flops and nbytes and flops / nbytes >= 16:
        return True
    return bool(_MATMUL.search(ctx.problem.name) or _MATMUL.search(ctx.problem.description[:200]))


def no_dump_reason(backend: Backend, target: str | None) -> str:
    """Why a backend has no artefacts on a CPU machine (its ``dump_plan`` said None)."""
    if not backend.compiles_kernels:
        return f"a {backend.label} candidate compiles no kernel of its own"
    aot = ", ".join(b.label for b in all_backends() if b.aot_without_gpu) or "no backend"
    if target:
        return f"ahead-of-time compiles for {target} without a GPU exist for {aot} only"
    return (
        f"without a GPU nothing is compiled at run time: add --target sm_90 ({aot}, ahead of time)"
    )


def _numel(shape: Any) -> float:
    numbers = [abs(v) for v in shape.values() if isinstance(v, int) and not isinstance(v, bool)]
    return float(math.prod(numbers)) if numbers else 0.0


class DumpRung:
    name = "dumps"
    gating = False

    def enabled(self, ctx: LadderContext) -> bool:
        return bool(ctx.options.dump_dir or ctx.options.target)

    def _not_loaded(self, which: str, reply: dict[str, Any]) -> RungResult:
        """Not a verdict on the candidate: the artefacts could not be made."""
        message = str((reply.get("error") or {}).get("message", ""))[:300]
        return RungResult.skip(self, f"the {which} worker could not load the candidate: {message}")

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        target = ctx.options.target
        plan = ctx.backend.dump_plan(ctx.device, target)
        if plan is None:
            return RungResult.skip(self, no_dump_reason(ctx.backend, target))
        role = "bench" if ctx.workers.is_open("bench") else "dump"
        try:
            session, reply = ctx.workers.aux(role, env=plan.worker_env or None)
        except WorkerGone as gone:
            return RungResult.skip(self, f"dump worker: {gone.reason}")
        if reply.get("error"):
            return self._not_loaded("dump", reply)
        shape = dump_shape(ctx) if plan.record_only else dict(max(ctx.inputs.shapes, key=_numel))
        timeout = max(ctx.options.timeout_s, ctx.options.first_call_timeout_s)
        record = ctx.workers.call(
            ctx.inputs.make(0, 0, shape=shape), timeout_s=timeout, session=session
        )
        failure = call_failure(ctx, record)
        if failure is not None:
            return RungResult.skip(self, f"the call before the dump failed: {failure[0]}")
        request: dict[str, Any] = {"op": "artifacts", "target": target}
        try:
            if plan.compile_env is not None:
                # the recorded launches are compiled ahead of time in a second worker
                launches = session.request(
                    {"op": "artifacts", "launches_only": True}, [], 60.0, 1 << 24
                ).header.get("launches")
                session, reply = ctx.workers.aux("aot", env=plan.compile_env)
                if reply.get("error"):
                    return self._not_loaded("compile", reply)
                request["launches"] = launches or []
            answer = session.request(request, [], 600.0, 1 << 28)
        except WorkerGone as gone:
            return RungResult.skip(self, f"collecting artefacts: {gone.reason}")
        head = answer.header
        if not head.get("ok"):
            return RungResult.skip(self, str(head.get("harness_error"))[-300:])
        files = [
            (meta, bytes(answer.tensors[i].numpy().tobytes()))
            for i, meta in enumerate(head.get("files") or [])
            if i < len(answer.tensors)
        ]
        given = ctx.options.dump_dir
        temporary = given is None
        directory = (
            Path(given) if given is not None else Path(tempfile.mkdtemp(prefix="ctxkernel-dump-"))
        )
        try:
            summary = write_dump(
                directory,
                files,
                ctx.candidate.backend,
                expects_mma(ctx),
                list(head.get("notes") or []),
                ctx.backend.mma_hint,
            )
        finally:
            if temporary:
                shutil.rmtree(directory, ignore_errors=True)
        if temporary:
            summary["directory"] = None
        reports = summary["reports"]
        if not reports:
            note = "; ".join(summary["notes"]) or "no artefacts"
            return RungResult.skip(self, note, {"dump": summary})
        metrics: dict[str, Any] = {
            "kernels": summary["kernels"],
            "versions": summary["versions"],
            "max_registers": max((r.get("registers") or 0) for r in reports),
            "spill_bytes": sum(
                (r.get("spill_stores") or 0) + (r.get("spill_loads") or 0) for r in reports
            ),
            "sass": summary["sass"],
        }
        if target:
            metrics["target"] = target
        mma = sorted({f for r in reports for f in (r.get("sass") or {}).get("mma_forms", [])})
        if mma:
            metrics["mma"] = "/".join(mma[:3])
        findings = summary["findings"]
        reason = "; ".join(findings[:3]) if findings else "nothing an expert would flag"
        if summary.get("directory"):
            reason += f" (written to {summary['directory']})"
        report = DumpReport(
            {
                "directory": summary.get("directory"),
                "findings": findings,
                "codes": summary.get("codes") or [],
                "mma": mma,
                "kernels": [
                    {
                        k: r.get(k)
                        for k in (
                            "kernel",
                            "version",
                            "registers",
                            "shared_bytes",
                            "local_bytes",
                            "spill_stores",
                        )
                    }
                    for r in reports[:8]
                ],
            }
        )
        return RungResult.passed(self, metrics, reason, {"dump": summary}, output=report)
