"""The ladder's view of a worker: ``WorkerSession`` (``request`` / ``close`` / ``logs``), its
``Reply``, and ``WorkerGone`` when it died or was killed.

A local process (``local.LocalSession``), a pool slot, an SSH host or a Ray actor: the
rungs talk to any of them through this protocol only.

``malformed(header)`` says what is wrong with a reply's header, where the session receives
it: every field the parent reads (the integrity findings, the call records, the error)
must have the type the worker's own code gives it. The worker shares its process with the
candidate, which may change what the worker answers or write onto the channel itself;
such a reply ends the worker as a corrupted channel (a failed verdict naming it), never
an exception in a rung or in the ladder's goodbye.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch


_NUMBER = (int, float)


def _list_of(value: Any, kinds: type | tuple[type, ...]) -> bool:
    return isinstance(value, list) and all(isinstance(v, kinds) for v in value)


def _table(value: Any) -> bool:
    """A ``{name: number}`` table (op counts, seconds, elements)."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, _NUMBER) for k, v in value.items()
    )


# the reply fields the parent reads, each with the type the worker's own code gives it
# (absent or null is always allowed: not every reply has every field)
_HEADER_FIELDS: dict[str, Any] = {
    "ok": lambda v: isinstance(v, bool),
    "op": lambda v: isinstance(v, str),
    "stage": lambda v: isinstance(v, str),
    "env": lambda v: isinstance(v, dict),
    "error": lambda v: (
        isinstance(v, dict) and (v.get("frames") is None or _list_of(v.get("frames"), dict))
    ),
    "harness_error": lambda v: isinstance(v, str),
    "integrity": lambda v: (
        isinstance(v, list)
        and all(
            isinstance(item, dict)
            and isinstance(item.get("message"), str)
            and isinstance(item.get("kind", ""), str)
            for item in v
        )
    ),
    "calls": lambda v: _list_of(v, dict),
    "import_s": lambda v: isinstance(v, _NUMBER),
}
_CALL_FIELDS: dict[str, Any] = {
    "forbidden": lambda v: _list_of(v, str),
    "compiled_forbidden": lambda v: _list_of(v, str),
    "own_kernels": lambda v: _list_of(v, str),
    "generated_kernels": lambda v: _list_of(v, str),
    "kernels": lambda v: _list_of(v, dict),
    "aten": _table,
    "aten_s": _table,
    "aten_elements": _table,
    "host_elements": _table,
    "changed_after_return": lambda v: _list_of(v, int),
    "earlier_changed": lambda v: _list_of(v, int),
    "launches": lambda v: isinstance(v, int),
    "call_no": lambda v: isinstance(v, int),
    "input_elements": lambda v: isinstance(v, int),
    "elapsed_s": lambda v: isinstance(v, _NUMBER),
    "settle_s": lambda v: isinstance(v, _NUMBER),
    "output": lambda v: isinstance(v, dict),
}


def malformed(header: dict[str, Any]) -> str | None:
    """What is wrong with a reply's header (``integrity[0] is int``), None when nothing is."""
    for name, ok in _HEADER_FIELDS.items():
        value = header.get(name)
        if value is not None and not ok(value):
            return f"its {name!r} field is {_shape(value)}"
    for index, call in enumerate(header.get("calls") or []):
        for name, ok in _CALL_FIELDS.items():
            value = call.get(name)
            if value is not None and not ok(value):
                return f"its calls[{index}][{name!r}] field is {_shape(value)}"
    return None


def _shape(value: Any) -> str:
    if isinstance(value, list):
        odd = [type(v).__name__ for v in value if not isinstance(v, dict)][:1]
        return f"a list holding {odd[0]}" if odd else "a list of the wrong items"
    if isinstance(value, dict):
        return "an object of the wrong items"
    return f"of type {type(value).__name__}"


class WorkerGone(Exception):
    """The worker is dead or was killed; ``reason`` says how, ``detail`` what it printed."""

    def __init__(self, reason: str, detail: str = "", returncode: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.returncode = returncode


@dataclass
class Reply:
    header: dict[str, Any]
    tensors: list[torch.Tensor] = field(default_factory=list)


class WorkerSession(Protocol):
    """What the ladder needs from a worker, wherever it runs."""

    def request(
        self,
        header: dict[str, Any],
        tensors: Sequence[torch.Tensor],
        timeout_s: float,
        max_reply_bytes: int,
    ) -> Reply: ...

    def close(self) -> dict[str, Any]: ...

    @property
    def logs(self) -> dict[str, Path]: ...
