"""A ladder that believes in a GPU on a CPU machine, for the rungs that wrap a one-shot
worker in a GPU tool (``profile``/``isa`` under ncu, ``sanitize`` under compute-sanitizer):
a stand-in for the tool on PATH replays a recorded report and runs the real worker it
wraps, and the ``PretendGPU`` rung tells the ladder the device is CUDA."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from cheatspec import EXAMPLES

from harness.options import RunOptions
from harness.runner import LocalRunner, check
from harness.verdict import RungResult, Verdict


class PretendGPU:
    """The parent believes in a GPU; the wrapped workers run on the CPU."""

    name, gating = "pretend", False

    def run(self, ctx: Any, earlier: Any) -> RungResult:
        ctx.device = "cuda"
        return RungResult.passed(self)


def install_tool(folder: Path, monkeypatch: pytest.MonkeyPatch, name: str, script: str) -> None:
    """``script`` as the executable ``name``, first on PATH."""
    tool = folder / name
    tool.write_text(script)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


def check_vector_add(rungs: list[Any], **options: Any) -> Verdict:
    """The vector add example's honest Triton solution through ``PretendGPU`` + ``rungs``."""
    from harness.rungs.ladder import Ladder

    run = RunOptions(device="cpu", trials=1, burst=2, record=False, timeout_s=120.0, **options)
    return check(
        EXAMPLES / "vector_add",
        EXAMPLES / "vector_add" / "solution_triton.py",
        run,
        runner=LocalRunner(Ladder([PretendGPU(), *rungs])),
    )
