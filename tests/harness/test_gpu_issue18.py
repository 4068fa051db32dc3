"""The real suites' planted cheats on a CUDA GPU (marked ``gpu``; run on the H200 by ``bench/gpu/gpu_suites.py``).

The planted cheats of the real suites under ``cheats/`` and their honest counterparts, compiled
(not interpreted): on a GPU the library share is measured from the profiler's kernel
records, ``torch.compile(mode="reduce-overhead")`` replays CUDA graphs, and the GPU MODE
problems build their inputs on CUDA as upstream does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cheatspec import problem_path, read_expectation

from harness.runner import LocalRunner, RunOptions, check

pytestmark = pytest.mark.gpu

CHEATS = Path(__file__).resolve().parent / "cheats"
ISSUE_18 = [
    "c01_decoy_library_then_copy",
    "c01_decoy_other_library_op",
    "c01_plain_pytorch",
    "c01_honest_fused_epilogue",
    "c04_honest_torch_compile",
    "c05_recycled_view",
    "c05_recycled_as_strided",
    "c05_earlier_output_slot",
    "c05_honest_write_into_output",
    "c06_shape_gated",
    "c06_distribution_detector",
]


@pytest.mark.parametrize("name", ISSUE_18)
def test_issue18_cheat_or_honest_counterpart_on_gpu(name: str) -> None:
    expect = read_expectation(CHEATS / f"{name}.py")
    assert expect.problem
    options = {"device": "cuda", "trials": 2, "burst": 3, "record": False}
    options.update(expect.options)
    verdict = check(
        problem_path(expect.problem), expect.path, RunOptions(**options), runner=LocalRunner()
    )
    failed = verdict.failed_rung
    if expect.rung == "none":
        assert failed is None, verdict.feedback()
        assert not verdict.interpreter
        return
    assert failed is not None, verdict.lines()
    assert failed.name in expect.rungs, failed.reason
    assert expect.named_in(failed.reason), failed.reason


def test_library_share_is_measured_from_kernel_records() -> None:
    expect = read_expectation(CHEATS / "c01_honest_fused_epilogue.py")
    verdict = check(
        problem_path("gpumode_mean64"),
        expect.path,
        RunOptions(device="cuda", trials=1, burst=2, record=False, shapes=[{"size": 1 << 22}]),
        runner=LocalRunner(),
    )
    assert verdict.ok, verdict.feedback()
    anti = next(r for r in verdict.rungs if r.name == "anti-cheat")
    share = anti.details.get("share") or {}
    assert share.get("basis") == "device time", anti.details
    assert share.get("own", 0) >= 0.8 and share.get("own_kernels"), share
