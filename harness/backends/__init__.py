"""Kernel backends: how a candidate's backend is detected, prepared and held to account.

One module per backend (``triton``, ``cutedsl``, ``cuda_inline``, ``pytorch``). A backend
knows: how to recognise a candidate written for it (its imports), the environment the
worker needs (``TRITON_INTERPRET=1`` on CPU), how to count the kernels a call launched
(so "declared backend triton but no Triton kernel was launched" can be said), and which
exceptions are compile errors. ``worker_env_for`` adds what dumps need (launch recording
for ahead-of-time Triton compiles, ``CUTE_DSL_KEEP``, ``nvcc -keep``); artefacts are
collected in the worker by ``harness/artifacts.py``.

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
    # the load request (imports, builds) gets at least this long
    min_compile_timeout_s = 0.0

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


def worker_env_for(name: str, device: str, dump: bool = False) -> dict[str, str]:
    """The worker's extra environment for a backend; with ``dump`` also what makes the
    backend keep its artefacts. Every runner spawns workers with this."""
    env = dict(get_backend(name).worker_env(device))
    if dump:
        env["CTXKERNEL_DUMP"] = "1"
        env["CTXKERNEL_RECORD_LAUNCHES"] = "1"
        env["CTXKERNEL_KEEP_NVCC"] = "1"
    return env


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
