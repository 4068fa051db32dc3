"""The state of an agent run: what it was asked (:class:`AgentConfig`, ``run.json``),
what its rounds leave behind (:class:`LoopState`, ``state.json``), the versions and
conversations of the round in progress (:class:`Pending`, :class:`Branch`), what it ends
with (:class:`RunResult`), and the shapes of the user turns the loop writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from harness import RunOptions

from .client import DEFAULT_MODEL

if TYPE_CHECKING:
    from .check_tool import CheckOutcome
    from .runs import RunRecord


@dataclass
class AgentConfig:
    """Everything a run was asked to do; kept in ``run.json`` for resume."""

    problem: str
    backend: str = "triton"
    model: str = DEFAULT_MODEL
    max_iters: int = 20
    target: float = 0.8
    samples: int = 1
    max_tokens: int = 16000
    temperature: float | None = None
    thinking_budget: int | str | None = None
    max_cost: float | None = None
    max_wall_s: float | None = None
    token_budget: int | None = None
    patience: int = 5
    min_gain: float = 0.03  # a new best must be this much faster (timing noise is ~1-4%)
    device: str | None = None
    trials: int = 3
    check_timeout_s: float = RunOptions.timeout_s  # one home: the check's own default
    context_tokens: int = 100_000
    lookups_per_version: int = 12
    runner: str | None = None  # harness.runners spec; None: local (one sample) or pool
    price: list[float] | None = None  # [input, output] dollars per million tokens
    index_dir: str | None = None
    chroma_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> AgentConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


@dataclass
class LoopState:
    """What a round leaves behind; ``state.json``."""

    system: str
    messages: list[dict[str, Any]]
    rounds: int = 0
    idle_rounds: int = 0
    no_improvement: int = 0
    progress_level: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    calls: int = 0
    retries: int = 0
    wall_s: float = 0.0
    context_tokens: int = 0
    tool_versions: dict[str, int] = field(default_factory=dict)
    device: str = ""
    has_timing: bool = False
    status: str = "running"
    stop_reason: str | None = None
    stop_detail: str = ""
    steer_offset: int = 0  # bytes of steer.md already read
    pinned: int | None = None  # the version the engineer keeps as the base
    target_waived: int | None = None  # the best version the engineer went on past
    notes: int = 0
    waited_s: float = 0.0  # waiting for the engineer: not run time

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LoopState:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


@dataclass
class Pending:
    """A ``check_kernel`` call waiting for its verdict."""

    tool_use_id: str
    source: str
    notes: str
    show: tuple[str, ...]
    sample: int
    version: int = 0
    result: CheckOutcome | None = None
    text: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Branch:
    """One sample's conversation in a round, up to the model's submission."""

    sample: int
    messages: list[dict[str, Any]]
    results: list[dict[str, Any]] = field(default_factory=list)  # for the last assistant turn
    candidates: list[Pending] = field(default_factory=list)
    ended: str | None = None  # why it stopped without a version
    error: str | None = None


@dataclass
class RunResult:
    record: RunRecord
    summary: dict[str, Any]

    @property
    def best(self) -> dict[str, Any] | None:
        best = self.summary.get("best")
        return best if isinstance(best, dict) else None


def continuation(branch: Branch, note: str) -> list[dict[str, Any]]:
    """The branch's conversation followed by the user turn that answers its last
    assistant turn: every tool result (the checked versions' verdicts) and the note."""
    done = {r["tool_use_id"]: r for r in branch.results}
    for cand in branch.candidates:
        done[cand.tool_use_id] = tool_result(cand.tool_use_id, cand.text, False)
    last = branch.messages[-1]["content"]
    content = [done[b["id"]] for b in last if b.get("type") == "tool_use" and b["id"] in done]
    content.append({"type": "text", "text": note})
    return [*branch.messages, {"role": "user", "content": content}]


def tool_result(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": text,
        "is_error": is_error,
    }


def append_text(message: dict[str, Any], text: str) -> None:
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = [{"type": "text", "text": content}]
    message["content"].append({"type": "text", "text": text})


__all__ = [
    "AgentConfig",
    "Branch",
    "LoopState",
    "Pending",
    "RunResult",
    "append_text",
    "continuation",
    "tool_result",
]


class RunningAgent(Protocol):
    """What steering and the re-check of a best need of the running agent (``loop.Agent``
    is one): its state and record, its event sink, the turn the model reads next."""

    state: LoopState
    record: RunRecord
    prover: Any  # recheck.Prover

    def emit(self, event: dict[str, Any]) -> None: ...

    def say(self, text: str) -> None: ...

    def save(self) -> None: ...

    def add_wait(self, seconds: float) -> None: ...
