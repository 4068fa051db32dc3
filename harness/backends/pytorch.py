"""The plain PyTorch backend: no kernel of its own, so nothing to count or compile.

A PyTorch candidate is held to the problem's forbidden-op policy only.
"""

from __future__ import annotations

from . import Backend


class PyTorchBackend(Backend):
    name = "torch"

    def detect(self, imports: set[str], source: str) -> bool:
        return True
