"""Stress inputs: trials of the largest checked shape whose values are scaled where the
public trials never are, made from the secret like every other trial.

``STRESS`` (classes in ``problemspec.STRESS_CLASSES``) chooses them: ``rescale`` moves
every float input at once (``make_stress``); the mixed-scale classes change parts of one
tensor -- a few rows and a column scaled far apart, a spike, a constant block
(``make_mixed``) -- so a kernel that samples a few elements to guess the distribution
(and skips a softmax's max subtraction when they look standard-normal) meets values it
did not sample. The rescaled trial's ``atol`` is scaled by how far the reference's output
moved (``stress_ratio``); on the mixed-scale trial each element's tolerance grows by how
far the reference moves there when the inputs move by ``rtol`` (``mixed_slack``). They
run by default where every op the reference computes is a known one (``MIXED_OPS``) and
the problem has no check of its own; ``STRESS = {"rows": True}`` asks for them,
``{"rows": False}`` switches one off. ``--no-unseen`` skips them with the other trials of
inputs never shown.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Any

import torch

from ..metrics import CHUNK_ELEMENTS, one_thread_if_small
from ..problems.library import op_stem
from ..problems.problemspec import STRESS_CLASSES
from .inputs import TrialInputs, flatten

if TYPE_CHECKING:
    from .inputs import Inputs

STRESS_TRIAL = 4000  # seed of the rescaled-inputs trial
MIXED_TRIAL = 4500  # seed of the mixed-scale trial
MIXED_PERTURBATIONS = 3  # random-sign perturbations whose largest move is the mixed trial's slack
# reference ops (by stem, ``library.op_stem``) whose results stay well defined on
# mixed-scale inputs: the numerically stable library softmax and norms, matmuls,
# elementwise arithmetic and activations, reductions -- not a bare exp or log, which a
# reference spelling out softmax itself would overflow
MIXED_OPS = frozenset(
    {
        "add", "sub", "mul", "div", "neg", "abs", "sqrt", "rsqrt", "pow", "square",
        "maximum", "minimum", "clamp", "where", "relu", "gelu", "silu", "sigmoid", "tanh",
        "softmax", "log_softmax", "native_layer_norm", "layer_norm", "rms_norm",
        "native_group_norm", "mean", "sum", "amax", "amin", "max", "min",
        "mm", "bmm", "addmm", "matmul", "linear", "dot",
    }
)  # fmt: skip


def stress_classes(inputs: Inputs) -> tuple[str, ...]:
    """The stress-input classes this check runs (see the module docstring)."""
    spec = inputs.problem.stress
    if not inputs.options.unseen or spec is False:
        return ()
    mixed = _mixed_by_default(inputs)
    defaults = {c for c in STRESS_CLASSES if c == "rescale" or mixed}
    if isinstance(spec, dict):
        chosen = {c for c in STRESS_CLASSES if spec.get(c, c in defaults)}
    elif isinstance(spec, (list, tuple, set, frozenset)):
        chosen = set(spec)
    else:
        chosen = defaults
    return tuple(c for c in STRESS_CLASSES if c in chosen)


def _mixed_by_default(inputs: Inputs) -> bool:
    """Whether the mixed-scale classes run unasked: every compute op the reference
    ran is a known one (``MIXED_OPS``) and no check of the problem's own judges
    (its fixed tolerance knows nothing of per-element slack)."""
    if inputs.problem.check is not None:
        return False
    ops = inputs.study().ops
    return bool(ops) and all(op_stem(op) in MIXED_OPS for op in ops)


def stress_scale(inputs: Inputs) -> float | None:
    """The factor the stress trial rescales float inputs by; None when it is off."""
    if "rescale" not in stress_classes(inputs):
        return None
    rng = inputs.rng("stress")
    return rng.choice((1e-3, 64.0))


def make_stress(inputs: Inputs) -> TrialInputs | None:
    """Inputs of the largest checked shape, every float input (not an output tensor)
    rescaled and shifted; None when the problem has no float input or forbids it."""
    scale = stress_scale(inputs)
    if scale is None:
        return None
    index = inputs.largest_shape_index()
    made = inputs.make(index, STRESS_TRIAL, record=False, kind="stress")
    # the reference's size on these inputs before they are rescaled, kept as one number
    # now (before the call): after it, the plain inputs made again and their reference
    # were two more tensors of an upstream size beside the stress call's (an H100 ran out)
    made.plain_rms = _rms(inputs.reference(made))
    slots = set(inputs.slots)
    rng = inputs.rng("stress-shift")
    moved = False
    for i, leaf in enumerate(made.leaves):
        if i in slots or not leaf.is_floating_point() or leaf.numel() == 0:
            continue
        low = leaf.dtype in (torch.float16, torch.bfloat16) or leaf.element_size() < 2
        factor = (0.125 if scale < 1 else 8.0) if low else scale
        shift = factor * rng.uniform(0.25, 1.0)
        with torch.no_grad():
            leaf.mul_(factor).add_(shift)
        moved = True
    return made if moved else None


def make_mixed(inputs: Inputs) -> TrialInputs | None:
    """Inputs of the largest checked shape with scales far apart inside each float
    input (not an output tensor): the mixed-scale classes this check runs; None when
    none runs or nothing could be changed."""
    classes = [c for c in stress_classes(inputs) if c != "rescale"]
    if not classes:
        return None
    index = inputs.largest_shape_index()
    made = inputs.make(index, MIXED_TRIAL, record=False, kind="mixed")
    slots = set(inputs.slots)
    rng = inputs.rng("mixed")
    moved = False
    for i, leaf in enumerate(made.leaves):
        if i in slots or not leaf.is_floating_point() or leaf.numel() < 2:
            continue
        moved = _mix(leaf, rng, classes) or moved
    return made if moved else None


def mixed_slack(inputs: Inputs, made: TrialInputs, reference: Any) -> list[torch.Tensor | None]:
    """Per output tensor, each element's extra tolerance on the mixed-scale inputs
    ``made``: twice the most the reference moves there (of a few tries) when every float
    input element moves by the input dtype's ``rtol`` (``Inputs.perturbed_reference``), so
    an element the inputs' scales make ill-conditioned (a constant row in a norm) is judged
    as loosely as the reference itself is defined there."""
    outs = [t for t in flatten(reference) if isinstance(t, torch.Tensor)]
    out: list[torch.Tensor | None] = [None] * len(outs)
    # the largest move of MIXED_PERTURBATIONS random-sign perturbations: one alone
    # can cancel by chance at an element (a matmul's sum of signed terms) and leave an
    # honest kernel's rounding there without slack
    for k in range(MIXED_PERTURBATIONS):
        again = inputs.perturbed_reference(made.pristine, made.shape, MIXED_TRIAL + 7919 * k)
        moved = [t for t in flatten(again) if isinstance(t, torch.Tensor)]
        for i, (a, b) in enumerate(zip(outs, moved, strict=False)):
            if not a.is_floating_point() or a.shape != b.shape:
                continue
            kept = out[i]
            if kept is None:
                # float32 unless the output is wider: an upstream-sized output's float64
                # slack (and its float64 temporaries) outgrew an 80 GB card
                wide = torch.float64 if a.element_size() > 4 else torch.float32
                kept = out[i] = torch.zeros(a.shape, dtype=wide, device=a.device)
            _widen_slack(kept, a, b)
        del again, moved
    return out


def _widen_slack(slack: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """``slack = max(slack, 2 |b - a|)`` in place, the difference taken in float64
    ``CHUNK_ELEMENTS`` at a time and rounded up (never down) into ``slack``'s dtype."""
    flat_s, flat_a, flat_b = slack.view(-1), a.detach().reshape(-1), b.detach().reshape(-1)
    for start in range(0, flat_s.numel(), CHUNK_ELEMENTS):
        part = slice(start, start + CHUNK_ELEMENTS)
        step = (flat_b[part].to(torch.float64) - flat_a[part].to(torch.float64)).abs_().mul_(2)
        if slack.dtype != torch.float64:
            # past the dtype's largest value it would round to inf, which a comparison
            # reads as no slack at all: the largest finite value instead; and rounded to
            # nearest it may sit below the move: one step up there
            kept = step.clamp_(max=torch.finfo(slack.dtype).max).to(slack.dtype)
            low = kept.to(torch.float64) < step
            step = torch.where(low, torch.nextafter(kept, torch.full_like(kept, math.inf)), kept)
        torch.maximum(flat_s[part], step.to(slack.dtype), out=flat_s[part])


