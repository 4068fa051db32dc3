"""The state of an agent run: what it was asked (:class:`AgentConfig`, ``run.json``),
what its rounds leave behind (:class:`LoopState`, ``state.json``), the versions and
conversations of the round in progress (:class:`Pending`, :class:`Branch`), what it ends
with (:class:`RunResult`), and the shapes of the user turns the loop writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from harness import RunOptions, envvars
from harness.optionspec import option

from .client import DEFAULT_MODEL, ModelSettings, Price, thinking_param

if TYPE_CHECKING:
    from .check_tool import CheckOutcome
    from .runs import RunRecord


def _backends() -> list[str]:
    from harness import backend_names  # the harness's backend registry

    return backend_names()


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``2h`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match:
        raise ValueError(f"--max-wall: expected seconds or 30m / 2h, got {text!r}")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def _price(text: str) -> list[float]:
    price = Price.parse(text)
    return [price.input, price.output]


def _thinking_budget(text: str) -> int | str:
    thinking_param(text)  # validate now, not at the first call
    return text if text == "adaptive" else int(text)


@dataclass
class AgentConfig:
    """Everything a run was asked to do; kept in ``run.json`` for resume. The fields a
    command line sets carry their flag (``optionspec.option``): ``ctxkernel agent`` and
    ``ctxkernel context init`` generate their options from them, defaults included."""

    problem: str
    backend: str = field(
        default="triton",
        metadata=option(
            "--backend",
            choices=_backends,
            help="The backend the kernel is written in (declared to the harness).",
        ),
    )
    model: str = field(
        default=DEFAULT_MODEL,
        metadata=option(
            "--model",
            envvar=envvars.CTXKERNEL_MODEL.name,
            metavar="ID",
            help="Claude model id (env CTXKERNEL_MODEL).",
        ),
    )
    max_iters: int = field(
        default=20,
        metadata=option(
            "--max-iters",
            low=1,
            help="Rounds that submit versions (each round: --samples versions).",
        ),
    )
    target: float = field(
        default=0.8,
        metadata=option(
            "--target",
            low=0.0,
            high=1.0,
            help="Stop when the best correct version reaches this fraction of the roofline.",
        ),
    )
    samples: int = field(
        default=1,
        metadata=option(
            "--samples",
            low=1,
            high=16,
            help="Independent versions per round, checked concurrently.",
        ),
    )
    max_tokens: int = field(
        default=ModelSettings.max_tokens,
        metadata=option("--max-tokens", low=256, help="max_tokens of each response."),
    )
    temperature: float | None = field(
        default=None,
        metadata=option(
            "--temperature",
            low=0.0,
            high=1.0,
            help="Sampling temperature (not sent with thinking).",
        ),
    )
    thinking_budget: int | str | None = field(
        default=None,
        metadata=option(
            "--thinking-budget",
            parse=_thinking_budget,
            metavar="N|adaptive",
            help="Extended thinking: a token budget >= 1024, or 'adaptive'.",
        ),
    )
    max_cost: float | None = field(
        default=None,
        metadata=option(
            "--max-cost",
            low=0.0,
            metavar="USD",
            help="Stop when the run has cost this many dollars.",
        ),
    )
    max_wall_s: float | None = field(
        default=None,
        metadata=option(
            "--max-wall",
            parse=parse_duration,
            metavar="DURATION",
            help="Stop after this much wall time for the run (90, 30m, 2h).",
        ),
    )
    token_budget: int | None = field(
        default=None,
        metadata=option(
            "--token-budget",
            low=1,
            metavar="N",
            help="Stop when the run has used this many tokens (input + output + cache).",
        ),
    )
    patience: int = field(
        default=5,
        metadata=option(
            "--patience", low=1, help="Stop after this many rounds without improvement."
        ),
    )
    min_gain: float = 0.03  # a new best must be this much faster (timing noise is ~1-4%)
    device: str | None = field(
        default=None,
        metadata=option(
            "--device",
            choices=("cpu", "cuda"),
            help="Where candidates run (default: cuda when present).",
        ),
    )
    runner: str | None = field(  # harness.runners spec; None: local (one sample) or pool
        default=None,
        metadata=option(
            "--runner",
            metavar="SPEC",
            help="Where candidates are checked: local, pool, ssh://host, ray (default: "
            "local, or pool with --samples > 1; see `ctxkernel check --help`). With a "
            "remote runner pass --device cuda.",
        ),
    )
    trials: int = field(  # one home: the check's own default
        default=RunOptions.trials,
        metadata=option(
            "--seeds", low=1, high=100, help="Trials (fresh inputs) per shape in each check."
        ),
    )
    check_timeout_s: float = field(  # one home: the check's own default
        default=RunOptions.timeout_s,
        metadata=option(
            "--check-timeout",
            low=1.0,
            help="Seconds per harness worker request (as `check --timeout`).",
        ),
    )
    context_tokens: int = field(
        default=100_000,
        metadata=option(
            "--context-tokens",
            low=4000,
            help="Trim old turns when the conversation grows past this.",
        ),
    )
    price: list[float] | None = field(  # [input, output] dollars per million tokens
        default=None,
        metadata=option(
            "--price",
            parse=_price,
            metavar="IN,OUT",
            help="Dollars per million input,output tokens (default: the model's list price).",
        ),
    )
    lookups_per_version: int = field(
        default=12,
        metadata=option(
            "--lookups",
            low=1,
            help="Tool calls in a round before the model is told to submit a version.",
        ),
    )
    index_dir: str | None = None  # the command line's shared --index-dir and --chroma-url
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
