"""ctxkernel's verification harness: turns a candidate GPU kernel into a verdict.

A ``Problem`` (native ``problem.py``, GPU MODE ``reference.py`` or KernelBench ``Model``)
and a ``Candidate`` go to a ``Runner``; the runner spawns an isolated worker, the rung
ladder (pre-checks, compile, run, correctness, anti-cheat; on request benchmark,
roofline, dumps, profile, trace) drives it over a private channel, and the answer is a
``Verdict`` (JSON document with a typed ``PerformanceSummary``, and compact LLM
feedback). What a kernel language is (Triton, CuTeDSL, TileLang, CUDA C++, PyTorch) is a
``Backend`` in ``harness/backends``, whose registry every backend choice reads.

This package never imports the retrieval stack (chromadb, sentence-transformers) nor
``ctxkernel``: it must run on a bare GPU machine. The public API is imported lazily so
``import harness`` (done by the worker process too) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import HarnessError, UsageError
    from .problems.candidate import Candidate, load_candidate
    from .problems.problem import Problem, Tolerance, load_problem
    from .runner import LocalRunner, Runner, RunOptions, check
    from .verdict import PerformanceSummary, RungResult, Verdict

__all__ = [
    "Candidate",
    "HarnessError",
    "LocalRunner",
    "PerformanceSummary",
    "Problem",
    "RunOptions",
    "RungResult",
    "Runner",
    "Tolerance",
    "UsageError",
    "Verdict",
    "check",
    "load_candidate",
    "load_problem",
]

_EXPORTS = {
    "Candidate": "problems.candidate",
    "load_candidate": "problems.candidate",
    "HarnessError": "errors",
    "UsageError": "errors",
    "Problem": "problems.problem",
    "Tolerance": "problems.problem",
    "load_problem": "problems.problem",
    "LocalRunner": "runner",
    "RunOptions": "runner",
    "Runner": "runner",
    "check": "runner",
    "PerformanceSummary": "verdict",
    "RungResult": "verdict",
    "Verdict": "verdict",
}


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f".{module_name}", __name__)
    return getattr(module, name)
