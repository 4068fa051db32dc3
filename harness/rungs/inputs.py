"""Inputs: the inputs of every call and the references they are checked against (the parent's side).

The parent generates inputs (the problem's public seed per shape mixed with a secret one),
keeps a pristine copy, and only after the output came back computes the reference (TF32
off) on a copy of the pristine inputs: the reference never exists in the candidate's
process, and not even in this one while the candidate runs. ``Inputs`` also remembers how
big a shape's outputs are (the worker poisons its allocator with NaN-filled blocks of that
size), which seeds were used, and derives the seeds and random streams the performance
rungs use (benchmark keys, profile and trace inputs) from the same secret.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..errors import ProblemError
from ..options import RunOptions
from ..problems.library import record_reference
from ..problems.precision import reference_precision
from ..problems.problem import Problem

STUDY_TRIAL = 2000  # the throwaway input the reference is studied on (distinct seeds)
UNSEEN_TRIAL = 3000  # seeds of the unseen-shape trials
STRESS_TRIAL = 4000  # seed of the rescaled-inputs trial
SHARE_MAX_SIZE = 1 << 24  # product of a shape's sizes the library-share call may use
SHARE_MAX_BYTES = 1 << 28  # and its inputs' bytes (a "size" key may stand for size x size)


def mix_seed(public: int, trial: int, secret: int) -> int:
    digest = hashlib.sha256(f"{public}:{trial}:{secret}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def shape_label(shape: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items()) or "default"


def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flatten(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in flatten(v)]
    return [value]


def clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(clone(v) for v in value)
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    return value


@dataclass
class TrialInputs:
    shape_index: int
    shape: dict[str, Any]
    trial: int
    seed: int
    pristine: Any  # on the target device, never handed to anyone
    leaves: list[torch.Tensor]  # pristine tensor leaves, in order
    kind: str = "public"  # "public" | "unseen" (a derived shape) | "stress" (rescaled inputs)

    @property
    def label(self) -> str:
        if self.kind == "unseen":
            return "an unseen shape"
        if self.kind == "stress":
            return "rescaled inputs"
        return f"shape {shape_label(self.shape)}, trial {self.trial + 1}"


@dataclass(frozen=True)
class ReferenceFacts:
    """What running the reference once showed (``Inputs.study``)."""

    ops: dict[str, int]  # compute ops it ran, by call count
    slots: tuple[int, ...]  # tensor leaves of the data it never reads: outputs to fill


def _tensor_bytes(value: Any) -> list[bytes]:
    out = []
    for leaf in flatten(value):
        if isinstance(leaf, torch.Tensor):
            t = leaf.detach().to("cpu").contiguous().reshape(-1)
            out.append(bytes(t.view(torch.uint8).numpy()) if t.numel() else b"")
        else:
            out.append(repr(leaf).encode())
    return out


def _scribble(t: torch.Tensor) -> None:
    """Fill a tensor with values no computation would produce from it."""
    with torch.no_grad():
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.logical_not_()
        else:
            t.fill_(77)


class Inputs:
    """The shapes checked, the secret seed, fresh inputs per trial and their references."""

    def __init__(self, problem: Problem, options: RunOptions, device: str) -> None:
        self.problem = problem
        self.options = options
        self.device = device
        self.secret = (
            options.secret
            if options.secret is not None
            else int.from_bytes(os.urandom(8), "little")
        )
        self.shapes = [
            dict(s) for s in (options.shapes if options.shapes else problem.shapes_for(device))
        ]
        self.seeds_used: list[dict[str, Any]] = []
        self._output_bytes: dict[int, list[int]] = {}
        self._facts: ReferenceFacts | None = None
        self._unseen: list[dict[str, Any]] | None = None
        self._weighed: dict[str, int] = {}  # ``_input_bytes``, by the shape's repr

    def make(
        self,
        shape_index: int,
        trial: int,
        shape: dict[str, Any] | None = None,
        record: bool = True,
        kind: str = "public",
    ) -> TrialInputs:
        """Fresh inputs for ``shapes[shape_index]`` (or ``shape``, e.g. a bench shape)."""
        shape = shape if shape is not None else self.shapes[shape_index]
        public = self.problem.public_seed(shape_index)
        seed = mix_seed(public, trial, self.secret)
        pristine = self.problem.generate_input(seed, shape, self.device)
        leaves = [t for t in flatten(pristine) if isinstance(t, torch.Tensor)]
        slots = set(self._facts.slots) if self._facts is not None else set()
        floats = [
            t
            for i, t in enumerate(leaves)
            if t.is_floating_point() and t.numel() > 1 and i not in slots
        ]
        if floats and all(not bool(t.any()) for t in floats):
            raise ProblemError(
                f"{self.problem.name}: generate_input({shape_label(shape)}) returned all-zero inputs; a check needs non-trivial values"
            )
        if record:
            self.seeds_used.append({"shape": shape_label(shape), "trial": trial, "public": public})
        return TrialInputs(shape_index, shape, trial, seed, pristine, leaves, kind)

    # -- what the reference is (studied once, before any candidate call) -----------------

    def study(self) -> ReferenceFacts:
        """The reference's compute ops and the data's output tensors (see the docstring)."""
        if self._facts is not None:
            return self._facts
        inputs = self.make(0, STUDY_TRIAL, record=False)
        shape = inputs.shape

        def run(data: Any) -> Any:
            with reference_precision(), torch.no_grad():
                return self.problem.ref_output(data, shape)

        recorded = record_reference(lambda: run(clone(inputs.pristine)))
        slots: tuple[int, ...] = ()
        if self.problem.provides_outputs:
            slots = self._find_slots(inputs, recorded.output, run)
        self._facts = ReferenceFacts(dict(recorded.ops), slots)
        return self._facts

    @property
    def slots(self) -> tuple[int, ...]:
        return self._facts.slots if self._facts is not None else ()

    def _find_slots(self, inputs: TrialInputs, baseline: Any, run: Any) -> tuple[int, ...]:
        """Tensor leaves the reference never reads: garbage in one leaves its output as is."""
        expected = _tensor_bytes(baseline)
        if _tensor_bytes(run(clone(inputs.pristine))) != expected:
            return ()  # a reference that does not repeat itself tells nothing here
        found = []
        for index in range(len(inputs.leaves)):
            copy = clone(inputs.pristine)
            leaf = [t for t in flatten(copy) if isinstance(t, torch.Tensor)][index]
            if leaf.numel() == 0:
                continue
            _scribble(leaf)
            try:
                same = _tensor_bytes(run(copy)) == expected
            except Exception:
                same = False
            if same:
                found.append(index)
        return tuple(found) if len(found) < len(inputs.leaves) else ()

    # -- shapes and inputs the candidate never saw ---------------------------------------

    def unseen_shapes(self) -> list[dict[str, Any]]:
        """Two shapes derived from the checked ones with the secret (``harness/unseen.py``);
        none when switched off."""
        if self._unseen is not None:
            return self._unseen
        self._unseen = []
        if not self.options.unseen:
            return self._unseen
        from ..problems.unseen import unseen_shapes

        derived = replace(self.problem, shapes=[dict(s) for s in self.shapes])
        try:
            self._unseen = unseen_shapes(derived, self.secret, device=self.device)
        except ProblemError:
            raise
        except Exception:
            self._unseen = []
        self._unseen += self._beyond_checked(unseen_shapes)
        return self._unseen

    def _beyond_checked(self, derive: Any) -> list[dict[str, Any]]:
        """On a GPU, one more unseen shape between the checked sizes and the benchmark
        sizes that are not huge (``SHARE_MAX_SIZE``, ``SHARE_MAX_BYTES`` of inputs): a
        kernel exact below some size that only the benchmarks reach (a gate at 10^6
        elements) is caught by the check."""
        if self.device == "cpu" or self.options.bench_shapes or self.options.shapes:
            return []
        top = max(shape_size(s) for s in self.shapes)
        bench = [
            s
            for s in self.problem.bench_shapes
            if top < shape_size(s) <= SHARE_MAX_SIZE
            and set(s) == set(self.shapes[0])
            and self._input_bytes(s) <= SHARE_MAX_BYTES
        ]
        if not bench:
            return []
        for public in (bench, [*self.shapes, *bench]):
            try:
                found = derive(
                    replace(self.problem, shapes=[dict(s) for s in public]),
                    self.secret ^ 0x5EED,
                    count=1,
                    device=self.device,
                )
            except Exception:
                continue
            found = [
                s
                for s in found
                if shape_size(s) > top
                and s not in (self._unseen or [])
                and self._input_bytes(s) <= SHARE_MAX_BYTES  # a "size" key may be size x size
            ]
            if found:
                return found[:1]
        return []

    def make_unseen(self, index: int) -> TrialInputs:
        shape = self.unseen_shapes()[index]
        inputs = self.make(0, UNSEEN_TRIAL + index, shape=shape, record=False, kind="unseen")
        inputs.shape_index = -1 - index  # never a public shape's poison sizes
        return inputs

    def share_shape(self) -> dict[str, Any] | None:
        """Where a GPU measures the library share: the largest benchmark shape that is not
        huge (``SHARE_MAX_SIZE``, ``SHARE_MAX_BYTES`` of inputs), since at the tiny checked
        sizes every kernel is a ~2 us launch and a small epilogue would look like a third
        of the work; None: the largest checked shape. Problems whose default shapes are
        fitted to the device (KernelBench) use those."""
        if self.problem.device_shapes is not None:
            return None
        largest = shape_size(self.shapes[self.largest_shape_index()])
        fits = [s for s in self.bench_shapes() if largest < shape_size(s) <= SHARE_MAX_SIZE]
        for shape in sorted(fits, key=shape_size, reverse=True):
            # the product of the sizes is not the elements (GPU MODE's {"size": n} is an
            # n x n matrix): what the inputs weigh decides, since they and the outputs
            # cross the worker's pipe (a 16384 x 16384 add moved 1.5 GB there, 11 s)
            if self._input_bytes(shape) <= SHARE_MAX_BYTES:
                return dict(shape)
        return None

    def _input_bytes(self, shape: dict[str, Any]) -> int:
        """The bytes of the tensors ``generate_input`` makes for ``shape`` (0 if it fails:
        the call that uses the shape reports that); generated once per shape and check."""
        key = repr(sorted(shape.items()))  # a size may be a list
        if key not in self._weighed:
            try:
                made = self.problem.generate_input(0, shape, self.device)
            except Exception:
                made = ()
            self._weighed[key] = sum(
                t.numel() * t.element_size() for t in flatten(made) if isinstance(t, torch.Tensor)
            )
        return self._weighed[key]

    def largest_shape_index(self) -> int:
        return max(range(len(self.shapes)), key=lambda i: shape_size(self.shapes[i]))

    def stress_scale(self) -> float | None:
        """The factor the stress trial rescales float inputs by; None when it is off."""
        if not self.options.unseen or self.problem.stress is False:
            return None
        rng = self.rng("stress")
        return rng.choice((1e-3, 64.0))

    def make_stress(self) -> TrialInputs | None:
        """Inputs of the largest checked shape, every float input (not an output tensor)
        rescaled and shifted; None when the problem has no float input or forbids it."""
        scale = self.stress_scale()
        if scale is None:
            return None
        index = self.largest_shape_index()
        inputs = self.make(index, STRESS_TRIAL, record=False, kind="stress")
        slots = set(self.slots)
        rng = self.rng("stress-shift")
        moved = False
        for i, leaf in enumerate(inputs.leaves):
            if i in slots or not leaf.is_floating_point() or leaf.numel() == 0:
                continue
            low = leaf.dtype in (torch.float16, torch.bfloat16) or leaf.element_size() < 2
            factor = (0.125 if scale < 1 else 8.0) if low else scale
            shift = factor * rng.uniform(0.25, 1.0)
            with torch.no_grad():
                leaf.mul_(factor).add_(shift)
            moved = True
        return inputs if moved else None

    def stress_ratio(self, inputs: TrialInputs, reference: Any) -> float:
        """After the stress call: how much the reference's output moved against the same
        inputs unscaled (what the tolerance's ``atol`` is scaled by)."""
        plain = self.reference(self.make(inputs.shape_index, STRESS_TRIAL, record=False))
        return _magnitude_ratio(reference, plain)

    def reference(self, inputs: TrialInputs) -> Any:
        """The reference output, computed now (after the candidate returned) on a copy."""
        copy = clone(inputs.pristine)
        with reference_precision(), torch.no_grad():
            return self.problem.ref_output(copy, inputs.shape)

    def remember_output_sizes(self, inputs: TrialInputs, reference: Any) -> None:
        sizes = [
            t.numel() * t.element_size() for t in flatten(reference) if isinstance(t, torch.Tensor)
        ]
        if sizes:
            self._output_bytes[inputs.shape_index] = [sum(sizes) * 2, *sizes]

    def poison_sizes(self, inputs: TrialInputs, input_bytes: int, sizes: list[int]) -> list[int]:
        """NaN-filled blocks the worker allocates before a call: the size of what the
        output will be (known after the first reference of a shape; the inputs' before)."""
        return self._output_bytes.get(inputs.shape_index) or [2 * input_bytes + (1 << 20), *sizes]

    def bench_shapes(self) -> list[dict[str, Any]]:
        """What the performance rungs time: ``--bench-shapes``, the problem's BENCH_SHAPES,
        else the last checked shape."""
        if self.options.bench_shapes:
            return [dict(s) for s in self.options.bench_shapes]
        if self.problem.bench_shapes:
            return [dict(s) for s in self.problem.bench_shapes]
        return [dict(self.shapes[-1])]

    def seed(self, salt: int) -> int:
        """A secret-derived seed for inputs generated in a worker (profile, trace)."""
        return mix_seed(self.problem.public_seed(0), salt, self.secret)

    def rng(self, label: str) -> random.Random:
        """A secret-derived random stream (benchmark keys, which timed outputs to check)."""
        return random.Random(f"{self.secret}:{label}")

    def seeds(self) -> dict[str, Any]:
        """The public seeds and the secret, for the verdict (and, after the check, the
        unseen shapes it derived)."""
        out: dict[str, Any] = {
            "public": [self.problem.public_seed(i) for i in range(len(self.shapes))],
            "secret": self.secret,
            "shapes": [shape_label(s) for s in self.shapes],
        }
        if self._unseen:
            out["unseen_shapes"] = [shape_label(s) for s in self._unseen]
        return out


def shape_size(shape: dict[str, Any]) -> float:
    """The product of a shape's integer sizes (how big its inputs are, roughly)."""
    sizes = [v for v in shape.values() if isinstance(v, int) and not isinstance(v, bool)]
    return math.prod(max(1, v) for v in sizes) if sizes else 0.0


def _magnitude_ratio(after: Any, before: Any) -> float:
    """RMS of the stressed reference's float outputs over the plain one's (>0)."""

    def rms(value: Any) -> float:
        parts = [
            t.detach().to("cpu", torch.float64)
            for t in flatten(value)
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()
        ]
        finite = [p[torch.isfinite(p)] for p in parts]
        total = sum(float((p * p).sum()) for p in finite)
        count = sum(p.numel() for p in finite)
        return math.sqrt(total / count) if count else 0.0

    a, b = rms(after), rms(before)
    if a == 0.0 or b == 0.0 or not math.isfinite(a) or not math.isfinite(b):
        return 1.0
    return a / b
