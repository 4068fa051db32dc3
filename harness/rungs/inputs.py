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
import os
import random
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ProblemError
from ..options import RunOptions
from ..precision import reference_precision
from ..problem import Problem


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

    @property
    def label(self) -> str:
        return f"shape {shape_label(self.shape)}, trial {self.trial + 1}"


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
        self.shapes = [dict(s) for s in (options.shapes if options.shapes else problem.shapes)]
        self.seeds_used: list[dict[str, Any]] = []
        self._output_bytes: dict[int, list[int]] = {}

    def make(
        self, shape_index: int, trial: int, shape: dict[str, Any] | None = None
    ) -> TrialInputs:
        """Fresh inputs for ``shapes[shape_index]`` (or ``shape``, e.g. a bench shape)."""
        shape = shape if shape is not None else self.shapes[shape_index]
        public = self.problem.public_seed(shape_index)
        seed = mix_seed(public, trial, self.secret)
        pristine = self.problem.generate_input(seed, shape, self.device)
        leaves = [t for t in flatten(pristine) if isinstance(t, torch.Tensor)]
        floats = [t for t in leaves if t.is_floating_point() and t.numel() > 1]
        if floats and all(not bool(t.any()) for t in floats):
            raise ProblemError(
                f"{self.problem.name}: generate_input({shape_label(shape)}) returned all-zero inputs; a check needs non-trivial values"
            )
        self.seeds_used.append({"shape": shape_label(shape), "trial": trial, "public": public})
        return TrialInputs(shape_index, shape, trial, seed, pristine, leaves)

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
        """The public seeds and the secret, for the verdict."""
        return {
            "public": [self.problem.public_seed(i) for i in range(len(self.shapes))],
            "secret": self.secret,
            "shapes": [shape_label(s) for s in self.shapes],
        }
