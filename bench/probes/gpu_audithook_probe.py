"""Who calls ``sys.addaudithook`` (and the other hook events the guard refuses) while an
honest ``torch.compile`` candidate runs on a GPU: prints each such call's Python stack.

Run on the GPU machine: ``python3 bench/probes/gpu_audithook_probe.py``. No harness involved:
a plain process with an audit hook that reports, then a compiled function in the modes the
harness sees in GPU MODE submissions (default and ``reduce-overhead``)."""

from __future__ import annotations

import sys
import traceback

EVENTS = {"sys.addaudithook", "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback"}
seen: list[str] = []


def _hook(event: str, args: tuple) -> None:
    if event in EVENTS and len(seen) < 6:
        stack = "".join(traceback.format_stack(limit=12)[:-1])
        seen.append(f"--- {event}\n{stack}")


sys.addaudithook(_hook)

import torch  # noqa: E402


def _sum(x: torch.Tensor) -> torch.Tensor:
    return (x * 2.0).sum()


for mode in ("default", "reduce-overhead"):
    fn = torch.compile(_sum, mode=mode)
    x = torch.randn(1 << 20, device="cuda")
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    print(f"mode {mode}: {len(seen)} hook events so far")
print(f"python {sys.version.split()[0]}, torch {torch.__version__}")
print("\n".join(seen) if seen else "no hook events")
