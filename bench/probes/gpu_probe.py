"""Facts about a GPU machine that the harness's design leans on, measured in one
run: interpreter and import costs, CUDA initialisation in a fresh process and in a child
forked from a process that imported torch and triton (before CUDA was touched), whether a
second timer (torch.profiler's CUPTI kernel records) sees a Triton kernel and agrees with
CUDA events, and a plain `python -m harness check` wall time with and without `--bench`.

usage: python bench/probes/gpu_probe.py [--out DIR]   (prints one JSON document, also to DIR/probe.json)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=False, capture_output=True, env=env)
    return time.perf_counter() - t


def imports() -> dict[str, float]:
    py = sys.executable
    return {
        "python_s": _wall([py, "-c", "pass"]),
        "import_torch_s": _wall([py, "-c", "import torch"]),
        "import_torch_triton_s": _wall([py, "-c", "import torch, triton"]),
        "import_torch_cuda_init_s": _wall(
            [py, "-c", "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"]
        ),
    }


def fork_after_import() -> dict[str, object]:
    """A template that imported torch and triton but never touched CUDA forks a child; the
    child initialises CUDA and launches a Triton kernel."""
    code = r"""
import os, time, json, sys
import torch, triton, triton.language as tl
@triton.jit
def k(x, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(x + o, tl.load(x + o, mask=o < n) + 1, mask=o < n)
assert not torch.cuda.is_initialized()
r, w = os.pipe()
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.close(r)
    t0 = time.perf_counter()
    x = torch.zeros(1 << 20, device="cuda"); torch.cuda.synchronize()
    t1 = time.perf_counter()
    k[(1024,)](x, x.numel(), B=1024); torch.cuda.synchronize()
    t2 = time.perf_counter()
    ok = bool((x == 1).all())
    os.write(w, json.dumps({"cuda_init_s": t1 - t0, "first_triton_launch_s": t2 - t1, "ok": ok}).encode())
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
out = json.loads(os.read(r, 4096))
out["fork_to_done_s"] = time.perf_counter() - t
print(json.dumps(out))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    try:
        return dict(json.loads(p.stdout.strip().splitlines()[-1]))
    except Exception:
        return {"error": (p.stderr or p.stdout)[-1500:]}


def profiler_witness() -> dict[str, object]:
    """torch.profiler's CUDA kernel records for a Triton vector add vs CUDA events."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add(x, y, o, n, B: tl.constexpr):
        i = tl.program_id(0) * B + tl.arange(0, B)
        m = i < n
        tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

    n = 1 << 28
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    o = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    for _ in range(3):
        add[grid](x, y, o, n, B=1024)
    torch.cuda.synchronize()
    ev = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        add[grid](x, y, o, n, B=1024)
        e.record()
        torch.cuda.synchronize()
        ev.append(s.elapsed_time(e))
    out: dict[str, object] = {"events_ms_median": sorted(ev)[len(ev) // 2]}
    try:
        from torch.profiler import ProfilerActivity, profile

        t = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                add[grid](x, y, o, n, B=1024)
            torch.cuda.synchronize()
        out["profiler_s"] = time.perf_counter() - t
        durs = [
            e.device_time_total / 1000 if hasattr(e, "device_time_total") else None
            for e in prof.events()
            if "add" in e.name
        ]
        durs = [d for d in durs if d]
        out["profiler_kernel_records"] = len(durs)
        out["profiler_ms_median"] = sorted(durs)[len(durs) // 2] if durs else None
    except Exception as exc:
        out["profiler_error"] = repr(exc)[:500]
    try:
        import cupti  # noqa: F401  (cupti-python)

        out["cupti_python"] = True
    except Exception as exc:
        out["cupti_python"] = repr(exc)[:200]
    return out


def harness_check() -> dict[str, float]:
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=str(REPO))
    base = [py, "-m", "harness", "check", "examples/vector_add",
            "examples/vector_add/solution_triton.py", "--no-record", "--json"]  # fmt: skip
    return {
        "check_s": _wall(base, env),
        "check_again_s": _wall(base, env),
        "check_bench_s": _wall([*base, "--bench"], env),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    os.chdir(REPO)
    result = {
        "imports": imports(),
        "fork_after_import": fork_after_import(),
        "witness": profiler_witness(),
        "harness": harness_check(),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out, "probe.json").write_text(text)


if __name__ == "__main__":
    main()
