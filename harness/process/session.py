"""The ladder's view of a worker: ``WorkerSession`` (``request`` / ``close`` / ``logs``), its
``Reply``, and ``WorkerGone`` when it died or was killed.

A local process (``local.LocalSession``), a pool slot, an SSH host or a Ray actor: the
rungs talk to any of them through this protocol only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch


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
