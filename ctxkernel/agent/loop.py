"""The agent loop: Claude writes a kernel, the harness judges it, the index informs it.

A run is a sequence of rounds. In a round, ``samples`` branches start from the same
conversation (one branch by default); each converses with the model, running the
retrieval tools it asks for, until the model submits a version with ``check_kernel``
(or ends its turn). The submitted versions are checked concurrently (:func:`evaluate`),
kept with their verdicts, and the branch holding the best one becomes the conversation
of the next round: its tool results, the other samples' one-line outcomes and a note
from the policy (best so far, what to do next, the budget left) go back to the model.

The policy follows the ladder: first version -> compile -> correctness -> optimisation.
The run stops when

- ``target``: the best correct version reaches ``target`` of the roofline; on a device
  the harness cannot time (a CPU, where Triton runs under its interpreter) there is no
  roofline, so there the target is "a correct version exists";
- ``max-iters``: ``max_iters`` rounds produced versions;
- ``max-tokens`` / ``max-cost`` / ``max-wall``: the token, dollar or wall-time budget of
  the run (all totals over every session of the run) is spent;
- ``no-improvement``: ``patience`` rounds in a row brought no new best (a faster correct
  version, or while none is correct, a version further up the ladder);
- ``model-stopped``: the model ended its turn three rounds in a row without a version;
- ``api-error``: the API failed for good (after retries); everything so far is kept;
- ``engineer``: the engineer said ``/stop``;
- ``interrupted``: Ctrl-C; ``error``: anything unexpected (kept, then raised).

Before a version is declared best it is re-checked in a fresh worker on shapes and seeds
the model never saw, and re-timed against the previous best where there is timing
(``recheck.py``): a version that passes the public shapes only is failed as overfitting
them. Between rounds the engineer's notes (``steer.py``: ``--note``, ``steer.md``, the
interactive console) join the next user turn, marked as theirs; ``/pin N`` makes version
N the base the policy note builds on, ``/back N`` continues from the conversation kept
with version N. A note given when the run would stop on ``target`` or
``no-improvement`` keeps it going.

State is saved after every round, so ``--resume RUN`` continues from the last finished
round (with budgets raised or changed if asked).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..tools import ToolSet, anthropic_tools, run_tool_use
from ..tools.base import ToolError
from .check_tool import (
    CheckOutcome,
    evaluate,
    make_check_tool,
    render_feedback,
    timed,
    with_evidence,
)
from .client import APIFailure, ModelClient, Usage
from .context import estimate_tokens, request_messages, system_blocks, trim
from .prompt import device_info, first_message, load_brief, system_prompt
from .recheck import UNSEEN_RUNG, Prover, prove_best
from .runs import RunRecord, best_of
from .state import (
    AgentConfig,
    Branch,
    LoopState,
    Pending,
    RunResult,
    append_text,
    continuation,
    tool_result,
)
from .steer import STEER_FILE, STEER_HEADER, Steering, apply_decision

IDLE_ROUNDS_LIMIT = 3
EventSink = Callable[[dict[str, Any]], None]
Evaluator = Callable[..., list[CheckOutcome]]

NEXT_STEP = {
    "pre-checks": "fix what the pre-checks found (syntax, entry point, a forbidden call) and "
    "submit the whole module again.",
    "compile": "fix the compile error at the line shown; check the API with docs or search "
    "when unsure.",
    "run": "make the call return a plain tensor of the expected shape, dtype and device "
    "without crashing.",
    "correctness": "fix correctness before anything else: compare the worst elements above "
    "with the reference (masks, tails, indexing, accumulation precision).",
    "anti-cheat": "the anti-cheat rung rejected this version: compute the result honestly, "
    "on every call, in the declared backend.",
    UNSEEN_RUNG: "make it correct on every size the problem allows, not only the shapes "
    "you were shown (tails, masks, grids that cover ragged edges).",
}


class Agent:
    """Drives one run; make it with :meth:`start` or :meth:`resume`, then :meth:`run`."""

    def __init__(
        self,
        config: AgentConfig,
        record: RunRecord,
        state: LoopState,
        client: ModelClient,
        *,
        toolset: ToolSet | None = None,
        on_event: EventSink | None = None,
        evaluator: Evaluator = evaluate,
        steering: Steering | None = None,
    ) -> None:
        import threading

        from harness import RunOptions

        self.config = config
        self.record = record
        self.state = state
        self.client = client
        self.on_event = on_event
        self.evaluator = evaluator
        self.steering = steering or Steering()
        if toolset is None:
            from ..workspace import Workspace

            index_dir, chroma_url = config.index_dir, config.chroma_url
            toolset = ToolSet(lambda: Workspace(index_dir, chroma_url))
        self.toolset = toolset
        self.check_tool = make_check_tool(problem_arg=False)
        self.tools = anthropic_tools([*toolset, self.check_tool], cache_control=True)
        self.system = system_blocks(state.system)
        options = RunOptions(
            device=config.device,
            trials=config.trials,
            timeout_s=config.check_timeout_s,
            backend=config.backend,
            record=False,
            # shapes and inputs the model never saw are the prover's (recheck.py), with a
            # fresh secret, before a version is declared best; the model hears only that
            unseen=False,
        )
        self.options = timed(options, "cuda" if state.has_timing else "cpu")
        self._runner: Any = None
        self._tool_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._session_start = time.monotonic()
        self._wall_base = state.wall_s
        self._waited = 0.0
        self._proof_lines: list[str] = []
        self.prover = Prover(config.problem, self.options, self.evaluator,
                             self._batch_runner, has_timing=state.has_timing)  # fmt: skip
        client.usage = Usage.from_json(state.usage)
        client.cost = state.cost
        client.calls = state.calls
        client.retries = state.retries
        client.on_retry = self._on_retry

    # -- construction ----------------------------------------------------------------

    @classmethod
    def start(
        cls,
        config: AgentConfig,
        client: ModelClient,
        *,
        runs_dir: Path | None = None,
        **kwargs: Any,
    ) -> Agent:
        """A new run: load the problem, write the prompt, create the run record."""
        from harness.errors import HarnessError

        problem = Path(config.problem)
        if not problem.exists():
            raise UserError(f"problem not found: {config.problem}")
        config.problem = str(problem.resolve())
        try:
            brief = load_brief(config.problem)
        except HarnessError as exc:
            raise UserError(str(exc)) from None
        info = device_info(config.device, config.backend)
        text = system_prompt(
            brief, config.backend, info, config.target,
            max_iters=config.max_iters, samples=config.samples,
        )  # fmt: skip
        record = RunRecord.create(
            brief.name,
            {"kind": "agent", "problem": brief.name, "problem_path": config.problem,
             "backend": config.backend, "model": config.model,
             "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "config": config.to_json()},
            runs_dir,
        )  # fmt: skip
        (record.path / "system_prompt.md").write_text(text + "\n")
        (record.path / STEER_FILE).write_text(STEER_HEADER)
        messages = [{"role": "user", "content": first_message(config.backend)}]
        state = LoopState(
            system=text, messages=messages, device=info.label, has_timing=info.has_timing
        )
        record.save_state(asdict(state))
        record.log({"type": "start", "config": config.to_json(), "device": info.label})
        record.log({"type": "system", "text": text})
        record.log({"type": "user", "content": messages[0]["content"]})
        return cls(config, record, state, client, **kwargs)

    @classmethod
    def resume(
        cls,
        ref: str | Path,
        overrides: Mapping[str, Any],
        client_factory: Callable[[AgentConfig], ModelClient],
        *,
        runs_dir: Path | None = None,
        **kwargs: Any,
    ) -> Agent:
        """Continue a run from its last finished round; ``overrides`` change its options."""
        record = RunRecord.open(ref, runs_dir)
        saved = record.config.get("config")
        doc = record.load_state()
        if not isinstance(saved, dict) or doc is None:
            raise UserError(f"{record.id} is not a resumable agent run")
        config = AgentConfig.from_json({**saved, **overrides})
        if not Path(config.problem).exists():
            raise UserError(f"the run's problem is gone: {config.problem}")
        state = LoopState.from_json(doc)
        state.status, state.stop_reason, state.stop_detail = "running", None, ""
        record.update_config({"config": config.to_json()})
        record.log({"type": "resume", "overrides": dict(overrides), "rounds": state.rounds})
        return cls(config, record, state, client_factory(config), **kwargs)

    # -- the loop --------------------------------------------------------------------

    def run(self) -> RunResult:
        self.emit({"type": "run", "id": self.record.id, "path": str(self.record.path),
                    "problem": self.record.config.get("problem"), "backend": self.config.backend,
                    "model": self.config.model, "device": self.state.device,
                    "max_iters": self.config.max_iters,
                    "resumed": self.state.calls > 0 or self.state.rounds > 0})  # fmt: skip
        from harness import RunnerError

        stop: tuple[str, str] | None = None
        try:
            first = self.steering.begin(self)
            pending = self._stop_check()
            if pending and pending[0] == "max-iters" and first.notes:
                # a note continues a run: one more round for the model to act on it
                self.config.max_iters = self.state.rounds + 1
                self.record.update_config({"config": self.config.to_json()})
                pending = self._stop_check()
            stop = apply_decision(self, first, pending)
            while stop is None:
                checked = self._round()
                pending = self._stop_check()
                stop = apply_decision(self, self.steering.between(self, checked, pending), pending)
        except APIFailure as exc:
            stop = ("api-error", str(exc))
        except RunnerError as exc:
            stop = ("runner-error", str(exc))
        except KeyboardInterrupt:
            self._finish(("interrupted", "stopped by the user"))
            raise
        except Exception as exc:  # keep what was done, then let the error surface
            self._finish(("error", f"{type(exc).__name__}: {exc}"))
            raise
        return self._finish(stop)

    def _stop_check(self) -> tuple[str, str] | None:
        cfg, state = self.config, self.state
        best = best_of(self.record.versions())
        if best is not None and best["version"] != state.target_waived:
            n, roofline = best["version"], best.get("roofline")
            if isinstance(roofline, (int, float)) and roofline >= cfg.target:
                return (
                    "target",
                    f"version {n} reaches {roofline:.0%} of the roofline (target {cfg.target:.0%})",
                )
            if best.get("time_us") is None and roofline is None:
                return "target", (
                    f"version {n} is correct; the harness gives no timing on this device "
                    f"({best.get('device') or state.device}), so correctness is the target"
                )
        if state.rounds >= cfg.max_iters:
            return "max-iters", f"{state.rounds} rounds (--max-iters {cfg.max_iters})"
        over = self._over_budget()
        if over:
            return over
        if state.no_improvement >= cfg.patience:
            return "no-improvement", f"{state.no_improvement} rounds without improvement"
        if state.idle_rounds >= IDLE_ROUNDS_LIMIT:
            return "model-stopped", f"the model ended {state.idle_rounds} rounds without a version"
        return None

    def _over_budget(self) -> tuple[str, str] | None:
        cfg, client = self.config, self.client
        if cfg.token_budget is not None and client.usage.total >= cfg.token_budget:
            return "max-tokens", f"{client.usage.total} tokens used (budget {cfg.token_budget})"
        if cfg.max_cost is not None and client.cost >= cfg.max_cost:
            return "max-cost", f"${client.cost:.4f} spent (budget ${cfg.max_cost:g})"
        if cfg.max_wall_s is not None and self._wall() >= cfg.max_wall_s:
            return "max-wall", f"{self._wall():.0f} s (budget {cfg.max_wall_s:g} s)"
        return None

    def _wall(self) -> float:
        return self._wall_base + time.monotonic() - self._session_start - self._waited

    def _round(self) -> list[dict[str, Any]]:
        """One round; the metas of the versions it checked (none when the model
        submitted nothing)."""
        k = max(1, self.config.samples)
        round_no = self.state.rounds + 1
        if k == 1:
            branches = [self._branch(0, round_no)]
        else:
            with ThreadPoolExecutor(k, thread_name_prefix="sample") as pool:
                branches = list(pool.map(lambda i: self._branch(i, round_no), range(k)))
        submitted = [b for b in branches if b.candidates]
        if not submitted:
            errors = [b.error for b in branches if b.error]
            if errors:
                raise APIFailure(errors[0])
            if any(b.ended == "budget" for b in branches):
                return []  # the stop check names the budget
            self._nudge(branches[0])
            return []
        self.state.idle_rounds = 0
        self.state.rounds = round_no
        pending = [c for b in submitted for c in b.candidates]
        self._check(pending, round_no)
        self._proof_lines = prove_best(self, pending)
        self._advance(submitted, pending, round_no)
        return [c.meta for c in pending]

    # -- one branch ------------------------------------------------------------------

    def _branch(self, sample: int, round_no: int) -> Branch:
        messages = copy.deepcopy(self.state.messages)
        k = self.config.samples
        if k > 1:
            append_text(messages[-1], f"(Sample {sample + 1} of {k} this round: an independent "
                         "attempt; the best correct sample continues.)")  # fmt: skip
        branch = Branch(sample, messages)
        lookups = 0
        limit = self.config.lookups_per_version
        try:
            while True:
                if self._over_budget():
                    branch.ended = "budget"
                    return branch
                self.emit({"type": "action", "action": "model", "round": round_no,
                            "sample": sample})  # fmt: skip
                reply = self.client.create(
                    system=self.system, messages=request_messages(messages), tools=self.tools
                )
                self._account(reply, sample, round_no)
                messages.append({"role": "assistant", "content": reply.content})
                uses = reply.tool_uses()
                if not uses:
                    branch.ended = reply.stop_reason or "end_turn"
                    return branch
                results: list[dict[str, Any]] = []
                for use in uses:
                    if use.get("name") == "check_kernel":
                        try:
                            args = self.check_tool.validate(use.get("input"))
                        except ToolError as exc:
                            results.append(tool_result(use["id"], str(exc), True))
                            continue
                        branch.candidates.append(
                            Pending(use["id"], args["source"], args.get("notes", ""),
                                    tuple(args.get("show") or ()), sample)
                        )  # fmt: skip
                    else:
                        results.append(self._run_tool(use, sample, round_no))
                        lookups += 1
                if branch.candidates:
                    branch.results = results
                    return branch
                content: list[dict[str, Any]] = list(results)
                if lookups >= limit:
                    content.append({"type": "text", "text": f"You have made {lookups} lookups "
                                    "since the last version: submit a version with check_kernel now."})  # fmt: skip
                messages.append({"role": "user", "content": content})
                if lookups >= 2 * limit:
                    branch.ended = "lookups"
                    return branch
        except APIFailure as exc:
            branch.ended, branch.error = "api-error", str(exc)
            return branch

    def _account(self, reply: Any, sample: int, round_no: int) -> None:
        with self._state_lock:
            self.state.context_tokens = reply.usage.context_tokens
        event = {"type": "request", "round": round_no, "sample": sample, "call": self.client.calls,
                 "model": reply.model, "message_id": reply.message_id, "stop_reason": reply.stop_reason,
                 "usage": reply.usage.to_json(), "cost": reply.cost, "attempts": reply.attempts,
                 "elapsed_s": round(reply.elapsed_s, 3), "total_cost": self.client.cost,
                 "total_tokens": self.client.usage.total}  # fmt: skip
        self.record.log(event)
        self.record.log(
            {"type": "assistant", "round": round_no, "sample": sample, "content": reply.content}
        )
        self.emit(event)

    def _run_tool(self, use: dict[str, Any], sample: int, round_no: int) -> dict[str, Any]:
        self.emit({"type": "action", "action": "lookup", "name": use.get("name"),
                    "input": use.get("input"), "sample": sample})  # fmt: skip
        with self._tool_lock:  # one Workspace: not shared between threads
            result = run_tool_use(self.toolset, use)
        self.record.log({"type": "tool", "round": round_no, "sample": sample, "name": use.get("name"),
                         "input": use.get("input"), "is_error": result["is_error"],
                         "result": result["content"]})  # fmt: skip
        self.emit({"type": "tool", "sample": sample, "name": use.get("name"),
                    "input": use.get("input"), "is_error": result["is_error"]})  # fmt: skip
        return result

    def _on_retry(self, attempt: int, wait_s: float, error: str) -> None:
        event = {"type": "retry", "attempt": attempt, "wait_s": round(wait_s, 3), "error": error}
        self.record.log(event)
        self.emit(event)

    # -- checking and the next round -------------------------------------------------

    def _check(self, pending: list[Pending], round_no: int) -> None:
        paths = []
        for cand in pending:
            cand.version, path = self.record.new_version(
                cand.source,
                {"round": round_no, "sample": cand.sample, "notes": cand.notes,
                 "tool_use_id": cand.tool_use_id},
            )  # fmt: skip
            self.state.tool_versions[cand.tool_use_id] = cand.version
            paths.append(path)
        self.emit({"type": "action", "action": "check", "versions": [c.version for c in pending]})
        results = self.evaluator(
            self.config.problem,
            paths,
            self.options,
            show=[c.show for c in pending],
            runner=self._batch_runner(),
        )
        for cand, result in zip(pending, results, strict=True):
            cand.result = result
            cand.text = render_feedback(
                cand.version, result.outcome, result.feedback, result.doc, cand.show
            )
            cand.text = with_evidence(cand.text, lambda: self.toolset.workspace.store, result.doc)
            cand.meta = self.record.finish_version(
                cand.version, result.doc, cand.text,
                {**result.outcome.to_json(), "check_wall_s": round(result.wall_s, 3)},
            )  # fmt: skip
            self.record.log({"type": "version", **cand.meta})
            self.emit({"type": "version", **cand.meta, "headline": result.outcome.headline()})

    def _advance(self, submitted: list[Branch], pending: list[Pending], round_no: int) -> None:
        from .runs import rank_key

        state = self.state
        versions = self.record.versions()
        this_round = {c.version for c in pending}
        before = best_of([v for v in versions if v["version"] not in this_round])
        best = best_of(versions)
        improved = best is not None and (before is None or self._gained(best, before))
        level = max(c.meta.get("level", 0) for c in pending)
        if level > state.progress_level:
            improved = improved or best is None
            state.progress_level = level
        state.no_improvement = 0 if improved else state.no_improvement + 1

        winner = min(submitted, key=lambda b: min(rank_key(c.meta) for c in b.candidates))
        note = self._note(winner, pending, best)
        for branch in submitted:  # what /back N continues from, for every version
            messages = continuation(branch, note)
            for cand in branch.candidates:
                self.record.save_conversation(cand.version, messages)
            if branch is winner:
                state.messages = messages
        content = state.messages[-1]["content"]
        self.record.log(
            {"type": "user", "round": round_no, "sample": winner.sample, "content": content}
        )
        self._maybe_trim()
        self._save()

    def _gained(self, best: dict[str, Any], before: dict[str, Any]) -> bool:
        if best["version"] == before["version"]:
            return False
        gain = self.config.min_gain
        t, t0 = best.get("time_us"), before.get("time_us")
        if isinstance(t, (int, float)) and isinstance(t0, (int, float)):
            return bool(t < t0 * (1 - gain))
        r, r0 = best.get("roofline"), before.get("roofline")
        if isinstance(r, (int, float)) and isinstance(r0, (int, float)):
            return bool(r > r0 * (1 + gain))
        return t is not None and t0 is None

    def _note(self, winner: Branch, pending: list[Pending], best: dict[str, Any] | None) -> str:
        from .runs import rank_key

        cfg, state = self.config, self.state
        lines = []
        others = [c for c in pending if c not in winner.candidates]
        for cand in others:
            assert cand.result is not None
            headline = cand.result.outcome.headline()
            if cand.meta.get("overfit"):
                headline = "FAILED on an unseen shape (it passes the public shapes only)"
            lines.append(f"Other sample: version {cand.version}: {headline}")
        latest = min(winner.candidates, key=lambda c: rank_key(c.meta))
        lines.extend(self._proof_lines)
        pinned = state.pinned
        if pinned is not None and all(c.version != pinned for c in winner.candidates):
            lines.append(f"Base: version {pinned}, pinned by the engineer; build on it:")
            lines.append("```python\n" + self.record.source(pinned).rstrip() + "\n```")
        if best is not None:
            measured = _measured(best)
            lines.append(
                f"Best so far: version {best['version']}"
                + (f" ({measured})" if measured else "")
                + "."
            )
            if pinned is None and all(c.version != best["version"] for c in winner.candidates):
                lines.append(f"Your latest version is not the best; version {best['version']} was:")
                lines.append("```python\n" + self.record.source(best["version"]).rstrip() + "\n```")
            roofline = best.get("roofline")
            if isinstance(roofline, (int, float)):
                lines.append(
                    f"Next: make it faster: {roofline:.0%} of the roofline, target {cfg.target:.0%}. "
                    "Find the bottleneck (memory-bound: wide coalesced loads, one pass over the "
                    "data; compute-bound: tensor cores, tiling, pipelining) and look up how in the index."
                )
            elif best.get("time_us") is not None:
                lines.append("Next: make it faster; look up techniques in the index.")
        failed = latest.result.outcome if latest.result else None
        if latest.meta.get("overfit"):
            lines.append(f"Next for version {latest.version}: {NEXT_STEP[UNSEEN_RUNG]}")
        elif failed is not None and not failed.ok:
            step = NEXT_STEP.get(failed.failed_rung or "", f"fix the '{failed.failed_rung}' rung.")
            if failed.error:
                step = f"the check could not run ({failed.error}); fix the submission."
            lines.append(f"Next for version {latest.version}: {step}")
        budget = f"Round {state.rounds} of {cfg.max_iters}"
        if cfg.max_cost is not None:
            budget += f"; ${self.client.cost:.2f} of ${cfg.max_cost:g} spent"
        if state.no_improvement:
            budget += (
                f"; {state.no_improvement} round(s) without improvement (stop at {cfg.patience})"
            )
        lines.append(budget + ".")
        return "\n".join(lines)

    def _nudge(self, branch: Branch) -> None:
        state = self.state
        state.idle_rounds += 1
        messages = branch.messages
        if branch.ended == "max_tokens":
            text = ("Your reply was cut off at max_tokens. Submit the complete module with "
                    "check_kernel, keeping explanations short.")  # fmt: skip
        else:
            text = ("No version was submitted. Submit a complete candidate with check_kernel; "
                    "the run continues until the target or the budget is reached.")  # fmt: skip
        if messages[-1]["role"] == "user":
            append_text(messages[-1], text)
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        state.messages = messages
        self.record.log({"type": "nudge", "reason": branch.ended, "text": text})
        self.emit({"type": "nudge", "reason": branch.ended})
        self._save()

    def _batch_runner(self) -> Any:
        """The harness runner, made once per session and kept warm between rounds:
        ``--runner``, else ``local`` for one sample a round and the ``pool`` (a slot per
        GPU, or one per sample on a CPU) for several."""
        if self._runner is None:
            from harness import get_runner

            k = max(1, self.config.samples)
            spec = self.config.runner or ("pool" if k > 1 else "local")
            jobs = None if spec.startswith("pool") and self.state.has_timing else k
            self._runner = get_runner(spec, jobs)
        return self._runner

    def _maybe_trim(self) -> None:
        limit = self.config.context_tokens
        state = self.state
        size = max(state.context_tokens, estimate_tokens(state.system, self.tools, state.messages))
        if size <= limit:
            return
        overhead = estimate_tokens(state.system, self.tools)
        report = trim(
            state.messages,
            target_tokens=max(int(limit * 0.6) - overhead, 1000),
            source_note=self._source_note,
        )
        if report.blocks:
            event = {"type": "trim", "blocks": report.blocks, "tokens_before": report.tokens_before,
                     "tokens_after": report.tokens_after}  # fmt: skip
            self.record.log(event)
            self.emit(event)

    def _source_note(self, tool_use_id: str) -> str:
        n = self.state.tool_versions.get(tool_use_id)
        return f"version {n} (versions/{n}/candidate.py)" if n else "an earlier version"

    # -- records ---------------------------------------------------------------------

    def say(self, text: str) -> None:
        """Add text to the user turn the model reads next."""
        messages = self.state.messages
        if messages and messages[-1]["role"] == "user":
            append_text(messages[-1], text)
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def elapsed_s(self) -> float:
        """The run's wall time so far (all sessions), waiting for the engineer excluded."""
        return self._wall()

    def add_wait(self, seconds: float) -> None:
        """Time spent waiting for the engineer: not counted as the run's wall time."""
        self._waited += seconds

    def save(self) -> None:
        self._save()

    def _save(self) -> None:
        state = self.state
        state.usage = self.client.usage.to_json()
        state.cost, state.calls, state.retries = (
            self.client.cost,
            self.client.calls,
            self.client.retries,
        )
        doc = asdict(state)
        doc["wall_s"] = round(self._wall(), 3)
        doc["waited_s"] = round(state.waited_s + self._waited, 3)
        self.record.save_state(doc)
        self.record.write_summary(self.summary())

    def _finish(self, stop: tuple[str, str] | None) -> RunResult:
        reason, detail = stop or ("stopped", "")
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        state = self.state
        state.status, state.stop_reason, state.stop_detail = "stopped", reason, detail
        self.record.write_best()
        self._save()
        self.record.log({"type": "stop", "reason": reason, "detail": detail})
        self.emit({"type": "stop", "reason": reason, "detail": detail})
        summary = self.summary()
        self.emit(summary)
        return RunResult(self.record, summary)

    def summary(self) -> dict[str, Any]:
        state, client, config = self.state, self.client, self.config
        versions = self.record.versions()
        best = best_of(versions)
        best_doc = None
        if best is not None:
            best_doc = {
                k: best.get(k)
                for k in ("version", "time_us", "roofline", "speedup", "bound", "notes")
            }
            proof = best.get("proof") or {}
            best_doc["proof"] = proof.get("status")
            best_doc["unseen_shapes"] = len(proof.get("shapes") or [])
        return {
            "type": "summary",
            "id": self.record.id,
            "kind": "agent",
            "problem": self.record.config.get("problem"),
            "backend": config.backend,
            "model": config.model,
            "device": state.device,
            "status": state.status,
            "stop_reason": state.stop_reason,
            "stop_detail": state.stop_detail,
            "target": config.target,
            "rounds": state.rounds,
            "versions": len(versions),
            "correct_versions": sum(1 for v in versions if v.get("ok")),
            "overfit": [v["version"] for v in versions if v.get("overfit")],
            "best": best_doc,
            "best_path": str(self.record.path / "best.py") if best is not None else None,
            "usage": client.usage.to_json(),
            "cost_usd": round(client.cost, 6) if client.price else None,
            "price_source": client.price.source if client.price else None,
            "calls": client.calls,
            "retries": client.retries,
            "wall_s": round(self._wall(), 3),
            "notes": state.notes,
            "pinned": state.pinned,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }

    def emit(self, event: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(event)


def _measured(meta: Mapping[str, Any]) -> str:
    from .check_tool import Outcome

    return Outcome(
        ok=True,
        time_us=meta.get("time_us"),
        roofline=meta.get("roofline"),
        speedup=meta.get("speedup"),
        bound=meta.get("bound"),
    ).measured()


def run_agent(
    config: AgentConfig,
    client: ModelClient,
    *,
    toolset: ToolSet | None = None,
    on_event: EventSink | None = None,
    evaluator: Evaluator = evaluate,
    steering: Steering | None = None,
) -> RunResult:
    """Start a run and drive it to its stop (the library entry point)."""
    agent = Agent.start(config, client, toolset=toolset, on_event=on_event, evaluator=evaluator,
                        steering=steering)  # fmt: skip
    return agent.run()


__all__ = [
    "Agent",
    "AgentConfig",
    "LoopState",
    "RunResult",
    "run_agent",
]
