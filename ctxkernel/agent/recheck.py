"""Proving the best: a version becomes a run's best only after a fresh re-check.

In the loop every version is checked on the problem's public shapes, the ones the model
read in its prompt. Before a version is declared best (and so before a run stops on its
target) the :class:`Prover` checks it again:

- in a fresh worker, on shapes and seeds the model never saw: ``harness.problems.unseen`` derives
  them from the problem's own shapes and a new secret (odd sizes, not multiples of 16 or
  128, size 1 where the problem allows; a problem can narrow this or switch it off, and
  then the public shapes are re-checked with new seeds). A version that passes the public
  shapes and fails these *overfits the public shapes*: it is failed (rung
  ``unseen-shapes``); the engineer's records say which shape, the model is told only that
  it failed on a shape it has not seen;
- where the harness times kernels, re-benchmarked against the previous best, interleaved
  A B B A in fresh workers, so the two are compared under the same conditions; a version
  that is not faster side by side is ``slower`` and never the best.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .runs import performance_of, write_json

if TYPE_CHECKING:
    from harness import RunOptions

    from .check_tool import CheckOutcome
    from .state import Pending
    from .state import RunningAgent as Agent

UNSEEN_RUNG = "unseen-shapes"
OVERFIT = "overfits the public shapes"
RACE_ROUNDS = 2  # A B B A


@dataclass
class Proof:
    """What the re-check of one version found."""

    version: int
    status: str  # "proven" | "overfit" | "slower" | "unchecked"
    shapes: list[dict[str, Any]] = field(default_factory=list)  # never shown to the model
    failed_rung: str | None = None  # on the unseen shapes
    reason: str = ""  # what failed there (for the engineer)
    timing: dict[str, Any] | None = None  # the side-by-side benchmark, when run

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Proof:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})

    def engineer_line(self) -> str:
        """For the engineer: what the re-check found, the unseen shape included."""
        where = "; ".join(_label(s) for s in self.shapes) or "the public shapes, new seeds"
        if self.status == "overfit":
            return (f"v{self.version} OVERFIT: {OVERFIT}; fails unseen shape(s) {where}: "
                    f"FAILED at {self.failed_rung}: {self.reason}".rstrip(": "))  # fmt: skip
        if self.status == "unchecked":
            return f"v{self.version} re-check could not run: {self.reason}"
        line = f"v{self.version} re-checked in a fresh worker on {where}: passed"
        if self.timing:
            t = self.timing
            line += (f"; side by side with v{t['previous']}: {t['version_median_us']:.4g} us vs "
                     f"{t['previous_median_us']:.4g} us")  # fmt: skip
            if self.status == "slower":
                line += f" (not faster: v{t['previous']} stays the best)"
        return line

    def model_text(self) -> str:
        """For the model: never which shape."""
        if self.status == "overfit":
            return (
                f"version {self.version}: FAILED on an unseen shape: it passes the public "
                "shapes, but a re-check in a fresh worker on shapes and seeds you have not "
                "seen failed (which ones is not disclosed). Make the kernel correct for every "
                "size the problem allows: masks and tails on every dimension, a grid that "
                "covers ragged edges, no tables of the visible shapes or seeds."
            )
        if self.status == "slower" and self.timing:
            t = self.timing
            return (
                f"Version {self.version} was not faster than version {t['previous']} when the "
                f"two were timed side by side ({t['version_median_us']:.4g} us vs "
                f"{t['previous_median_us']:.4g} us): version {t['previous']} stays the best."
            )
        if self.status == "proven":
            return (
                f"Version {self.version} also passed a fresh re-check on shapes and seeds it "
                "had not seen."
            )
        return ""


Evaluator = Callable[..., list["CheckOutcome"]]


class Prover:
    """Re-checks versions for the loop (its evaluator and runner, fresh workers)."""

    def __init__(
        self,
        problem: str,
        options: RunOptions,
        evaluator: Evaluator,
        runner: Callable[[], Any],
        *,
        has_timing: bool,
    ) -> None:
        self.problem = problem
        self.options = options
        self.evaluator = evaluator
        self.runner = runner
        self.has_timing = has_timing

    def prove(
        self,
        version: int,
        path: Path,
        previous: tuple[Mapping[str, Any], Path] | None = None,
        keep: Path | None = None,
    ) -> Proof:
        """Check ``path`` (version ``version``) on unseen shapes; where there is timing
        and a ``previous`` best (its meta and path), race the two. ``keep``: a directory
        for the re-check's verdict."""
        from harness import load_problem, new_secret, unseen_shapes
        from harness.errors import HarnessError

        secret = new_secret()
        try:
            shapes = unseen_shapes(load_problem(self.problem), secret)
        except HarnessError as exc:
            return Proof(version, "unchecked", reason=str(exc))
        options = _options(
            self.options,
            shapes=shapes or None,
            secret=secret,
            unseen=True,  # and the harness's own: more unseen shapes, rescaled inputs
            trials=max(2, self.options.trials),
            bench=False,
            profile=False,
            trace=False,
            dump_dir=None,
        )
        [result] = self.evaluator(self.problem, [path], options, runner=self.runner())
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            write_json(keep / "shapes.json", shapes)
            if result.doc is not None:
                write_json(keep / "verdict.json", result.doc)
        outcome = result.outcome
        if outcome.error:
            return Proof(version, "unchecked", shapes, reason=outcome.error)
        if not outcome.ok:
            return Proof(version, "overfit", shapes, outcome.failed_rung, outcome.reason)
        proof = Proof(version, "proven", shapes)
        if self.has_timing and previous is not None:
            proof.timing = self.race(version, path, previous)
            if not proof.timing["faster"]:
                proof.status = "slower"
        return proof

    def race(
        self, version: int, path: Path, previous: tuple[Mapping[str, Any], Path]
    ) -> dict[str, Any]:
        """Benchmark the version and the previous best interleaved (A B B A), each in a
        fresh worker with new seeds; medians of the candidate's times."""
        from harness import new_secret

        prev_meta, prev_path = previous
        prev = int(prev_meta["version"])
        options = _options(self.options, secret=new_secret(), bench_reference=False,
                           profile=False, trace=False, dump_dir=None)  # fmt: skip
        order: list[int] = []
        times: dict[int, list[float]] = {version: [], prev: []}
        for r in range(RACE_ROUNDS):
            pair = [(version, path), (prev, prev_path)]
            for n, p in pair if r % 2 == 0 else pair[::-1]:
                [result] = self.evaluator(self.problem, [p], options, runner=self.runner())
                order.append(n)
                t = performance_of(result.outcome.to_json()).time_us
                if result.outcome.ok and t is not None:
                    times[n].append(t)
        mine, theirs = _median(times[version]), _median(times[prev])
        faster = mine is not None and (theirs is None or mine < theirs)
        return {"previous": prev, "order": order, "version_us": times[version],
                "previous_us": times[prev], "version_median_us": mine,
                "previous_median_us": theirs, "faster": faster}  # fmt: skip


