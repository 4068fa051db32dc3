"""Intra-kernel tracing: time the sections inside a kernel, per warp or CTA, for the trace rung.

Recorders: Triton candidates mark scopes with Proton's language (``proton.py`` drives
Proton's instrumentation mode and parses its Chrome trace); CUDA C++ and CuTeDSL
candidates call the ``ck_trace`` helper (``ck_trace.py`` with ``include/ck_trace.cuh``
and ``cute_trace.py``; ``buffers.py`` parses what they wrote). Both become a
``model.Trace``; ``summary.py`` aggregates it (shares, cycles, imbalance),
``perfetto.py`` writes the timeline as Chrome/Perfetto JSON, ``plot.py`` draws a PNG,
``collect.py`` is the worker's side of the ``trace`` request and ``primer.py`` the text
that tells an agent how to instrument its kernel. The rung itself is
``harness/rungs/trace.py``.

Nothing here is imported by the worker unless a trace is asked for, except ``ck_trace``
(registered as the top-level module candidates import), ``cute_trace`` for CuTeDSL
candidates (before the guards go on) and ``install_candidate_api``.
"""

from __future__ import annotations

import sys

CANDIDATE_MODULE = "ck_trace"


def install_candidate_api(backend: str = "", interpreter: bool = False, path: str = "") -> None:
    """In a worker, before the candidate at ``path`` is imported: make ``import ck_trace``
    work, and under the Triton interpreter make Proton's scope calls no-ops for a
    candidate that uses them (the interpreter cannot run them). Never raises: tracing
    support must not break a plain check."""
    try:
        from . import ck_trace

        sys.modules.setdefault(CANDIDATE_MODULE, ck_trace)
        if backend == "cutedsl":
            from . import cute_trace  # noqa: F401  (imported now, not under the guards)
    except Exception:
        pass
    if interpreter and backend == "triton" and _mentions(path, "profiler"):
        try:
            from .proton import neutralize_under_interpreter

            neutralize_under_interpreter()
        except Exception:
            pass


def _mentions(path: str, word: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return word in fh.read()
    except OSError:
        return False
