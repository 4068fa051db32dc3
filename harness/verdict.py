"""RungResult and Verdict: what a check concluded, as JSON and as feedback for an LLM.

A rung builds its ``RungResult`` with ``passed``, ``fail`` or ``skip`` (``not_run`` is the
ladder's, after a failed gate); its ``output`` is the typed result the later rungs read
(``rungs/results.py``) and is not part of the JSON. ``Verdict.to_json()`` is one document
(``type: "verdict"``): the rungs with their metrics and reasons, the environment (device,
GPU name, driver, torch/triton versions, whether the Triton interpreter ran), the public
seeds and the options. ``summary`` is the typed ``PerformanceSummary`` (time, percent of
roofline, speedup, bound of the first benchmarked shape; null when nothing was timed):
what an agent ranks versions and stops on. ``performance`` holds the details (benchmark,
roofline per shape, dumps, profile, trace) and leads the feedback of a passed verdict.
``Verdict.lines()`` is the human ladder (``[correctness] ok  max_abs=3.1e-07 ...``).
``Verdict.feedback()`` is the compact text an agent loop feeds back: the first failing
rung, the trimmed error with the offending candidate line or the worst mismatching
indices with expected vs got, in under about 40 lines. All three are redacted
(``harness/redact.py``): no secret value this process knows survives in them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from .printable import printable
from .redact import known as known_secrets
from .redact import redact, redact_obj

FEEDBACK_MAX_LINES = 40


class _Rung(Protocol):
    name: str
    gating: bool


@dataclass
class RungResult:
    name: str
    ok: bool | None  # None: skipped for a reason, or not run (an earlier gating rung failed)
    gating: bool = True
    metrics: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    output: Any = field(default=None, repr=False, compare=False)  # for later rungs, not JSON

    @classmethod
    def passed(
        cls,
        rung: _Rung,
        metrics: dict[str, Any] | None = None,
        reason: str = "",
        details: dict[str, Any] | None = None,
        output: Any = None,
    ) -> RungResult:
        return cls(
            rung.name, True, rung.gating, dict(metrics or {}), reason, dict(details or {}), output
        )

    @classmethod
    def fail(
        cls,
        rung: _Rung,
        reason: str,
        metrics: dict[str, Any] | None = None,
        details: dict[str, Any] | None = None,
        output: Any = None,
    ) -> RungResult:
        return cls(
            rung.name, False, rung.gating, dict(metrics or {}), reason, dict(details or {}), output
        )

    @classmethod
    def skip(cls, rung: _Rung, reason: str, details: dict[str, Any] | None = None) -> RungResult:
        """Not run here, for a reason (no GPU, no ncu): never fails the verdict or gates."""
        return cls(rung.name, None, False, {}, reason, dict(details or {}))

    @classmethod
    def not_run(cls, rung: _Rung) -> RungResult:
        """After a failed gating rung."""
        return cls(rung.name, None, rung.gating)

    @property
    def status(self) -> str:
        return "skipped" if self.ok is None else ("ok" if self.ok else "failed")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "gating": self.gating,
            "metrics": self.metrics,
            "reason": self.reason,
            "details": self.details,
            "status": self.status,
        }

    def shown_line(self) -> str:
        """``line()`` as printed (``shown``)."""
        return shown(self.line(), known_secrets())

    def line(self) -> str:
        head = f"[{self.name}] {self.status}"
        parts = [f"{k}={format_metric(k, v)}" for k, v in self.metrics.items() if v is not None]
        text = head + ("  " + " ".join(parts) if parts else "")
        if self.reason and self.ok is not True:
            text += f"  -- {self.reason}"
        elif self.reason and self.ok:
            text += f"  ({self.reason})"
        return text


def shown(line: str, secrets: Any) -> str:
    """A verdict line as printed: ``secrets`` redacted, one line whatever a reason holds, no
    control character (``printable``)."""
    return printable(redact(line, secrets), newlines=False)


def format_metric(key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if key == "cossim":
        return f"{value:.6f}"
    if key in ("psnr",):
        return f"{value:.1f}"
    if key.endswith("_s"):
        return f"{value:.2f}"
    if key.endswith(("_ms", "_gbps", "_tflops", "_mhz", "_w_max")) or key in ("intensity",):
        return f"{value:.4g}"
    if key.endswith("_pct") or key.startswith("pct_"):
        return f"{value:.1f}"
    if key.startswith("speedup") or key == "bench_vs_ncu":
        return f"{value:.3g}x"
    if key == "ci_rel":
        return f"{value * 100:.2f}%"
    return f"{value:.1e}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def _from_jsonable(value: Any) -> Any:
    if value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, dict):
        return {k: _from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class PerformanceSummary:
    """What the benchmark and roofline rungs measured, typed: the first benchmarked
    shape's median time, its speedup over the reference, its percent of the roofline and
    what bounds it (``memory`` / ``compute``). The agent ranks versions by it. For a
    GEMM-, convolution- or attention-like problem also the speedups over the library path
    and ``torch.compile`` of the reference, and ``sol``: the share of the gap between the
    better of those baselines and the roofline that the candidate closes (negative when
    slower than it; None with ``sol_note`` saying why when undefined;
    ``harness/perf/baselines.py``)."""

    shape: str
    time_ms: float
    speedup: float | None = None
    pct_of_roofline: float | None = None
    bound: str | None = None
    speedup_vs_library: float | None = None
    speedup_vs_compiled: float | None = None
    sol: float | None = None
    sol_baseline: str | None = None  # "library" | "compiled": the better baseline
    sol_note: str | None = None  # the SOL in words, or why there is none

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "time_ms": self.time_ms,
            "speedup": self.speedup,
            "pct_of_roofline": self.pct_of_roofline,
            "bound": self.bound,
            "speedup_vs_library": self.speedup_vs_library,
            "speedup_vs_compiled": self.speedup_vs_compiled,
            "sol": self.sol,
            "sol_baseline": self.sol_baseline,
            "sol_note": self.sol_note,
        }

    @classmethod
    def from_json(cls, doc: Any) -> PerformanceSummary | None:
        """The summary of a verdict document's ``summary`` entry (None when absent or
        when nothing was timed)."""
        if not isinstance(doc, dict) or not _finite(doc.get("time_ms")):
            return None
        return cls(
            shape=str(doc.get("shape") or ""),
            time_ms=float(doc["time_ms"]),
            speedup=float(doc["speedup"]) if _finite(doc.get("speedup")) else None,
            pct_of_roofline=(
                float(doc["pct_of_roofline"]) if _finite(doc.get("pct_of_roofline")) else None
            ),
            bound=str(doc["bound"]) if isinstance(doc.get("bound"), str) else None,
            speedup_vs_library=_finite_or_none(doc.get("speedup_vs_library")),
            speedup_vs_compiled=_finite_or_none(doc.get("speedup_vs_compiled")),
            sol=_finite_or_none(doc.get("sol")),
            sol_baseline=_str_or_none(doc.get("sol_baseline")),
            sol_note=_str_or_none(doc.get("sol_note")),
        )


def _finite_or_none(value: Any) -> float | None:
    return float(value) if _finite(value) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class Verdict:
    ok: bool
    problem: str
    problem_format: str
    candidate: str
    backend: str
    device: str
    interpreter: bool
    rungs: list[RungResult]
    environment: dict[str, Any] = field(default_factory=dict)
    integrity: list[str] = field(default_factory=list)
    seeds: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    run_dir: str | None = None
    wall_s: float = 0.0
    performance: dict[str, Any] = field(default_factory=dict)
    summary: PerformanceSummary | None = None

    @property
    def failed_rung(self) -> RungResult | None:
        return next((r for r in self.rungs if r.ok is False), None)

    @property
    def reason(self) -> str:
        failed = self.failed_rung
        return failed.reason if failed else ""

    def device_label(self) -> str:
        if self.device == "cpu":
            return "cpu (Triton interpreter)" if self.interpreter else "cpu"
        gpu = self.environment.get("gpu")
        return f"{self.device} ({gpu})" if gpu else self.device

    def redact_secrets(self) -> Verdict:
        """Redact, in place, every secret value this process knows (reasons, details,
        integrity findings, environment...); the runners call it on each verdict."""
        values = known_secrets()
        if values:
            for rung in self.rungs:
                rung.reason = redact(rung.reason, values)
                rung.metrics = redact_obj(rung.metrics, values)
                rung.details = redact_obj(rung.details, values)
            self.integrity = redact_obj(self.integrity, values)
            self.environment = redact_obj(self.environment, values)
            self.seeds = redact_obj(self.seeds, values)
            self.options = redact_obj(self.options, values)
            self.performance = redact_obj(self.performance, values)
            self.candidate = redact(self.candidate, values)
        return self

    def to_json(self) -> dict[str, Any]:
        failed = self.failed_rung
        doc = {
            "type": "verdict",
            "ok": self.ok,
            "problem": self.problem,
            "problem_format": self.problem_format,
            "candidate": self.candidate,
            "backend": self.backend,
            "device": self.device,
            "interpreter": self.interpreter,
            "failed_rung": failed.name if failed else None,
            "reason": failed.reason if failed else "",
            "rungs": [r.to_json() for r in self.rungs],
            "integrity": self.integrity,
            "environment": self.environment,
            "seeds": self.seeds,
            "options": self.options,
            "run_dir": self.run_dir,
            "wall_s": self.wall_s,
            "summary": self.summary.to_json() if self.summary else None,
            "performance": self.performance,
        }
        return redact_obj(_jsonable(doc))  # type: ignore[no-any-return]

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Verdict:
        doc = _from_jsonable(doc)
        rungs = [
            RungResult(
                name=r["name"],
                ok=r.get("ok"),
                gating=r.get("gating", True),
                metrics=r.get("metrics", {}),
                reason=r.get("reason", ""),
                details=r.get("details", {}),
            )
            for r in doc.get("rungs", [])
        ]
        return cls(
            ok=bool(doc["ok"]),
            problem=doc.get("problem", ""),
            problem_format=doc.get("problem_format", ""),
            candidate=doc.get("candidate", ""),
            backend=doc.get("backend", ""),
            device=doc.get("device", ""),
            interpreter=bool(doc.get("interpreter")),
            rungs=rungs,
            environment=doc.get("environment", {}),
            integrity=list(doc.get("integrity", [])),
            seeds=doc.get("seeds", {}),
            options=doc.get("options", {}),
            run_dir=doc.get("run_dir"),
            wall_s=float(doc.get("wall_s", 0.0)),
            performance=dict(doc.get("performance") or {}),
            summary=PerformanceSummary.from_json(doc.get("summary")),
        )

    def lines(self) -> list[str]:
        values = known_secrets()
        return [shown(line, values) for line in self._lines()]

    def _lines(self) -> list[str]:
        out = [r.line() for r in self.rungs]
        head = (
            "PASSED"
            if self.ok
            else f"FAILED at {self.failed_rung.name if self.failed_rung else '?'}"
        )
        out.append(
            f"verdict: {head}  ({self.problem}, backend {self.backend}, {self.device_label()})"
        )
        if self.run_dir:
            out.append(f"run: {self.run_dir}")
        return out

    def feedback(self, max_lines: int = FEEDBACK_MAX_LINES) -> str:
        """Compact text for an agent: what failed, where, and what to look at."""
        return printable(redact(self._feedback(max_lines)))

    def _feedback(self, max_lines: int) -> str:
        lines: list[str] = []
        failed = self.failed_rung
        where = f"problem {self.problem}, backend {self.backend}, {self.device_label()}"
        if failed is None:
            lines.append(f"PASSED all rungs ({where}).")
            lines.extend(performance_lines(self.performance))
            if self.summary is not None and self.summary.sol_note:  # the gap to the best known
                lines.append(f"vs the best known implementation: {self.summary.sol_note}")
            for rung in self.rungs:
                if rung.metrics or rung.ok is None:
                    lines.append(rung.line())
            return "\n".join(lines[:max_lines])
        lines.append(f"FAILED at rung '{failed.name}' ({where}).")
        lines.append(f"reason: {failed.reason}")
        details = failed.details
        if details.get("where"):
            lines.append(f"where: {details['where']}")
        error = details.get("error")
        if isinstance(error, dict):
            lines.extend(_error_lines(error))
        findings = details.get("findings") or []
        if findings:
            lines.append("pre-check findings:")
            for f in findings[:10]:
                lines.append(f"  line {f.get('line')}: [{f.get('rule')}] {f.get('message')}")
                if f.get("code"):
                    lines.append(f"    {f['code']}")
        worst = details.get("worst") or []
        if worst:
            lines.append("worst mismatches (index: expected vs got):")
            for w in worst[:5]:
                idx = ", ".join(str(i) for i in w.get("index", []))
                lines.append(
                    f"  [{idx}]: expected {_num(w.get('expected'))} got {_num(w.get('got'))}"
                )
        if failed.metrics:
            lines.append(
                "metrics: "
                + " ".join(
                    f"{k}={format_metric(k, v)}" for k, v in failed.metrics.items() if v is not None
                )
            )
        others = [i for i in self.integrity if i not in failed.reason][:5]
        if others:
            lines.append("also seen:")
            lines.extend(f"  - {i}" for i in others)
        lines.append("rungs: " + ", ".join(f"{r.name} {r.status}" for r in self.rungs))
        if len(lines) > max_lines:
            lines = [*lines[: max_lines - 1], "(truncated)"]
        return "\n".join(lines)


def performance_lines(perf: dict[str, Any]) -> list[str]:
    """The performance summary an agent acts on: roofline %, time, speedup, what to fix."""
    out: list[str] = []
    if perf.get("roofline"):
        out.append(f"performance: {perf['roofline']} on {perf.get('shape')}")
    for entry in (perf.get("benchmark") or [])[:3]:
        cand = entry.get("candidate") or {}
        text = (
            f"  {entry.get('label')}: median {cand.get('median_ms', float('nan')):.4g} ms, "
            f"min {cand.get('min_ms', float('nan')):.4g} ms, IQR {cand.get('iqr_ms', float('nan')):.3g} ms, "
            f"{cand.get('runs')} runs, L2 {'flushed' if entry.get('l2') == 'flush' else 'hot'}"
        )
        if entry.get("speedup") is not None:
            text += f", {entry['speedup']:.3g}x the reference"
        out.append(text)
    for item in perf.get("review") or []:
        out.append(f"REVIEW: {item}")
    dump = perf.get("dump") or {}
    for finding in (dump.get("findings") or [])[:4]:
        out.append(f"dump: {finding}")
    profile = perf.get("profile") or {}
    if profile.get("kernels"):
        bits = [
            f"{label} {profile[key]:.1f}%"
            for key, label in (
                ("dram_pct", "DRAM"),
                ("sm_pct", "SM"),
                ("achieved_occupancy_pct", "occupancy"),
                ("l2_hit_pct", "L2 hit"),
            )
            if isinstance(profile.get(key), (int, float))
        ]
        stalls = ", ".join(s["reason"] for s in profile.get("top_stalls") or [])
        out.append("ncu: " + ", ".join(bits) + (f"; top stalls: {stalls}" if stalls else ""))
        executed = profile.get("executed") or {}  # what the hot kernel ran (perf/isa.py)
        if executed.get("what"):
            out.append(f"executed by {executed.get('kernel')}: {executed['what']}")
    trace = perf.get("trace") or {}  # trace rung: where the time goes in the kernel
    if trace.get("sentence"):
        out.append(f"trace on {trace.get('shape')}: {trace['sentence']}")
        out.extend(str(line) for line in (trace.get("lines") or [])[:8])
    return out


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _error_lines(error: dict[str, Any]) -> list[str]:
    out = []
    frames = error.get("candidate_frames") or []
    for f in frames[-3:]:
        out.append(f"  at {f.get('file')}:{f.get('line')} in {f.get('name')}")
        if f.get("code"):
            out.append(f"    {f['code']}")
    message = str(error.get("message", "")).strip().splitlines()
    if message:
        out.append("error: " + message[0][:300])
        out.extend("  " + m[:300] for m in message[1:6])
    root = error.get("root")
    if root:
        out.append("caused by: " + str(root).strip().splitlines()[0][:300])
    return out
