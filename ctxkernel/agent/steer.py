"""Steering: what the engineer says to a run, and how it reaches the model.

An agent run is guided, not left alone. The engineer's words arrive between rounds from
three places, and go to the model the same way, as the engineer's words (marked so in the
next user turn and kept as ``note`` events in the transcript):

- ``--note TEXT`` on ``ctxkernel agent --resume RUN`` (the first user turn of the session);
- ``runs/agent/RUN/steer.md``: text appended while the run is going, one note per
  paragraph (a paragraph is read once its line is complete; HTML comments are skipped);
- the interactive console (``--interactive``, ``console.py``): a line typed after a
  verdict or while the model works, and the commands ``/pin``, ``/back``, ``/stop``.

:class:`Steering` is the loop's one seam for all of it: ``begin`` when a session starts,
``between`` after every round. Each returns a :class:`Decision` (notes, a version to pin
or go back to, a stop) that the loop applies. :func:`parse_line` turns a typed line into
a :class:`Command`; the console executes the ones that only show things.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .state import RunningAgent as Agent

STEER_FILE = "steer.md"
SOURCES = ("--note", "steer.md", "console")
# stops the engineer may overrule by saying something: the loop keeps going
ASKABLE_STOPS = ("target", "no-improvement")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n")

STEER_HEADER = """\
<!-- Notes for this run's model, one per paragraph (separate them with a blank line).
     Append while the run is going: each is read between rounds and sent as the
     engineer's words. `ctxkernel runs show RUN` lists them. -->
"""


@dataclass
class Note:
    """One thing the engineer said."""

    text: str
    source: str  # one of SOURCES
    arrived: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "source": self.source,
            "arrived": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.arrived)),
        }


@dataclass
class Decision:
    """What the loop does with what the engineer said between two rounds."""

    notes: list[Note] = field(default_factory=list)
    pin: int | None = None  # keep this version as the base
    unpin: bool = False
    back: int | None = None  # continue from this version's conversation
    stop: bool = False
    waited_s: float = 0.0  # time spent waiting for the engineer (not counted as run time)

    @property
    def steers(self) -> bool:
        """The engineer asked for something the model should act on."""
        return bool(self.notes) or self.pin is not None or self.back is not None

    def merge(self, other: Decision) -> Decision:
        """Both, in order: the later pin, unpin or back wins."""
        return Decision(
            notes=[*self.notes, *other.notes],
            pin=other.pin if other.pin is not None else (None if other.unpin else self.pin),
            unpin=other.unpin or (self.unpin and other.pin is None),
            back=other.back if other.back is not None else self.back,
            stop=self.stop or other.stop,
            waited_s=self.waited_s + other.waited_s,
        )


# -- typed lines -------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One line typed at the console: ``go`` (Enter), ``note`` (any other text), a
    command (``show``, ``diff``, ``best``, ``pin``, ``unpin``, ``back``, ``budget``,
    ``stop``, ``help``) or ``error`` (with the message in ``text``)."""

    kind: str
    args: tuple[int, ...] = ()
    text: str = ""


COMMAND_HELP = [
    ("Enter", "go on"),
    ("any text", "guidance: sent to the model in its next turn as your words"),
    ("/show N", "version N's source and feedback"),
    ("/diff N [M]", "version N against the best (or against M)"),
    ("/best", "the best version so far"),
    ("/pin N", "keep version N as the base the model continues from (/pin off: unpin)"),
    ("/back N", "continue from version N's conversation"),
    ("/budget", "what is spent and what is left"),
    ("/stop", "stop the run here"),
    ("/help", "this list"),
]
_ARITY = {"show": (1, 1), "diff": (1, 2), "best": (0, 0), "pin": (1, 1), "back": (1, 1),
          "budget": (0, 0), "stop": (0, 0), "help": (0, 0)}  # fmt: skip


def parse_line(line: str) -> Command:
    text = line.strip()
    if not text:
        return Command("go")
    if not text.startswith("/"):
        return Command("note", text=text)
    if text.startswith("//"):  # a note that starts with a slash
        return Command("note", text=text[1:])
    name, *words = text[1:].split()
    name = name.lower()
    if name == "pin" and words in (["off"], ["none"]):
        return Command("unpin")
    if name == "quit":
        name = "stop"
    if name not in _ARITY:
        return Command("error", text=f"unknown command /{name} (/help lists them)")
    low, high = _ARITY[name]
    if not low <= len(words) <= high:
        usage = next(u for u, _ in COMMAND_HELP if u.startswith(f"/{name}"))
        return Command("error", text=f"usage: {usage}")
    try:
        numbers = tuple(int(w.lstrip("v")) for w in words)
    except ValueError:
        return Command("error", text=f"/{name}: versions are numbers (v3 or 3)")
    return Command(name, numbers)


# -- steer.md ------------------------------------------------------------------------------


def read_paragraphs(path: Path, offset: int) -> tuple[list[str], int]:
    """Complete paragraphs of ``path`` after byte ``offset``, and the offset after them.

    A paragraph is complete when a blank line follows it, or when the file ends with a
    newline (so a note appended with ``echo "..." >> steer.md`` is read at once, and a
    half-written line is left for the next read)."""
    try:
        data = path.read_bytes()
    except OSError:
        return [], offset
    if len(data) < offset:  # the file was replaced: read it from the start
        offset = 0
    text = data[offset:].decode("utf-8", errors="replace")
    if not text:
        return [], offset
    if text.endswith("\n"):
        complete = text
    else:
        ends = list(_PARAGRAPH_END.finditer(text))
        if not ends:
            return [], offset
        complete = text[: ends[-1].end()]
    consumed = offset + len(complete.encode("utf-8"))
    paragraphs = []
    for chunk in _PARAGRAPH_END.split(_COMMENT.sub("", complete)):
        words = " ".join(line.strip() for line in chunk.strip().splitlines()).strip()
        if words:
            paragraphs.append(words)
    return paragraphs, consumed


