"""CuTeDSL (``nvidia-cutlass-dsl``): detection, launch counting, artefacts, GPU requirement.

Compiling works on a CPU machine but running needs a GPU, so on CPU a CuTeDSL candidate
fails at the compile rung with that reason. In the worker (before the candidate is
imported) ``JitExecutor.run_compiled_program`` -- the path every call of a compiled
``cute.compile`` result or a ``@cute.jit`` function takes -- counts launches, and every
``JitCompiledFunction`` is remembered (``CAPTURED``) so its ``__mlir__``/``__ptx__``/
``__cubin__`` can be dumped. With ``CTXKERNEL_DUMP=1`` the DSL is told to keep MLIR, PTX
and CUBIN (``CUTE_DSL_KEEP``) under ``$HOME/cute-dump``; artefacts are those files and the
captured objects' attributes. SASS comes from ``cuobjdump`` in the parent
(``CUTE_DSL_KEEP=sass`` needs nvdisasm >= 13.4 and breaks ``import cutlass`` otherwise).
The DSL's compiler rewrites the ``__code__`` of the function it compiles: the guards
allow that from its own frames. Traces go through ``ck_trace`` (``tracing/cute_trace.py``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from .. import envvars
from .base import Backend, File, LaunchCounter

_ARCH_OF_CAPABILITY = {"9.0": "sm_90a", "10.0": "sm_100a", "10.3": "sm_103a", "12.0": "sm_120a"}
KINDS = ("mlir", "ptx", "cubin", "sass")
CAPTURED: list[Any] = []  # compiled objects, filled by the executor wrapper
MAX_CAPTURED = 16


class CuteDSLBackend(Backend):
    name = "cutedsl"
    compile_hooks = (
        "cutlass.cute:compile",
    )  # timed apart from run time (harness/worker/jitclock.py)
    label = "CuTeDSL"
    modules = ("cutlass",)
    requires_gpu = True
    enforce_launches = True
    jit_decorators = ("cute.jit", "cute.kernel", "cutlass.cute.jit", "cutlass.cute.kernel")
    code_rewriters = (
        os.path.join("cutlass", "base_dsl") + os.sep,
        os.path.join("cutlass", "cutlass_dsl") + os.sep,
    )
    env_passthrough = ("CUTE_DSL_ARCH", "CUTE_DSL_LOG_LEVEL")
    trace_recorder = "ck_trace"

    def worker_env(self, device: str) -> dict[str, str]:
        env = {}
        for key in self.env_passthrough:
            if key in os.environ:
                env[key] = os.environ[key]
        return env

    def cache_env(self, home: Path) -> dict[str, str]:
        return {"CUTE_DSL_CACHE_DIR": str(home / ".cute-cache")}

    def prepare_trace(self, device: str, candidate_path: str) -> None:
        try:
            from ..tracing import cute_trace  # noqa: F401  (imported now, not under the guards)
        except Exception:  # cutlass failing to import: the trace rung says it cannot run
            pass

    def collect_artifacts(
        self, target: str | None, notes: list[str], launches: list[dict[str, Any]] | None
    ) -> list[File]:
        return _collect(notes)

    def prepare_worker(self, device: str) -> LaunchCounter | None:
        if envvars.CTXKERNEL_DUMP.get():
            dump = os.environ.setdefault(
                "CUTE_DSL_DUMP_DIR", os.path.join(os.environ.get("HOME", "."), "cute-dump")
            )
            os.makedirs(dump, exist_ok=True)
            os.environ.setdefault("CUTE_DSL_KEEP", "ir,ptx,cubin")
        if device == "cuda" and "CUTE_DSL_ARCH" not in os.environ:
            try:
                import torch

                props = torch.cuda.get_device_properties(0)
                arch = _ARCH_OF_CAPABILITY.get(f"{props.major}.{props.minor}")
                if arch:
                    os.environ["CUTE_DSL_ARCH"] = arch
            except Exception:  # no device to read: cutlass picks the arch itself
                pass
        try:
            import cutlass.cute  # noqa: F401  (reads CUTE_DSL_* now)
            from cutlass.base_dsl import jit_executor
        except Exception:  # cutlass missing or broken on import: nothing to count
            return None
        counter = LaunchCounter()
        _wrap_executor(jit_executor, counter)
        return counter

    def is_compile_error(self, exc: BaseException) -> bool:
        module = type(exc).__module__ or ""
        return (
            module.startswith(("cutlass.base_dsl", "cutlass._mlir"))
            or "DSLRuntimeError" in type(exc).__name__
            or "DSLAstPreprocessorError" in type(exc).__name__
        )

    def environment(self) -> dict[str, object]:
        try:
            from importlib.metadata import version

            return {"cutlass_dsl": version("nvidia-cutlass-dsl")}
        except Exception:  # not installed, or its metadata unreadable: no version
            return {"cutlass_dsl": None}


def _counting(cls: Any, counter: LaunchCounter) -> None:
    original = cls.__dict__.get("run_compiled_program") if cls is not None else None
    if original is None or getattr(original, "_ctxkernel_counted", False):
        return

    @functools.wraps(original)
    def run_compiled_program(self: Any, *args: Any, **kwargs: Any) -> Any:
        counter.count += 1
        return original(self, *args, **kwargs)

    run_compiled_program._ctxkernel_counted = True  # type: ignore[attr-defined]
    cls.run_compiled_program = run_compiled_program


def _wrap_executor(module: Any, counter: LaunchCounter) -> None:
    """Count at every class a call can end in (a call may pass two of them: counts are
    'at least one launch', which is what the ladder enforces)."""
    _counting(getattr(module, "JitExecutor", None), counter)
    _counting(getattr(module, "JitCompiledFunction", None), counter)
    try:
        from cutlass.cutlass_dsl import cutlass_function

        _counting(getattr(cutlass_function, "CutlassCallJitCompiledFunction", None), counter)
    except Exception:  # a cutlass without that module: the other classes count
        pass
    compiled = getattr(module, "JitCompiledFunction", None)
    init = getattr(compiled, "__init__", None)
    if compiled is not None and init is not None and not getattr(init, "_ctxkernel_counted", False):

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            if len(CAPTURED) < MAX_CAPTURED:
                CAPTURED.append(self)

        __init__._ctxkernel_counted = True  # type: ignore[attr-defined]
        compiled.__init__ = __init__


def _collect(notes: list[str]) -> list[File]:
    files: list[File] = []
    root = os.environ.get("CUTE_DSL_DUMP_DIR")
    if root and os.path.isdir(root):
        for path in sorted(Path(root).rglob("*")):
            kind = path.suffix.lstrip(".")
            if path.is_file() and kind in KINDS:
                stem = path.name.split(".")[0]
                files.append(
                    (
                        {"name": path.name, "kernel": stem, "version": stem[-10:], "kind": kind},
                        path.read_bytes(),
                    )
                )
    for index, compiled in enumerate(CAPTURED):
        for attr, kind in (("__mlir__", "mlir"), ("__ptx__", "ptx"), ("__cubin__", "cubin")):
            try:
                value = getattr(compiled, attr, None)
            except Exception:  # cutlass's property may raise anything: no such artefact
                value = None
            if not value:
                continue
            data = value if isinstance(value, bytes) else str(value).encode()
            name = f"cute_compiled_{index}"
            files.append(
                (
                    {
                        "name": f"{name}.{kind}",
                        "kernel": name,
                        "version": f"c{index}",
                        "kind": kind,
                    },
                    data,
                )
            )
    if not files:
        notes.append(
            "no CuTeDSL artefacts (CUTE_DSL_KEEP/CUTE_DSL_DUMP_DIR unset, or nothing compiled)"
        )
    return files
