"""Edge inputs: the trials a problem asks for with ``EDGE_INPUTS``, each off unless named.

Each class is one more call of the correctness rung (after the unseen shapes and the
stress trials), on inputs made from the secret like every other trial:

- ``padded``: every tensor input of two or more dimensions is the slice ``base[..., :n]``
  of a tensor with longer rows (the row pitch ``n`` rounded up to 16 elements, plus 16):
  not contiguous, the last dimension still unit-stride -- what a slice of a fused tensor
  (the q of a qkv projection) or a pitched buffer looks like;
- ``strided``: every tensor input of more than one element is a view with a step of 2 on
  its last dimension (``base[..., ::2]``), so no dimension has its contiguous stride;
- ``broadcast``: every tensor input's first dimension longer than 1 has stride 0
  (``t[:1].expand(...)``): its slices are one memory, so the values are the first slice
  repeated;
- ``size0``: one size of the smallest checked shape set to 0 (one the unseen shapes vary,
  or one the problem names) where the problem's generator and reference build it: an
  empty output of the right shape must come back, without a launch error;
- ``nonfinite``: a NaN, a +Inf and a -Inf in each float input (in rows of their own where
  there are rows enough): the output must hold NaN/Inf wherever the reference's does.

The view classes hold the values of a plain trial (``broadcast``: its first slice
repeated). The worker rebuilds each input with the same strides over a buffer at least as
long as the tensor, every element outside the view NaN (``harness/worker/calltensors.py``),
so a kernel that indexes as if the input were contiguous reads NaN, not a neighbour's value.
The reference gets contiguous copies of the same values. A failure names the class, what
was done to which input (its strides, where the NaN went), the shape and the seed.

Off unless a problem names them, because they are part of a candidate's contract that
the inputs ``generate_input`` returns do not show: hand-written kernels (GPU MODE's,
KernelBench's, a CUDA extension taking ``data_ptr``) assume contiguous inputs as every
public trial gives them; a launch over a grid of 0 programs raises in CUDA; and whether
NaN and Inf propagate is the problem's to say (a reference may mask or clamp them).
``EDGE_INPUTS = ["strided", "nonfinite"]`` names classes, ``True`` all of them, and a
dict narrows one: ``{"strided": [0]}`` only input #0, ``{"size0": ["m"]}`` only that size.
``--no-unseen`` skips them with the other trials of inputs never shown.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ProblemError
from ..problems.problemspec import EDGE_CLASSES
from ..problems.unseen import shape_size, size_links, varying_dims
from .inputs import TrialInputs, flatten

if TYPE_CHECKING:
    from ..problems.problem import Problem
    from .inputs import Inputs

EDGE_TRIAL = 7000  # seeds of the edge-input trials (+ the class's place in EDGE_CLASSES)
PITCH = 16  # the padded rows' pitch is a multiple of this many elements (aligned rows)
SIZE0_INDEX = -100  # the size-0 trial's shape index: below the unseen shapes' (-1, -2, ...)

# what a failure says: the class, then how a kernel gets it right
LABELS = {
    "padded": "padded inputs (not contiguous: each row a slice of a longer row)",
    "strided": "strided (non-contiguous) inputs (a step of 2 on the last dimension)",
    "broadcast": "broadcast inputs (a dimension of stride 0: its slices share memory)",
    "size0": "size-0 inputs (an empty dimension)",
    "nonfinite": "inputs holding NaN and +-Inf",
}
HINTS = {
    "padded": "index every input through its strides (x.stride(0) is the row pitch, not "
    "the row length), or make it contiguous first",
    "strided": "index every input through all of its strides (x.stride(d) for every "
    "dimension), or make it contiguous first",
    "broadcast": "index every input through its strides (a stride of 0 repeats one slice), "
    "or make it contiguous first",
    "size0": "an input with a dimension of size 0 must give the reference's (empty) output "
    "without an error: return early, or launch over no programs",
    "nonfinite": "the reference propagates NaN and Inf: the output must hold the same "
    "non-finite values where the reference's does (no clamping or masking them away)",
}


def edge_classes(problem: Problem) -> dict[str, tuple[Any, ...] | None]:
    """The classes the problem asks for (``EDGE_INPUTS``, checked on import), each with
    what narrows it (input numbers, or ``size0``'s dimension names; None: all)."""
    spec = problem.edge_inputs
    if spec is None or spec is False:
        return {}
    if spec is True:
        return dict.fromkeys(EDGE_CLASSES)
    if isinstance(spec, Mapping):
        chosen = {
            str(k): (None if v is True else tuple(v)) for k, v in spec.items() if v is not False
        }
    else:
        chosen = dict.fromkeys(str(c) for c in spec)
    return {c: chosen[c] for c in EDGE_CLASSES if c in chosen}


def edge_trials(inputs: Inputs) -> Iterator[TrialInputs]:
    """The edge-input trials this check runs, made one at a time (a failure stops the
    rung before the next is made); none with ``--no-unseen``."""
    if not inputs.options.unseen:
        return
    for name, narrowed in edge_classes(inputs.problem).items():
        trial = EDGE_TRIAL + EDGE_CLASSES.index(name)
        rng = inputs.rng(f"edge:{name}")
        made = (
            _size0(inputs, trial, narrowed, rng)
            if name == "size0"
            else _views(inputs, name, trial, narrowed, rng)
        )
        if made is not None:
            yield made


# -- the trials ------------------------------------------------------------------------


def _views(
    inputs: Inputs, name: str, trial: int, narrowed: tuple[Any, ...] | None, rng: random.Random
) -> TrialInputs | None:
    """A trial of the largest checked shape whose tensor inputs (not the data's output
    tensors; only ``narrowed`` when given) went through the class's transform; None
    when it applies to none of them."""
    made = inputs.make(inputs.largest_shape_index(), trial, record=False, kind=name)
    slots = set(inputs.slots)
    changed: dict[int, torch.Tensor] = {}
    notes = []
    for index, leaf in enumerate(made.leaves):
        if index in slots or (narrowed is not None and index not in narrowed):
            continue
        if name == "nonfinite":
            result = with_nonfinite(leaf, rng)
            if result is not None:
                changed[index], where = result
                notes.append(f"input #{index}: NaN, +Inf, -Inf at {where}")
            continue
        view = VIEWS[name](leaf)
        if view is not None:
            changed[index] = view
            notes.append(f"input #{index} strides {list(view.stride())}")
    if not changed:
        return None
    made.pristine = replace_leaves(made.pristine, changed)
    made.leaves = [t for t in flatten(made.pristine) if isinstance(t, torch.Tensor)]
    made.detail = f"{LABELS[name]}: {'; '.join(notes)}"
    return made


def _size0(
    inputs: Inputs, trial: int, narrowed: tuple[Any, ...] | None, rng: random.Random
) -> TrialInputs | None:
    """The smallest checked shape with one size set to 0, the first (in a secret order)
    the problem's generator and reference build; None when none does (the reference
    does not define an empty input)."""
    index = min(range(len(inputs.shapes)), key=lambda i: shape_size(inputs.shapes[i]))
    base = inputs.shapes[index]
    sizes = [k for k, v in base.items() if isinstance(v, int) and not isinstance(v, bool)]
    if narrowed is not None:
        unknown = [d for d in narrowed if d not in sizes]
        if unknown:
            raise ProblemError(
                f"{inputs.problem.name}: EDGE_INPUTS['size0'] names {unknown[0]!r}, not an "
                f"integer size of its shapes ({', '.join(sizes) or 'none'})"
            )
        dims = list(narrowed)
    else:
        try:
            fixed = size_links(inputs.problem, inputs.shapes).fixed
        except Exception:  # sizes whose relations cannot be read: none follows another
            fixed = set()
        dims = [d for d in varying_dims(inputs.shapes) if d in sizes and d not in fixed]
    rng.shuffle(dims)
    for dim in dims:
        shape = {**base, dim: 0}
        try:
            made = inputs.make(index, trial, shape=shape, record=False, kind="size0")
            inputs.reference(made)
        except ProblemError:  # not built or not defined there: the next size, or none
            continue
        made.shape_index = SIZE0_INDEX  # never a public shape's poison sizes
        made.detail = LABELS["size0"]  # the label's shape says which size is 0
        return made
    return None


# -- the transforms (each returns fresh storage, or None where the class does not apply) --


def _base(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """A tensor to cut a view from, every element a value no kernel should use."""
    base = torch.empty(shape, dtype=like.dtype, device=like.device)
    if like.is_floating_point() or like.is_complex():
        base.fill_(float("nan"))
    elif like.dtype == torch.bool:
        base.fill_(True)
    else:
        base.fill_(77)
    return base


def padded_view(t: torch.Tensor) -> torch.Tensor | None:
    """``t``'s values as ``base[..., :n]`` of rows padded to a pitch of a multiple of
    ``PITCH`` elements plus ``PITCH``; None for fewer than two dimensions or where the
    view would still be contiguous (a single row)."""
    if t.dim() < 2 or t.numel() < 2:
        return None
    n = t.shape[-1]
    pitch = -(-n // PITCH) * PITCH + PITCH
    view = _base((*t.shape[:-1], pitch), t)[..., :n]
    if view.is_contiguous():
        return None
    view.copy_(t)
    return view


def strided_view(t: torch.Tensor) -> torch.Tensor | None:
    """``t``'s values as ``base[..., ::2]`` (every stride twice the contiguous one); None
    for fewer than two elements."""
    if t.dim() < 1 or t.numel() < 2:
        return None
    view = _base((*t.shape[:-1], 2 * t.shape[-1]), t)[..., ::2]
    view.copy_(t)
    return view


def broadcast_view(t: torch.Tensor) -> torch.Tensor | None:
    """``t``'s first slice along its first dimension longer than 1, expanded back to
    ``t``'s shape (stride 0 there); None when no dimension is longer than 1."""
    dim = next((d for d, n in enumerate(t.shape) if n > 1), None)
    if dim is None:
        return None
    return t.narrow(dim, 0, 1).clone().expand(t.shape)


def with_nonfinite(t: torch.Tensor, rng: random.Random) -> tuple[torch.Tensor, str] | None:
    """A copy of ``t`` with a NaN, a +Inf and a -Inf (as many as it has elements), each in
    a row of its own where there are three rows, and where they went; None for a tensor
    that is not floating point or empty."""
    if not t.is_floating_point() or t.numel() == 0:
        return None
    out = t.clone(memory_format=torch.contiguous_format)
    grid = out.view(out.shape[0], -1) if out.dim() >= 2 else out.view(-1, 1)
    rows, cols = grid.shape
    values = (float("nan"), float("inf"), float("-inf"))[: min(3, out.numel())]
    if rows >= len(values):
        picks = [(r, rng.randrange(cols)) for r in rng.sample(range(rows), k=len(values))]
    else:
        flat = rng.sample(range(out.numel()), k=len(values))
        picks = [divmod(f, cols) for f in flat]
    places = []
    with torch.no_grad():
        for (row, col), value in zip(picks, values, strict=True):
            grid[row, col] = value
            places.append(_index(row * cols + col, tuple(out.shape)))
    return out, ", ".join(str(p) for p in places)


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for size in reversed(shape):
        flat, rest = divmod(flat, max(1, size))
        out.append(rest)
    return out[::-1]


VIEWS = {"padded": padded_view, "strided": strided_view, "broadcast": broadcast_view}


def replace_leaves(value: Any, changed: Mapping[int, torch.Tensor]) -> Any:
    """``value`` with its tensor leaves (numbered as ``flatten`` finds them) replaced
    where ``changed`` says."""
    count = [0]

    def walk(node: Any) -> Any:
        if isinstance(node, torch.Tensor):
            count[0] += 1
            return changed.get(count[0] - 1, node)
        if isinstance(node, tuple):
            return tuple(walk(v) for v in node)
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        return node

    return walk(value)
