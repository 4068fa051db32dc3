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
(registered as the top-level module candidates import, by ``install_candidate_api``) and
what a backend's ``prepare_trace`` imports before the guards go on (``cute_trace`` for
CuTeDSL, Proton's no-op scopes under the Triton interpreter). Which recorder traces a
candidate is its backend's ``trace_recorder``.
"""

from __future__ import annotations

import sys

CANDIDATE_MODULE = "ck_trace"


def install_candidate_api() -> None:
    """In a worker, before the candidate is imported: make ``import ck_trace`` work (what
    a backend needs beyond that is its ``Backend.prepare_trace``). Never raises: tracing
    support must not break a plain check."""
    try:
        from . import ck_trace

        sys.modules.setdefault(CANDIDATE_MODULE, ck_trace)
    except Exception:  # tracing support must not break a plain check
        pass
