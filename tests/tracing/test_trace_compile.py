"""The device-side helpers compile without a GPU: the CUDA header (nvcc) and CuTeDSL's CuteTrace
(``cute.compile`` for sm_90a); traced builds read the clocks, plain builds contain nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tracing import ck_trace

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

KERNEL = r"""
__global__ void k(float* out, int n, long long* trace) {
    CK_TRACE_OPEN(trace, CK_TRACE_WARP);
    CK_TRACE_BEGIN(0);
    float acc = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += out[i];
    __syncthreads();
    CK_TRACE_END(0);
    CK_TRACE_BEGIN(1);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    CK_TRACE_END(1);
}
"""


def _example_kernel() -> str:
    """The traced CUDA example's kernel, without its torch binding."""
    text = (EXAMPLES / "matmul_bf16" / "solution_cuda_traced.py").read_text()
    return text[text.index("#include <cuda_bf16.h>") : text.index("torch::Tensor matmul_bf16(")]


@pytest.mark.parametrize("source", ["small", "example"])
def test_cuda_header_compiles_traced_and_plain(tmp_path: Path, source: str) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    body = KERNEL if source == "small" else _example_kernel()
    ptx = {}
    for on in (True, False):
        cu = tmp_path / f"k_{on}.cu"
        cu.write_text(ck_trace.cuda_header(on) + body)
        out = tmp_path / f"k_{on}.ptx"
        proc = subprocess.run([nvcc, "-arch=sm_90a", "-ptx", str(cu), "-o", str(out)],
                              capture_output=True, text=True, timeout=240, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        ptx[on] = out.read_text()
    assert "%globaltimer" in ptx[True] and "%clock64" in ptx[True] and "%smid" in ptx[True]
    assert "%globaltimer" not in ptx[False] and "%clock64" not in ptx[False]


CUTE = r"""
import os, sys
from harness.backends import get_backend
from harness.tracing import install_candidate_api
install_candidate_api()  # what the worker does before it imports a CuTeDSL candidate
get_backend("cutedsl").prepare_trace("cpu", "")
from harness.worker.guards import install_audit_guard
guard = install_audit_guard(os.getcwd())  # compiles run with the guards on, as in a worker
sys.path.insert(0, sys.argv[1])
import solution_cutedsl_traced as s
import cutlass, torch, cuda.bindings.driver as cuda
x = torch.randn(4097); y = torch.randn(4097); o = torch.empty(4097)
for on in ("0", "1"):
    os.environ["CTXKERNEL_TRACE"] = on  # decided when the kernel is traced
    args = (s._view(x, 16), s._view(y, 16), s._view(o, 16), cutlass.Int32(4097), cutlass.Int64(0))
    guard.activate()
    compiled = s.cute.compile(s.vector_add, *args, cuda.CUstream(0))
    guard.deactivate()
    ptx = compiled.__ptx__ or ""
    print("MODE", on, "GT", "%globaltimer" in ptx, "V4", "ld.global.v4" in ptx,
          "STORES", ptx.count("st.global.u64"))
print("VIOLATIONS", [v.message for v in guard.take_violations()])
"""


def test_cutedsl_helper_compiles_for_sm90a(tmp_path: Path) -> None:
    pytest.importorskip("cutlass.cute")
    dump = tmp_path / "dump"
    dump.mkdir()
    env = {
        "CUTE_DSL_ARCH": "sm_90a",
        "CUTE_DSL_KEEP": "ptx,cubin",
        "CUTE_DSL_DUMP_DIR": str(dump),
        "TMPDIR": str(tmp_path),
        "HOME": str(tmp_path),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run([sys.executable, "-c", CUTE, str(EXAMPLES / "vector_add")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=400,
                          check=False)  # fmt: skip
    modes = {
        line.split()[1]: line.split()
        for line in proc.stdout.splitlines()
        if line.startswith("MODE")
    }
    assert set(modes) == {"0", "1"}, proc.stdout[-2000:] + proc.stderr[-3000:]
    plain, traced = modes["0"], modes["1"]
    assert plain[3] == "False" and traced[3] == "True"  # clocks only in the traced build
    assert plain[5] == traced[5] == "True"  # the 128-bit accesses survive the instrumentation
    assert int(plain[7]) == 0 and int(traced[7]) >= 8  # unit header + events
    assert "VIOLATIONS []" in proc.stdout
