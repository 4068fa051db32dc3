"""Triton's driver helpers built once per worker template and copied into each forked
worker's own cache (``TritonBackend.warm_template`` / ``seed_worker``), and Triton's key made
there once (``warm_lookups``): the template stays without CUDA, and a worker loads the helpers
without running the host compiler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# the template's order: torch imported, the backend's warm-up, then (in a "worker") the seed
# copied into a cache folder of its own and Triton's helpers loaded with every compiler
# call refused
SCRIPT = r"""
import json, os, subprocess, sys
import torch
from harness.backends.triton import TritonBackend, _SEED
backend = TritonBackend()
backend.warm_template()
template_clean = not torch.cuda.is_initialized()
from triton.runtime.cache import triton_key
key_made = triton_key.cache_info().currsize == 1  # warm_lookups: made once, in the template
os.environ["TRITON_CACHE_DIR"] = sys.argv[1]
done = backend.seed_worker()
compiled = []
real_check_call, real_run = subprocess.check_call, subprocess.run
def refuse(real):
    def call(cmd, *args, **kwargs):
        argv = [cmd] if isinstance(cmd, str) else list(cmd)
        if "-shared" in argv or os.path.basename(str(argv[0])) in ("cc", "gcc", "clang", "c++"):
            compiled.append(argv)  # a host-compiler build (not ldconfig's lookup of libcuda)
        return real(cmd, *args, **kwargs)
    return call
subprocess.check_call, subprocess.run = refuse(real_check_call), refuse(real_run)
from triton.backends.nvidia.driver import CudaUtils
CudaUtils()
print(json.dumps({"seed": sorted(_SEED), "done": done, "template_clean": template_clean,
                  "key_made": key_made,
                  "compiler_calls": [str(c) for c in compiled]}))
"""


@pytest.mark.gpu
def test_a_worker_loads_the_driver_helpers_its_template_built(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_CACHE_DIR")}
    env["PYTHONPATH"] = str(ROOT)
    env["TRITON_HOME"] = str(tmp_path / "home")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "worker-cache")],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["template_clean"]  # the build ran in a child: no CUDA in the template
    assert doc["key_made"]  # Triton's key (0.2-0.5 s) made before any worker is forked
    assert any("cuda_utils" in rel for rel in doc["seed"]), doc
    assert doc["done"]["files"] == len(doc["seed"]) >= 1, doc
    assert doc["compiler_calls"] == [], doc  # loaded from the seeded cache, not compiled
    cached = [p.name for p in (tmp_path / "worker-cache").rglob("*") if p.is_file()]
    assert any(name.startswith("cuda_utils") for name in cached)
