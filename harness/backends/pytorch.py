"""The plain PyTorch backend: no kernel of its own, so nothing to count, compile or dump.

A PyTorch candidate is held to the problem's forbidden-op policy only. It claims every
candidate no other backend does, so it comes last in the registry.
"""

from __future__ import annotations

from .base import Backend


class PyTorchBackend(Backend):
    name = "torch"
    label = "PyTorch"
    compiles_kernels = False
    compile_hooks_complete = True  # torch.compile's compiles: harness/worker/compiled.py

    def detect(self, imports: set[str], source: str) -> bool:
        return True
