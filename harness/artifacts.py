"""Compiled artefacts, collected in the worker: what each backend left behind.

- Triton: each version (one compiled specialisation) from the worker's Triton cache dir
  (``<hash>/<kernel>.{ttir,ttgir,llir,ptx,cubin,json}``), or, with a target (``sm_90``),
  compiled ahead of time from the recorded launches (``aot.py``) -- no GPU needed.
- CuTeDSL: the files the DSL wrote under ``CUTE_DSL_DUMP_DIR`` (``CUTE_DSL_KEEP``), and the
  ``__mlir__``/``__ptx__``/``__cubin__`` of every object ``cute.compile`` returned.
- CUDA C++ (``load_inline``): the ``nvcc -keep`` intermediates (PTX, CUBIN) from the keep
  dir, the source, and the built extension (``cuobjdump`` reads SASS from it).

Files travel to the parent as bytes; disassembly and analysis happen there (``dumps.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

TRITON_KINDS = ("ttir", "ttgir", "llir", "ptx", "cubin", "json")
CUTE_KINDS = ("mlir", "ptx", "cubin", "sass")
CUDA_KINDS = ("ptx", "cubin", "cu", "so")
CAPTURED_CUTE: list[Any] = []  # compiled objects, filled by the CuTeDSL backend's wrapper

File = tuple[dict[str, Any], bytes]


def collect(
    backend: str, target: str | None, max_bytes: int, launches: list[dict[str, Any]] | None = None
) -> tuple[list[File], list[str]]:
    notes: list[str] = []
    files: list[File] = []
    if backend == "triton":
        files = _triton_aot(target, notes, launches) if target else _triton_cache(notes)
    elif backend == "cutedsl":
        files = _cutedsl(notes)
    elif backend == "cuda_inline":
        files = _cuda_inline(notes)
    else:
        notes.append(f"backend {backend} compiles nothing of its own: no artefacts")
    kept: list[File] = []
    total = 0
    for meta, data in files:
        if total + len(data) > max_bytes:
            notes.append(f"artefacts over {max_bytes >> 20} MiB: {meta['name']} and later left out")
            break
        total += len(data)
        kept.append((meta, data))
    return kept, notes


def _triton_cache(notes: list[str]) -> list[File]:
    root = os.environ.get("TRITON_CACHE_DIR")
    if not root or not os.path.isdir(root):
        notes.append("no Triton cache dir in the worker")
        return []
    files: list[File] = []
    for version_dir in sorted(Path(root).iterdir()):
        if not version_dir.is_dir() or not any(version_dir.glob("*.cubin")):
            continue
        version = version_dir.name[:10]
        for path in sorted(version_dir.iterdir()):
            kind = path.suffix.lstrip(".")
            if kind not in TRITON_KINDS or path.name.startswith("__grp__"):
                continue
            files.append(
                (
                    {"name": path.name, "kernel": path.stem, "version": version, "kind": kind},
                    path.read_bytes(),
                )
            )
    if not files:
        notes.append("no compiled Triton kernel in the worker's cache (nothing launched?)")
    return files


def _triton_aot(target: str, notes: list[str], launches: list[dict[str, Any]] | None) -> list[File]:
    import json

    from .aot import RECORDED, compile_launch, launches_from_json

    if launches is not None:
        specs, more = launches_from_json(launches)
        notes.extend(more)
    else:
        specs = list(RECORDED.values())
    if not specs:
        notes.append("no Triton launch was recorded, so nothing to compile ahead of time")
        return []
    files: list[File] = []
    for spec in specs:
        try:
            result = compile_launch(spec, target)
        except Exception as exc:
            notes.append(
                f"AOT compile of {spec.name} for {target} failed: {type(exc).__name__}: {exc}"[:600]
            )
            continue
        meta = result["metadata"]
        version = meta["version"]
        name = str(meta.get("name") or spec.name)
        for kind, value in result["asm"].items():
            if kind not in TRITON_KINDS:
                continue
            data = value if isinstance(value, bytes) else str(value).encode()
            files.append(
                (
                    {"name": f"{name}.{kind}", "kernel": name, "version": version, "kind": kind},
                    data,
                )
            )
        files.append(
            (
                {"name": f"{name}.json", "kernel": name, "version": version, "kind": "json"},
                json.dumps(meta, default=str, indent=1).encode(),
            )
        )
    return files


def _cutedsl(notes: list[str]) -> list[File]:
    files: list[File] = []
    root = os.environ.get("CUTE_DSL_DUMP_DIR")
    if root and os.path.isdir(root):
        for path in sorted(Path(root).rglob("*")):
            kind = path.suffix.lstrip(".")
            if path.is_file() and kind in CUTE_KINDS:
                stem = path.name.split(".")[0]
                files.append(
                    (
                        {"name": path.name, "kernel": stem, "version": stem[-10:], "kind": kind},
                        path.read_bytes(),
                    )
                )
    for index, compiled in enumerate(CAPTURED_CUTE):
        for attr, kind in (("__mlir__", "mlir"), ("__ptx__", "ptx"), ("__cubin__", "cubin")):
            try:
                value = getattr(compiled, attr, None)
            except Exception:
                value = None
            if not value:
                continue
            data = value if isinstance(value, bytes) else str(value).encode()
            name = f"cute_compiled_{index}"
            files.append(
                (
                    {
                        "name": f"{name}.{kind}",
                        "kernel": name,
                        "version": f"c{index}",
                        "kind": kind,
                    },
                    data,
                )
            )
    if not files:
        notes.append(
            "no CuTeDSL artefacts (CUTE_DSL_KEEP/CUTE_DSL_DUMP_DIR unset, or nothing compiled)"
        )
    return files


def _cuda_inline(notes: list[str]) -> list[File]:
    files: list[File] = []
    seen: set[str] = set()
    from .backends.cuda_inline import keep_dir

    for root in (keep_dir(), os.environ.get("TORCH_EXTENSIONS_DIR")):
        if not root or not os.path.isdir(root):
            continue
        for path in sorted(Path(root).rglob("*")):
            kind = path.suffix.lstrip(".")
            if not path.is_file() or kind not in CUDA_KINDS or path.name in seen:
                continue
            if kind == "so" and path.stat().st_size > (48 << 20):
                continue
            seen.add(path.name)
            stem = path.name.split(".")[0]
            files.append(
                (
                    {
                        "name": path.name,
                        "kernel": stem,
                        "version": path.parent.name[:24],
                        "kind": kind,
                    },
                    path.read_bytes(),
                )
            )
    if not files:
        notes.append("no CUDA extension build found in the worker")
    return files
