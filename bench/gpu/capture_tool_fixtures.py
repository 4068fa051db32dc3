"""Record real ncu and compute-sanitizer output on a GPU, with the harness's own commands,
for the parsers' fixtures (``tests/harness/fixtures/{ncu,sanitizer}``).

Outside the sandbox (what is recorded is the tools' output format, not a verdict):
- compute-sanitizer, each of ``sanitizer.TOOLS`` (``sanitizer.command``), around a small
  CUDA program built here with nvcc (``-lineinfo``) and launched through the driver API
  (ctypes, no torch build): an out-of-bounds write, a read of global memory never written,
  a shared-memory race without a barrier, a barrier inside divergent code, a __syncwarp
  whose mask leaves out the calling lanes, and a clean kernel;
- ncu (``ncu.command``: raw page, per-opcode instances) around Triton kernels inside the
  harness's NVTX range: a bf16 matmul (``tl.dot``: HGMMA on Hopper), the same in fp32
  with ``input_precision="ieee"`` (a SIMT fallback: FFMA) and a vector add.
Each log is parsed by the harness's parser and the summary printed beside it. Logs under
``$OUT/fixtures``. About a minute and a half on the H200.

    python3 bench/gpu/capture_tool_fixtures.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.perf import isa, ncu, sanitizer  # noqa: E402

CUDA_SOURCE = r"""
extern "C" __global__ void out_of_bounds(float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i + 64] = 1.0f;  // the last 64 threads write past the end
}
extern "C" __global__ void never_written(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 2.0f;  // `in` allocated, never written
}
extern "C" __global__ void shared_race(const float *in, float *out, int n) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    tile[t] = in[t];
    // no barrier: a neighbour's element may not be written yet
    out[t] = tile[(t + 1) % 256];
}
extern "C" __global__ void divergent_barrier(float *out, int n) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    tile[t] = (float)t;
    if (t < 128) __syncthreads();  // half the block never reaches it
    out[t] = tile[255 - t];
}
extern "C" __global__ void bad_syncwarp(float *out, int n) {
    int t = threadIdx.x;
    out[t] = (float)t;
    __syncwarp(0x0000ffffu);  // lanes 16-31 name a mask without themselves
    out[t] += 1.0f;
}
extern "C" __global__ void clean(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + 1.0f;
}
"""

LAUNCHER = r"""
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
def ok(r, what):
    if r != 0:
        raise SystemExit(f"{what}: CUDA error {r}")
ok(cu.cuInit(0), "cuInit")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
ok(cu.cuCtxSetCurrent(ctx), "set")
mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
ok(cu.cuModuleLoad(ctypes.byref(mod), sys.argv[1].encode()), "load")
name = sys.argv[2]
ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "function")
n = 256
a, b = ctypes.c_uint64(), ctypes.c_uint64()
ok(cu.cuMemAlloc_v2(ctypes.byref(a), n * 4), "alloc")
ok(cu.cuMemAlloc_v2(ctypes.byref(b), n * 4), "alloc")
if name not in ("never_written",):
    host = (ctypes.c_float * n)(*range(n))
    ok(cu.cuMemcpyHtoD_v2(a, host, n * 4), "copy")
count = ctypes.c_int(n)
if name in ("out_of_bounds", "divergent_barrier", "bad_syncwarp"):
    args = [ctypes.byref(a), ctypes.byref(count)]
else:
    args = [ctypes.byref(a), ctypes.byref(b), ctypes.byref(count)]
params = (ctypes.c_void_p * len(args))(*[ctypes.cast(p, ctypes.c_void_p) for p in args])
ok(cu.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, None, params, None), "launch")
print("sync", cu.cuCtxSynchronize())
"""

TRITON_PROGRAM = r"""
import sys, torch, triton, triton.language as tl

@triton.jit
def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, IEEE: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        if IEEE:
            acc += tl.dot(x, y, input_precision="ieee")
        else:
            acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty))

@triton.jit
def add(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)

which = sys.argv[1]
if which == "add":
    n = 1 << 24
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    o = torch.empty_like(x)
    run = lambda: add[(triton.cdiv(n, 1024),)](x, y, o, n, B=1024)
else:
    s = 2048
    dt = torch.bfloat16 if which == "bf16" else torch.float32
    a = torch.randn(s, s, device="cuda", dtype=dt)
    b = torch.randn(s, s, device="cuda", dtype=dt)
    c = torch.empty(s, s, device="cuda", dtype=dt)
    bk = 64 if which == "bf16" else 32
    run = lambda: matmul[(s // 128, s // 128)](a, b, c, s, s, s, BM=128, BN=128, BK=bk,
                                               IEEE=which != "bf16", num_warps=8)
run(); torch.cuda.synchronize()  # compiled outside the profiled range
torch.cuda.nvtx.range_push(NVTX)
run(); torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
print("ran", which)
"""


def main() -> None:
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp()) / "fixtures"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ck-fixtures-"))
    san = sanitizer.find_sanitizer()
    nvcc = shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None
    )
    print("compute-sanitizer", san, "nvcc", nvcc, "ncu", ncu.find_ncu(), flush=True)
    if san and nvcc:
        (work / "bugs.cu").write_text(CUDA_SOURCE)
        (work / "launch.py").write_text(LAUNCHER)
        built = subprocess.run(
            [nvcc, "-cubin", "-arch=sm_90", "-lineinfo", "-o", str(work / "bugs.cubin"),
             str(work / "bugs.cu")], capture_output=True, text=True,
        )  # fmt: skip
        print("nvcc", built.returncode, built.stderr[-500:], flush=True)
        cases = {
            "memcheck": ["out_of_bounds", "clean"],
            "initcheck": ["never_written", "clean"],
            "racecheck": ["shared_race", "clean"],
            "synccheck": ["divergent_barrier", "bad_syncwarp", "clean"],
        }
        for tool, kernels in cases.items():
            for kernel in kernels:
                log = out / f"sanitizer_{tool}_{kernel}.txt"
                cmd = sanitizer.command(san, tool, str(log))
                done = subprocess.run(
                    [*cmd, sys.executable, str(work / "launch.py"), str(work / "bugs.cubin"), kernel],
                    capture_output=True, text=True, timeout=300,
                )  # fmt: skip
                text = log.read_text(errors="replace") if log.exists() else ""
                summary = sanitizer.summarize(sanitizer.parse(text, tool))
                print(f"{tool:9s} {kernel:18s} rc={done.returncode} {summary}", flush=True)
                if not text:
                    print("   ", (done.stdout + done.stderr)[-600:], flush=True)
    binary = ncu.find_ncu()
    if binary:
        prog = work / "triton_prog.py"
        prog.write_text(TRITON_PROGRAM.replace("NVTX", repr(ncu.NVTX_RANGE)))
        for which in ("bf16", "fp32_ieee", "add"):
            log = out / f"ncu_{which}.csv"
            done = subprocess.run(
                [*ncu.command(binary, str(log)), sys.executable, str(prog), which],
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            text = log.read_text(errors="replace") if log.exists() else ""
            profiles = ncu.parse_raw_csv(text)
            hot = isa.hot(profiles)
            ev = isa.evidence(hot) if hot else None
            print(f"ncu {which:9s} rc={done.returncode} kernels={len(profiles)} evidence={ev}",
                  flush=True)  # fmt: skip
            if not profiles:
                print("   ", (done.stdout + done.stderr)[-800:], flush=True)


if __name__ == "__main__":
    main()
