"""GPU MODE reference-kernels problems: ``reference.py`` (+ ``task.yml``, ``task.py``).

What the format looks like (problems/pmpp/*, problems/nvidia/*): ``generate_input(**spec)``
takes the test spec's keys including ``seed``; ``ref_kernel(data)``; ``check_implementation
(data, output)`` returns ``''``/an error string, or ``(good, message)`` in newer problems;
``task.yml`` lists ``tests`` and ``benchmarks`` as flow mappings and the files the
evaluator assembles (``utils.py`` usually comes from ``../utils.py``). Submissions
define ``custom_kernel(data)`` and import ``task``.

Their evaluator runs the candidate and ``check_implementation`` in the same process, on the
same ``data`` object the candidate received (so a candidate that mutates its inputs moves
the reference too). Here ``check_implementation`` runs in the parent on a pristine copy,
our own metrics run beside it, and the seeds get a secret mixed in.

Every upstream ``generate_input`` builds its tensors on CUDA (``device="cuda"``, a CUDA
``torch.Generator``). On a CPU check it runs under ``cuda_as_cpu`` (a TorchFunctionMode
that turns ``device="cuda"`` into the CPU, and a CPU generator for a CUDA one), so an
unchanged problem still gives a verdict there (random values differ from a GPU's).
The data may carry the output tensor a solution fills (``output[...] = ...; return
output``): ``provides_outputs``; the ladder finds which leaves by running the reference.

Some generators use the seed as data (pmpp_v2 ``sort_py``: row ``i`` is ``randn + seed +
i``). Upstream's test seeds are below 10^4; the harness's secret-mixed seeds reach 2^31,
where float32 keeps none of the noise: every row was one value, the input already sorted,
and a kernel returning its input passed (the signal check found it; at 2^20 the check's
``rtol`` of the values, 10, still let it pass). Seeds are folded below ``SEED_RANGE``
before they reach ``generate_input``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ...errors import ProblemError
from ..problemspec import Problem, import_file, isolated_import_path, to_device

_SHADOW = ("utils", "task", "reference", "submission", "eval")
SEED_RANGE = 1 << 14  # the scale of upstream's own test seeds (see the module docstring)


def _is_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, int) and not isinstance(device, bool):
        return True  # a bare index is a CUDA device
    return isinstance(device, str) and device.split(":")[0] == "cuda"


class _CudaAsCpu(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = dict(kwargs or {})
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to and len(args) > 1 and _is_cuda(args[1]):
            args = (args[0], "cpu", *args[2:])
        return func(*args, **kwargs)


_GENERATOR = torch.Generator  # the real class, whatever a patch left in its place
_patched = [0]  # how many threads are inside cuda_as_cpu
_patch_lock = threading.Lock()


def _generator_on_cpu(device: Any = "cpu") -> torch.Generator:
    return _GENERATOR(device="cpu" if _is_cuda(device) else device)


@contextmanager
def cuda_as_cpu() -> Iterator[None]:
    """Run a problem's CUDA-only input code on the CPU (see the module docstring).

    ``torch.Generator`` is the process's own: checks in several threads (a batch, the check
    server) enter and leave in any order, so the patch is counted and the real class put
    back by the last to leave -- saving "the original" on entry left the patch in place for
    good when two overlapped (``torch.Generator | None`` then failed in unrelated code)."""
    with _patch_lock:
        if _patched[0] == 0:
            torch.Generator = _generator_on_cpu  # type: ignore[misc,assignment]
        _patched[0] += 1
    try:
        with _CudaAsCpu():
            yield
    finally:
        with _patch_lock:
            _patched[0] -= 1
            if _patched[0] == 0:
                torch.Generator = _GENERATOR  # type: ignore[misc]


def _flow_map(text: str) -> dict[str, Any]:
    quoted = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)\s*:", r'\1"\2":', text.strip())
    value = json.loads(quoted)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


def parse_task_yml(text: str) -> dict[str, Any]:
    """``tests``, ``benchmarks`` and ``files`` of a task.yml (PyYAML when installed)."""
    try:
        import yaml

        loaded = yaml.safe_load(text)
        if isinstance(loaded, dict):
            return loaded
    except ImportError:
        pass
    # The subset these files use: top-level keys holding lists of one-line flow mappings.
    data: dict[str, Any] = {}
    current: list[Any] | None = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip() if not raw.lstrip().startswith("- {") else raw.rstrip()
        if not line.strip():
            continue
        top = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$", line)
        if top and not line.startswith((" ", "\t")):
            key, rest = top.group(1), top.group(2).strip()
            if rest and rest not in ("|", ">"):
                data[key] = rest.strip("\"'")
                current = None
            else:
                current = []
                data[key] = current
            continue
        item = re.match(r"^\s*-\s*(\{.*\})\s*$", line)
        if item and current is not None:
            current.append(_flow_map(item.group(1)))
    return data


def load_gpumode(path: Path) -> Problem:
    directory = path if path.is_dir() else path.parent
    reference_file = directory / "reference.py" if path.is_dir() else path
    task: dict[str, Any] = {}
    task_yml = directory / "task.yml"
    if task_yml.is_file():
        try:
            task = parse_task_yml(task_yml.read_text())
        except (ValueError, json.JSONDecodeError) as exc:
            raise ProblemError(f"{task_yml}: cannot read it: {exc}") from exc

    search = [directory]
    support: list[Path] = []
    for entry in task.get("files", []) or []:
        if not isinstance(entry, dict):
            continue
        name, source = str(entry.get("name", "")), str(entry.get("source", ""))
        if name in ("utils.py", "task.py") and not source.startswith("@"):
            src = (directory / source).resolve()
            if src.is_file():
                support.append(src)
                if src.parent not in search:
                    search.append(src.parent)
    for name in ("task.py", "utils.py"):
        local = directory / name
        if local.is_file() and all(s.name != name for s in support):
            support.append(local)
    if (
        directory.parent not in search
        and (directory.parent / "utils.py").is_file()
        and not (directory / "utils.py").is_file()
    ):
        search.append(directory.parent)
        support.append(directory.parent / "utils.py")

    with isolated_import_path(search, _SHADOW):
        module = import_file(reference_file, "gpumode")
    for required in ("generate_input", "ref_kernel"):
        if not hasattr(module, required):
            raise ProblemError(f"{reference_file}: a GPU MODE reference defines {required}")

    tests = [dict(t) for t in task.get("tests", []) or [] if isinstance(t, dict)]
    benchmarks = [dict(t) for t in task.get("benchmarks", []) or [] if isinstance(t, dict)]
    shapes = [{k: v for k, v in t.items() if k != "seed"} for t in tests]
    seeds = [int(t.get("seed", 1000 + i)) for i, t in enumerate(tests)]
    generate_input = module.generate_input
    ref_kernel = module.ref_kernel

    def generate(seed: int, shape: dict[str, Any], device: str) -> Any:
        seed %= SEED_RANGE
        if device != "cpu":
            return to_device(generate_input(**shape, seed=seed), device)
        try:
            with cuda_as_cpu():
                data = generate_input(**shape, seed=seed)
        except (RuntimeError, AssertionError) as exc:
            if "CUDA" in str(exc) or "cuda" in str(exc):
                raise ProblemError(
                    f"{reference_file}: generate_input needs CUDA ({str(exc).splitlines()[0]}); "
                    "run with --device cuda"
                ) from exc
            raise
        return to_device(data, device)

    def reference(inputs: Any, shape: dict[str, Any]) -> Any:
        return ref_kernel(inputs)

    return Problem(
        name=directory.name,
        path=path,
        format="gpumode",
        shapes=shapes,
        generate=generate,
        reference=reference,
        bench_shapes=[{k: v for k, v in t.items() if k != "seed"} for t in benchmarks],
        seeds=seeds,
        check=getattr(module, "check_implementation", None),
        forbidden=[str(f) for f in getattr(module, "FORBIDDEN", [])],
        support_files=support,
        description=str(task.get("description", "")).strip(),
        provides_outputs=True,  # generate_input's data may carry the output to fill
    )
