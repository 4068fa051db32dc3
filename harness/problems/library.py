"""Library use: which library ops a candidate may call, and how much of the work they may do.

A custom kernel must do the work. What that means by default, in every problem format:

- the **compute ops the reference itself runs** -- recorded under the op recorder when it
  runs once on a throwaway input (elementwise ops and reductions as well as matmuls,
  norms and convolutions; never allocation, views, copies, dtype conversions or RNG,
  ``NON_COMPUTE``) -- are forbidden to the candidate at run time, unless the problem
  (``ALLOW_LIBRARY = ["add"]``) or the user (``--allow-library add,aten::mul`` or ``all``)
  allows them;
- the **share of the work in the candidate's own kernels** must reach the problem's
  ``MIN_KERNEL_SHARE`` (default 0.8): on a GPU the device time of its backend's kernels
  against every other kernel (torch.profiler's kernel records, ``library_share.py``), on a
  CPU the call's time outside library compute ops (the op recorder's timings);
- a **plain PyTorch candidate** (no kernel backend) passes only when asked for: ``--backend
  torch`` on the command line, or ``ALLOW_TORCH = True`` in the problem. Then neither rule
  above applies (only the problem's explicit ``FORBIDDEN``), and the verdict says so. A
  ``# backend: torch`` line in the candidate itself does not count: the candidate does not
  get to decide what it is checked as.

``LibraryRules.of(problem, options, candidate)`` is the decision; ``record_reference`` runs
a reference under the recorder. Parent side only (the worker just reports what it saw).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .policy import GROUPS

if TYPE_CHECKING:
    from ..options import RunOptions
    from .candidate import Candidate
    from .problem import Problem

DEFAULT_MIN_SHARE = 0.8

# ATen ops that move, allocate, view, convert or draw random numbers: host code and the
# backends' own launchers use them (the Triton interpreter copies and re-views its
# arguments), so they are never "the reference's work" a candidate must not call.
NON_COMPUTE = frozenset(
    "aten::" + name
    for name in [
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "fill",
        "fill_",
        "zero",
        "zero_",
        "arange",
        "linspace",
        "scalar_tensor",
        "tensor",
        "lift",
        "lift_fresh",
        "lift_fresh_copy",
        "copy",
        "copy_",
        "clone",
        "contiguous",
        "_to_copy",
        "to",
        "_copy_from",
        "_copy_from_and_resize",
        "detach",
        "detach_",
        "alias",
        "view",
        "_unsafe_view",
        "view_as",
        "reshape",
        "_reshape_alias",
        "as_strided",
        "as_strided_",
        "expand",
        "expand_as",
        "permute",
        "t",
        "t_",
        "transpose",
        "transpose_",
        "unsqueeze",
        "unsqueeze_",
        "squeeze",
        "squeeze_",
        "select",
        "slice",
        "narrow",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "flatten",
        "unflatten",
        "movedim",
        "set",
        "set_",
        "resize",
        "resize_",
        "resize_as_",
        "item",
        "_local_scalar_dense",
        "is_nonzero",
        "equal",
        "normal",
        "normal_",
        "uniform",
        "uniform_",
        "random",
        "random_",
        "rand",
        "randn",
        "randint",
        "randperm",
        "bernoulli",
        "bernoulli_",
        "exponential_",
        "record_stream",
        "_efficientzerotensor",
        "resolve_conj",
        "resolve_neg",
        "conj",
        "_conj",
        "_neg_view",
        "_has_compatible_shallow_copy_type",
        "result_type",
        "numel",
        "size",
        "stride",
        "dim",
        "is_same_size",
        "_nested_tensor_from_mask",
        "pin_memory",
        "_pin_memory",
        "cpu",
        "cuda",
        "type_as",
        "masked_select_backward",
    ]
)
_NON_COMPUTE_PREFIXES = ("aten::_assert", "aten::sym_", "aten::is_", "aten::_fused_dropout")


def is_compute(op: str) -> bool:
    """Whether an ATen op (``aten::mul``) computes, as opposed to moving or viewing data."""
    return (
        op.startswith("aten::")
        and op not in NON_COMPUTE
        and not op.startswith(_NON_COMPUTE_PREFIXES)
    )


def op_stem(name: str) -> str:
    """``aten::_softmax`` -> ``softmax``, ``__add__`` -> ``add``, ``add_`` -> ``add``: the
    name an op goes by whichever level (ATen, torch function, FX graph) saw it."""
    base = name.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
    return base.strip("_") or base


def _group_of(op: str) -> set[str]:
    """The ATen ops of the policy group an op belongs to (``aten::mm`` -> the matmul ops)."""
    for group in GROUPS.values():
        if op in group.aten:
            return set(group.aten)
    return {op}


def expand_allowed(entries: Iterable[str]) -> tuple[set[str], bool]:
    """(ATen ops allowed, whether everything is) for ``ALLOW_LIBRARY`` / ``--allow-library``
    entries: group names (``matmul``), ATen ops (``aten::add``), bare op names (``add``),
    comma-separated lists, or ``all``."""
    allowed: set[str] = set()
    everything = False
    for raw in entries:
        for part in str(raw).split(","):
            name = part.strip()
            if not name:
                continue
            if name.lower() == "all":
                everything = True
            elif name in GROUPS:
                allowed |= set(GROUPS[name].aten)
            elif re.fullmatch(r"(aten::)?[A-Za-z_][A-Za-z0-9_]*", name):
                op = name if name.startswith("aten::") else f"aten::{name}"
                allowed |= _group_of(op) | {op, f"{op}_"}
            else:
                raise UsageError(f"--allow-library: not an op name: {name!r}")
    return allowed, everything


@dataclass(frozen=True)
class LibraryRules:
    """What this check holds the candidate to: see the module docstring."""

    plain_torch: bool  # the candidate has no kernel backend of its own
    torch_asked: str | None  # who asked for a plain PyTorch candidate ("--backend torch", ...)
    allowed: frozenset[str] = frozenset()
    allow_all: bool = False
    min_share: float = DEFAULT_MIN_SHARE
    reference_ops: tuple[str, ...] = ()  # compute ops the reference ran (set by ``record``)

    @classmethod
    def of(cls, problem: Problem, options: RunOptions, candidate: Candidate) -> LibraryRules:
        allowed, everything = expand_allowed(
            [*getattr(problem, "allow_library", []), *getattr(options, "allow_library", ())]
        )
        asked = None
        if options.backend == "torch":
            asked = "--backend torch"
        elif getattr(problem, "allow_torch", False):
            asked = "the problem (ALLOW_TORCH)"
        share = options.min_kernel_share
        if share is None:
            share = getattr(problem, "min_kernel_share", None)
        return cls(
            plain_torch=candidate.backend == "torch",
            torch_asked=asked,
            allowed=frozenset(allowed),
            allow_all=everything,
            min_share=DEFAULT_MIN_SHARE if share is None else float(share),
        )

    @property
    def custom_kernel_required(self) -> bool:
        """False for a plain PyTorch candidate that was asked for: library ops are its work."""
        return not (self.plain_torch and self.torch_asked)

    def with_reference(self, ops: Iterable[str]) -> LibraryRules:
        compute = sorted({op for op in ops if is_compute(op)})
        return LibraryRules(
            self.plain_torch,
            self.torch_asked,
            self.allowed,
            self.allow_all,
            self.min_share,
            tuple(compute),
        )

    def forbidden_reference_ops(self) -> list[str]:
        """The reference's compute ops the candidate may not call (none when not required)."""
        if not self.custom_kernel_required or self.allow_all:
            return []
        return [op for op in self.reference_ops if op not in self.allowed]

    def plain_torch_refusal(self) -> str | None:
        """The reason a plain PyTorch candidate fails, or None."""
        if self.plain_torch and not self.torch_asked:
            return (
                "no custom kernel: the candidate is plain PyTorch (library ops do the work); write "
                "the kernel in a kernel language (Triton, CUDA, CuTeDSL, TileLang), or pass "
                "--backend torch to check a PyTorch implementation"
            )
        return None

    def note(self) -> str:
        """What the verdict says about library use when the check passed."""
        if self.plain_torch and self.torch_asked:
            return f"plain PyTorch candidate, as asked by {self.torch_asked}: library ops allowed, no custom kernel required"
        return ""

    def describe(self) -> dict[str, Any]:
        return {
            "custom_kernel_required": self.custom_kernel_required,
            "plain_torch_asked_by": self.torch_asked,
            "reference_ops": list(self.reference_ops),
            "forbidden_reference_ops": self.forbidden_reference_ops(),
            "allowed": "all" if self.allow_all else sorted(self.allowed),
            "min_kernel_share": self.min_share,
        }


