"""``check_kernel``: the harness as the agent sees it.

- :func:`evaluate` checks candidate files with the harness, concurrently: threads over
  ``harness.check`` on a CPU or a single GPU, and on a machine with several GPUs one
  ``python -m harness check --json`` process per GPU, pinned with
  ``CUDA_VISIBLE_DEVICES``. It is the one seam where a runner pool plugs in later.
- :class:`Outcome` is what the loop needs from a verdict: ok, the failed rung, how far up
  the ladder it got, and the time, percent of roofline and speedup when the harness
  measured them. They are read defensively from ``Verdict.to_json()``: on a CPU there is
  no benchmark or roofline rung, and their metric names belong to the harness.
- :func:`render_feedback` is the tool result: the version number and a headline, the
  harness's compact feedback (rung ladder, metrics, trimmed errors), the roofline line,
  and on request the dump highlights or profile summary when the harness has them.
- :func:`make_check_tool` is the :class:`~ctxkernel.tools.Tool` (no workspace needed):
  the loop offers its schema to the model; the MCP server runs it, keeping each call as a
  version of a run record so ``ctxkernel runs`` shows external sessions too.
"""

from __future__ import annotations

import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tools.base import Tool, ToolError

if TYPE_CHECKING:
    from harness.runner import RunOptions

    from .runs import RunRecord

SHOW_CHOICES = ("dump", "profile")
_TIME_KEYS = {
    "median_us": 1.0,
    "time_us": 1.0,
    "median_ns": 1e-3,
    "median_ms": 1e3,
    "time_ms": 1e3,
    "median_s": 1e6,
}


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


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def verdict_metrics(doc: Mapping[str, Any]) -> dict[str, Any]:
    """time_us, roofline (fraction), speedup and bound from a verdict document, or None
    for each the harness did not measure. Names are matched loosely on purpose: the
    benchmark and roofline rungs are the harness's, and it owns their metric names."""
    found: dict[str, Any] = {"time_us": None, "roofline": None, "speedup": None, "bound": None}
    rungs = [r for r in doc.get("rungs", []) if isinstance(r, Mapping)]
    # benchmark rungs first, so a compile or run timing is never taken for the kernel's
    ordered = sorted(rungs, key=lambda r: 0 if "bench" in str(r.get("name", "")) else 1)
    for rung in ordered:
        if rung.get("ok") is False:
            continue
        name = str(rung.get("name", ""))
        for key, value in (rung.get("metrics") or {}).items():
            key = str(key).lower()
            number = _number(value)
            timing = key in _TIME_KEYS and ("bench" in name or key.startswith("median"))
            if found["time_us"] is None and number is not None and timing:
                found["time_us"] = number * _TIME_KEYS[key]
            if found["roofline"] is None and number is not None and "roofline" in key:
                percent = "pct" in key or "percent" in key or (number > 1.5 and "frac" not in key)
                found["roofline"] = number / 100 if percent else number
            if found["speedup"] is None and number is not None and key.startswith("speedup"):
                found["speedup"] = number
            if found["bound"] is None and key == "bound" and isinstance(value, str):
                found["bound"] = value
    top = doc.get("roofline")
    if found["roofline"] is None and _number(top) is not None:
        number = float(top)  # type: ignore[arg-type]
        found["roofline"] = number / 100 if number > 1.5 else number
    return found


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
    return replace(options, **changes) if changes else options


def timed(options: RunOptions, device: str) -> RunOptions:
    """Options that benchmark on a GPU (the roofline the loop stops on), when the harness
    can; a CPU has no timing."""
    if device != "cpu" and "bench" in {f.name for f in fields(options)}:
        return replace(options, bench=True)  # type: ignore[call-arg]
    return options


