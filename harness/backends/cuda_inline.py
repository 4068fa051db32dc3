"""CUDA C++ through ``torch.utils.cpp_extension.load_inline``/``load``.

Launch counting wraps the loaders so every function of the extension module they return
counts its calls. Build failures (``RuntimeError: Error building extension``) are compile
errors. With ``CTXKERNEL_KEEP_NVCC=1`` (dumps) the loaders add ``nvcc -keep`` so the PTX
and CUBIN intermediates stay in ``keep_dir()`` (``$HOME/nvcc-keep``, in the worker's temp
dir); artefacts are those, the source and the built extension (``cuobjdump`` reads SASS
from it), from the keep dir and ``TORCH_EXTENSIONS_DIR``. The first build takes about a
minute (~51 s seen on an H200): the load request gets ``min_compile_timeout_s``. Traces go
through the ``ck_trace`` header.
"""

from __future__ import annotations

import functools
import os
import types
from pathlib import Path
from typing import Any

from .. import envvars
from .base import Backend, File, LaunchCounter

KINDS = ("ptx", "cubin", "cu", "so")
MAX_SO_BYTES = 48 << 20


class CudaInlineBackend(Backend):
    name = "cuda_inline"
    template_imports = ("torch.utils.cpp_extension",)
    compile_hooks = (
        "torch.utils.cpp_extension:load_inline",
        "torch.utils.cpp_extension:load",
    )  # timed apart from run time (harness/worker/jitclock.py)
    label = "CUDA extension"
    requires_gpu = True
    enforce_launches = True
    own_kernel_names = "defined"
    min_compile_timeout_s = 600.0
    trace_recorder = "ck_trace"

    def detect(self, imports: set[str], source: str) -> bool:
        return "load_inline" in source or any(
            name.startswith("torch.utils.cpp_extension") for name in imports
        )

    def cache_env(self, home: Path) -> dict[str, str]:
        return {"TORCH_EXTENSIONS_DIR": str(home / ".torch-extensions")}

    def dump_env(self) -> dict[str, str]:
        return {"CTXKERNEL_KEEP_NVCC": "1"}

    def collect_artifacts(
        self, target: str | None, notes: list[str], launches: list[dict[str, Any]] | None
    ) -> list[File]:
        return _collect(notes)

    def prepare_worker(self, device: str) -> LaunchCounter | None:
        try:
            import torch.utils.cpp_extension as cpp_extension
        except ImportError:
            return None
        counter = LaunchCounter()
        for name in ("load_inline", "load"):
            original = getattr(cpp_extension, name, None)
            if original is not None and not getattr(original, "_ctxkernel_counted", False):
                setattr(cpp_extension, name, _counting_loader(original, counter))
        return counter

    def is_compile_error(self, exc: BaseException) -> bool:
        text = str(exc)
        return "Error building extension" in text or (
            "ninja" in text.lower() and "failed" in text.lower()
        )


def keep_dir() -> str | None:
    if not envvars.CTXKERNEL_KEEP_NVCC.get():
        return None
    return os.path.join(os.environ.get("HOME", "."), "nvcc-keep")


def _keep_flags(kwargs: dict[str, Any]) -> dict[str, Any]:
    keep = keep_dir()
    if not keep:
        return kwargs
    os.makedirs(keep, exist_ok=True)
    flags = list(kwargs.get("extra_cuda_cflags") or [])
    flags += ["-keep", "--keep-dir", keep]
    return {**kwargs, "extra_cuda_cflags": flags}


def _counting_loader(original: Any, counter: LaunchCounter) -> Any:
    @functools.wraps(original)
    def load(*args: Any, **kwargs: Any) -> Any:
        module = original(*args, **_keep_flags(kwargs))
        if not isinstance(module, types.ModuleType):
            return module
        proxy = types.ModuleType(module.__name__)
        for attr in dir(module):
            value = getattr(module, attr)
            if callable(value) and not attr.startswith("_"):
                setattr(proxy, attr, _counted(value, counter))
            else:
                setattr(proxy, attr, value)
        return proxy

    load._ctxkernel_counted = True  # type: ignore[attr-defined]
    return load


def _counted(fn: Any, counter: LaunchCounter) -> Any:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        counter.count += 1
        return fn(*args, **kwargs)

    return call


def _collect(notes: list[str]) -> list[File]:
    files: list[File] = []
    seen: set[str] = set()
    for root in (keep_dir(), os.environ.get("TORCH_EXTENSIONS_DIR")):
        if not root or not os.path.isdir(root):
            continue
        for path in sorted(Path(root).rglob("*")):
            kind = path.suffix.lstrip(".")
            if not path.is_file() or kind not in KINDS or path.name in seen:
                continue
            if kind == "so" and path.stat().st_size > MAX_SO_BYTES:
                continue
            seen.add(path.name)
            stem = path.name.split(".")[0]
            files.append(
                (
                    {
                        "name": path.name,
                        "kernel": stem,
                        "version": path.parent.name[:24],
                        "kind": kind,
                    },
                    path.read_bytes(),
                )
            )
    if not files:
        notes.append("no CUDA extension build found in the worker")
    return files
