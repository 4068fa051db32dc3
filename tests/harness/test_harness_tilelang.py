"""The TileLang backend: on a CPU a clear "needs a CUDA GPU" after the pre-checks; its kernels
compile for sm_90a under the worker's guards with launches counted and the generated CUDA,
PTX and CUBIN collected (no GPU needed); the agent's primer; and on a GPU (marked ``gpu``)
the whole ladder for both examples, and a wrong kernel caught at correctness."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends import get_backend
from harness.runner import LocalRunner, RunOptions, check

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
WRONG = Path(__file__).resolve().parent / "fixtures" / "tilelang" / "k_tail_dropped.py"
SOLUTIONS = [EXAMPLES / "vector_add", EXAMPLES / "matmul_bf16"]


@pytest.mark.parametrize("problem", SOLUTIONS, ids=lambda p: p.name)
def test_on_a_cpu_tilelang_passes_the_pre_checks_then_needs_a_gpu(problem: Path) -> None:
    verdict = check(
        problem,
        problem / "solution_tilelang.py",
        RunOptions(device="cpu", record=False),
        runner=LocalRunner(),
    )
    assert verdict.backend == "tilelang" and not verdict.ok
    assert [(r.name, r.status) for r in verdict.rungs[:2]] == [
        ("pre-checks", "ok"),
        ("compile", "failed"),
    ]
    assert verdict.reason == "backend tilelang needs a CUDA GPU; this check runs on cpu"
    assert all(r.status == "skipped" for r in verdict.rungs[2:])
    assert verdict.feedback().startswith("FAILED at rung 'compile' (problem ")


def test_tilelang_kernel_bodies_are_kernel_code_for_the_static_scan() -> None:
    """``T.gemm`` on tiles is the kernel; a host-side ``a @ b`` next to it is not."""
    from harness.problems.policy import Policy
    from harness.problems.problem import load_problem
    from harness.staticscan import scan

    problem = load_problem(EXAMPLES / "matmul_bf16")
    policy = Policy.from_entries(problem.forbidden)
    source = (EXAMPLES / "matmul_bf16" / "solution_tilelang.py").read_text()
    assert not scan(source, policy, entry="custom_kernel").errors
    cheat = source.replace("    c = KERNEL(", "    c = a @ b\n    c = KERNEL(")
    assert any(f.rule == "P101" for f in scan(cheat, policy, entry="custom_kernel").errors)


COMPILE = r"""
import json, os, sys, time
from harness.backends import get_backend
backend = get_backend("tilelang")
counter = backend.prepare_worker("cuda")
from harness.worker.guards import install_audit_guard
from harness.worker.snapshots import IdentitySnapshot
snapshot = IdentitySnapshot.take()
guard = install_audit_guard(os.getcwd())  # the candidate's import compiles: guards on
import importlib.util, torch
spec = importlib.util.spec_from_file_location("solution_tilelang", sys.argv[1])
module = importlib.util.module_from_spec(spec)
guard.activate()
spec.loader.exec_module(module)
try:
    module.custom_kernel((torch.randn(4100), torch.randn(4100)))  # no GPU: the launch fails
except Exception:
    pass
guard.deactivate()
notes = []
files = backend.collect_artifacts(None, notes, None)
os.makedirs("files")
for meta, data in files:
    with open(os.path.join("files", meta["name"]), "wb") as fh:
        fh.write(data)
sys.path.insert(0, os.getcwd())
from broken_kernel import broken
try:
    broken()
    lowering = None
except Exception as exc:
    lowering = [type(exc).__name__, backend.is_compile_error(exc)]
