"""Compiled artefacts, collected in the worker: what the candidate's backend left behind.

Each backend knows where its compiler leaves files (``Backend.collect_artifacts``:
Triton's cache or an ahead-of-time compile, CuTeDSL's dump dir, the ``nvcc -keep``
intermediates); this module asks the candidate's backend and caps the total size. Files
travel to the parent as bytes; disassembly and analysis happen there (``dumps.py``).
"""

from __future__ import annotations

from typing import Any

from ..backends import File, get_backend


def collect(
    backend: str, target: str | None, max_bytes: int, launches: list[dict[str, Any]] | None = None
) -> tuple[list[File], list[str]]:
    notes: list[str] = []
    files = get_backend(backend).collect_artifacts(target, notes, launches)
    kept: list[File] = []
    total = 0
    for meta, data in files:
        if total + len(data) > max_bytes:
            notes.append(f"artefacts over {max_bytes >> 20} MiB: {meta['name']} and later left out")
            break
        total += len(data)
        kept.append((meta, data))
    return kept, notes
