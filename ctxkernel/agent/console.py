"""The engineer's terminal: a live view of a run and, with ``--interactive``, a console.

:class:`LiveView` (any run on a terminal without ``--json``) keeps a rich ``Live`` region
at the bottom of the screen: the versions table (v, result, time, % of roofline, note),
what the run is doing now (the model writing, a lookup, the harness checking or
re-checking, waiting for you) and the cost so far. Lines that stay print above it: each
version's verdict line, what the re-check of a best found, the notes, command output.

:class:`Console` adds the keyboard. :class:`KeyReader` reads keys on a thread with the
terminal's echo off, so the line being typed shows in the live region and a line can be
typed while the model works (it is read between rounds). After each round's versions are
checked the console waits: Enter goes on, any other text is guidance for the model, and
the commands of ``steer.COMMAND_HELP`` show a version, a diff, the best or the budget,
pin a base, go back to a version's conversation, or stop.
"""

from __future__ import annotations

import codecs
import difflib
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .check_tool import format_time
from .runs import RunRecord, best_of, performance_of
from .steer import ASKABLE_STOPS, COMMAND_HELP, Command, Decision, Note, parse_line

if TYPE_CHECKING:
    from .loop import Agent

TABLE_ROWS = 12  # versions shown in the live region; the rest stay in the scrollback
PROMPT = "engineer> "


# -- lines about versions ------------------------------------------------------------------


def result_word(meta: Mapping[str, Any]) -> str:
    """A version's result in a few characters (the table's column)."""
    if "ok" not in meta:
        return "checking..."
    if meta.get("overfit"):
        return "OVERFIT"
    if meta.get("error"):
        return "NOT CHECKED"
    if not meta.get("ok"):
        return f"FAILED {meta.get('failed_rung')}"
    if meta.get("beaten_by"):
        return f"PASSED, slower than v{meta['beaten_by']}"
    proof = (meta.get("proof") or {}).get("status")
    return "PASSED, re-checked" if proof == "proven" else "PASSED"


def verdict_line(meta: Mapping[str, Any]) -> str:
    """One version's verdict for the engineer: result, time, % of roofline, the rung that
    failed and why, and its notes."""
    n = meta.get("version")
    if meta.get("overfit"):
        result = f"OVERFIT: passes the public shapes, fails unseen ones ({meta.get('unseen_failure', '')})"
    elif meta.get("error"):
        result = f"NOT CHECKED: {meta['error']}"
    elif meta.get("ok"):
        result = "PASSED"
    else:
        reason = str(meta.get("reason") or "").strip().splitlines()
        result = f"FAILED at {meta.get('failed_rung')}" + (f": {reason[0][:160]}" if reason else "")
    perf = performance_of(meta)
    parts = [f"v{n}", result]
    if perf.time_us is not None:
        parts.append(format_time(perf.time_us))
    if perf.roofline is not None:
        parts.append(f"{perf.roofline:.0%} of roofline")
    notes = str(meta.get("notes") or "").strip()
    return "  ".join(parts) + (f"  -- {notes}" if notes else "")


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:,}"


# -- the live view ---------------------------------------------------------------------------


