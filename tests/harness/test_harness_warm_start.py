"""What a check starts before it needs it: Triton's GPU-free lookups made once in
the worker template (``triton.warm_lookups``), and the benchmark's fresh worker started once
the candidate compiles (``Ladder._start_ahead`` / ``Workers.open_ahead``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cheatspec import EXAMPLES

from harness.rungs.compile import CompileRung
from harness.rungs.ladder import Ladder
from harness.rungs.precheck import PreCheckRung
from harness.runner import LocalRunner, RunOptions, check
from harness.verdict import RungResult, Verdict

ROOT = Path(__file__).resolve().parents[2]

# the template's order: torch and triton imported, the lookups made; then a forked child
# (a worker) asks for Triton's key: a hit on the template's value, no new computation
LOOKUPS = r"""
import json, os, sys
import torch, triton
from harness.backends.triton import warm_lookups
took = warm_lookups()
from triton.runtime.cache import triton_key
before = triton_key.cache_info()
pid = os.fork()
if pid == 0:
    triton_key()
    after = triton_key.cache_info()
    os._exit(0 if (after.misses, after.hits) == (before.misses, before.hits + 1) else 3)
_, status = os.waitpid(pid, 0)
with open("/proc/self/maps") as fh:
    maps = fh.read()
print(json.dumps({"took": took, "child": os.waitstatus_to_exitcode(status),
                  "cuda": torch.cuda.is_initialized(), "libcuda": "libcuda" in maps}))
"""


def test_the_template_makes_tritons_key_once_for_every_worker_it_forks() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", LOOKUPS], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert "triton_key" in doc["took"], doc
    assert doc["child"] == 0, doc  # the forked worker's lookup was a hit on the template's
    assert not doc["cuda"] and not doc["libcuda"], doc  # the template stays without CUDA


def _options() -> RunOptions:
    return RunOptions(device="cpu", trials=1, burst=2, record=False, timeout_s=120.0)


class _Probe:
    """A rung after the compile rung that starts the benchmark's worker ahead (as the
    benchmark rung does on a GPU) and, when ``use`` is set, asks for it as the benchmark
    does."""

    name, gating = "probe", False

    def __init__(self, use: bool) -> None:
        self.use = use
        self.seen: dict[str, Any] = {}

    def enabled(self, ctx: Any) -> bool:
        return True

    def ahead(self, ctx: Any) -> None:
        self.seen["ahead_at"] = [r for r in ctx.workers._aux] + ["compiled"]
        ctx.workers.open_ahead("bench")
        self.seen["pid"] = ctx.workers._ahead["bench"].worker_pid

    def run(self, ctx: Any, earlier: Any) -> RungResult:
        if self.use:
            session, reply = ctx.workers.aux("bench")
            self.seen["same"] = session.worker_pid == self.seen.get("pid")
            self.seen["loaded"] = reply.get("ok")
        return RungResult.passed(self)


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _check_with(probe: _Probe) -> Verdict:
    """The vector add example through pre-checks, compile and ``probe``."""
    return check(
        EXAMPLES / "vector_add",
        EXAMPLES / "vector_add" / "solution_triton.py",
        _options(),
        runner=LocalRunner(Ladder([PreCheckRung(), CompileRung(), probe])),
    )


def test_the_worker_started_ahead_is_the_one_the_benchmark_loads() -> None:
    probe = _Probe(use=True)
    verdict = _check_with(probe)
    assert verdict.ok, [(r.name, r.reason) for r in verdict.rungs]
    assert probe.seen["ahead_at"] == ["compiled"]  # after the compile rung, before any aux
    assert probe.seen["same"] and probe.seen["loaded"], probe.seen
    assert (
        verdict.environment["workers"]["forked"] + verdict.environment["workers"]["spawned"] == 2
    )  # the ladder's and the one started ahead: no third
    assert _gone(int(probe.seen["pid"]))


def test_a_worker_started_ahead_and_never_used_ends_with_the_check() -> None:
    probe = _Probe(use=False)
    verdict = _check_with(probe)
    assert verdict.ok
    assert _gone(int(probe.seen["pid"]))


def test_a_candidate_that_does_not_compile_starts_nothing_ahead(tmp_path: Path) -> None:
    bad = tmp_path / "solution_triton.py"
    bad.write_text(
        (EXAMPLES / "vector_add" / "solution_triton.py").read_text()
        + "\nraise RuntimeError('broken at import')\n"
    )
    probe = _Probe(use=True)
    verdict = check(
        EXAMPLES / "vector_add",
        bad,
        _options(),
        runner=LocalRunner(Ladder([PreCheckRung(), CompileRung(), probe])),
    )
    assert not verdict.ok
    assert probe.seen == {}
    assert verdict.environment["workers"]["forked"] + verdict.environment["workers"]["spawned"] == 1
