"""Loading a problem: three formats load into the same ``Problem``:

- native ``problem.py`` (documented in ``examples/README.md``): ``generate_input(seed,
  **shape)``, ``ref_kernel(inputs)``, ``SHAPES``, optional ``TOLERANCE``, ``FORBIDDEN``,
  ``BENCH_SHAPES``, ``BENCH_L2`` (``"flush"`` or ``"hot"``), ``SEEDS``, ``flops(**shape)``,
  ``bytes(**shape)``, ``UNSEEN`` (``unseen.py``), ``STRESS = False``, ``CALIBRATE = True``
  (tolerances measured against a float64 reference: ``calibrate.py``), ``EDGE_INPUTS``
  (edge-input trials: ``rungs/edges.py``), and the library
  rules (``library.py``): ``ALLOW_LIBRARY``, ``ALLOW_TORCH``, ``MIN_KERNEL_SHARE``;
- GPU MODE reference-kernels (``reference.py`` + ``task.yml``): see ``importers/gpumode.py``;
- KernelBench (``Model``, ``get_inputs``, ``get_init_inputs``): ``importers/kernelbench.py``.

``detect_format`` looks at a file or directory without running it. ``Problem`` and the
``Tolerance`` policy are defined in ``problemspec.py`` (the importers build them too) and
importable from here.
"""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path
from typing import Any

from ..errors import ProblemError, UsageError
from ..process import cleanup
from .problemspec import (
    Problem,
    Tolerance,
    call_on_device,
    check_settings,
    import_file,
    isolated_import_path,
    to_device,
)
from .pysource import parse as parse_source
from .snapshot import is_snapshot, read_regular, refuse_check_folder, release_with, snapshot

__all__ = [
    "Problem",
    "Tolerance",
    "call_on_device",
    "detect_format",
    "import_file",
    "isolated_import_path",
    "load_native",
    "load_problem",
    "to_device",
]


# -- native format ---------------------------------------------------------------------------


def load_native(path: Path) -> Problem:
    file = path / "problem.py" if path.is_dir() else path
    with isolated_import_path([file.parent], ()):
        module = import_file(file, "problem")
    # the settings' types first: SHAPES = "n=1" is one line naming it, not a ValueError below
    check_settings(module, file)
    for required in ("generate_input", "ref_kernel", "SHAPES"):
        if not hasattr(module, required):
            raise ProblemError(f"{file}: a native problem defines {required}")
    shapes = [dict(s) for s in module.SHAPES]
    if not shapes:
        raise ProblemError(f"{file}: SHAPES is empty")
    generate_input = module.generate_input
    ref_kernel = module.ref_kernel

    def generate(seed: int, shape: dict[str, Any], device: str) -> Any:
        return call_on_device(generate_input, device, seed, **shape)

    def reference(inputs: Any, shape: dict[str, Any]) -> Any:
        return ref_kernel(inputs)

    name = file.parent.name if file.name == "problem.py" else file.stem
    return Problem(
        name=name,
        path=path,
        format="native",
        shapes=shapes,
        generate=generate,
        reference=reference,
        bench_shapes=[dict(s) for s in getattr(module, "BENCH_SHAPES", [])],
        bench_l2=getattr(module, "BENCH_L2", None),
        seeds=[int(s) for s in getattr(module, "SEEDS", [])],
        forbidden=[str(f) for f in getattr(module, "FORBIDDEN", [])],
        tolerance=dict(getattr(module, "TOLERANCE", {}) or {}) or None,
        precision=getattr(module, "PRECISION", None),
        flops_fn=getattr(module, "flops", None),
        bytes_fn=getattr(module, "bytes", None),
        description=(module.__doc__ or "").strip(),
        unseen=getattr(module, "UNSEEN", None),
        stress=getattr(module, "STRESS", None),
        allow_library=[str(a) for a in getattr(module, "ALLOW_LIBRARY", [])],
        allow_torch=bool(getattr(module, "ALLOW_TORCH", False)),
        min_kernel_share=_share(file, getattr(module, "MIN_KERNEL_SHARE", None)),
        signal_exempt=_exemption(file, getattr(module, "SIGNAL_EXEMPT", None)),
        calibrate=bool(getattr(module, "CALIBRATE", False)),
        edge_inputs=getattr(module, "EDGE_INPUTS", None),
    )


