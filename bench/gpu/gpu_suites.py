"""Issue 18 on the H200 in one call: the gpu-marked tests and the real upstream suites.

Two steps:

``prepare`` (here, where the local mirrors are) copies the upstream files a run needs --
GPU MODE ``problems/pmpp_v2`` with their ``solutions/`` and ``utils.py``/``eval.py``, and
KernelBench level-1/2 problems -- unchanged into ``bench/.upstream/`` (ignored by git;
a few MiB, carried to the device)::

    python bench/gpu/gpu_suites.py prepare --reference-kernels MIRROR/reference-kernels \\
        --kernelbench MIRROR/KernelBench

``run`` (on the GPU; on a CPU it runs the same with ``--device cpu``) runs, each with a
time limit, (1) ``pytest -m gpu`` on ``tests/harness/test_gpu_issue18.py`` and
``test_harness_gpu.py``; (2) every GPU MODE pmpp_v2 submission and solution through
``check`` (plain-PyTorch ones as ``--backend torch``: upstream's "correct" solutions are
PyTorch), expecting ``solutions/wrong/*`` to fail and the rest to pass; (3) the
KernelBench problems: each loads and its reference runs on the device's default shapes,
and the honest Triton candidates under ``bench/candidates/kb_*.py`` pass while the
library passthrough fails; (4) the wall time of a hanging kernel's verdict. Results:
``OUT/gpu_suites.json`` and ``OUT/pytest.log``. On the H200 the tests and the suites
are two device calls of under ten minutes each::

    python bench/gpu/gpu_suites.py run --only pytest --pytest-s 560 --out "$OUT"
    python bench/gpu/gpu_suites.py run --only hang,gpumode,kernelbench --out "$OUT"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "bench" / ".upstream"
CANDIDATES = REPO / "bench" / "candidates"
KB_PROBLEMS = [
    "level1/19_ReLU.py",
    "level1/23_Softmax.py",
    "level1/40_LayerNorm.py",
    "level1/1_Square_matrix_multiplication_.py",
    "level1/21_Sigmoid.py",
    "level1/36_RMSNorm_.py",
    "level1/47_Sum_reduction_over_a_dimension.py",
    "level1/88_MinGPTNewGelu.py",
    "level2/12_Gemm_Multiply_LeakyReLU.py",
    "level2/40_Matmul_Scaling_ResidualAdd.py",
]
# honest Triton ModelNew candidates written for this script (and the passthrough cheat)
KB_CANDIDATES = {
    "19_ReLU": [("kb_relu_triton.py", True), ("kb_relu_passthrough.py", False)],
    "40_LayerNorm": [("kb_layernorm_triton.py", True)],
}
# 19_ReLU's inputs are torch.rand (never negative): a copy of the input passes its check on
# every shape, so the signal check refuses it unless told why it is checked anyway
KB_OPTIONS: dict[str, dict[str, Any]] = {
    "19_ReLU": {"signal_exempt": "upstream inputs are non-negative: relu is the identity there"},
}


def prepare(args: argparse.Namespace) -> int:
    import shutil
    import tarfile
    import tempfile

    if UPSTREAM.exists():
        shutil.rmtree(UPSTREAM)
    UPSTREAM.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "rk.tar"
        subprocess.run(
            ["git", "-C", args.reference_kernels, "archive", "-o", str(archive), "HEAD",
             "problems/pmpp_v2"],
            check=True,
        )  # fmt: skip
        with tarfile.open(archive) as tar:
            tar.extractall(UPSTREAM / "reference-kernels", filter="data")
    kb = UPSTREAM / "KernelBench"
    for rel in KB_PROBLEMS:
        text = subprocess.run(
            ["git", "-C", args.kernelbench, "show", f"HEAD:KernelBench/{rel}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        dest = kb / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    size = sum(p.stat().st_size for p in UPSTREAM.rglob("*") if p.is_file())
    print(f"prepared {UPSTREAM.relative_to(REPO)} ({size / 1e6:.1f} MB)")
    return 0


def _check(
    problem: Path, candidate: Path, device: str, torch_ok: bool = False, **extra: Any
) -> dict[str, Any]:
    from harness.problems.candidate import load_candidate
    from harness.problems.problem import load_problem
    from harness.runner import LocalRunner, RunOptions, check

    backend = None
    try:
        detected = load_candidate(candidate, load_problem(problem)).backend
    except Exception:
        detected = None
    if torch_ok and detected == "torch":
        backend = "torch"  # upstream's PyTorch solutions, checked as PyTorch
    options = RunOptions(device=device, record=False, backend=backend, **extra)
    t0 = time.monotonic()
    try:
        verdict = check(problem, candidate, options, runner=LocalRunner())
    except Exception as exc:  # a problem that cannot be loaded: recorded, the run goes on
        return {"ok": None, "error": f"{type(exc).__name__}: {exc}"[:300], "wall_s": 0.0}
    failed = verdict.failed_rung
    return {
        "ok": verdict.ok,
        "backend": verdict.backend,
        "failed_rung": failed.name if failed else None,
        "reason": (failed.reason if failed else "")[:300],
        "shapes": verdict.seeds.get("shapes"),
        "wall_s": round(time.monotonic() - t0, 2),
    }


def gpumode(device: str, deadline: float) -> list[dict[str, Any]]:
    out = []
    root = UPSTREAM / "reference-kernels" / "problems" / "pmpp_v2"
    for problem in sorted(p for p in root.iterdir() if (p / "reference.py").is_file()):
        files = [problem / "submission.py", *sorted((problem / "solutions").rglob("*.py"))]
        for candidate in files:
            if not candidate.is_file() or time.monotonic() > deadline:
                continue
            expect = "wrong" not in candidate.parts
            result = _check(problem, candidate, device, torch_ok=True)
            result.update(
                problem=problem.name, candidate=str(candidate.relative_to(problem)), expect=expect
            )
            result["as_expected"] = result["ok"] == expect
            print(json.dumps(result), flush=True)
            out.append(result)
    return out


def kernelbench(device: str, deadline: float) -> list[dict[str, Any]]:
    import torch

    from harness.problems.problem import load_problem

    out = []
    for rel in KB_PROBLEMS:
        path = UPSTREAM / "KernelBench" / rel
        if not path.is_file() or time.monotonic() > deadline:
            continue
        entry: dict[str, Any] = {"problem": rel}
        try:
            problem = load_problem(path)
            shape = problem.shapes_for(device)[0]
            t0 = time.monotonic()
            data = problem.generate_input(1, shape, device)
            problem.ref_output(data, shape)
            if device == "cuda":
                torch.cuda.synchronize()
            entry.update(loads=True, shape=shape, reference_s=round(time.monotonic() - t0, 3))
        except Exception as exc:
            entry.update(loads=False, error=f"{type(exc).__name__}: {exc}"[:300])
        for name, expect in KB_CANDIDATES.get(path.stem, []):
            result = _check(path, CANDIDATES / name, device, **KB_OPTIONS.get(path.stem, {}))
            result.update(candidate=name, expect=expect, as_expected=result["ok"] == expect)
            entry.setdefault("candidates", []).append(result)
        print(json.dumps(entry), flush=True)
        out.append(entry)
    return out


def hang(device: str) -> dict[str, Any]:
    cheat = REPO / "tests" / "harness" / "gpu_cheats" / "g06_hang.py"
    result = _check(
        REPO / "examples" / "vector_add",
        cheat,
        device,
        timeout_s=10.0,
        policy_scan=False,
        trials=1,
        shapes=[{"n": 1000}],
    )
    result["timeout_s"] = 10.0
    result["within_timeout_plus_10"] = result["wall_s"] <= 20.0 + 15.0  # + worker start
    return result


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    results: dict[str, Any] = {"device": args.device, "started": time.strftime("%F %T UTC")}
    env = dict(os.environ, PYTHONPATH=str(REPO))
    only = set(args.only.split(","))
    if args.device == "cuda" and "pytest" in only:
        t0 = time.monotonic()
        with open(out / "pytest.log", "w") as log:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                 "tests/harness/test_gpu_issue18.py", "tests/harness/test_harness_gpu.py"],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                timeout=args.pytest_s, check=False,
            )  # fmt: skip
        tail = (out / "pytest.log").read_text().strip().splitlines()[-1:]
        results["pytest"] = {"rc": proc.returncode, "last": tail, "wall_s": time.monotonic() - t0}
        print("pytest:", results["pytest"], flush=True)
    if "hang" in only:
        results["hang"] = hang(args.device)
        print("hang:", results["hang"], flush=True)
    deadline = start + args.budget_s
    if "gpumode" in only:
        results["gpumode"] = gpumode(args.device, deadline - 120)
    if "kernelbench" in only:
        results["kernelbench"] = kernelbench(args.device, deadline)
    results.setdefault("gpumode", [])
    results.setdefault("kernelbench", [])
    g = results["gpumode"]
    results["summary"] = {
        "gpumode_as_expected": f"{sum(r['as_expected'] for r in g)}/{len(g)}",
        "kernelbench_loads": f"{sum(bool(e.get('loads')) for e in results['kernelbench'])}"
        f"/{len(results['kernelbench'])}",
        "kernelbench_candidates_as_expected": "{}/{}".format(
            sum(c["as_expected"] for e in results["kernelbench"] for c in e.get("candidates", [])),
            sum(len(e.get("candidates", [])) for e in results["kernelbench"]),
        ),
        "wall_s": round(time.monotonic() - start, 1),
    }
    print(json.dumps(results["summary"]), flush=True)
    name = "gpu_suites.json" if only != {"pytest"} else "gpu_pytest.json"
    (out / name).write_text(json.dumps(results, indent=1, default=str))
    return 0


def main() -> int:
    sys.path.insert(0, str(REPO))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--reference-kernels", required=True)
    p.add_argument("--kernelbench", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", default=os.environ.get("OUT", "gpu-suites-out"))
    r.add_argument("--device", default="cuda")
    r.add_argument("--budget-s", type=float, default=560.0)
    r.add_argument("--pytest-s", type=float, default=300.0)
    r.add_argument(
        "--only",
        default="pytest,hang,gpumode,kernelbench",
        help="comma-separated parts (one device call of <= 10 min each: pytest; the rest)",
    )
    args = parser.parse_args()
    return prepare(args) if args.cmd == "prepare" else run(args)


if __name__ == "__main__":
    raise SystemExit(main())
