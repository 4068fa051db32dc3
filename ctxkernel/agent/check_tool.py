"""``check_kernel``: the harness as the agent sees it.

- :func:`evaluate` checks candidate files with the harness, concurrently, through a
  ``harness.runners`` runner (``local`` threads, the ``pool`` of slot processes pinned one
  per GPU, an SSH host, a Ray cluster): the one place the loop meets the harness.
- :class:`Outcome` is what the loop needs from a verdict: ok, the failed rung, how far up
  the ladder it got, and the time, percent of roofline, speedup and bound when the harness
  measured them: the verdict's typed ``summary`` (``harness.verdict.PerformanceSummary``;
  null on a CPU, where nothing is timed).
- :func:`render_feedback` is the tool result: the version number and a headline, the
  harness's compact feedback (rung ladder, metrics, trimmed errors), the roofline line,
  and on request the dump highlights or profile summary when the harness has them.
- :func:`make_check_tool` is the :class:`~ctxkernel.tools.Tool` (no workspace needed):
  the loop offers its schema to the model; the MCP server runs it, keeping each call as a
  version of a run record so ``ctxkernel runs`` shows external sessions too.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tools.base import Tool, ToolError

if TYPE_CHECKING:
    from harness import BatchRunner, RunOptions

    from .runs import RunRecord

SHOW_CHOICES = ("dump", "profile", "trace")


# -- outcome ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """One checked version, as the loop ranks it."""

    ok: bool
    failed_rung: str | None = None
    reason: str = ""
    level: int = 0  # rungs passed
    time_us: float | None = None
    roofline: float | None = None  # fraction of the roofline, 0..1
    speedup: float | None = None
    bound: str | None = None
    device: str = ""
    error: str | None = None  # the check itself could not run (bad problem, harness error)

    @property
    def timed(self) -> bool:
        return self.time_us is not None or self.roofline is not None

    def headline(self) -> str:
        if self.error:
            return f"NOT CHECKED: {self.error}"
        if not self.ok:
            return f"FAILED at {self.failed_rung}: {self.reason}".rstrip(": ")
        return "PASSED" + (f"  {self.measured()}" if self.timed else "")

    def measured(self) -> str:
        parts = []
        if self.time_us is not None:
            parts.append(format_time(self.time_us))
        if self.roofline is not None:
            parts.append(
                f"{self.roofline:.0%} of roofline" + (f" ({self.bound})" if self.bound else "")
            )
        if self.speedup is not None:
            parts.append(f"{self.speedup:.2f}x the reference")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_verdict(cls, doc: Mapping[str, Any]) -> Outcome:
        rungs = [r for r in doc.get("rungs", []) if isinstance(r, Mapping)]
        level = 0
        for rung in rungs:
            if rung.get("ok") is not True:
                break
            level += 1
        metrics = verdict_metrics(doc)
        return cls(
            ok=bool(doc.get("ok")),
            failed_rung=doc.get("failed_rung"),
            reason=str(doc.get("reason") or ""),
            level=level,
            device=str(doc.get("device") or ""),
            **metrics,
        )


def format_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.4g} ms"
    return f"{us:.4g} us"


def verdict_metrics(doc: Mapping[str, Any]) -> dict[str, Any]:
    """time_us, roofline (fraction), speedup and bound from a verdict document's typed
    ``summary``; None for each the harness did not measure."""
    from harness.verdict import PerformanceSummary

    summary = PerformanceSummary.from_json(doc.get("summary"))
    if summary is None:
        return {"time_us": None, "roofline": None, "speedup": None, "bound": None}
    pct = summary.pct_of_roofline
    return {
        "time_us": summary.time_ms * 1e3,
        "roofline": pct / 100 if pct is not None else None,
        "speedup": summary.speedup,
        "bound": summary.bound,
    }


# -- feedback --------------------------------------------------------------------------


def render_feedback(
    version: int | None,
    outcome: Outcome,
    feedback: str,
    doc: Mapping[str, Any] | None = None,
    show: Sequence[str] = (),
) -> str:
    """The tool result for one checked version."""
    name = f"version {version}" if version is not None else "check"
    lines = [f"{name}: {outcome.headline()}"]
    if feedback:
        lines.append(feedback.rstrip())
    if outcome.ok and not outcome.timed and not outcome.error:
        lines.append(f"timing: none on this device ({outcome.device or 'unknown'}).")
    for what in show:
        lines.extend(_show(what, doc or {}))
    return "\n".join(lines)


def with_evidence(text: str, store: Callable[[], Any] | None, doc: Mapping[str, Any] | None) -> str:
    """The feedback with the hit ids that explain its dumps findings (``evidence.py``),
    when there is an index to find them in."""
    if store is None or not doc:
        return text
    from .. import evidence

    found = evidence.lines(evidence.for_verdict_quietly(store, doc))
    return "\n".join([text, *found]) if found else text


def _show(what: str, doc: Mapping[str, Any]) -> list[str]:
    rungs = [r for r in doc.get("rungs", []) if what in str(r.get("name", "")).lower()]
    if not rungs:
        return [f"{what}: not available (this harness reported no {what} rung for this check)"]
    out = []
    for rung in rungs:
        metrics = " ".join(f"{k}={v}" for k, v in (rung.get("metrics") or {}).items())
        out.append(f"[{rung.get('name')}] {rung.get('status', '')} {metrics}".rstrip())
        if rung.get("reason"):
            out.append(f"  {rung['reason']}")
        details = rung.get("details") or {}
        for key in ("summary", "highlights", "findings"):
            value = details.get(key)
            if isinstance(value, str):
                out.extend("  " + line for line in value.splitlines()[:15])
            elif isinstance(value, list):
                out.extend(f"  - {item}" for item in value[:15])
    return out


# -- evaluation ------------------------------------------------------------------------


@dataclass
class CheckOutcome:
    """One evaluated candidate: the verdict document (None when the check could not
    run), the feedback text for the model, and the outcome the loop ranks."""

    outcome: Outcome
    feedback: str
    doc: dict[str, Any] | None
    wall_s: float


def with_requests(options: RunOptions, show: Sequence[str], out_dir: Path | None) -> RunOptions:
    """Turn on the harness's dump/profile options for one check, when it has them."""
    names = {f.name for f in fields(options)}
    changes: dict[str, Any] = {}
    if "dump" in show and "dump_dir" in names and out_dir is not None:
        changes["dump_dir"] = out_dir / "dump"
    if "profile" in show and "profile" in names:
        changes["profile"] = True
    if "trace" in show and "trace" in names:
        changes["trace"] = True
    return replace(options, **changes) if changes else options


