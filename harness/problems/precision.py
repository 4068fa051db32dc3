"""Reference precision: the reference runs in full fp32 (TF32 off), in the parent and in the
harness-only worker that times it.

Worker-safe (imports torch only): ``benchworker`` times the reference under it, the
parent's ``rungs/inputs.py`` computes every expected output under it.
"""

from __future__ import annotations

from typing import Any

import torch

REFERENCE_PRECISION_FLAGS = "tf32 off: cuda.matmul.allow_tf32=False, cudnn.allow_tf32=False, float32_matmul_precision=highest"


class reference_precision:
    """Context manager: full fp32 for the reference (TF32 off), restored afterwards."""

    def __enter__(self) -> None:
        self.saved = (
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision(),
        )
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

    def __exit__(self, *exc: Any) -> None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, precision = (
            self.saved
        )
        torch.set_float32_matmul_precision(precision)
