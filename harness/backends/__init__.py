"""Kernel backends and their registry: the one list every backend choice reads.

One module per backend, each a ``Backend`` subclass (``base.py`` says what a backend
declares) with its prompt primer in ``<module>_primer.md`` beside it; a backend may keep
helpers in modules of its own (``triton_aot.py``). ``REGISTRY`` below is the list:
detection tries it in order (the most specific first, plain PyTorch last), and the CLI's
``--backend`` choices, the worker's hooks, the static scan's kernel decorators, the
guards' allowances, the scrubbed environment's cache folders and the agent's primers all
come from it. Adding a backend is a module (and its primer), a line here, an example, a
corpus file and an extra in ``pyproject.toml``.

The worker imports this package too: nothing here may import torch or a DSL at module level.
"""

from __future__ import annotations

from pathlib import Path

from .base import Backend, DumpPlan, File, LaunchCounter, parse_target
from .cuda_inline import CudaInlineBackend
from .cutedsl import CuteDSLBackend
from .pytorch import PyTorchBackend
from .tilelang import TileLangBackend
from .triton import TritonBackend

REGISTRY: tuple[Backend, ...] = (
    CuteDSLBackend(),
    TileLangBackend(),
    CudaInlineBackend(),
    TritonBackend(),
    PyTorchBackend(),
)
DEFAULT_BACKEND = "torch"  # what a candidate that matches no other backend is

__all__ = [
    "DEFAULT_BACKEND",
    "REGISTRY",
    "Backend",
    "DumpPlan",
    "File",
    "LaunchCounter",
    "all_backends",
    "allowed_programs",
    "backend_names",
    "cache_env",
    "code_rewriters",
    "detect_backend",
    "env_passthrough",
    "get_backend",
    "jit_decorators",
    "module_names",
    "parse_target",
    "protected_classes",
    "protected_modules",
    "protected_names",
    "snapshot_imports",
    "tool_dirs",
    "worker_env_for",
]


def all_backends() -> tuple[Backend, ...]:
    return REGISTRY


def backend_names() -> list[str]:
    """The names ``--backend`` accepts, in registry order."""
    return [backend.name for backend in REGISTRY]


def get_backend(name: str) -> Backend:
    for backend in REGISTRY:
        if backend.name == name:
            return backend
    raise KeyError(name)


def detect_backend(imports: set[str], source: str) -> str:
    for backend in REGISTRY:
        if backend.detect(imports, source):
            return backend.name
    return DEFAULT_BACKEND


def worker_env_for(name: str, device: str, dump: bool = False) -> dict[str, str]:
    """The worker's extra environment for a backend; with ``dump`` also what makes the
    backend keep its artefacts. Every runner spawns workers with this."""
    backend = get_backend(name)
    env = dict(backend.worker_env(device))
    if dump:
        env["CTXKERNEL_DUMP"] = "1"
        env.update(backend.dump_env())
    return env


def cache_env(home: Path) -> dict[str, str]:
    """Every backend's cache folders under ``home`` (the scrubbed environment's)."""
    env: dict[str, str] = {}
    for backend in REGISTRY:
        env.update(backend.cache_env(home))
    return env


def env_passthrough() -> set[str]:
    """Parent environment variables any backend needs in the worker."""
    return {key for backend in REGISTRY for key in backend.env_passthrough}


def jit_decorators() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(decorator names, decorator prefixes) that mark kernel code, over all backends."""
    names = tuple(d for backend in REGISTRY for d in backend.jit_decorators)
    prefixes = tuple(p for backend in REGISTRY for p in backend.jit_prefixes)
    return names, prefixes


def module_names() -> set[str]:
    """Top-level modules of every backend (a candidate file may not shadow them)."""
    return {module for backend in REGISTRY for module in backend.modules}


def snapshot_imports(source: str, declared: str) -> list[str]:
    """Modules to import before the guards go on because the candidate mentions another
    backend (so what it could patch there is in the identity snapshot)."""
    out: list[str] = []
    for backend in REGISTRY:
        if backend.name != declared and any(m in source for m in backend.modules):
            out.extend(backend.snapshot_imports)
    return out


def protected_names() -> list[str]:
    """Callables of any backend the identity snapshot watches."""
    return [name for backend in REGISTRY for name in backend.protected_names]


def protected_modules() -> list[str]:
    return [name for backend in REGISTRY for name in backend.protected_modules]


def protected_classes() -> list[tuple[str, str]]:
    return [pair for backend in REGISTRY for pair in backend.protected_classes]


def code_rewriters() -> tuple[str, ...]:
    """Path fragments of backend compilers allowed to swap a function's ``__code__``."""
    return tuple(path for backend in REGISTRY for path in backend.code_rewriters)


def allowed_programs() -> frozenset[str]:
    """Programs backends run besides the common compilers."""
    return frozenset(p for backend in REGISTRY for p in backend.allowed_programs)


def tool_dirs() -> list[Path]:
    """Folders of CUDA binary tools the backends' packages ship."""
    return [d for backend in REGISTRY for d in backend.tool_dirs()]