def timed(options: RunOptions, device: str) -> RunOptions:
    """Options that benchmark on a GPU (the roofline the loop stops on), when the harness
    can; a CPU has no timing."""
    if device != "cpu" and "bench" in {f.name for f in fields(options)}:
        return replace(options, bench=True)
    return options


def evaluate(
    problem: str | Path,
    candidates: Sequence[Path],
    options: RunOptions,
    *,
    runner: BatchRunner | str | None = None,
    jobs: int | None = None,
    show: Sequence[Sequence[str]] | None = None,
) -> list[CheckOutcome]:
    """Check each candidate file against the problem, concurrently; results in order.

    ``runner`` is a ``harness.runners`` runner or spec (``local``: threads here, each
    candidate in its own worker; ``pool``: one slot process per GPU, pinned with
    ``CUDA_VISIBLE_DEVICES``; ``ssh://…``; ``ray``), ``None`` for ``local`` on ``jobs``
    threads. Candidates that ask for a dump or a profile are checked with their own
    options (their own dump directory); the rest go as one batch.
    """
    from harness import load_candidate, load_problem, run_many
    from harness.errors import HarnessError

    started = time.monotonic()
    if not candidates:
        return []
    results: list[CheckOutcome | None] = [None] * len(candidates)
    loaded = load_problem(problem)
    shows = [tuple(s) for s in show] if show is not None else [() for _ in candidates]
    groups: list[tuple[RunOptions, list[tuple[int, Any]]]] = []
    for i, path in enumerate(candidates):
        try:
            cand = load_candidate(path, loaded, backend=options.backend)
        except HarnessError as exc:
            results[i] = _error_outcome(str(exc), started)
            continue
        opts = with_requests(options, shows[i], path.parent)
        group = next((g for g in groups if g[0] == opts), None)
        if group is None:
            groups.append((opts, [(i, cand)]))
        else:
            group[1].append((i, cand))
    for opts, members in groups:
        index = {id(cand): i for i, cand in members}
        batch = [cand for _, cand in members]
        for cand, verdict in run_many(loaded, batch, opts, runner, jobs or len(batch)):
            doc = verdict.to_json()
            outcome = Outcome.from_verdict(doc)
            results[index[id(cand)]] = CheckOutcome(
                outcome, verdict.feedback(), doc, verdict.wall_s
            )
    return [r if r is not None else _error_outcome("no verdict", started) for r in results]


def _error_outcome(message: str, started: float) -> CheckOutcome:
    first = message.strip().splitlines()[0] if message.strip() else "unknown harness error"
    outcome = Outcome(ok=False, failed_rung=None, error=first)
    return CheckOutcome(outcome, "", None, time.monotonic() - started)


# -- the tool --------------------------------------------------------------------------

DESCRIPTION = """\
Check a candidate GPU kernel with the verification harness and get its verdict. Submit \
the COMPLETE Python module (imports, kernels, and custom_kernel(inputs) -> output), not a \
diff. Each call is a new version, kept with its verdict.

The harness runs a ladder of rungs: pre-checks (parses, entry point, no forbidden ops), \
compile, run (output type/shape/dtype/device), correctness (every shape, secret seeds, \
dtype-aware tolerances), anti-cheat, and on a GPU benchmark and roofline. The answer \
starts with "version N: PASSED ..." or "version N: FAILED at <rung>: <reason>", then the \
rung ladder with metrics, the trimmed error with the offending line or the worst \
mismatching elements, and when measured the time and percent of roofline. Fix the first \
failing rung first.

show: ["dump"] adds the compiled code's highlights (registers, spills, MMA instructions, \
load widths), ["profile"] the profiler summary and ["trace"] the time per marked section \
of the kernel (see the tracing primer), when the harness can produce them on this device.

Example: {"source": "import torch\\nimport triton\\n...\\ndef custom_kernel(inputs):\\n  \
  ...", "notes": "BLOCK 1024 -> 4096, 8 warps"}"""


