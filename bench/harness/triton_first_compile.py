"""Where a fresh process's first Triton call spends its time (the compile rung was
1.6-1.8 s of a 4 s verdict): import, CUDA init, the driver's C helpers, the kernel's
compile and first launch, a second launch. Each case is a fresh process.

    python3 bench/harness/triton_first_compile.py

Cases: ``cold`` (empty cache dir), ``warm`` (same dir again: kernel and helpers cached),
``other kernel`` (same dir, a new specialisation: helpers cached, kernel compiled),
``cold again`` (a new empty dir).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch, triton, triton.language as tl
t1 = time.perf_counter()
x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize()
t2 = time.perf_counter()
getattr(triton.runtime.driver.active, "utils", None)  # the driver's C helpers
t3 = time.perf_counter()
B = int(sys.argv[1])

@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) * 2.0, mask=m)

out = torch.empty_like(x)
k[(x.numel() // B,)](x, out, x.numel(), BLOCK=B); torch.cuda.synchronize()
t4 = time.perf_counter()
k[(x.numel() // B,)](x, out, x.numel(), BLOCK=B); torch.cuda.synchronize()
t5 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "cuda_init": t2 - t1, "driver_utils": t3 - t2,
                  "first_call": t4 - t3, "second_call": t5 - t4}))
"""


def run(script: Path, cache: str, block: str) -> dict[str, object]:
    env = {**os.environ, "TRITON_CACHE_DIR": cache, "TRITON_HOME": cache}
    proc = subprocess.run(
        [sys.executable, str(script), block], env=env, capture_output=True, text=True
    )
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: round(v, 3) for k, v in row.items()}


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tfc-"))
    script = work / "first_call.py"  # @triton.jit reads its source from a file
    script.write_text(CHILD)
    cache = str(work / "cache")
    rows = {
        "cold": run(script, cache, "1024"),
        "warm": run(script, cache, "1024"),
        "other kernel": run(script, cache, "512"),
        "cold again": run(script, str(work / "cache2"), "1024"),
    }
    for name, row in rows.items():
        print(f"{name}: {row}")


if __name__ == "__main__":
    main()