# -- the seam --------------------------------------------------------------------------------


class Reviewer(Protocol):
    """The interactive side (the console): shows each round's verdicts and waits."""

    def review(self, agent: Agent, checked: Sequence[dict[str, Any]],
               stop: tuple[str, str] | None) -> Decision: ...  # fmt: skip

    def poll(self, agent: Agent) -> Decision: ...


class Steering:
    """Where the engineer's words come from: ``--note`` once, ``steer.md`` always, and a
    :class:`Reviewer` (the console) in an interactive session."""

    def __init__(self, notes: Sequence[str] = (), reviewer: Reviewer | None = None) -> None:
        self.pending = [Note(n.strip(), "--note") for n in notes if n.strip()]
        self.reviewer = reviewer

    @property
    def interactive(self) -> bool:
        return self.reviewer is not None

    def begin(self, agent: Agent) -> Decision:
        """At the start of a session: the ``--note`` notes, then steer.md's new paragraphs."""
        decision = Decision(notes=self.pending)
        self.pending = []
        return decision.merge(self._file(agent))

    def between(
        self, agent: Agent, checked: Sequence[dict[str, Any]], stop: tuple[str, str] | None
    ) -> Decision:
        """After a round (``checked``: the versions it checked, maybe none; ``stop``: the
        stop the loop would make now)."""
        decision = self._file(agent)
        if self.reviewer is not None:
            if checked:
                decision = decision.merge(self.reviewer.review(agent, checked, stop))
            else:
                decision = decision.merge(self.reviewer.poll(agent))
        return decision

    def _file(self, agent: Agent) -> Decision:
        path = agent.record.path / STEER_FILE
        paragraphs, agent.state.steer_offset = read_paragraphs(path, agent.state.steer_offset)
        return Decision(notes=[Note(p, "steer.md") for p in paragraphs])


# -- applying a decision ---------------------------------------------------------------------


def apply_decision(
    agent: Agent, decision: Decision, stop: tuple[str, str] | None
) -> tuple[str, str] | None:
    """Carry out what the engineer said between two rounds; the stop that still holds
    (a note keeps a run going past ``target`` or ``no-improvement``)."""
    from .runs import best_of

    state, record = agent.state, agent.record
    agent.add_wait(decision.waited_s)
    if decision.stop:
        record.log({"type": "steer", "action": "stop"})
        return ("engineer", "stopped by the engineer (/stop)")
    changed = False
    if decision.back is not None:
        changed = _go_back(agent, decision.back) or changed
    if decision.unpin and state.pinned is not None:
        record.log({"type": "steer", "action": "unpin", "version": state.pinned})
        state.pinned, changed = None, True
    if decision.pin is not None:
        changed = _pin(agent, decision.pin) or changed
    for note in decision.notes:
        _deliver(agent, note)
        changed = True
    if stop is not None and stop[0] in ASKABLE_STOPS and decision.steers:
        best = best_of(record.versions())
        if stop[0] == "target" and best is not None:
            state.target_waived = int(best["version"])
        state.no_improvement = 0
        record.log({"type": "steer", "action": "continue", "stop": stop[0]})
        stop = None
    if changed:
        agent.save()
    return stop


def _deliver(agent: Agent, note: Note) -> None:
    from .prompt import engineer_note

    agent.say(engineer_note(note.text))
    agent.state.notes += 1
    versions = agent.record.versions()
    event = {"type": "note", **note.to_json(), "round": agent.state.rounds,
             "after_version": versions[-1]["version"] if versions else 0}  # fmt: skip
    agent.record.log(event)
    agent.emit(event)


def _pin(agent: Agent, n: int) -> bool:
    from .prompt import engineer_note

    try:
        source = agent.record.source(n)
    except OSError:
        return False
    agent.state.pinned = n
    agent.say(engineer_note(f"Keep version {n} as the base: build your next versions on it, "
                            f"not on the latest one. Version {n}:")
              + "\n```python\n" + source.rstrip() + "\n```")  # fmt: skip
    agent.record.log({"type": "steer", "action": "pin", "version": n})
    agent.emit({"type": "steer", "action": "pin", "version": n})
    return True


def _go_back(agent: Agent, n: int) -> bool:
    from .prompt import engineer_note

    messages = agent.record.conversation(n)
    if messages is None:
        return False
    agent.state.messages = messages
    agent.say(engineer_note(f"We are back at version {n}: continue from here. The versions "
                            "written after it are kept; their numbering goes on."))  # fmt: skip
    agent.record.log({"type": "steer", "action": "back", "version": n})
    agent.emit({"type": "steer", "action": "back", "version": n})
    return True


__all__ = [
    "ASKABLE_STOPS",
    "COMMAND_HELP",
    "STEER_FILE",
    "STEER_HEADER",
    "Command",
    "Decision",
    "Note",
    "Reviewer",
    "Steering",
    "apply_decision",
    "parse_line",
    "read_paragraphs",
]
