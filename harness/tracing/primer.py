"""The tracing primer: how an agent instruments its kernel for the ``trace`` rung.

``COMMON`` is what holds for every backend; each backend's own part is the ``## Tracing``
section of its primer file (``harness/backends/<module>_primer.md``, read through
``Backend.trace_primer``). ``trace_primer(backend)`` joins them, for a system prompt (the
agent's prompt module decides where it goes). Keep each under ~25 lines: agents read all
of it every round.
"""

from __future__ import annotations

from ..backends import get_backend

COMMON = """\
Intra-kernel tracing (`check --trace`): mark the sections of your kernel and the harness
reports each one's share of the kernel time, its cycles per warp/CTA (mean/p50/p95) and
its imbalance across CTAs and warps, e.g. "mainloop 71% with 3.1x imbalance across CTAs,
epilogue 22%". The instrumented build runs in a separate worker and is never the one
checked or timed; elsewhere the markers cost nothing. Time a whole loop as one section,
not each iteration. A clock read marks when it was issued, so end a section after its
work completed (after a barrier or a use of the loaded data)."""


def trace_primer(backend: str) -> str:
    """The common paragraph plus the backend's; only the common one for a backend with
    no instrumentation (PyTorch)."""
    specific = get_backend(backend).trace_primer()
    return COMMON + ("\n\n" + specific if specific else "")


def traceable(backend: str) -> bool:
    """Whether the trace rung can instrument this backend's kernels."""
    return get_backend(backend).trace_recorder is not None
