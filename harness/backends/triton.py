"""The Triton backend: interpreter on CPU, launch counting, compile-error classification.

Launches are counted by wrapping ``JITFunction.run`` (compiled path) and
``InterpretedFunction.run`` (``TRITON_INTERPRET=1``); warm-up runs are not launches. The
autotuner ends in one of those, so it is counted too. With ``CTXKERNEL_RECORD_LAUNCHES=1``
(dumps) the same wrapper records each distinct launch's specialisation for ahead-of-time
compiles (``aot.py``).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from . import Backend, LaunchCounter


class TritonBackend(Backend):
    name = "triton"
    enforce_launches = True

    def detect(self, imports: set[str], source: str) -> bool:
        return any(name == "triton" or name.startswith("triton.") for name in imports)

    def worker_env(self, device: str) -> dict[str, str]:
        env = {"TRITON_DEFAULT_FP_FUSION": os.environ.get("TRITON_DEFAULT_FP_FUSION", "1")}
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        return env

    def prepare_worker(self, device: str) -> LaunchCounter | None:
        counter = LaunchCounter()
        try:
            import triton.runtime.jit as jit
        except ImportError:
            return None
        _wrap_run(jit.JITFunction, counter)
        try:
            import triton.runtime.interpreter as interpreter
        except ImportError:
            interpreter = None  # type: ignore[assignment]
        if interpreter is not None and hasattr(interpreter, "InterpretedFunction"):
            _wrap_run(interpreter.InterpretedFunction, counter)
        if device == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
            _warm_interpreter()
        from ..aot import RECORDED

        RECORDED.clear()  # the harness's own warm-up launch is no candidate kernel
        return counter

    def is_compile_error(self, exc: BaseException) -> bool:
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            module = type(current).__module__ or ""
            if module.startswith("triton.compiler") or type(current).__name__ in (
                "CompilationError",
                "CompileTimeAssertionFailure",
                "UnsupportedLanguageConstruct",
            ):
                return True
            current = current.__cause__ or current.__context__
        return False

    def environment(self) -> dict[str, object]:
        try:
            import triton
        except ImportError:
            return {"triton": None}
        return {
            "triton": triton.__version__,
            "triton_interpreter": os.environ.get("TRITON_INTERPRET") == "1",
        }


def _wrap_run(cls: Any, counter: LaunchCounter) -> None:
    original = cls.__dict__.get("run")
    if original is None or getattr(original, "_ctxkernel_counted", False):
        return
    record: Any = None
    if os.environ.get("CTXKERNEL_RECORD_LAUNCHES") == "1":
        from ..aot import record_launch

        record = record_launch
    # a dump worker on a CPU machine records launches on large shapes without running them
    record_only = record is not None and os.environ.get("CTXKERNEL_RECORD_ONLY") == "1"

    @functools.wraps(original)
    def run(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        if record is not None and not warmup:
            record(self, args, kwargs)
            if record_only:
                counter.count += 1
                return None
        result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        if not warmup:
            counter.count += 1
        return result

    run._ctxkernel_counted = True  # type: ignore[attr-defined]
    cls.run = run


def _warm_interpreter() -> None:
    """The interpreter's first launch imports a lot; pay for it outside the candidate's time."""
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError:
        return
    import importlib.util
    import tempfile

    source = (
        "import triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef _ck_warm(x_ptr, n, B: tl.constexpr):\n"
        "    offs = tl.program_id(0) * B + tl.arange(0, B)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)\n"
    )
    del triton, tl
    with tempfile.TemporaryDirectory(prefix="ck-warm-") as tmp:
        path = os.path.join(tmp, "_ck_warm.py")
        with open(path, "w") as fh:
            fh.write(source)
        spec = importlib.util.spec_from_file_location("_ck_warm", path)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        x = torch.zeros(8)
        module._ck_warm[(1,)](x, 8, B=8)