def prove_best(agent: Agent, pending: Sequence[Pending]) -> list[str]:
    """Re-check a run's best until one holds: the top version not yet proven is checked
    on unseen shapes (and raced against the previous proven best where there is timing);
    one that fails is taken out of the running and the next is tried. The verdicts the
    model reads for this round's versions (``pending``) are updated; the lines for older
    versions are returned for the round's note."""
    from .runs import best_of

    record, lines = agent.record, []
    for _ in range(len(record.versions()) + 1):
        versions = record.versions()
        best = best_of(versions)
        if best is None or best.get("proof"):
            break
        n = int(best["version"])
        before = best_of([v for v in versions if v["version"] != n and v.get("proof")])
        previous = None
        if before is not None:
            previous = (before, record.version_dir(before["version"]) / "candidate.py")
        agent.emit({"type": "action", "action": "recheck", "version": n})
        proof = agent.prover.prove(n, record.version_dir(n) / "candidate.py", previous,
                                   keep=record.version_dir(n) / "recheck")  # fmt: skip
        meta = record.update_meta(n, {"proof": proof.to_json(), **meta_changes(proof)})
        record.log({"type": "proof", **proof.to_json()})
        agent.emit({"type": "proof", **proof.to_json(), "meta": meta,
                    "line": proof.engineer_line()})  # fmt: skip
        text = proof.model_text()
        cand = next((c for c in pending if c.version == n), None)
        if cand is None:
            lines.extend([text] if text else [])
            continue
        cand.meta = meta
        if proof.status == "overfit":
            cand.text = text
            (record.version_dir(n) / "feedback.txt").write_text(text + "\n")
        elif text:
            cand.text += "\n" + text
    return lines


def meta_changes(proof: Proof) -> dict[str, Any]:
    """How a re-check changes a version's meta: overfitting fails it; losing the race
    to the previous best keeps it correct but never the best."""
    if proof.status == "overfit":
        return {"ok": False, "overfit": True, "failed_rung": UNSEEN_RUNG, "reason": OVERFIT,
                "unseen_failure": f"{proof.failed_rung}: {proof.reason}"}  # fmt: skip
    if proof.status == "slower" and proof.timing:
        return {"beaten_by": proof.timing["previous"]}
    return {}


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _options(options: RunOptions, **changes: Any) -> RunOptions:
    """``options`` with those of ``changes`` this harness has."""
    names = {f.name for f in fields(options)}
    return replace(options, **{k: v for k, v in changes.items() if k in names})


def _label(shape: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items()) or "default"


__all__ = ["OVERFIT", "UNSEEN_RUNG", "Proof", "Prover", "meta_changes", "prove_best"]
