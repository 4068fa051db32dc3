"""The sanitize rung (``--sanitize``) and compute-sanitizer's report parser
(``harness/perf/sanitizer.py``), on reports captured on an H200 with the rung's own command
(``h200_*``) and on hand-written ones in the tool's layout where no capture exists yet
(``fixtures/sanitizer/README.md`` says which is which).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cheatspec import FIXTURES
from pretendgpu import check_vector_add, install_tool

from harness.options import RunOptions
from harness.perf import sanitizer
from harness.rungs.results import Earlier
from harness.rungs.sanitize import SanitizeRung

REPORTS = FIXTURES / "sanitizer"


def _parsed(name: str, tool: str) -> sanitizer.Report:
    return sanitizer.parse((REPORTS / name).read_text(), tool)


def test_memcheck_findings_grouped_by_kind_kernel_and_line() -> None:
    report = _parsed("memcheck_out_of_bounds.txt", "memcheck")
    assert report.errors == 4 and len(report.findings) == 4 and not report.clean
    first = report.findings[0]
    assert (first.kind, first.kernel, first.where) == (
        "Invalid __global__ read",
        "add_kernel",
        "solution_triton.py:23",
    )
    assert first.detail[0] == "by thread (127,0,0) in block (7,0,0)"
    summary = sanitizer.summarize(report)
    assert summary["groups"][0] == {
        "kind": "Invalid __global__ read",
        "kernel": "add_kernel",
        "where": "solution_triton.py:23",
        "count": 2,
    }
    lines = sanitizer.lines(summary)
    assert (
        lines[0] == "memcheck: 2 x Invalid __global__ read in add_kernel at solution_triton.py:23"
    )
    assert "memcheck: 1 x Invalid __global__ write in add_kernel at solution_triton.py:25" in lines
    assert "memcheck: 1 x CUDA API error cudaErrorLaunchFailure from cudaStreamSynchronize" in lines


def test_initcheck_racecheck_and_clean_reports_captured_on_the_h200() -> None:
    init = _parsed("h200_initcheck_never_written.txt", "initcheck")
    # past the print limit the tool adds "ERROR SUMMARY: 56 errors were not printed":
    # the count stays the first summary's
    assert init.errors == 256 and len(init.findings) == 3
    assert {(f.kind, f.kernel, f.where) for f in init.findings} == {
        ("Uninitialized __global__ memory read", "never_written", "bugs.cu:8")
    }
    assert sanitizer.lines(sanitizer.summarize(init)) == [
        "initcheck: 3 x Uninitialized __global__ memory read in never_written at bugs.cu:8",
        "initcheck: 256 error(s) in all (the report itemises fewer)",
    ]
    race = _parsed("h200_racecheck_shared_race.txt", "racecheck")
    # racecheck has no ERROR SUMMARY: its own "RACECHECK SUMMARY: ... (1 error, 0 warnings)"
    assert race.errors == 1 and len(race.findings) == 1
    assert sanitizer.lines(sanitizer.summarize(race)) == [
        "racecheck: 1 x Race between Write and Read access in shared_race at bugs.cu:13"
    ]
    for name, tool in (
        ("h200_racecheck_clean.txt", "racecheck"),
        ("h200_synccheck_clean.txt", "synccheck"),
        ("h200_memcheck_clean.txt", "memcheck"),
    ):
        clean = _parsed(name, tool)
        assert clean.clean and sanitizer.lines(sanitizer.summarize(clean)) == [f"{tool}: clean"]
    unfinished = _parsed("memcheck_unfinished.txt", "memcheck")
    assert unfinished.errors is None and not unfinished.findings and not unfinished.clean


def test_a_cxx_kernel_name_with_spaces_is_kept_whole() -> None:
    text = (
        "========= Uninitialized __global__ memory read of size 4 bytes\n"
        "=========     at void row_sum<float>(const float *, float *, int)+0x1f0 in"
        " /tmp/x/kernels.cu:41\n"
        "========= ERROR SUMMARY: 1 error\n"
    )
    found = sanitizer.parse(text, "initcheck")
    assert found.errors == 1
    assert (found.findings[0].kernel, found.findings[0].where) == (
        "void row_sum<float>(const float *, float *, int)",
        "kernels.cu:41",
    )


def test_frames_in_older_and_bare_forms() -> None:
    old = "========= Invalid __shared__ write of size 8 bytes\n=========     at 0x00000070 in k1\n"
    assert sanitizer.parse(old, "memcheck").findings[0].kernel == "k1"
    bare = (
        "========= Barrier error detected. Divergent thread(s) in warp\n=========     at k2+0x10\n"
    )
    found = sanitizer.parse(bare, "synccheck").findings[0]
    assert (found.kind, found.kernel, found.where) == (
        "Barrier error detected. Divergent thread(s) in warp",
        "k2",
        None,
    )


def test_the_command_runs_one_tool_into_a_log_with_the_allocator_uncached() -> None:
    cmd = sanitizer.command("compute-sanitizer", "racecheck", "/w/.sanitize-racecheck.log")
    assert cmd[:3] == ["compute-sanitizer", "--tool", "racecheck"]
    assert cmd[cmd.index("--log-file") + 1] == "/w/.sanitize-racecheck.log"
    assert cmd[-2:] == ["env", "PYTORCH_NO_CUDA_MEMORY_CACHING=1"]
    assert set(sanitizer.BUDGET_S) == set(sanitizer.TOOLS)
    with pytest.raises(ValueError, match="unknown compute-sanitizer tool"):
        sanitizer.command("compute-sanitizer", "leakcheck", "/w/x.log")


def test_on_a_cpu_the_sanitize_rung_says_it_needs_a_gpu() -> None:
    ctx: Any = SimpleNamespace(device="cpu", options=RunOptions(device="cpu", sanitize=True))
    rung = SanitizeRung()
    off: Any = SimpleNamespace(options=RunOptions())
    assert rung.enabled(ctx) and not rung.enabled(off)
    result = rung.run(ctx, Earlier())
    assert result.ok is None and "needs a GPU" in result.reason


def test_without_compute_sanitizer_the_rung_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: None)
    ctx: Any = SimpleNamespace(
        device="cuda",
        options=RunOptions(sanitize=True),
        workers=SimpleNamespace(oneshot=lambda *a, **k: {}),
    )
    result = SanitizeRung().run(ctx, Earlier())
    assert result.ok is None and "compute-sanitizer not found" in result.reason


FAKE_SANITIZER = r"""#!/usr/bin/env python3
# stands in for compute-sanitizer: writes a hand-written report for its --tool to
# --log-file, then runs the wrapped command (env VAR=1 python -m harness.worker ...)
import os, shutil, subprocess, sys
args = sys.argv[1:]
tool = args[args.index("--tool") + 1]
report = {"memcheck": "memcheck_out_of_bounds.txt", "synccheck": "memcheck_unfinished.txt"}
shutil.copyfile(os.path.join("@DIR@", report.get(tool, "h200_synccheck_clean.txt")),
                args[args.index("--log-file") + 1])
sys.exit(subprocess.call(args[args.index("env"):]))
"""


def test_the_rung_wraps_a_worker_per_tool_and_fails_on_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_tool(
        tmp_path, monkeypatch, "compute-sanitizer", FAKE_SANITIZER.replace("@DIR@", str(REPORTS))
    )
    verdict = check_vector_add([SanitizeRung()], shapes=[{"n": 5000}, {"n": 1000}], sanitize=True)
    rung = next(r for r in verdict.rungs if r.name == "sanitize")
    assert rung.ok is False and not verdict.ok
    assert rung.reason.startswith("n=1000: ")  # the smallest shape
    assert "memcheck: 2 x Invalid __global__ read in add_kernel at solution_triton.py:23" in (
        rung.reason
    )
    assert "not checked: synccheck gave no error summary" in rung.reason
    assert rung.metrics == {"memcheck": 4, "initcheck": 0, "racecheck": 0}
    assert verdict.options["sanitize"] is True