print("RESULT", json.dumps({
    "violations": [v.message for v in guard.take_violations()],
    "patched": snapshot.changed(), "launches": counter.count, "notes": notes,
    "files": [[m["name"], m["kind"], len(d)] for m, d in files],
    "lowering": lowering, "plain": backend.is_compile_error(ValueError("bad shape")),
}))
"""


BROKEN = """\
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def broken():
    @T.prim_func
    def main(
        a: T.Tensor((64, 32), T.float16),
        b: T.Tensor((16, 64), T.float16),
        c: T.Tensor((64, 64), T.float32),
    ):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((64, 32), T.float16)
            b_s = T.alloc_shared((16, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(a, a_s)
            T.copy(b, b_s)
            T.gemm(a_s, b_s, acc)  # the k of a (32) is not the k of b (16)
            T.copy(acc, c)

    return main
"""


@pytest.mark.slow
def test_tilelang_vector_add_compiles_for_sm90a_under_the_guards(tmp_path: Path) -> None:
    """What the worker does with a TileLang candidate, on a CPU: TileLang compiles for an
    explicit sm_90a target (``TILELANG_DEFAULT_TARGET``) with nvcc; the dumps read SASS."""
    pytest.importorskip("tilelang")
    if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        pytest.skip("nvcc not found (TileLang builds its kernels with it)")
    env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "CUDA_HOME", "LANG")},
        "TILELANG_DEFAULT_TARGET": json.dumps({"kind": "cuda", "arch": "sm_90a"}),
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": str(REPO),
        "PYTHONDONTWRITEBYTECODE": "1",
        **get_backend("tilelang").worker_env("cuda"),
        **get_backend("tilelang").cache_env(tmp_path),
    }
    (tmp_path / "broken_kernel.py").write_text(BROKEN)
    staged = shutil.copy(EXAMPLES / "vector_add" / "solution_tilelang.py", tmp_path)  # as a worker
    proc = subprocess.run(
        [sys.executable, "-c", COMPILE, staged],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
        check=False,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), "")
    assert line, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(line[len("RESULT ") :])
    assert result["violations"] == [] and result["patched"] == []
    assert result["launches"] == 1  # counted though the launch itself fails without a GPU
    assert {kind for _, kind, _ in result["files"]} == {"cu", "ptx", "cubin"}, result["notes"]
    assert result["lowering"] is not None and result["lowering"][1] is True
    assert result["plain"] is False
    assert (tmp_path / ".tilelang-cache").is_dir()  # the cache stays in the worker's home

    from harness.perf.dumps import write_dump

    files = [
        ({"name": n, "kernel": "vector_add", "version": "k0", "kind": k},
         (tmp_path / "files" / n).read_bytes())
        for n, k, _ in result["files"]
    ]  # fmt: skip
    summary = write_dump(tmp_path / "dump", files, "tilelang", False)
    assert summary["sass"], summary["notes"]
    report = summary["reports"][0]
    assert "__global__" in (tmp_path / "dump" / "vector_add" / "k0" / "vector_add.cu").read_text()
    assert report["sass"]["global_loads"].get("128"), report["sass"]  # full tiles: float4
    assert report["registers"]


def test_the_agent_is_primed_for_tilelang() -> None:
    from ctxkernel.agent.prompt import DeviceInfo, load_brief, system_prompt

    brief = load_brief(EXAMPLES / "matmul_bf16")
    text = system_prompt(brief, "tilelang", DeviceInfo("cuda", "cuda (NVIDIA H200)"), 0.8)
    assert "## Backend: tilelang" in text and "T.gemm" in text and '"corpus": "tilelang"' in text
    assert "### Where the time goes" not in text  # no intra-kernel trace recorder for TileLang


# -- on the GPU --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("problem", SOLUTIONS, ids=lambda p: p.name)
def test_tilelang_examples_pass_the_whole_ladder_on_a_gpu(problem: Path, tmp_path: Path) -> None:
    options = RunOptions(device="cuda", record=False, bench=True, dump_dir=tmp_path / "dump")
    verdict = check(problem, problem / "solution_tilelang.py", options, runner=LocalRunner())
    assert verdict.ok, verdict.feedback()
    status = {r.name: r.status for r in verdict.rungs}
    for name in ("compile", "run", "correctness", "anti-cheat", "benchmark", "roofline", "dumps"):
        assert status[name] == "ok", (name, verdict.feedback())
    assert verdict.summary is not None and (verdict.summary.pct_of_roofline or 0) > 0
    dump = verdict.performance["dump"]
    assert dump["kernels"] and (tmp_path / "dump" / "report.txt").is_file()
    sources = list((tmp_path / "dump").rglob("*.cu"))
    assert sources and list((tmp_path / "dump").rglob("*.sass"))
    if problem.name == "matmul_bf16":
        assert "HGMMA" in str(dump["mma"])  # T.gemm lowered to warpgroup MMA


@pytest.mark.gpu
def test_a_wrong_tilelang_kernel_fails_at_correctness_with_the_worst_elements() -> None:
    verdict = check(
        EXAMPLES / "matmul_bf16",
        WRONG,
        RunOptions(device="cuda", record=False),
        runner=LocalRunner(),
    )
    assert verdict.failed_rung is not None and verdict.failed_rung.name == "correctness"
    assert "elements outside" in verdict.reason
    feedback = verdict.feedback()
    assert "worst mismatches (index: expected vs got):" in feedback
    assert verdict.failed_rung.details["worst"]
