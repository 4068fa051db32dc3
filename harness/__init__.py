"""ctxkernel's verification harness: turns a candidate GPU kernel into a verdict.

A ``Problem`` (native ``problem.py``, GPU MODE ``reference.py`` or KernelBench ``Model``)
and a ``Candidate`` go to a ``Runner``; the runner spawns an isolated worker, the rung
ladder (pre-checks, compile, run, correctness, anti-cheat; on request benchmark,
roofline, dumps, profile, trace) drives it over a private channel, and the answer is a
``Verdict`` (JSON document with a typed ``PerformanceSummary``, and compact LLM
feedback). What a kernel language is (Triton, CuTeDSL, TileLang, CUDA C++, PyTorch) is a
``Backend`` in ``harness/backends``, whose registry every backend choice reads.

This package never imports the retrieval stack (chromadb, sentence-transformers) nor
``ctxkernel``: it must run on a bare GPU machine. The public API -- the names below and
the top-level modules (``errors``, ``options``, ``optionspec``, ``envvars``, ``paths``,
``redact``, ``verdict``...) -- is what the agent uses; the rooms behind it may move. It is
imported lazily so ``import harness`` (done by the worker process too) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backends import DEFAULT_BACKEND, backend_names, get_backend
    from .errors import HarnessError, UsageError
    from .perf.ceilings import latest_cached as latest_ceilings
    from .problems.candidate import Candidate, load_candidate
    from .problems.problem import Problem, Tolerance, detect_format, load_problem
    from .problems.unseen import new_secret, unseen_shapes
    from .runner import LocalRunner, Runner, RunOptions, check
    from .runners import BatchRunner, RunnerError, get_runner, run_many
    from .tracing.primer import trace_primer, traceable
    from .verdict import PerformanceSummary, RungResult, Verdict

__all__ = [
    "DEFAULT_BACKEND",
    "BatchRunner",
    "Candidate",
    "HarnessError",
    "LocalRunner",
    "PerformanceSummary",
    "Problem",
    "RunOptions",
    "RungResult",
    "Runner",
    "RunnerError",
    "Tolerance",
    "UsageError",
    "Verdict",
    "backend_names",
    "check",
    "detect_format",
    "get_backend",
    "get_runner",
    "latest_ceilings",
    "load_candidate",
    "load_problem",
    "new_secret",
    "run_many",
    "trace_primer",
    "traceable",
    "unseen_shapes",
]

_EXPORTS = {  # name -> module (":attribute" where the module calls it otherwise)
    "Candidate": "problems.candidate",
    "load_candidate": "problems.candidate",
    "HarnessError": "errors",
    "UsageError": "errors",
    "Problem": "problems.problem",
    "Tolerance": "problems.problem",
    "load_problem": "problems.problem",
    "detect_format": "problems.problem",
    "new_secret": "problems.unseen",
    "unseen_shapes": "problems.unseen",
    "LocalRunner": "runner",
    "RunOptions": "runner",
    "Runner": "runner",
    "check": "runner",
    "BatchRunner": "runners",
    "RunnerError": "runners",
    "get_runner": "runners",
    "run_many": "runners",
    "DEFAULT_BACKEND": "backends",
    "backend_names": "backends",
    "get_backend": "backends",
    "latest_ceilings": "perf.ceilings:latest_cached",
    "trace_primer": "tracing.primer",
    "traceable": "tracing.primer",
    "PerformanceSummary": "verdict",
    "RungResult": "verdict",
    "Verdict": "verdict",
}


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    import importlib

    module_name, _, attribute = module_name.partition(":")
    module = importlib.import_module(f".{module_name}", __name__)
    return getattr(module, attribute or name)
