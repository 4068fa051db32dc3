"""Candidate: the kernel under test — its source, entry point and backend.

The entry point is ``custom_kernel(inputs)`` (native and GPU MODE) or ``ModelNew``
(KernelBench). The backend is declared (``--backend``, a ``# backend: triton`` comment in
the first lines, or ``BACKEND = "triton"``) or detected from the imports by the backend
registry (``harness/backends``; the first backend that claims them, plain PyTorch last).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..backends import backend_names, detect_backend, module_names
from ..errors import UsageError
from .pysource import parse as parse_source
from .snapshot import read_regular, refuse_check_folder

if TYPE_CHECKING:  # problem.py imports torch: the CLI detects a backend without it
    from .problem import Problem

# module names a candidate file may not take (it would shadow what the harness imports),
# besides every backend's modules
_RESERVED = {
    "harness",
    "torch",
    "numpy",
    "task",
    "utils",
    "reference",
    "ctxkernel",
    "eval",
    "problem",
    "candidate_support",
}
_DECLARED = re.compile(r"^\s*#\s*backend\s*:\s*([A-Za-z_]+)", re.MULTILINE)


@dataclass
class Candidate:
    path: Path
    source: str
    entry: str
    entry_kind: str
    backend: str
    backend_declared: bool
    module_name: str

    @property
    def filename(self) -> str:
        return f"{self.module_name}.py"

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def stage(self, workdir: Path) -> Path:
        """Copy the source into the worker's directory under its module name."""
        target = workdir / self.filename
        shutil.copyfile(self.path, target)
        return target


def imported_modules(source: str) -> set[str]:
    try:
        tree = parse_source(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def declared_backend(source: str) -> str | None:
    head = "\n".join(source.splitlines()[:20])
    match = _DECLARED.search(head)
    if match:
        return match.group(1).lower()
    try:
        tree = parse_source(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "BACKEND" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value.lower()
    return None


def load_candidate(path: str | Path, problem: Problem, backend: str | None = None) -> Candidate:
    p = Path(path)
    if not os.path.lexists(p):
        raise UsageError(f"candidate not found: {p}")
    if p.suffix != ".py":
        raise UsageError(f"{p}: a candidate is a .py file")
    refuse_check_folder(p, "candidate")
    source = read_regular(p, "candidate").decode("utf-8", errors="replace")
    declared = backend or declared_backend(source)
    if declared is not None and declared not in backend_names():
        raise UsageError(f"unknown backend {declared!r} (one of {', '.join(backend_names())})")
    chosen = declared or detect_backend(imported_modules(source), source)
    stem = p.stem
    reserved = stem in _RESERVED or stem in module_names()
    module_name = stem if stem.isidentifier() and not reserved else "candidate"
    return Candidate(
        path=p,
        source=source,
        entry=problem.entry,
        entry_kind=problem.entry_kind,
        backend=chosen,
        backend_declared=declared is not None,
        module_name=module_name,
    )