def _exemption(file: Path, value: Any) -> str | None:
    """``SIGNAL_EXEMPT``: why trivial answers may pass this problem's check (a reason)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ProblemError(f"{file}: SIGNAL_EXEMPT must be a sentence saying why (a string)")
    return value.strip()


def _share(file: Path, value: Any) -> float | None:
    if value is None:
        return None
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise ProblemError(f"{file}: MIN_KERNEL_SHARE must be a number in [0, 1]") from None
    if not 0.0 <= share <= 1.0:
        raise ProblemError(f"{file}: MIN_KERNEL_SHARE must be a number in [0, 1]")
    return share


# -- detection -------------------------------------------------------------------------------


def _top_level_names(file: Path) -> set[str]:
    text = read_regular(file, "problem file").decode("utf-8", errors="replace")
    try:
        tree = parse_source(text)
    except SyntaxError as exc:
        raise UsageError(f"{file}: does not parse: {exc.msg} (line {exc.lineno})") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _format_of_file(file: Path) -> str | None:
    names = _top_level_names(file)
    if {"Model", "get_inputs"} <= names:
        return "kernelbench"
    if {"generate_input", "ref_kernel", "SHAPES"} <= names:
        return "native"
    if {"generate_input", "ref_kernel"} <= names:
        return "gpumode"
    return None


def detect_format(path: str | Path) -> tuple[str, Path]:
    """The format of a problem file or directory, and the path to load it from."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"problem not found: {p}")
    if p.is_dir():
        for name, found in (("problem.py", "native"), ("reference.py", "gpumode")):
            if os.path.lexists(p / name):
                read_regular(p / name, "problem file")  # a FIFO, device or huge file: refused
                return found, p
        candidates = [f for f in sorted(p.glob("*.py")) if _format_of_file(f) == "kernelbench"]
        if len(candidates) == 1:
            return "kernelbench", candidates[0]
        raise UsageError(f"{p}: no problem.py, reference.py or single KernelBench Model file here")
    if p.suffix != ".py":
        raise UsageError(f"{p}: a problem is a .py file or a directory")
    fmt = _format_of_file(p)
    if fmt is None:
        raise UsageError(
            f"{p}: unknown problem format (expected generate_input+ref_kernel+SHAPES, "
            "GPU MODE reference.py, or KernelBench Model+get_inputs)"
        )
    return fmt, p


_LOAD_LOCK = threading.Lock()  # loading edits sys.path and sys.modules


def load_problem(path: str | Path) -> Problem:
    with _LOAD_LOCK:
        return _load_problem(path)


def _load_problem(path: str | Path) -> Problem:
    """Detect the format, snapshot the problem's files (``snapshot.py``: nothing is ever
    imported from a path a worker could have written) and load the snapshot."""
    given = Path(path)
    refuse_check_folder(given, "problem")
    fmt, target = detect_format(given)
    if is_snapshot(target):  # a worker loading the copy its parent made
        return _load_format(fmt, target)
    copied, root = snapshot(target, with_parent=fmt == "gpumode")
    try:
        problem = _load_format(fmt, copied)
    except BaseException:
        cleanup.remove_root(root)
        raise
    release_with(problem, root)
    return problem


def _load_format(fmt: str, target: Path) -> Problem:
    if fmt == "native":
        return load_native(target)
    if fmt == "gpumode":
        from .importers.gpumode import load_gpumode

        return load_gpumode(target)
    from .importers.kernelbench import load_kernelbench

    return load_kernelbench(target)
