"""Problem and Tolerance: what a kernel must compute, on which inputs, to which tolerance.

Whatever a problem's format (native, GPU MODE, KernelBench: ``problem.py`` loads them),
it becomes a ``Problem``. The ``Tolerance`` policy lives here too: defaults by output
dtype (fp32 tight; tf32/bf16/fp16/fp8 looser with PSNR and cosine-similarity floors),
overridden per problem, or tightened to what the reference's own error against float64
allows (``calibrate.py``, ``CALIBRATE``). Also the helpers every format's loader uses: importing a problem
file in isolation, calling a generator on a device.

A native problem file's settings are checked right after its import (``check_settings``):
``SHAPES = "n=1"``, a shape of strings or ``FORBIDDEN = "add"`` is one ``ProblemError``
naming the setting and what it expects, not a traceback from deep inside the loader.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import keyword
import numbers
import reprlib
import shutil
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from ..errors import ProblemError, UsageError


@dataclass(frozen=True)
class Tolerance:
    """Element-wise ``|got - expected| <= atol + rtol * |expected|``, plus global floors."""

    atol: float
    rtol: float
    min_psnr: float | None = None
    min_cossim: float | None = None
    precision: str = "fp32"
    calibrated: bool = False  # measured from the reference's own error (calibrate.py)

    @classmethod
    def for_dtype(cls, dtype: torch.dtype | str) -> Tolerance:
        key = (
            dtype
            if isinstance(dtype, str)
            else _PRECISION_OF.get(dtype, "exact" if not _is_float(dtype) else "fp32")
        )
        return DEFAULT_TOLERANCES[key]

    def merged(self, override: dict[str, Any] | None) -> Tolerance:
        if not override:
            return self
        fields = {
            k: override[k] for k in ("atol", "rtol", "min_psnr", "min_cossim") if k in override
        }
        values: dict[str, Any] = {k: (None if v is None else float(v)) for k, v in fields.items()}
        return replace(self, **values)

    def as_dict(self) -> dict[str, Any]:
        return {
            "atol": self.atol,
            "rtol": self.rtol,
            "min_psnr": self.min_psnr,
            "min_cossim": self.min_cossim,
            "precision": self.precision,
            "source": "calibrated" if self.calibrated else "declared",
        }


def _is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "fp64": Tolerance(1e-9, 1e-7, precision="fp64"),
    "fp32": Tolerance(1e-5, 1e-5, precision="fp32"),
    "tf32": Tolerance(5e-3, 5e-3, min_psnr=50.0, min_cossim=0.99999, precision="tf32"),
    "fp16": Tolerance(1e-2, 5e-3, min_psnr=45.0, min_cossim=0.9999, precision="fp16"),
    "bf16": Tolerance(2e-2, 2e-2, min_psnr=35.0, min_cossim=0.999, precision="bf16"),
    "fp8": Tolerance(0.125, 0.125, min_psnr=20.0, min_cossim=0.99, precision="fp8"),
    "exact": Tolerance(0.0, 0.0, precision="exact"),
}
_PRECISION_OF: dict[torch.dtype, str] = {
    torch.float64: "fp64",
    torch.complex128: "fp64",
    torch.float32: "fp32",
    torch.complex64: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        _PRECISION_OF[getattr(torch, _name)] = "fp8"


@dataclass
class Problem:
    """A loaded problem, whatever its format. Everything here runs in the parent only."""

    name: str
    path: Path
    format: str  # "native" | "gpumode" | "kernelbench"
    shapes: list[dict[str, Any]]
    generate: Callable[[int, dict[str, Any], str], Any]  # (seed, shape, device) -> inputs
    reference: Callable[[Any, dict[str, Any]], Any]  # (inputs, shape) -> output
    bench_shapes: list[dict[str, Any]] = field(default_factory=list)
    bench_l2: str | None = None  # "flush" (default) | "hot": L2 state the benchmark times
    seeds: list[int] = field(default_factory=list)  # public seed per shape
    entry: str = "custom_kernel"
    entry_kind: str = "function"  # "function": entry(inputs); "model": Entry(*init)(*inputs)
    forbidden: list[str] = field(default_factory=list)
    tolerance: dict[str, Any] | None = None
    precision: str | None = None  # e.g. "tf32": use that tolerance whatever the dtype
    check: Callable[[Any, Any], Any] | None = None  # GPU MODE check_implementation
    init: Callable[[dict[str, Any]], tuple[int, tuple[Any, ...]]] | None = None  # KernelBench
    flops_fn: Callable[..., float] | None = None
    bytes_fn: Callable[..., float] | None = None
    support_files: list[Path] = field(default_factory=list)
    description: str = ""
    unseen: Any = None  # UNSEEN: how unseen shapes are derived (harness/unseen.py)
    # STRESS: which stress-input classes run (False: none; a dict or list: STRESS_CLASSES)
    stress: Any = None
    signal_exempt: str | None = None  # SIGNAL_EXEMPT: why trivial answers may pass (signalcheck.py)
    # library use (harness/library.py): ALLOW_LIBRARY, ALLOW_TORCH, MIN_KERNEL_SHARE
    allow_library: list[str] = field(default_factory=list)
    allow_torch: bool = False
    min_kernel_share: float | None = None
    # GPU MODE: the data may carry output tensors for the candidate to fill (found by running
    # the reference: inputs it never reads, rungs/inputs.py)
    provides_outputs: bool = False
    # default shapes for a device when the problem's own are too big for it (KernelBench)
    device_shapes: Callable[[str], list[dict[str, Any]]] | None = None
    shape_note: Callable[[str], str] | None = None  # what the verdict says about those shapes
    # CALIBRATE: tolerances measured from the reference against float64 (calibrate.py)
    calibrate: bool = False
    # EDGE_INPUTS: which edge-input classes run (rungs/edges.py; EDGE_CLASSES), off unless named
    edge_inputs: Any = None

    def shapes_for(self, device: str) -> list[dict[str, Any]]:
        """The shapes a check uses by default on ``device``."""
        if self.device_shapes is not None:
            return [dict(s) for s in self.device_shapes(device)]
        return [dict(s) for s in self.shapes]

    def public_seed(self, shape_index: int) -> int:
        if shape_index < len(self.seeds):
            return int(self.seeds[shape_index])
        return 1000 + shape_index

    def generate_input(self, seed: int, shape: dict[str, Any], device: str) -> Any:
        try:
            return self.generate(seed, shape, device)
        except Exception as exc:
            raise ProblemError(
                f"{self.name}: generate_input({shape}) failed: {type(exc).__name__}: {exc}"
            ) from exc

    def ref_output(self, inputs: Any, shape: dict[str, Any]) -> Any:
        try:
            return self.reference(inputs, shape)
        except Exception as exc:
            raise ProblemError(
                f"{self.name}: the reference failed on {shape}: {type(exc).__name__}: {exc}"
            ) from exc

    def tolerance_for(self, dtype: torch.dtype) -> Tolerance:
        """Defaults for the precision (or dtype), overridden by ``TOLERANCE`` (flat, or
        keyed by dtype name such as ``"float32"``)."""
        base = Tolerance.for_dtype(self.precision) if self.precision else Tolerance.for_dtype(dtype)
        override = self.tolerance or {}
        if any(isinstance(v, dict) for v in override.values()):
            override = override.get(str(dtype).replace("torch.", ""), {})
        return base.merged(override)

    def flops(self, shape: dict[str, Any]) -> float | None:
        return float(self.flops_fn(**shape)) if self.flops_fn else None

    def bytes(self, shape: dict[str, Any]) -> float | None:
        return float(self.bytes_fn(**shape)) if self.bytes_fn else None

    def stage_support_files(self, workdir: Path) -> None:
        """Copy the files a candidate may import (GPU MODE ``task.py``); never the reference."""
        for src in self.support_files:
            if src.is_file():
                shutil.copyfile(src, workdir / src.name)


# -- loading helpers -----------------------------------------------------------------------


@contextlib.contextmanager
def isolated_import_path(paths: list[Path], shadow: tuple[str, ...]) -> Iterator[None]:
    """Put ``paths`` first on sys.path and hide modules named ``shadow`` (``utils``,
    ``task``, ``reference``) so two problems with same-named helpers do not collide."""
    saved_path = list(sys.path)
    saved_modules = {name: sys.modules.pop(name) for name in shadow if name in sys.modules}
    sys.path[:0] = [str(p) for p in paths]
    try:
        yield
    finally:
        sys.path[:] = saved_path
        for name in shadow:
            sys.modules.pop(name, None)
        sys.modules.update(saved_modules)


# -- a native problem file's settings ------------------------------------------------------

_SHAPE_EXAMPLE = '[{"n": 1024}, {"n": 4097}]'
_short = reprlib.Repr()
_short.maxstring = _short.maxother = 40


def _got(value: Any) -> str:
    return "got None" if value is None else f"got {_short.repr(value)} (a {type(value).__name__})"


def _size_problem(value: Any) -> str | None:
    """Why ``value`` cannot be one size of a shape (None: it can). A size is an int (or a
    list of ints); a float or a word (``"bf16"``) passes through to ``generate_input``."""
    if isinstance(value, bool):
        return f"expected an int size, {_got(value)}"
    if isinstance(value, (numbers.Integral, float)):
        return None
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return None  # a name, like a dtype
        return f"expected an int size, got the string {value!r} (write it without quotes)"
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value
    ):
        return None
    return f"expected an int size (or a list of ints), {_got(value)}"


def check_shapes(setting: str, value: Any) -> str | None:
    """What is wrong with a ``SHAPES``-like setting (a list of dicts of sizes), or None."""
    if not isinstance(value, (list, tuple)):
        return f"{setting}: expected a list of shapes, each a dict of sizes like {_SHAPE_EXAMPLE}; {_got(value)}"
    for index, shape in enumerate(value):
        where = f"{setting}[{index}]"
        if not isinstance(shape, dict):
            return f'{where}: expected a dict of sizes like {{"n": 1024}}; {_got(shape)}'
        for key, size in shape.items():
            if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
                return f"{where}: the key {key!r} is not a Python name (sizes are passed to generate_input by name)"
            problem = _size_problem(size)
            if problem:
                return f"{where}[{key!r}]: {problem}"
    return None


_MANY = (list, tuple, set, frozenset)  # not a str, whose characters would be the items


def _names(setting: str, value: Any) -> str | None:
    if isinstance(value, _MANY) and all(isinstance(v, str) for v in value):
        return None
    return f'{setting}: expected a list of names like ["add", "aten::exp"]; {_got(value)}'


def _seeds(setting: str, value: Any) -> str | None:
    if isinstance(value, (list, tuple, range)) and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value
    ):
        return None
    return f"{setting}: expected a list of int seeds, one per shape; {_got(value)}"


def _tolerance(setting: str, value: Any) -> str | None:
    if value is None or isinstance(value, dict):
        return None
    return f'{setting}: expected a dict like {{"atol": 1e-3, "rtol": 1e-3}}; {_got(value)}'


def _one_of(choices: tuple[str, ...]) -> Callable[[str, Any], str | None]:
    def check(setting: str, value: Any) -> str | None:
        if value is None or (isinstance(value, str) and value in choices):
            return None
        return f"{setting}: expected one of {', '.join(map(repr, choices))}; {_got(value)}"

    return check


# stress inputs (rungs/stress.py): "rescale" moves every float input (whole-tensor
# transforms); the mixed-scale classes change parts of one tensor: a few rows and a column
# scaled far apart, a spike, a constant block
STRESS_CLASSES = ("rescale", "rows", "spike", "block")


def _classes(setting: str, value: Any, known: tuple[str, ...], example: str) -> str | None:
    """The shape ``STRESS`` and ``EDGE_INPUTS`` share: True/False, or a list or dict whose
    keys name known classes (what a dict maps them to is each setting's own check)."""
    if value is None or isinstance(value, bool):
        return None
    names = list(value) if isinstance(value, (list, tuple, set, frozenset, dict)) else None
    if names is None or not all(isinstance(n, str) for n in names):
        return (
            f"{setting}: expected True, False, a list of classes or a dict like "
            f"{example} (classes: {', '.join(known)}); {_got(value)}"
        )
    unknown = [n for n in names if n not in known]
    if unknown:
        return f"{setting}: unknown class {unknown[0]!r} (classes: {', '.join(known)})"
    return None


def _stress(setting: str, value: Any) -> str | None:
    """``STRESS``: True/False, a list of classes, or a dict of class -> bool."""
    wrong = _classes(setting, value, STRESS_CLASSES, '{"rows": False}')
    if wrong:
        return wrong
    if isinstance(value, dict) and not all(isinstance(v, bool) for v in value.values()):
        return f"{setting}: each class maps to True or False; {_got(value)}"
    return None


# edge inputs (rungs/edges.py), each off unless the problem names it: views that are not
# contiguous (rows of a wider tensor; a step on every dimension; a dimension of stride 0),
# a dimension of size 0, NaN and +-Inf in the float inputs
EDGE_CLASSES = ("padded", "strided", "broadcast", "size0", "nonfinite")


def _edge(setting: str, value: Any) -> str | None:
    """``EDGE_INPUTS``: True/False, a list of classes, or a dict of class -> True/False or
    a list narrowing it: input numbers for the view classes and ``nonfinite``, dimension
    names for ``size0``."""
    wrong = _classes(setting, value, EDGE_CLASSES, '{"strided": True, "size0": ["m"]}')
    if wrong:
        return wrong
    for name, narrowed in value.items() if isinstance(value, dict) else ():
        if isinstance(narrowed, bool):
            continue
        if name == "size0":
            if isinstance(narrowed, (list, tuple)) and all(isinstance(d, str) for d in narrowed):
                continue
            return f'{setting}[{name!r}]: expected True, False or a list of dimension names like ["m"]; {_got(narrowed)}'
        if isinstance(narrowed, (list, tuple)) and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in narrowed
        ):
            continue
        return f"{setting}[{name!r}]: expected True, False or a list of input numbers like [0]; {_got(narrowed)}"
    return None


