"""The ``sanitize`` rung: compute-sanitizer's four tools around one call of the candidate
(``--sanitize``).

For each of ``sanitizer.TOOLS`` (memcheck: out-of-bounds and misaligned accesses;
initcheck: reads of memory never written; racecheck: shared-memory hazards; synccheck:
barriers used wrongly), a separate one-shot worker -- the one the profile rung wraps in
ncu, never a timing one -- loads the candidate and calls it once, with no warm-up, on the
smallest public shape (the tools slow a kernel by 10-100x), wrapped in
``compute-sanitizer --tool T`` with that tool's own wall budget (``sanitizer.BUDGET_S``).
Every finding fails the rung; the reason lists them compactly (tool, count, kind, kernel,
source line where the kernel has line info). A tool that ran out of time or gave no
summary is said, not counted as clean. Skipped, with the reason, without a GPU, without
``compute-sanitizer``, or with a runner that cannot wrap a worker. Not yet validated on a
GPU (``tests/harness/fixtures/sanitizer/README.md``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..perf import sanitizer
from ..problems.unseen import shape_size
from ..process.workerfiles import read_worker_file
from ..verdict import RungResult
from .inputs import shape_label

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier

SANITIZE_SEED_SALT = 4000


class SanitizeRung:
    name = "sanitize"
    gating = False

    def enabled(self, ctx: LadderContext) -> bool:
        return bool(ctx.options.sanitize)

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        if ctx.device != "cuda":
            return RungResult.skip(self, "needs a GPU (compute-sanitizer checks CUDA kernels)")
        oneshot = ctx.workers.oneshot
        if oneshot is None:
            return RungResult.skip(self, "this runner cannot wrap a worker in compute-sanitizer")
        binary = sanitizer.find_sanitizer()
        if binary is None:
            return RungResult.skip(
                self, "compute-sanitizer not found on PATH (it ships with the CUDA toolkit)"
            )
        shape = min(ctx.inputs.shapes, key=shape_size)
        request = {
            "load": ctx.workers.load_header(with_problem=True),
            "shape": shape,
            "seed": ctx.inputs.seed(SANITIZE_SEED_SALT),
            "warmup": 0,
            "calls": 1,
        }
        summaries: list[dict[str, Any]] = []
        unchecked: list[str] = []
        for tool in sanitizer.TOOLS:
            budget = sanitizer.BUDGET_S[tool]
            log = "{tooldir}/" + sanitizer.log_name(tool)  # the worker cannot write there
            outcome = oneshot(request, sanitizer.command(binary, tool, log), budget, tag=tool)
            if outcome.get("timed_out"):
                unchecked.append(f"{tool} ran past its {budget:g} s")
                continue
            folder = Path(str(outcome.get("tooldir") or tempfile.gettempdir()))
            report = sanitizer.parse(_read_worker_file(folder / sanitizer.log_name(tool)), tool)
            if report.errors is None:
                unchecked.append(f"{tool} gave no error summary (exit {outcome.get('returncode')})")
                continue
            summaries.append(sanitizer.summarize(report))
        label = shape_label(shape)
        found = [s for s in summaries if s["errors"] or s["groups"]]
        metrics: dict[str, Any] = {s["tool"]: s["errors"] for s in summaries}
        details: dict[str, Any] = {"shape": label, "tools": summaries, "unchecked": unchecked}
        lines = [line for s in found for line in sanitizer.lines(s)]
        tail = f"; not checked: {'; '.join(unchecked)}" if unchecked else ""
        if found:
            return RungResult.fail(
                self, f"{label}: " + "; ".join(lines[:8]) + tail, metrics, details
            )
        if not summaries:
            return RungResult.skip(self, f"{label}: no tool finished{tail}", details)
        clean = ", ".join(s["tool"] for s in summaries)
        return RungResult.passed(self, metrics, f"{label}: {clean} clean{tail}", details)


def _read_worker_file(path: Path, limit: int = 16 << 20) -> str:
    """A report the sanitized worker's side wrote: '' unless it is a regular file (no
    link) of at most ``limit`` bytes."""
    data = read_worker_file(path, limit)  # opened without following or blocking
    return data.decode(errors="replace") if data is not None else ""


__all__ = ["SanitizeRung"]
