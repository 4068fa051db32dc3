"""The worker's GPU requests beyond ``call``: timing, re-check samples, ceilings, artifacts.

Kept apart from ``serve.py`` (the request loop, its op table and the guarded ``call``);
each handler is given the worker as a ``WorkerState`` (``state.py``). Requests:

- ``bench``: time the entry point with ``timing.Bench`` on inputs generated *here*, on the
  device, from seeds derived from the key the parent sends just before (nothing large
  crosses the pipe). Reply: every sample, the calibration, the clocks, the persisting-L2
  readings, which timed calls' outputs were kept (a keyed bottom-K sample).
- ``bench_sample``: elements of kept outputs the parent picks after the fact; the parent
  regenerates those calls' inputs from the same seeds and compares against its own
  reference. Nothing is compared here.
- ``identity`` / ``ceilings``: the device's identity (cache key) and measured ceilings;
  only in a harness-only worker (no candidate code in the process).
- ``artifacts``: the compiled artefacts the candidate's backend left in this worker (its
  ``collect_artifacts``), or ``launches_only``: the launches it recorded for an
  ahead-of-time compile in another worker.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from . import timing
from .calltensors import leaves
from .timing import Bench, BenchConfig, bench_seed, escape_findings, tensor_bytes

if TYPE_CHECKING:
    from .state import WorkerState

_Tensor = torch.Tensor
_MAX_SAMPLE_ELEMENTS = 1 << 25
BENCH_DEVICE = "cuda"  # where timed inputs are generated (tests on a simulated clock: cpu)


def input_sets_for(working_set: int, l2: int) -> int:
    """Rotate among several input sets when one fits in L2 twice over."""
    if working_set <= 0 or working_set >= 2 * l2:
        return 1
    return max(1, min(8, math.ceil(2 * l2 / working_set)))


def _guarded_call(worker: WorkerState, entry: Any) -> Any:
    guard = worker.guard
    model = worker.entry_kind == "model"

    def call(inputs: Any) -> Any:
        if guard is not None:
            guard.activate()
        try:
            with torch.no_grad():
                return entry(*inputs) if model else entry(inputs)
        finally:
            if guard is not None:
                guard.deactivate()

    return call


def _recorded(worker: WorkerState, call: Any) -> Any:
    """The warm-up calls run under the op recorder: a forbidden library op used only when
    benchmarked is reported like one in the correctness calls."""
    recorder = worker.recorder
    if recorder is None:
        return None

    def warm(inputs: Any) -> Any:
        recorder.reset()
        with recorder:
            out = call(inputs)
        used = {op for op in recorder.aten if op in worker.forbidden_aten}
        used |= {"fn:" + f for f in recorder.functions if f in worker.forbidden_functions}
        for op in sorted(used):
            name = op[3:] if op.startswith("fn:") else op
            worker.bench_findings.add(f"called forbidden library op {name} while being benchmarked")
        return out

    return warm


def _reference_call(worker: WorkerState, shape: dict[str, Any]) -> Any:
    from ..problems.precision import reference_precision

    problem = worker.problem
    assert problem is not None

    def reference(inputs: Any) -> Any:
        return problem.ref_output(inputs, shape)

    fn = reference
    if worker.compile_reference:
        fn = torch.compile(reference)
    operands = worker.library_operands
    if operands is not None:  # the library's GEMM at the inputs' precision (baselines.py)

        def library(inputs: Any) -> Any:
            flat = leaves(inputs)
            return torch.matmul(flat[operands[0]], flat[operands[1]])

        fn = library

    def call(inputs: Any) -> Any:
        with reference_precision(), torch.no_grad():
            return fn(inputs)

    return call


def handle_bench(
    worker: WorkerState, req: dict[str, Any], tensors: list[torch.Tensor]
) -> tuple[dict[str, Any], list[torch.Tensor]]:
    from ..backends import get_backend

    backend = get_backend(worker.backend_name)
    if worker.device != "cuda":
        return {"ok": False, "op": "bench", "harness_error": "bench needs a CUDA device"}, []
    if worker.problem is None:
        return {"ok": False, "op": "bench", "harness_error": "no problem loaded for bench"}, []
    shape = dict(req.get("shape") or {})
    key = int(req["key"])
    problem = worker.problem
    worker.kept = {}

    def make_inputs(index: int) -> Any:
        return problem.generate_input(bench_seed(key, index), shape, BENCH_DEVICE)

    try:
        warm = None
        if worker.subject == "reference":
            call = _reference_call(worker, shape)
        else:
            entry = worker.get_entry(req.get("init"), tensors)
            call = _guarded_call(worker, entry)
            warm = _recorded(worker, call)
        if worker.bench is None:
            worker.bench = Bench()
        config = BenchConfig.from_header(req)
        if worker.subject == "reference":
            config.witness = 0  # the second timer is the candidate's witness
        probe = make_inputs(-1)
        input_bytes = tensor_bytes(probe)
        sets = input_sets_for(2 * input_bytes, worker.bench.l2)
        del probe
        report, kept = worker.bench.run(call, make_inputs, config, sets, warm_fn=warm)
    except BaseException as exc:
        error = worker.describe_error(exc, "bench", backend)
        if any(
            w in str(exc) for w in ("illegal memory access", "device-side assert", "CUDA error")
        ):
            worker.dead = True
        return {
            "ok": False,
            "op": "bench",
            "error": error,
            "integrity": worker.integrity(),
        }, []
    worker.kept = kept
    findings = [{"kind": "forbidden", "message": m} for m in sorted(worker.bench_findings)]
    worker.bench_findings.clear()
    sample = next(iter(kept.values()), None)
    outputs = [
        {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}
        for t in leaves(sample)
        if isinstance(t, _Tensor)
    ]
    return {
        "ok": True,
        "op": "bench",
        "subject": worker.subject,
        "report": report,
        "escape": escape_findings(report),
        "outputs": outputs,
        "input_bytes": input_bytes,
        "output_bytes": tensor_bytes(sample),
        "integrity": findings + worker.integrity(),
    }, []


def handle_sample(
    worker: WorkerState, req: dict[str, Any], tensors: list[torch.Tensor]
) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """Gather the elements the parent picked from kept outputs (flat indices per leaf)."""
    out: list[torch.Tensor] = []
    picks = []
    for pick in req.get("picks") or []:
        index, leaf_no = int(pick["index"]), int(pick.get("leaf", 0))
        kept = worker.kept.get(index)
        if kept is None:
            picks.append({"index": index, "leaf": leaf_no, "missing": True})
            continue
        tensor_leaves = [t for t in leaves(kept) if isinstance(t, _Tensor)]
        if leaf_no >= len(tensor_leaves):
            picks.append({"index": index, "leaf": leaf_no, "missing": True})
            continue
        flat = tensor_leaves[leaf_no].reshape(-1)
        if pick.get("t") is None:
            if flat.numel() > _MAX_SAMPLE_ELEMENTS:
                picks.append({"index": index, "leaf": leaf_no, "too_large": flat.numel()})
                continue
            values = flat
        else:
            idx = tensors[int(pick["t"])].to(flat.device, torch.int64)
            values = flat[idx]
        picks.append({"index": index, "leaf": leaf_no, "t": len(out)})
        out.append(values.detach().to("cpu").contiguous())
    if req.get("release"):
        worker.kept = {}
        torch.cuda.empty_cache()
    return {"ok": True, "op": "bench_sample", "picks": picks}, out


def handle_identity(worker: WorkerState, req: dict[str, Any]) -> dict[str, Any]:
    from ..perf.ceilings import device_identity

    if worker.device != "cuda":
        return {"ok": False, "op": "identity", "harness_error": "no CUDA device"}
    return {"ok": True, "op": "identity", "identity": device_identity()}


def handle_ceilings(worker: WorkerState, req: dict[str, Any]) -> dict[str, Any]:
    from ..perf.ceilings import measure

    if worker.device != "cuda":
        return {"ok": False, "op": "ceilings", "harness_error": "no CUDA device"}
    if worker.subject == "candidate":
        return {
            "ok": False,
            "op": "ceilings",
            "harness_error": "ceilings are measured in a harness-only worker",
        }
    args = {k: int(v) for k, v in (req.get("args") or {}).items()}
    return {"ok": True, "op": "ceilings", "result": measure(**args)}


def handle_artifacts(
    worker: WorkerState, req: dict[str, Any]
) -> tuple[dict[str, Any], list[torch.Tensor]]:
    from .artifacts import collect

    if req.get("launches_only"):
        from ..backends import get_backend

        launches = get_backend(worker.backend_name).recorded_launches()
        return {"ok": True, "op": "artifacts", "launches": launches}, []
    files, notes = collect(
        worker.backend_name,
        req.get("target"),
        int(req.get("max_bytes", 64 << 20)),
        req.get("launches"),
    )
    tensors = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for _, data in files]
    return {
        "ok": True,
        "op": "artifacts",
        "files": [meta for meta, _ in files],
        "notes": notes,
        "integrity": worker.integrity(),
    }, tensors


__all__ = [
    "handle_artifacts",
    "handle_bench",
    "handle_ceilings",
    "handle_identity",
    "handle_sample",
    "timing",
]
