"""TileLang (``tilelang``, ``pip install 'ctxkernel[tilelang]'``): tile programs lowered to CUDA.

A candidate writes ``@tilelang.jit`` kernels (``T.prim_func`` bodies, or the eager form)
whose ``T.Kernel`` blocks use shared-memory tiles, fragments, ``T.copy`` (TMA or cp.async)
and ``T.gemm`` (``wgmma`` on sm_90); TileLang generates CUDA C++, builds it with nvcc and
calls it through a ``JITKernel``. Needs a CUDA GPU: TileLang's CPU target (``c``) lowers
only the simplest loops (no shared memory, fragments or ``T.gemm``), so a GPU kernel does
not run there and a CPU check stops at the compile rung with that reason.

In the worker, before the candidate is imported (``import tilelang`` takes seconds and
sets environment variables: not under the guards): ``JITKernel.__call__`` -- every launch
of a compiled kernel, lazy or eager -- counts launches, and every ``JITKernel`` built is
remembered (``CAPTURED``). Artefacts per kernel: the generated CUDA source
(``get_kernel_source``), and PTX and CUBIN built from that source by TileLang's own nvcc
helper with its default options for the kernel's target (``tilelang.contrib.nvcc``);
the parent disassembles the CUBIN. Compiles land in ``TILELANG_CACHE_DIR``, inside the
worker's temp dir. No intra-kernel trace recorder.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from .base import Backend, File, LaunchCounter

CAPTURED: list[Any] = []  # JITKernel objects built in this worker
MAX_CAPTURED = 16
# TileLang's compile path (building the TIR, lowering, nvcc): an exception raised under one
# of these frames of tilelang/jit, or anywhere in tilelang/engine, is a compile error
_COMPILE_FRAMES = frozenset(
    {"compile", "par_compile", "get_tir", "_compile_and_create_adapter", "_compile_artifact"}
)
_JIT_DIR = f"{os.sep}tilelang{os.sep}jit{os.sep}"
_ENGINE_DIR = f"{os.sep}tilelang{os.sep}engine{os.sep}"


class TileLangBackend(Backend):
    name = "tilelang"
    compile_hooks = (
        "tilelang:compile",
        "tilelang.jit.kernel:JITKernel.__init__",
    )  # timed apart from run time (harness/worker/jitclock.py)
    label = "TileLang"
    modules = ("tilelang",)
    requires_gpu = True
    enforce_launches = True
    min_compile_timeout_s = 600.0  # nvcc builds of wgmma kernels at import take tens of seconds
    jit_decorators = (
        "tilelang.jit",
        "tilelang.autotune",
        "tilelang.language.prim_func",
        "tilelang.language.macro",
    )
    protected_classes = (("tilelang.jit.kernel", "JITKernel"),)
    mma_hint = "TileLang: T.gemm on shared-memory tiles of 64+ rows per warpgroup"

    def worker_env(self, device: str) -> dict[str, str]:
        return {"TILELANG_PRINT_ON_COMPILATION": "0"}

    def cache_env(self, home: Path) -> dict[str, str]:
        return {"TILELANG_CACHE_DIR": str(home / ".tilelang-cache")}

    def prepare_worker(self, device: str) -> LaunchCounter | None:
        try:
            from tilelang.jit.kernel import JITKernel
        except Exception:  # tilelang missing or broken on import: nothing to count
            return None
        counter = LaunchCounter()
        _wrap(JITKernel, counter)
        return counter

    def is_compile_error(self, exc: BaseException) -> bool:
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            if type(current).__name__ in ("EagerJITBuildError", "JITNoBuilderError"):
                return True
            tb = current.__traceback__
            while tb is not None:
                code = tb.tb_frame.f_code
                if (
                    code.co_name in _COMPILE_FRAMES
                    and f"{os.sep}tilelang{os.sep}" in code.co_filename
                ):
                    return True
                tb = tb.tb_next
            current = current.__cause__ or current.__context__
        return False

    def environment(self) -> dict[str, object]:
        try:
            from importlib.metadata import version

            return {"tilelang": version("tilelang")}
        except Exception:  # not installed, or its metadata unreadable: no version
            return {"tilelang": None}

    def collect_artifacts(
        self, target: str | None, notes: list[str], launches: list[dict[str, Any]] | None
    ) -> list[File]:
        files: list[File] = []
        for index, kernel in enumerate(CAPTURED):
            files.extend(_kernel_files(kernel, index, notes))
        if not files:
            notes.append("no TileLang kernel was compiled in the worker")
        return files


def _wrap(cls: Any, counter: LaunchCounter) -> None:
    call = cls.__dict__.get("__call__")
    if call is not None and not getattr(call, "_ctxkernel_counted", False):

        @functools.wraps(call)
        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            counter.count += 1
            return call(self, *args, **kwargs)

        __call__._ctxkernel_counted = True  # type: ignore[attr-defined]
        cls.__call__ = __call__
    init = cls.__dict__.get("__init__")
    if init is not None and not getattr(init, "_ctxkernel_counted", False):

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            if len(CAPTURED) < MAX_CAPTURED:
                CAPTURED.append(self)

        __init__._ctxkernel_counted = True  # type: ignore[attr-defined]
        cls.__init__ = __init__


def _kernel_files(kernel: Any, index: int, notes: list[str]) -> list[File]:
    """The generated CUDA source of one kernel, and PTX and CUBIN built from it."""
    try:
        source = kernel.get_kernel_source()
        func = getattr(kernel, "prim_func", None)
        symbol = func.attrs.get("global_symbol") if func is not None and func.attrs else None
    except Exception as exc:
        notes.append(f"TileLang kernel {index}: no source ({type(exc).__name__}: {exc})"[:300])
        return []
    name = str(symbol or f"tilelang_kernel_{index}")
    version = f"k{index}"

    def meta(kind: str) -> dict[str, Any]:
        return {"name": f"{name}.{kind}", "kernel": name, "version": version, "kind": kind}

    files: list[File] = [(meta("cu"), str(source).encode())]
    try:
        from tilelang.contrib import nvcc

        options = nvcc.default_compile_options(getattr(kernel, "compile_flags", None))
        with kernel.target:
            for kind in ("ptx", "cubin"):
                data = nvcc.compile_cuda(str(source), target_format=kind, options=options)
                files.append((meta(kind), bytes(data)))
    except Exception as exc:
        notes.append(
            f"TileLang kernel {name}: PTX/CUBIN not built ({type(exc).__name__}: {exc})"[:400]
        )
    return files
