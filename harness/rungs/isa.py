"""The ``isa`` rung: the instruction family the candidate's hot kernel must execute
(``--expect-isa wgmma``).

Runs only when a family is required, after the profile rung (which ``--expect-isa`` turns
on), on what ncu counted there (``ProfileReport.executed``, ``perf/isa.py``): the kernel
that took the most time executed at least one instruction of the family, or the rung fails
naming what it did execute (its tensor family, TMA, FP32 vs half precision, its busiest
pipes). A static SASS listing that holds the family's instructions is no proof that they
ran (a fallback path, a branch never taken); the executed counts are. When the metrics
cannot tell (no per-opcode counts, the tensor pipe active under a shared counter) the rung
is skipped with that reason rather than failing an honest kernel; with no profile (no GPU,
no ncu, no counters) it is skipped with the profile's reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..perf import isa
from ..verdict import RungResult
from .results import DumpReport, ProfileReport

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier


class IsaRung:
    name = "isa"
    gating = False

    def enabled(self, ctx: LadderContext) -> bool:
        return isa.family_of(ctx.options.expect_isa) is not None

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        wanted = str(ctx.options.expect_isa)
        if ctx.device != "cuda":
            return RungResult.skip(
                self, f"needs a GPU (ncu counts executed instructions); {wanted} not checked"
            )
        report = earlier.get(ProfileReport)
        if report is None or report.executed is None:
            return RungResult.skip(
                self, f"no ncu profile to read (see the profile rung); {wanted} not checked"
            )
        executed = report.executed
        decision = isa.expect(executed, wanted)
        metrics = {"expect_isa": wanted, "source": executed.source}
        details = {"executed": executed.as_dict()}
        static = _static_forms(earlier)
        reason = decision.reason + (f"; static SASS holds {static}" if static else "")
        if decision.ok is None:
            return RungResult.skip(self, reason, details)
        if decision.ok:
            return RungResult.passed(self, metrics, reason, details)
        return RungResult.fail(self, reason, metrics, details)


def _static_forms(earlier: Earlier) -> str:
    """The MMA forms the dumps rung found in the compiled code, when it ran."""
    dump = earlier.get(DumpReport)
    forms = list((dump.summary.get("mma") or []) if dump else [])
    return "/".join(str(f) for f in forms[:3])


__all__ = ["IsaRung"]