def visible_gpus(device: str | None) -> list[str]:
    """The GPUs candidates may use: ``CUDA_VISIBLE_DEVICES`` entries, else all of them."""
    if device == "cpu":
        return []
    try:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        count = 0
    if not count:
        return []
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def evaluate(
    problem: str | Path,
    candidates: Sequence[Path],
    options: RunOptions,
    *,
    workers: int | None = None,
    show: Sequence[Sequence[str]] | None = None,
    pin_gpus: Sequence[str] | None = None,
) -> list[CheckOutcome]:
    """Check each candidate file against the problem, concurrently; results in order.

    One worker per visible GPU, or per CPU core on a machine without one. With several
    GPUs each check runs in its own harness process that sees one GPU
    (``CUDA_VISIBLE_DEVICES``); ``pin_gpus`` forces that path (tests use it on a CPU).
    """
    if not candidates:
        return []
    shows = [tuple(s) for s in show] if show is not None else [() for _ in candidates]
    gpus = list(pin_gpus) if pin_gpus is not None else visible_gpus(options.device)
    pinned = len(gpus) > 1 or pin_gpus is not None
    free: queue.Queue[str] = queue.Queue()
    for gpu in gpus:
        free.put(gpu)

    def run(i: int) -> CheckOutcome:
        opts = with_requests(options, shows[i], candidates[i].parent)
        if not pinned:
            return _check_in_process(problem, candidates[i], opts)
        gpu = free.get()
        try:
            return _check_pinned(problem, candidates[i], opts, gpu)
        finally:
            free.put(gpu)

    # one check at a time on a single GPU (timings must not share it); CPU cores otherwise
    default = len(gpus) if pinned else (1 if gpus else max(1, os.cpu_count() or 1))
    count = max(1, min(default if pinned else (workers or default), len(candidates)))
    if count == 1:
        return [run(i) for i in range(len(candidates))]
    with ThreadPoolExecutor(count, thread_name_prefix="check") as pool:
        return list(pool.map(run, range(len(candidates))))


def _check_in_process(problem: str | Path, candidate: Path, options: RunOptions) -> CheckOutcome:
    import harness
    from harness.errors import HarnessError

    started = time.monotonic()
    try:
        verdict = harness.check(problem, candidate, options)
    except HarnessError as exc:
        return _error_outcome(str(exc), started)
    doc = verdict.to_json()
    return CheckOutcome(
        Outcome.from_verdict(doc), verdict.feedback(), doc, time.monotonic() - started
    )


# runs in a child process that sees one GPU: the whole RunOptions travels as JSON on stdin
_PINNED = """\
import json, sys
from pathlib import Path
import harness
from harness.errors import HarnessError
from harness.runner import RunOptions
spec = json.loads(sys.stdin.read())
defaults = RunOptions()
opts = {}
for key, value in spec["options"].items():
    if isinstance(getattr(defaults, key, None), tuple) and value is not None:
        value = tuple(value)
    elif key.endswith("_dir") and value is not None:
        value = Path(value)
    opts[key] = value
try:
    verdict = harness.check(spec["problem"], spec["candidate"], RunOptions(**opts))
except HarnessError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"verdict": verdict.to_json(), "feedback": verdict.feedback()}))
"""


def _check_pinned(
    problem: str | Path, candidate: Path, options: RunOptions, gpu: str
) -> CheckOutcome:
    """One check in its own Python process that sees one GPU only."""
    started = time.monotonic()
    spec = {
        "problem": str(problem),
        "candidate": str(candidate),
        "options": {
            f.name: (str(v) if isinstance(v, Path) else v)
            for f in fields(options)
            for v in [getattr(options, f.name)]
        },
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["CUDA_VISIBLE_DEVICES"] = gpu
    limit = options.compile_timeout_s + options.first_call_timeout_s + 60 * options.timeout_s
    try:
        proc = subprocess.run(
            [options.python or sys.executable, "-c", _PINNED],
            input=json.dumps(spec),
            env=env,
            capture_output=True,
            text=True,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        return _error_outcome(f"the harness did not finish within {limit:g} s", started)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        err = proc.stderr.strip().splitlines()
        return _error_outcome(err[-1] if err else f"harness exited with {proc.returncode}", started)
    answer = json.loads(lines[-1])
    if "error" in answer:
        return _error_outcome(answer["error"], started)
    doc = answer["verdict"]
    return CheckOutcome(
        Outcome.from_verdict(doc), answer["feedback"], doc, time.monotonic() - started
    )


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
load widths) and ["profile"] the profiler summary, when the harness can produce them on \
this device.

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
            "description": "Extra reports: dump (compiled code highlights), profile.",
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
    ) -> None:
        self.problem = str(Path(problem).resolve()) if problem else None
        self.options = options
        self.runs_dir = runs_dir
        self.record = record
        self._records: dict[str, RunRecord] = {}
        self._lock = threading.Lock()

    def _record_for(self, problem: str) -> RunRecord:
        from harness.problem import load_problem

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
            return render_feedback(None, result.outcome, result.feedback, result.doc, show)
        try:
            record = self._record_for(problem)
        except HarnessError as exc:
            raise ToolError(f"check_kernel: {exc}") from None
        n, path = record.new_version(source, {"notes": args.get("notes", ""), "show": list(show)})
        result = evaluate(problem, [path], options, show=[show])[0]
        text = render_feedback(n, result.outcome, result.feedback, result.doc, show)
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
