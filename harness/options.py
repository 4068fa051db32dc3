"""RunOptions: how one check runs -- device, trials, limits, the performance rungs' switches.

What every runner, rung and command line reads. Declared once: the fields a command line
sets carry their flag in the field's metadata (``optionspec.option``; a ``bool`` field's
flag flips its default), and ``python -m harness check``, ``ctxkernel check``, ``ctxkernel
mcp`` and ``ctxkernel agent`` generate their options from it (``harness/cli.py``), defaults
included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .optionspec import option


def _backends() -> list[str]:
    from .backends import backend_names

    return backend_names()


def _isa_families() -> list[str]:
    from .perf.isa import CHOICES

    return list(CHOICES)


@dataclass
class RunOptions:
    """How to check: device, trials, limits, and the switches tests use."""

    device: str | None = field(
        default=None,
        metadata=option(
            "--device",
            choices=("cpu", "cuda"),
            help="Default: cuda if available, else cpu (Triton interpreter).",
        ),
    )
    # fresh inputs per shape (the first new tensors, the rest in place)
    trials: int = field(
        default=3,
        metadata=option("--seeds", low=1, high=100, help="Trials (fresh seeded inputs) per shape."),
    )
    shapes: list[dict[str, Any]] | None = None  # override the problem's SHAPES
    timeout_s: float = field(
        default=30.0,
        metadata=option("--timeout", low=0.1, help="Seconds allowed per worker request."),
    )
    compile_timeout_s: float | None = None  # the candidate's import; None: timeout_s
    startup_timeout_s: float = 120.0  # the worker's own start-up, before any candidate code
    first_call_timeout_s: float = 120.0  # on a GPU, the first call (JIT compile, autotuning)
    memory_cap_bytes: int | None = None  # None: memory_cap_for (the machine's memory)
    concurrent_workers: int = 1  # checks running at once on this machine (a pool's slots)
    disk_cap_gib: float = field(
        default=4.0,
        metadata=option(
            "--disk-cap",
            low=0.001,
            help="GiB a worker may write into its temp folder (the only folder it may "
            "write); a worker that writes more is killed and the verdict says so.",
        ),
    )
    burst: int = 6  # back-to-back calls on the same inputs in the anti-cheat rung
    settle_s: float = 0.05  # wait after a call before checking the output again
    policy_scan: bool = True  # False: static policy findings are reported, not gating
    # declared backend; None: the candidate's declaration or detection
    backend: str | None = field(
        default=None,
        metadata=option("--backend", choices=_backends, help="Declare the candidate's backend."),
    )
    secret: int | None = None  # secret seed; None: os.urandom
    # -- library use and unseen inputs: harness/library.py, rungs/inputs.py ----
    allow_library: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--allow-library",
            many=True,
            metavar="OPS",
            help="Library ops the candidate may call although the reference computes them "
            "(comma-separated: add,mul, aten::exp, a group such as matmul, or all).",
        ),
    )
    min_kernel_share: float | None = field(
        default=None,
        metadata=option(
            "--min-kernel-share",
            low=0.0,
            high=1.0,
            help="Share of the work that must run in the candidate's own kernels "
            "(default: the problem's MIN_KERNEL_SHARE, else 0.8).",
        ),
    )
    unseen: bool = field(
        default=True,
        metadata=option(
            "--no-unseen",
            help="Skip the shapes and rescaled inputs the candidate never saw (on by default).",
        ),
    )
    # trivial answers (zeros, the mean...) may pass the problem's check: harness/problems/signalcheck.py
    signal_exempt: str | None = field(
        default=None,
        metadata=option(
            "--signal-exempt",
            metavar="WHY",
            help="Check the problem although a trivial answer (zeros, ones, the input, a "
            "constant) passes its check on every shape, saying why; the verdict keeps it.",
        ),
    )
    calibrate: bool = field(
        default=False,
        metadata=option(
            "--calibrate",
            help="Tighten each output's tolerance to what the reference's own error against "
            "a float64 run allows (never looser than declared; also CALIBRATE = True).",
        ),
    )
    record: bool = field(
        default=True,
        metadata=option("--no-record", help="Do not keep a run record."),
    )
    runs_dir: Path | None = field(
        default=None,
        metadata=option("--runs-dir", help="Where run records go (default: runs/)."),
    )
    python: str | None = None  # interpreter for the worker; None: this one
    warm: bool = field(  # workers forked from a warm template (harness/templates.py)
        default=True,
        metadata=option(
            "--cold",
            help="Start every worker as a fresh interpreter (no warm worker template).",
        ),
    )
    allow_programs: tuple[str, ...] = ()  # extra programs the candidate may run
    # -- performance: benchmark + roofline, dumps, profile --------------------
    bench: bool = field(
        default=False,
        metadata=option(
            "--bench",
            help="Time the candidate and the reference on BENCH_SHAPES; report the roofline.",
        ),
    )
    bench_shapes: list[dict[str, Any]] | None = None  # None: the problem's BENCH_SHAPES
    bench_budget_s: float = field(  # per shape and subject, split over the rounds
        default=3.0,
        metadata=option(
            "--bench-budget",
            low=0.1,
            help="Seconds of timing per shape and subject (stops earlier at a 1% CI).",
        ),
    )
    bench_rel_ci: float = 0.01  # stop when the median's 95% CI half-width is within this
    # "flush" | "hot"; None: the problem's BENCH_L2, else flush
    bench_l2: str | None = field(
        default=None,
        metadata=option(
            "--l2",
            choices=("flush", "hot"),
            help="L2 flushed before every timed call (default) or left hot.",
        ),
    )
    # "events" (flush/spin ahead of each launch) | "graph"
    bench_mode: str = field(
        default="events",
        metadata=option(
            "--graph",
            flag_value="graph",
            help="Time replays of a CUDA graph of the call instead of plain calls.",
        ),
    )
    bench_reference: bool = True  # time the reference too (speedups)
    compile_ref: bool = field(
        default=False,
        metadata=option("--compile-ref", help="Also time torch.compile of the reference."),
    )
    speedup_review: float = 10.0  # speedups above this are flagged for review
    dump_dir: Path | None = field(
        default=None,
        metadata=option(
            "--dump",
            dir_only=True,
            help="Write IR/PTX/CUBIN/SASS and a resource report per kernel version here.",
        ),
    )
    target: str | None = field(  # compile Triton ahead of time for this target (sm_90)
        default=None,
        metadata=option(
            "--target",
            help="Compile Triton kernels ahead of time for this target (e.g. sm_90); no GPU needed.",
        ),
    )
    profile: bool = field(
        default=False,
        metadata=option("--profile", help="Profile the candidate's kernels with ncu."),
    )
    # the executed-instruction check (harness/perf/isa.py, harness/rungs/isa.py); a GPU only
    expect_isa: str | None = field(
        default=None,
        metadata=option(
            "--expect-isa",
            choices=_isa_families,
            help="Fail unless the candidate's hot kernel executes instructions of this family "
            "(ncu's executed counts; implies --profile): wgmma (= hgmma), hmma (mma.sync), "
            "tcgen05, tensor (any of them), tma, or none.",
        ),
    )
    sanitize: bool = field(
        default=False,
        metadata=option(
            "--sanitize",
            help="Run compute-sanitizer's memcheck, initcheck, racecheck and synccheck around "
            "one call on the smallest shape (a GPU and compute-sanitizer needed).",
        ),
    )
    # -- intra-kernel tracing: harness/rungs/trace.py --------------------------
    trace: bool = field(
        default=False,
        metadata=option(
            "--trace",
            help="Time the sections the kernel marks (Proton scopes, ck_trace) in a separate "
            "instrumented worker; writes a Perfetto timeline into the run record.",
        ),
    )

    def import_timeout_s(self) -> float:
        """Seconds the candidate's import (and the builds it starts) may take."""
        return self.timeout_s if self.compile_timeout_s is None else self.compile_timeout_s

    def resolved_device(self) -> str:
        if self.device:
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"


def memory_cap_for(device: str, options: RunOptions) -> int:
    """A worker's memory cap: ``memory_cap_bytes`` when given, else its share of this
    machine's memory (80 % over the workers that run at once), never under 1 GiB. On a
    CPU it is the worker's address space (``RLIMIT_AS``: the interpreter maps more than
    it touches, hence the factor 2), on a GPU the parent's RSS watchdog."""
    if options.memory_cap_bytes is not None:
        return options.memory_cap_bytes
    total = _mem_total() or (16 << 30)
    share = int(total * 0.8 / max(1, options.concurrent_workers))
    cap = 2 * share if device == "cpu" else share
    return max(cap, 1 << 30)


def _mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