def stress_ratio(made: TrialInputs, reference: Any) -> float:
    """After the stress call on ``made``: how much the reference's output moved against
    the same inputs unscaled (what the tolerance's ``atol`` is scaled by): the RMS of its
    float outputs over the plain one's (``make_stress`` took that), 1.0 where either is 0
    or not finite."""
    a, b = _rms(reference), made.plain_rms
    if b is None or a == 0.0 or b == 0.0 or not math.isfinite(a) or not math.isfinite(b):
        return 1.0
    return a / b


def _mix(t: torch.Tensor, rng: random.Random, classes: list[str]) -> bool:
    """Scales far apart inside one tensor, in place: a few rows (segments of a vector)
    and a column scaled up and down (``rows``), one element far out (``spike``), part of
    a row set to one value (``block``), each in its own row. False: not changed."""
    if not t.is_contiguous() or t.numel() < 2:
        return False
    if t.dim() >= 2:
        grid = t.view(t.shape[0], -1)
    else:
        segments = min(8, t.numel())
        grid = t[: segments * (t.numel() // segments)].view(segments, -1)
    rows, cols = grid.shape
    # a half-precision tensor gets milder factors: an honest kernel squaring a row
    # scaled up 1000x in fp16 overflows where the reference (upcast inside) does not
    wide = t.element_size() >= 4
    big, small = (1e3, 1e-3) if wide else (4.0, 0.25)
    order = rng.sample(range(rows), k=rows)
    pick = [order[i % rows] for i in range(4)]
    column = rng.randrange(cols)
    with torch.no_grad():
        peak = float(t.detach().abs().max()) or 1.0
        if "rows" in classes:
            grid[pick[0]].mul_(big)
            if rows > 1:
                grid[pick[1]].mul_(small)
            if t.dim() >= 2 and cols > 1:
                grid[:, column].mul_(big)
        if "spike" in classes:
            where = rng.randrange(cols)
            if cols > 1 and where == column:
                where = (where + 1) % cols
            grid[pick[2], where] = rng.choice((-1.0, 1.0)) * big * peak
        if "block" in classes and cols > 1:
            start = rng.randrange(cols)
            end = min(cols, start + max(2, cols // 4))
            grid[pick[3], start:end] = grid[pick[3], start].clone()
    return True


def _rms(value: Any) -> float:
    """RMS of a value's finite float elements (0.0: none), in float64 where the output
    lives, a chunk at a time."""
    parts = [
        t.detach().reshape(-1)
        for t in flatten(value)
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()
    ]
    total, count = 0.0, 0
    with one_thread_if_small(sum(p.numel() for p in parts)):
        for p in parts:
            for start in range(0, p.numel(), CHUNK_ELEMENTS):
                chunk = p[start : start + CHUNK_ELEMENTS].to(torch.float64)
                finite = chunk[torch.isfinite(chunk)]
                total += float((finite * finite).sum())
                count += finite.numel()
    return math.sqrt(total / count) if count else 0.0