@dataclass
class RecordedRun:
    """What one reference run computed: its compute ops (by call count) and its output."""

    ops: Counter[str] = field(default_factory=Counter)
    output: Any = None
    dtypes: dict[str, list[str]] = field(default_factory=dict)  # each compute op's inputs


def record_reference(run: Callable[[], Any]) -> RecordedRun:
    """Run ``run()`` (a reference on a copy of its inputs) under the op recorder."""
    from ..worker.guards import OpRecorder

    recorder = OpRecorder(with_dtypes=True)
    with recorder:
        output = run()
    ops = Counter({k: v for k, v in recorder.aten.items() if is_compute(k)})
    dtypes = {k: sorted(recorder.dtypes.get(k, ())) for k in ops}
    return RecordedRun(ops, output, dtypes)


def library_message(op: str) -> str:
    """The finding for a call of one of the reference's compute ops."""
    short = op.split("::", 1)[-1]
    return (
        f"called library op {op} at run time, which the reference computes: a custom kernel "
        f"must do this work (allow it with --allow-library {short}, or ALLOW_LIBRARY in the problem)"
    )


__all__ = [
    "DEFAULT_MIN_SHARE",
    "NON_COMPUTE",
    "LibraryRules",
    "RecordedRun",
    "expand_allowed",
    "is_compute",
    "library_message",
    "op_stem",
    "record_reference",
]