def check_schema(problem_arg: bool) -> dict[str, Any]:
    props: dict[str, Any] = {
        "source": {
            "type": "string",
            "minLength": 1,
            "maxLength": 400_000,
            "description": "The complete candidate module (Python source text).",
        },
        "notes": {
            "type": "string",
            "maxLength": 2000,
            "description": "One line: what changed in this version and why.",
        },
        "show": {
            "type": "array",
            "items": {"type": "string", "enum": list(SHOW_CHOICES)},
            "uniqueItems": True,
            "description": "Extra reports: dump (compiled code highlights), profile, trace (time per marked section).",
        },
    }
    if problem_arg:
        props["problem"] = {
            "type": "string",
            "minLength": 1,
            "description": "The problem: a problem.py or its directory (default: the "
            "server's --problem).",
        }
    return {
        "type": "object",
        "properties": props,
        "required": ["source"],
        "additionalProperties": False,
    }


class CheckSession:
    """What ``check_kernel`` needs outside the loop: harness options and, per problem,
    the run record its versions go to (made on the first call)."""

    def __init__(
        self,
        problem: str | None,
        options: RunOptions,
        *,
        runs_dir: Path | None = None,
        record: bool = True,
        store: Callable[[], Any] | None = None,
    ) -> None:
        self.problem = str(Path(problem).resolve()) if problem else None
        self.options = options
        self.runs_dir = runs_dir
        self.record = record
        self.store = store  # the index's store, for the ids that explain dumps findings
        self._records: dict[str, RunRecord] = {}
        self._lock = threading.Lock()

    def _record_for(self, problem: str) -> RunRecord:
        from harness import load_problem

        from .runs import RunRecord

        with self._lock:
            if problem not in self._records:
                name = load_problem(problem).name
                config = {"kind": "mcp", "problem": name, "problem_path": problem,
                          "backend": self.options.backend, "model": "external (MCP)",
                          "created": time.strftime("%Y-%m-%dT%H:%M:%S")}  # fmt: skip
                self._records[problem] = RunRecord.create(name, config, self.runs_dir)
            return self._records[problem]

    def check(self, args: Mapping[str, Any]) -> str:
        from harness.errors import HarnessError

        problem = args.get("problem") or self.problem
        if not problem:
            raise ToolError(
                "check_kernel: no problem given: pass 'problem' (a problem.py or its directory)"
            )
        problem = str(Path(problem).resolve())
        if not Path(problem).exists():
            raise ToolError(f"check_kernel: problem not found: {args.get('problem') or problem}")
        source, show = str(args["source"]), tuple(args.get("show") or ())
        options = timed(self.options, self.options.resolved_device())
        if not self.record:
            with tempfile.TemporaryDirectory(prefix="ctxkernel-check-") as tmp:
                path = Path(tmp) / "candidate.py"
                path.write_text(source)
                result = evaluate(problem, [path], options, show=[show])[0]
            text = render_feedback(None, result.outcome, result.feedback, result.doc, show)
            return with_evidence(text, self.store, result.doc)
        try:
            record = self._record_for(problem)
        except HarnessError as exc:
            raise ToolError(f"check_kernel: {exc}") from None
        n, path = record.new_version(source, {"notes": args.get("notes", ""), "show": list(show)})
        result = evaluate(problem, [path], options, show=[show])[0]
        text = render_feedback(n, result.outcome, result.feedback, result.doc, show)
        text = with_evidence(text, self.store, result.doc)
        meta = record.finish_version(
            n, result.doc, text, {**result.outcome.to_json(), "check_wall_s": result.wall_s}
        )
        record.log({"type": "version", **meta})
        summarize_external(record)
        return text


def summarize_external(record: RunRecord) -> None:
    from .runs import best_of

    versions = record.versions()
    best = record.write_best() if best_of(versions) else None
    config = record.config
    record.write_summary({
        "problem": config.get("problem"), "backend": config.get("backend"),
        "model": config.get("model"), "kind": config.get("kind"), "status": "external",
        "stop_reason": None, "versions": len(versions),
        "correct_versions": sum(1 for v in versions if v.get("ok")),
        "best": best, "cost_usd": None, "usage": None,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
    })  # fmt: skip


def make_check_tool(session: CheckSession | None = None, *, problem_arg: bool = True) -> Tool:
    """The ``check_kernel`` Tool. Without a session (the loop only needs its schema) the
    handler refuses to run."""

    def handler(_ws: Any, args: dict[str, Any]) -> str:
        if session is None:
            raise ToolError("check_kernel: not available here")
        return session.check(args)

    return Tool(
        name="check_kernel",
        description=DESCRIPTION,
        input_schema=check_schema(problem_arg),
        handler=handler,
        needs_workspace=False,
    )
