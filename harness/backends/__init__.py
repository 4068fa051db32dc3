"""Kernel backends: how a candidate's backend is detected, prepared and held to account.

One module per backend (``triton``, ``cutedsl``, ``cuda_inline``, ``pytorch``). A backend
knows: how to recognise a candidate written for it (its imports), the environment the
worker needs (``TRITON_INTERPRET=1`` on CPU), how to count the kernels a call launched
(so "declared backend triton but no Triton kernel was launched" can be said), and which
exceptions are compile errors. The next issue adds compile artefacts and dumps here.

The worker imports this package too: nothing here may import torch or triton at module
level.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LaunchCounter:
    """Kernel launches seen since the last reset (``None`` total: counting unsupported)."""

    count: int = 0

    def reset(self) -> None:
        self.count = 0


class Backend:
    """Base class; subclasses override what differs."""

    name = "base"
    requires_gpu = False
    # whether a call that launched nothing of this backend is a failure
    enforce_launches = False

    def detect(self, imports: set[str], source: str) -> bool:
        return False

    def worker_env(self, device: str) -> dict[str, str]:
        """Environment variables the worker process needs (set by the parent at spawn)."""
        return {}

    def prepare_worker(self, device: str) -> LaunchCounter | None:
        """Runs in the worker before the candidate is imported; returns a launch counter."""
        return None

    def is_compile_error(self, exc: BaseException) -> bool:
        return False

    def environment(self) -> dict[str, object]:
        """Versions and modes to report (runs in the worker)."""
        return {}


def all_backends() -> list[Backend]:
    from .cuda_inline import CudaInlineBackend
    from .cutedsl import CuteDSLBackend
    from .pytorch import PyTorchBackend
    from .triton import TritonBackend

    # detection order: the most specific first, plain PyTorch last
    return [CuteDSLBackend(), CudaInlineBackend(), TritonBackend(), PyTorchBackend()]


BACKEND_NAMES = ("triton", "cutedsl", "cuda_inline", "torch")


def get_backend(name: str) -> Backend:
    for backend in all_backends():
        if backend.name == name:
            return backend
    raise KeyError(name)


def detect_backend(imports: set[str], source: str) -> str:
    for backend in all_backends():
        if backend.detect(imports, source):
            return backend.name
    return "torch"
