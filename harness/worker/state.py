"""``WorkerState``: what a request handler beside the serve loop may read and set.

The handlers of ``bench``, ``bench_sample``, ``identity``, ``ceilings``, ``artifacts``
(``benchworker.py``) and ``trace`` (``tracing/collect.py``) are given the worker through
this interface, so they need nothing of ``serve.py`` (which imports them for its op table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from .guards import OpRecorder
    from .timing import Bench


class WorkerState(Protocol):
    """The worker's state a handler uses (``serve.Worker`` has it)."""

    workdir: str
    device: str
    backend_name: str
    subject: str  # "candidate", or "reference" in a harness-only worker
    problem: Any
    entry: Any
    entry_kind: str
    compile_reference: bool
    library_operands: tuple[int, int] | None  # time torch.matmul of these input leaves
    guard: Any
    recorder: OpRecorder | None
    forbidden_aten: set[str]
    forbidden_functions: set[str]
    reported_patches: set[str]
    bench: Bench | None
    bench_findings: set[str]
    kept: dict[int, Any]
    dead: bool

    def get_entry(self, init: dict[str, Any] | None, tensors: list[torch.Tensor]) -> Any: ...

    def describe_error(self, exc: BaseException, phase: str, backend: Any) -> dict[str, Any]: ...

    def integrity(self) -> list[dict[str, str]]: ...
