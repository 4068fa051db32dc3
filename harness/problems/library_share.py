"""The library share: how much of a call's work ran in the candidate's own kernels.

"Some kernel of the declared backend launched" is not "the kernel did the work": a decoy
launches a Triton copy while ``torch.mm`` computes the result. So one call (the anti-cheat
rung's, on the largest checked shape) is measured:

- on a GPU, torch's Kineto profiler records every kernel with its device time (CUPTI; the
  worker's side is ``kernel_profiler`` and ``kernel_records``). A kernel is the
  candidate's own when its backend's launch hook saw a kernel of that name launched
  (Triton: every ``JITFunction``, and the user kernels ``torch.compile`` runs) or, for
  backends without one, when its name is a kernel the candidate's source defines
  (``__global__`` functions, decorated kernel functions). Everything else -- cuBLAS,
  cuDNN, ATen's elementwise kernels, copies and fills, the kernels ``torch.compile``
  generates from PyTorch code -- is library;
- on a CPU (the Triton interpreter), the op recorder's count of the tensor elements
  library compute ops were given, against the elements of the call's inputs.

``measure(call, ...)`` returns a ``Share`` (own fraction, the library kernels and their
fractions); below the problem's ``MIN_KERNEL_SHARE`` the check fails naming them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFS = re.compile(r"(?:__global__[^(]*?\b|def\s+)([A-Za-z_][A-Za-z0-9_]*)\s*\(")


# -- worker side -----------------------------------------------------------------------------


def kernel_profiler() -> Any:
    """A profiler context recording CUDA kernels only (None when unavailable); see
    ``kernelrecords.cuda_profiler`` for why it is not ``torch.profiler.profile``."""
    try:
        from ..worker.kernelrecords import cuda_profiler

        return cuda_profiler()
    except Exception:  # a torch without a working profiler: no shares measured
        return None


def kernel_records(prof: Any) -> list[list[Any]]:
    """[name, device microseconds, launches] per kernel name, from a finished profiler."""
    totals: dict[str, list[float]] = {}
    try:
        from torch.autograd import DeviceType

        events = list(prof.function_events)
    except Exception:  # a profiler that recorded nothing readable: no shares
        return []
    for event in events:
        if getattr(event, "device_type", None) != DeviceType.CUDA:
            continue
        us = getattr(event, "device_time_total", 0.0)
        if not us:
            try:
                us = event.time_range.elapsed_us()
            except AttributeError:
                us = 0.0
        entry = totals.setdefault(str(event.name), [0.0, 0])
        entry[0] += float(us or 0.0)
        entry[1] += 1
    return [[name, t, int(n)] for name, (t, n) in sorted(totals.items(), key=lambda kv: -kv[1][0])]


# -- parent side -----------------------------------------------------------------------------


def source_kernel_names(source: str) -> set[str]:
    """Kernel function names a candidate's source defines (CUDA ``__global__`` functions in
    its strings, Python functions)."""
    return {m.group(1) for m in _DEFS.finditer(source) if len(m.group(1)) >= 3}


def kernel_function(name: str) -> str:
    """``void at::native::foo<float>(float*, int)`` -> ``foo``; ``add_kernel`` -> itself."""
    head = name.split("(", 1)[0]
    depth = 0
    cut = []
    for ch in head:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            cut.append(ch)
    words = "".join(cut).replace("::", " ").split()
    return words[-1] if words else name


@dataclass(frozen=True)
class Share:
    """The measured split of one call's work."""

    own: float  # fraction of device time (GPU) or call time (CPU) in the candidate's kernels
    basis: str  # "device time" | "call time"
    library: list[tuple[str, float]] = field(default_factory=list)  # (kernel or op, fraction)
    own_kernels: list[str] = field(default_factory=list)

    def describe(self, limit: int = 3) -> str:
        parts = [f"{name} {100 * frac:.0f}%" for name, frac in self.library[:limit]]
        more = len(self.library) - limit
        if more > 0:
            parts.append(f"+{more} more")
        return ", ".join(parts)

    def as_metrics(self) -> dict[str, Any]:
        return {"own_share": self.own}


def measure_gpu(call: dict[str, Any], source: str, exact: bool) -> Share | None:
    """The device-time split from a profiled call's kernel records (None: no records)."""
    records = call.get("kernels") or []
    total = sum(float(r[1]) for r in records)
    if not records or total <= 0:
        return None
    launched = {str(n) for n in call.get("own_kernels") or []}
    generated = {str(n) for n in call.get("generated_kernels") or []}
    defined = set() if exact else source_kernel_names(source)
    own_time = 0.0
    library: list[tuple[str, float]] = []
    own_names = []
    for name, us, _ in records:
        fn = kernel_function(str(name))
        mine = fn not in generated and (fn in launched or str(name) in launched or fn in defined)
        if mine:
            own_time += float(us)
            own_names.append(str(name))
        else:
            library.append((str(name), float(us) / total))
    own = own_time / total
    elements = int(call.get("input_elements") or 0)
    if elements > 0:  # the inputs read on the host: work of no kernel, whatever its time
        for name, n in host_reads(call).items():
            fraction = min(1.0, n / elements)
            library.append((name, fraction))
            own = min(own, 1.0 - fraction)
        library.sort(key=lambda kv: -kv[1])
    return Share(own, "device time", library, own_names)


def host_reads(call: dict[str, Any]) -> dict[str, int]:
    """Tensor elements candidate code handed to host code outside its kernel launches
    (``Tensor.numpy``, ``tolist``, DLPack), by method: numpy computing on them is work
    no kernel of the candidate did."""
    return {
        f"host code (Tensor.{name})": int(n)
        for name, n in (call.get("host_elements") or {}).items()
        if int(n) > 0
    }


def measure_cpu(call: dict[str, Any]) -> Share | None:
    """The split by data: the tensor elements library compute ops were given against the
    elements of the call's inputs. On a CPU a Triton kernel runs in the interpreter, a
    thousand times slower than the library, so time would hide a decoy; what the library
    ops read does not (a decoy's ``torch.mm`` reads every input, a small epilogue on the
    kernel's result reads little)."""
    total = int(call.get("input_elements") or 0)
    given = {str(k): int(v) for k, v in (call.get("aten_elements") or {}).items()}
    given.update(host_reads(call))
    if total <= 0:
        return None
    spent = min(total, sum(given.values()))
    library = sorted(((op, min(1.0, n / total)) for op, n in given.items()), key=lambda kv: -kv[1])
    return Share(1.0 - spent / total, "input elements read", [kv for kv in library if kv[1] > 0])


__all__ = [
    "Share",
    "host_reads",
    "kernel_function",
    "kernel_profiler",
    "kernel_records",
    "measure_cpu",
    "measure_gpu",
    "source_kernel_names",
]