def _flag(setting: str, value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    return f"{setting}: expected True or False; {_got(value)}"


def _reason(setting: str, value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return None
    return f'{setting}: expected a sentence saying why, like "outputs are probabilities near 1/n"; {_got(value)}'


_SETTINGS: dict[str, Callable[[str, Any], str | None]] = {
    "SHAPES": check_shapes,
    "BENCH_SHAPES": check_shapes,
    "SEEDS": _seeds,
    "FORBIDDEN": _names,
    "ALLOW_LIBRARY": _names,
    "TOLERANCE": _tolerance,
    "PRECISION": _one_of(tuple(DEFAULT_TOLERANCES)),
    "BENCH_L2": _one_of(("flush", "hot")),
    "STRESS": _stress,
    "SIGNAL_EXEMPT": _reason,
    "CALIBRATE": _flag,
    "EDGE_INPUTS": _edge,
}


def check_settings(module: types.ModuleType, path: Path) -> None:
    """Raise one ``ProblemError`` for the first setting of a native problem file whose
    type is wrong, naming the setting and what it expects."""
    for setting, check in _SETTINGS.items():
        if hasattr(module, setting):
            problem = check(setting, getattr(module, setting))
            if problem:
                raise ProblemError(f"{path.name}: {problem}")
    if isinstance(getattr(module, "SHAPES", None), (list, tuple)) and not module.SHAPES:
        raise ProblemError(f"{path.name}: SHAPES is empty (expected e.g. {_SHAPE_EXAMPLE})")


def import_file(path: Path, prefix: str) -> types.ModuleType:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    name = f"_ctxkernel_{prefix}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ProblemError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def call_on_device(fn: Callable[..., Any], device: str, *args: Any, **kwargs: Any) -> Any:
    """Call a generator; pass ``device=`` when it takes one, else build on CPU and move."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    if "device" in params:
        return fn(*args, device=device, **kwargs)
    return to_device(fn(*args, **kwargs), device)


def to_device(value: Any, device: str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(to_device(v, device) for v in value)
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value
