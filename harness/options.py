"""RunOptions: how one check runs -- device, trials, limits, the performance rungs' switches.

What every runner, rung and command line reads; ``python -m harness check`` and ``ctxkernel
check`` set it from their flags (``harness/cli.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class RunOptions:
    """How to check: device, trials, limits, and the switches tests use."""

    device: str | None = None  # None: cuda when available, else cpu
    trials: int = 3  # fresh inputs per shape (the first new tensors, the rest in place)
    shapes: list[dict[str, Any]] | None = None  # override the problem's SHAPES
    timeout_s: float = 30.0  # per request
    compile_timeout_s: float | None = None  # the candidate's import; None: timeout_s
    startup_timeout_s: float = 120.0  # the worker's own start-up, before any candidate code
    first_call_timeout_s: float = 120.0  # on a GPU, the first call (JIT compile, autotuning)
    memory_cap_bytes: int | None = None  # None: 16 GiB on CPU (address space), 48 GiB RSS on CUDA
    burst: int = 6  # back-to-back calls on the same inputs in the anti-cheat rung
    settle_s: float = 0.05  # wait after a call before checking the output again
    policy_scan: bool = True  # False: static policy findings are reported, not gating
    backend: str | None = None  # declared backend; None: the candidate's declaration or detection
    secret: int | None = None  # secret seed; None: os.urandom
    record: bool = True
    runs_dir: Path | None = None
    python: str | None = None  # interpreter for the worker; None: this one
    allow_programs: tuple[str, ...] = ()  # extra programs the candidate may run
    # -- performance (issue 5): benchmark + roofline, dumps, profile --------------------
    bench: bool = False  # time the candidate (and the reference) on BENCH_SHAPES
    bench_shapes: list[dict[str, Any]] | None = None  # None: the problem's BENCH_SHAPES
    bench_budget_s: float = 3.0  # per shape and subject, split over the rounds
    bench_rel_ci: float = 0.01  # stop when the median's 95% CI half-width is within this
    bench_l2: str | None = None  # "flush" | "hot"; None: the problem's BENCH_L2, else flush
    bench_mode: str = "events"  # "events" (flush/spin ahead of each launch) | "graph"
    bench_reference: bool = True  # time the reference too (speedups)
    compile_ref: bool = False  # also time torch.compile of the reference
    speedup_review: float = 10.0  # speedups above this are flagged for review
    dump_dir: Path | None = None  # write IR/PTX/CUBIN/SASS and the resource report here
    target: str | None = None  # compile Triton ahead of time for this target (sm_90)
    profile: bool = False  # ncu the candidate's kernels in a separate worker
    # -- intra-kernel tracing (issue 8): harness/rungs/trace.py --------------------------
    trace: bool = False  # time sections inside the kernel in a separate instrumented worker

    def import_timeout_s(self) -> float:
        """Seconds the candidate's import (and the builds it starts) may take."""
        return self.timeout_s if self.compile_timeout_s is None else self.compile_timeout_s

    def resolved_device(self) -> str:
        if self.device:
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
