"""``torch.compile`` in the worker: what must be ready before the guards, and what it compiles.

A candidate may wrap its entry point (or its kernel launcher) in ``torch.compile``, in any
mode (``reduce-overhead`` uses CUDA graphs). For PyTorch's compile machinery to run under
the guards without being taken for candidate code, and without opening a way around the
checks, ``prepare`` runs in the worker before the identity snapshot when the candidate
mentions ``torch.compile`` (``mentions_torch_compile``):

- imports ``torch._dynamo`` and ``torch._inductor`` (importing dynamo rewraps
  ``torch.manual_seed`` and other RNG functions: done after the snapshot, that reads as the
  candidate replacing them);
- records the ops of every graph dynamo hands a compiler (``compiled_ops``, as op stems:
  ``library.op_stem``). Compiled PyTorch is still the library: the reference's ops
  compiled into a fused kernel are reported like the same ops called eagerly;
- makes dynamo's frame compilation a compile phase (``harness/worker/jitclock.py``), so its tens
  of seconds do not eat the run timeout;
- lets the candidate's backend count the kernels inductor launches for it
  (``Backend.prepare_torch_compile``), and counts a CUDA-graph replay as a launch of the
  kernels captured in it.

The guards themselves (threads, subprocesses and hooks started by PyTorch's own frames) are
in ``guards.py``; the op recorder stays out of compilation (``ignore_compile_internals``).
Imports nothing of the ladder.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..problems.library import op_stem
from . import jitclock

if TYPE_CHECKING:
    from ..backends import Backend, LaunchCounter

_MENTIONS = re.compile(r"\btorch\s*\.\s*compiler?\b|\b_dynamo\b|\b_inductor\b")
compiled_ops: Counter[str] = Counter()  # op stems of every graph compiled in this worker
_COMPILE_HOOKS = ("torch._dynamo.convert_frame:_compile",)


def mentions_torch_compile(source: str) -> bool:
    """Whether a candidate's source mentions ``torch.compile`` (or dynamo, inductor)."""
    return bool(_MENTIONS.search(source))


def graph_ops(gm: Any) -> list[str]:
    """Op stems of an FX graph's calls (functions, methods, modules)."""
    out = []
    for node in getattr(getattr(gm, "graph", None), "nodes", []):
        target = node.target
        if node.op == "call_function":
            name = getattr(target, "__name__", None) or str(target)
        elif node.op == "call_method":
            name = str(target)
        elif node.op == "call_module":
            try:
                name = type(gm.get_submodule(str(target))).__name__.lower()
            except AttributeError:
                name = str(target)
        else:
            continue
        out.append(op_stem(str(name)))
    return out


def prepare(backend: Backend, counter: LaunchCounter | None, device: str) -> list[str]:
    """Ready ``torch.compile`` before the guards go on; the compile hooks installed."""
    import torch._dynamo
    import torch._inductor.config  # noqa: F401  (loads inductor's modules now)
    from torch._dynamo import output_graph

    cls = output_graph.OutputGraph
    original = cls.__dict__.get("call_user_compiler")
    if original is not None and not getattr(original, "_ctxkernel_recorded", False):

        @functools.wraps(original)
        def call_user_compiler(self: Any, gm: Any, *args: Any, **kwargs: Any) -> Any:
            compiled_ops.update(graph_ops(gm))
            return original(self, gm, *args, **kwargs)

        call_user_compiler._ctxkernel_recorded = True  # type: ignore[attr-defined]
        cls.call_user_compiler = call_user_compiler  # type: ignore[method-assign]
    backend.prepare_torch_compile(counter)
    if counter is not None and device == "cuda":
        _count_graph_replays(counter)
    return jitclock.wrap_hooks(_COMPILE_HOOKS)


def _count_graph_replays(counter: LaunchCounter) -> None:
    import torch

    graph = getattr(torch.cuda, "CUDAGraph", None)
    original = getattr(graph, "replay", None) if graph is not None else None
    if original is None or getattr(original, "_ctxkernel_counted", False):
        return

    @functools.wraps(original)
    def replay(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if counter.names:  # a graph of the candidate's own launches, replayed
            counter.count += 1
        return result

    replay._ctxkernel_counted = True  # type: ignore[attr-defined]
    graph.replay = replay  # type: ignore[union-attr]


def forbidden_compiled(forbidden_stems: set[str]) -> list[str]:
    """The compiled graphs' ops whose stems are forbidden."""
    return sorted(stem for stem in compiled_ops if stem in forbidden_stems)


__all__ = ["compiled_ops", "forbidden_compiled", "graph_ops", "mentions_torch_compile", "prepare"]
