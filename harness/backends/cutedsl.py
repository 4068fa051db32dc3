"""CuTeDSL (``nvidia-cutlass-dsl``): detection and GPU requirement.

Compiling works on a CPU machine but running needs a GPU, so on CPU a CuTeDSL candidate
fails at the run rung with that reason. Launch counting is not wired yet (the next issue
adds compile artefacts here); a call is not failed for launching nothing.
"""

from __future__ import annotations

import os

from . import Backend


class CuteDSLBackend(Backend):
    name = "cutedsl"
    requires_gpu = True

    def detect(self, imports: set[str], source: str) -> bool:
        return any(name == "cutlass" or name.startswith("cutlass.") for name in imports)

    def worker_env(self, device: str) -> dict[str, str]:
        env = {}
        for key in ("CUTE_DSL_ARCH", "CUTE_DSL_LOG_LEVEL"):
            if key in os.environ:
                env[key] = os.environ[key]
        return env

    def is_compile_error(self, exc: BaseException) -> bool:
        module = type(exc).__module__ or ""
        return (
            module.startswith(("cutlass.base_dsl", "cutlass._mlir"))
            or "DSLRuntimeError" in type(exc).__name__
        )