class LiveView:
    """Renders a run's events on a terminal: a live region below, lasting lines above."""

    interactive = False

    def __init__(self, *, verbose: bool = False, file: IO[str] | None = None) -> None:
        from rich.console import Console as RichConsole

        self.verbose = verbose
        self.rich = RichConsole(file=file or sys.stdout, highlight=False)
        self.rows: dict[int, dict[str, Any]] = {}
        self.action = "starting"
        self.round = 0
        self.max_iters: int | None = None
        self.cost: float | None = None
        self.calls = 0
        self.tokens = 0
        self.record: RunRecord | None = None
        self._lock = threading.RLock()
        self.live: Any = None
        self._started = False
        self.closing = False

    # -- lifecycle

    def start(self) -> None:
        from rich.live import Live

        if not self._started:
            self.live = Live(console=self.rich, get_renderable=self.render, refresh_per_second=8,
                             transient=False, redirect_stdout=True, redirect_stderr=True)  # fmt: skip
            self.live.start()
            self._started = True

    def close(self) -> None:
        self.closing = True
        if self._started:
            self.live.refresh()
            self.live.stop()
            self._started = False

    def print(self, text: str, style: str | None = None) -> None:
        from rich.text import Text

        self.rich.print(Text(text, style=style or ""), soft_wrap=True)

    def refresh(self) -> None:
        if self._started:
            self.live.refresh()

    # -- events

    def __call__(self, event: dict[str, Any]) -> None:
        handler = getattr(self, f"_on_{event.get('type')}", None)
        if handler is not None:
            with self._lock:
                handler(event)
            self.refresh()

    def _on_run(self, e: dict[str, Any]) -> None:
        verb = "resuming" if e.get("resumed") else "run"
        self.print(
            f"{verb} {e['id']}  ({e['problem']}, {e['backend']}, {e['model']}, {e['device']})"
        )
        self.print(f"records: {e['path']}")
        self.record = RunRecord(Path(e["path"]))
        self.max_iters = e.get("max_iters")
        self.rows = {int(v["version"]): v for v in self.record.versions()}

    def _on_action(self, e: dict[str, Any]) -> None:
        kind = e.get("action")
        if kind == "model":
            self.round = int(e.get("round") or self.round)
            self.action = "model: writing"
        elif kind == "lookup":
            args = json.dumps(e.get("input"), ensure_ascii=False)
            self.action = f"model: looking up ({e.get('name')} {args[:60]})"
        elif kind == "check":
            self.action = "harness: checking " + ", ".join(f"v{n}" for n in e.get("versions", []))
        elif kind == "recheck":
            self.action = f"harness: re-checking v{e.get('version')} on unseen shapes"

    def _on_request(self, e: dict[str, Any]) -> None:
        self.calls = int(e.get("call") or self.calls)
        self.tokens = int(e.get("total_tokens") or self.tokens)
        if isinstance(e.get("total_cost"), (int, float)) and e.get("cost") is not None:
            self.cost = float(e["total_cost"])
        if self.verbose:
            u = e["usage"]
            self.print(f"  call {e['call']} (round {e['round']}): {u['input_tokens']:,} in, "
                       f"{u['output_tokens']:,} out -> {e['stop_reason']}", "dim")  # fmt: skip

    def _on_tool(self, e: dict[str, Any]) -> None:
        if self.verbose:
            args = json.dumps(e.get("input"), ensure_ascii=False)
            self.print(f"  {e['name']} {args[:120]}", "dim")

    def _on_retry(self, e: dict[str, Any]) -> None:
        self.print(f"  retry {e['attempt']}: {e['error']} -- waiting {e['wait_s']:.1f} s", "yellow")

    def _on_nudge(self, e: dict[str, Any]) -> None:
        self.print(f"  no version this round ({e.get('reason')}); asking again", "dim")

    def _on_version(self, e: dict[str, Any]) -> None:
        meta = {k: v for k, v in e.items() if k not in ("type", "headline")}
        self.rows[int(e["version"])] = meta
        style = "green" if e.get("ok") else "red"
        self.print(verdict_line(meta), style)

    def _on_proof(self, e: dict[str, Any]) -> None:
        meta = e.get("meta") or {}
        if meta:
            self.rows[int(meta["version"])] = meta
        style = "red" if e.get("status") == "overfit" else "cyan"
        self.print("  " + str(e.get("line", "")), style)

    def _on_note(self, e: dict[str, Any]) -> None:
        if e.get("source") != "console":
            self.print(f"  note from {e.get('source')} -> model: {e.get('text')}", "magenta")

    def _on_stop(self, e: dict[str, Any]) -> None:
        self.action = f"stopped: {e.get('reason')}"

    # -- the live region

    def status(self) -> str:
        parts = [self.action]
        if self.round:
            parts.append(
                f"round {self.round}" + (f" of {self.max_iters}" if self.max_iters else "")
            )
        spent = f"${self.cost:.4f}" if self.cost is not None else "cost unknown"
        calls = f"{self.calls} call" + ("" if self.calls == 1 else "s")
        parts.append(f"{spent} ({calls}, {_tokens(self.tokens)} tokens)")
        return "  ·  ".join(parts)

    def render(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
            for name, width in (("v", 4), ("result", 30), ("time", 10), ("%roof", 6)):
                table.add_column(name, no_wrap=True, max_width=width + 8)
            table.add_column("note", no_wrap=True, overflow="ellipsis", ratio=1)
            best = best_of(list(self.rows.values()))
            shown = sorted(self.rows)[-TABLE_ROWS:]
            hidden = len(self.rows) - len(shown)
            for n in shown:
                meta = self.rows[n]
                perf = performance_of(meta)
                mark = "*" if best is not None and best["version"] == n else ""
                word = result_word(meta)
                style = "green" if meta.get("ok") else ("red" if "ok" in meta else "")
                table.add_row(
                    f"{n}{mark}", Text(word, style=style),
                    format_time(perf.time_us) if perf.time_us is not None else "-",
                    f"{perf.roofline:.0%}" if perf.roofline is not None else "-",
                    str(meta.get("notes") or ""),
                )  # fmt: skip
            parts: list[Any] = []
            if hidden:
                parts.append(Text(f"({hidden} earlier versions above)", style="dim"))
            if self.rows:
                parts.append(table)
            parts.append(Text(self.status(), style="bold"))
            parts.extend(self.extra())
            return Group(*parts)

    def extra(self) -> list[Any]:
        return []


# -- the keyboard ---------------------------------------------------------------------------


class KeyReader:
    """Lines typed at the terminal, read by a thread with echo and line editing off (the
    line being typed is ``buffer``, drawn by the view); Enter queues it."""

    def __init__(self, fd: int, on_change: Callable[[], None]) -> None:
        import termios

        self.fd = fd
        self.on_change = on_change
        self.lines: queue.Queue[str] = queue.Queue()
        self.buffer = ""
        self._saved = termios.tcgetattr(fd)
        mode = termios.tcgetattr(fd)
        mode[3] &= ~(termios.ICANON | termios.ECHO)
        mode[6][termios.VMIN] = 1
        mode[6][termios.VTIME] = 0
        termios.tcsetattr(fd, termios.TCSANOW, mode)
        self._closed = False
        threading.Thread(target=self._run, name="keys", daemon=True).start()

    def _run(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        escape = False
        while not self._closed:
            try:
                data = os.read(self.fd, 1024)
            except OSError:
                return
            if not data:
                return
            for ch in decoder.decode(data):
                if escape:  # the rest of an arrow key or other escape sequence
                    escape = not (ch.isalpha() or ch == "~")
                elif ch == "\x1b":
                    escape = True
                elif ch in "\r\n":
                    line, self.buffer = self.buffer, ""
                    self.lines.put(line)
                elif ch in "\x7f\x08":
                    self.buffer = self.buffer[:-1]
                elif ch == "\x15":  # Ctrl-U
                    self.buffer = ""
                elif ch.isprintable():
                    self.buffer += ch
            self.on_change()

    def get(self, timeout: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def pending(self) -> int:
        return self.lines.qsize()

    def close(self) -> None:
        import termios

        if not self._closed:
            self._closed = True
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)


# -- the console ------------------------------------------------------------------------------


class Console(LiveView):
    """The live view plus the keyboard: the reviewer of an interactive run."""

    interactive = True

    def __init__(self, *, verbose: bool = False, fd: int = 0, file: IO[str] | None = None) -> None:
        super().__init__(verbose=verbose, file=file)
        self.waiting = ""
        self.keys = KeyReader(fd, self.refresh)

    def close(self) -> None:
        super().close()
        self.keys.close()

    def extra(self) -> list[Any]:
        from rich.text import Text

        out: list[Any] = []
        if self.closing:
            return out
        queued = self.keys.pending()
        if self.waiting:
            out.append(Text(self.waiting, style="yellow"))
        elif queued:
            out.append(Text(f"{queued} line(s) typed: read after this round", style="yellow"))
        out.append(Text(PROMPT + self.keys.buffer + "_"))
        return out

    # -- the Reviewer protocol (steer.py)

    def review(
        self, agent: Agent, checked: Sequence[dict[str, Any]], stop: tuple[str, str] | None
    ) -> Decision:
        """After a round's versions were checked: wait for the engineer."""
        if stop is not None and stop[0] not in ASKABLE_STOPS:
            return self.poll(agent)  # the run stops whatever is said; --resume continues it
        if stop is not None:
            self.waiting = (f"stop: {stop[0]} -- {stop[1]}. Enter = stop here; "
                            "any text = keep going with that guidance; /help")  # fmt: skip
        else:
            done = ", ".join(f"v{m.get('version')}" for m in checked)
            self.waiting = f"{done} checked. Enter = go on; any text = guidance; /help"
        self.action = "waiting for you"
        self.refresh()
        started = time.monotonic()
        decision = Decision()
        try:
            while True:
                line = self.keys.get(0.25)
                if line is not None and self._handle(agent, parse_line(line), decision):
                    break
        finally:
            self.waiting = ""
            self.action = "model: reading"
        decision.waited_s = time.monotonic() - started
        return decision

    def poll(self, agent: Agent) -> Decision:
        """Lines typed while the model worked, read without waiting."""
        decision = Decision()
        while (line := self.keys.get(0)) is not None:
            if self._handle(agent, parse_line(line), decision) and decision.stop:
                break
        return decision

    # -- commands

    def _handle(self, agent: Agent, cmd: Command, decision: Decision) -> bool:
        """Carry out one typed line; True when it ends the wait (Enter, guidance, /stop)."""
        record = agent.record
        if cmd.kind != "go":
            self.print(PROMPT + (cmd.text if cmd.kind == "note" else _typed(cmd)), "bold")
        if cmd.kind == "go":
            return True
        if cmd.kind == "note":
            decision.notes.append(Note(cmd.text, "console"))
            self.print("  sent to the model as your note, in its next turn", "magenta")
            return True
        if cmd.kind == "stop":
            decision.stop = True
            return True
        if cmd.kind == "error":
            self.print("  " + cmd.text, "yellow")
        elif cmd.kind == "help":
            for usage, what in COMMAND_HELP:
                self.print(f"  {usage:<12} {what}")
        elif cmd.kind == "show":
            self._show(record, cmd.args[0])
        elif cmd.kind == "diff":
            self._diff(record, *cmd.args)
        elif cmd.kind == "best":
            self._best(record)
        elif cmd.kind == "budget":
            for line in budget_lines(agent):
                self.print("  " + line)
        elif cmd.kind == "pin":
            n = cmd.args[0]
            if self._exists(record, n):
                decision.pin, decision.unpin = n, False
                self.print(
                    f"  pinned v{n}: the next versions build on it (/pin off to undo)", "magenta"
                )
        elif cmd.kind == "unpin":
            decision.pin, decision.unpin = None, True
            self.print("  unpinned: the next versions build on the best", "magenta")
        elif cmd.kind == "back":
            n = cmd.args[0]
            if record.conversation(n) is None:
                self.print(f"  no conversation kept for v{n}", "yellow")
            else:
                decision.back = n
                self.print(f"  the model continues from v{n}'s conversation", "magenta")
        return False

    def _exists(self, record: RunRecord, n: int) -> bool:
        if not (record.version_dir(n) / "candidate.py").is_file():
            self.print(f"  no version {n}", "yellow")
            return False
        return True

    def _show(self, record: RunRecord, n: int) -> None:
        if not self._exists(record, n):
            return
        meta = next((v for v in record.versions() if v["version"] == n), {"version": n})
        self.print(f"--- v{n}: {verdict_line(meta)}", "bold")
        self.print(record.source(n).rstrip())
        feedback = record.version_dir(n) / "feedback.txt"
        if feedback.is_file():
            self.print(f"--- v{n} feedback (what the model read)", "bold")
            self.print(feedback.read_text().rstrip())
        proof = meta.get("proof")
        if isinstance(proof, dict):
            from .recheck import Proof

            self.print("--- re-check: " + Proof.from_json(proof).engineer_line(), "bold")

    def _diff(self, record: RunRecord, n: int, m: int | None = None) -> None:
        if m is None:
            best = best_of(record.versions())
            if best is None:
                self.print("  no best version yet: /diff N M", "yellow")
                return
            m = int(best["version"])
        if not (self._exists(record, n) and self._exists(record, m)):
            return
        lines = list(difflib.unified_diff(
            record.source(m).splitlines(), record.source(n).splitlines(),
            fromfile=f"v{m}", tofile=f"v{n}", lineterm="",
        ))  # fmt: skip
        if not lines:
            self.print(f"  v{n} and v{m} are the same")
        for line in lines:
            style = "green" if line.startswith("+") else ("red" if line.startswith("-") else None)
            self.print(line, style)

    def _best(self, record: RunRecord) -> None:
        best = best_of(record.versions())
        if best is None:
            self.print("  no correct version yet")
            return
        self.print("  best: " + verdict_line(best))
        if isinstance(best.get("proof"), dict):
            from .recheck import Proof

            self.print("  " + Proof.from_json(best["proof"]).engineer_line())
        self.print(f"  source: {record.version_dir(best['version']) / 'candidate.py'}")


def _typed(cmd: Command) -> str:
    if cmd.kind == "error":
        return "(?)"
    return "/" + " ".join([cmd.kind if cmd.kind != "unpin" else "pin off", *map(str, cmd.args)])


def budget_lines(agent: Agent) -> list[str]:
    """What a run has spent and what is left, budget by budget."""
    cfg, state, client = agent.config, agent.state, agent.client
    out = [
        f"rounds: {state.rounds} of {cfg.max_iters} ({max(0, cfg.max_iters - state.rounds)} left)"
    ]
    used = client.usage.total
    out.append(
        f"tokens: {used:,}" + (f" of {cfg.token_budget:,}" if cfg.token_budget else " (no budget)")
    )
    cost = f"${client.cost:.4f}" if client.price else "unknown (no price)"
    out.append(
        f"cost: {cost}" + (f" of ${cfg.max_cost:g}" if cfg.max_cost is not None else " (no budget)")
    )
    wall = agent.elapsed_s()
    out.append(f"wall: {wall:.0f} s" + (f" of {cfg.max_wall_s:g} s" if cfg.max_wall_s else " (no budget)")
               + " (time waiting for you not counted)")  # fmt: skip
    out.append(f"no improvement: {state.no_improvement} round(s) of {cfg.patience}")
    return out


__all__ = ["Console", "KeyReader", "LiveView", "budget_lines", "result_word", "verdict_line"]
