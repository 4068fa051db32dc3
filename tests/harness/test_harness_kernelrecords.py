"""Kernel records (``harness/worker/kernelrecords.py``): cutting a record list into timed calls.

The record lists are built by hand in the shape torch.profiler returns (markers from
``torch.cuda._sleep`` around each call); collecting real records needs a GPU
(``test_kernel_recorder_sees_a_kernel_on_the_gpu``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.worker.kernelrecords import (
    KernelRecord,
    KernelRecorder,
    busy_ns,
    launch_gap_ns,
    span_ns,
    split_windows,
)


def _k(name: str, start: int, end: int, stream: int = 7) -> KernelRecord:
    return KernelRecord(name=name, kind="kernel", start_ns=start, end_ns=end, stream=stream)


def _marker(start: int, end: int) -> KernelRecord:
    return _k("at::cuda::(anonymous namespace)::spin_kernel(long)", start, end)


def test_windows_hold_only_the_work_between_each_pair_of_markers() -> None:
    records = [
        _k("generate", 0, 50),  # input generation: before the opening marker
        _marker(60, 100),
        _k("add_kernel", 103, 203),
        _marker(210, 211),
        _k("generate", 300, 350),
        _marker(360, 400),
        _k("add_kernel", 420, 521),
        _k("side", 430, 500, stream=9),
        _marker(530, 531),
    ]
    windows = split_windows(records)
    assert windows is not None and len(windows) == 2
    assert [r.name for r in windows[0] if not r.is_marker] == ["add_kernel"]
    assert span_ns(windows[0]) == 100
    assert launch_gap_ns(windows[0]) == 3
    assert {r.name for r in windows[1] if not r.is_marker} == {"add_kernel", "side"}
    assert span_ns(windows[1]) == 101
    assert busy_ns(windows[1]) == 101  # the side stream overlaps: counted once
    assert launch_gap_ns(windows[1]) == 20


def test_a_stray_marker_makes_the_windows_unusable() -> None:
    records = [_marker(0, 10), _k("a", 11, 20), _marker(21, 22), _marker(30, 31)]
    assert split_windows(records) is None


def test_busy_time_of_disjoint_work_adds_up() -> None:
    work = [_k("a", 0, 10), _k("b", 20, 25), _k("c", 22, 30)]
    assert busy_ns(work) == 20
    assert span_ns(work) == 30
    assert span_ns([]) == 0 and busy_ns([]) == 0


def test_recorder_without_a_gpu_says_why_and_runs_the_block() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    ran = []
    with KernelRecorder() as rec:
        ran.append(1)
    assert ran == [1]
    assert rec.records == [] and rec.error == "no CUDA device"


@pytest.mark.gpu
def test_kernel_recorder_sees_a_kernel_on_the_gpu() -> None:
    from harness.worker.kernelrecords import mark

    x = torch.randn(1 << 24, device="cuda")
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    with KernelRecorder() as rec:
        for _ in range(3):
            mark()
            torch.mul(x, 2.0, out=y)
            torch.cuda.synchronize()
            mark()
    assert rec.error is None, rec.error
    windows = split_windows(rec.records)
    assert windows is not None and len(windows) == 3
    for window in windows:
        work = [r for r in window if not r.is_marker]
        assert len(work) == 1 and work[0].kind == "kernel"
        assert span_ns(window) > 0


_PROBE = """
import sys, torch
from harness.worker import kernelrecords
from harness.problems import library_share
if sys.argv[1] == "ours" and torch.cuda.is_available():  # what the worker and the witness use
    with kernelrecords.cuda_profiler(), library_share.kernel_profiler():
        torch.ones(4, device="cuda").add_(1)
elif sys.argv[1] == "ours":  # no GPU: the same entry point, recording the CPU instead
    with kernelrecords._profile(use_cpu=True, use_kineto=True):
        torch.ones(4).add_(1)
print(sorted(m for m in ("torch._inductor", "torch._dynamo") if m in sys.modules))
"""


def _modules_a_profiler_imports(which: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, which],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return out.stdout.strip().splitlines()[-1]


def test_the_kernel_profiler_does_not_import_inductor_or_dynamo() -> None:
    """Regression: ``torch.profiler.profile`` asks
    ``hasattr(torch, "_inductor")`` when it starts, which imports inductor and dynamo --
    seconds in every fresh worker, added to each check's anti-cheat and benchmark rungs.
    The profiler the harness uses must not."""
    assert _modules_a_profiler_imports("ours") == "[]"
