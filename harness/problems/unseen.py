"""Unseen shapes: sizes a candidate was never shown, derived from a problem's own shapes.

A kernel can pass every public shape and still be wrong: a missing mask on a ragged tail
that the public sizes happen not to have, a grid that drops the last partial block, a
table of the public shapes. The cure is to check it again on shapes it never saw.

``unseen_shapes(problem, secret)`` derives them from the problem's ``SHAPES`` and a
secret seed: every integer dimension that varies across the public shapes (the others
are structural and stay as they are) gets a size inside the public range (widened a
little when the range holds no new odd size) that is odd, so not a multiple of 16 or
128, and not one of the public sizes; the second shape sets one dimension to 1 where the
problem allows it. Each derived shape is accepted only when the problem's own
``generate_input`` and reference run on it (on ``device``, CPU by default), so a derived
shape is never one the problem cannot build; when the problem keeps rejecting them, one
dimension at a time is varied. The same secret gives the same shapes; a fresh secret (``new_secret``)
gives new ones, and the seeds of a check mixed with that secret are new too.

A derived shape never holds more work (the product of its sizes, ``shape_size``) than
the largest public shape, or than ``max_work`` when the caller measured what the public
shapes cost on its device (``rungs/inputs.py``): public shapes that are tall (many short
rows) and wide (a few long rows) would otherwise give an unseen shape with the most rows
*and* the longest rows, many times the work of any public one -- under the CPU Triton
interpreter minutes instead of seconds, an honest kernel timed out. A shape over the cap
has its largest varied size shrunk to an odd size that fits.

Sizes can belong together (KernelBench's ``bias_shape = (out_features,)``): a problem's
``SizeLinks`` names the sizes computed from others, which follow them in every derived
shape instead of varying on their own, and the sizes whose relation cannot be seen, which
stay as given (``size_links`` says which, for the verdict).

A problem narrows or switches this off with ``UNSEEN`` in its ``problem.py``::

    UNSEEN = False                      # no unseen shapes for this problem
    UNSEEN = {
        "dims": ["n"],                  # only these dimensions vary (default: all that vary)
        "min": {"n": 16}, "max": {"n": 4096},   # bounds per dimension
        "multiple_of": {"k": 16},       # sizes that must stay multiples (then odd multiples)
        "one": False,                   # never use size 1
        "count": 3,                     # how many shapes (default 2)
        "shapes": [{"n": 77}],          # explicit unseen shapes, used first, as given
    }

This module knows shapes only: it is the one place the agent's re-check of a best
version and the harness's own checks derive unseen shapes from.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ProblemError

if TYPE_CHECKING:
    from .problemspec import Problem

DEFAULT_COUNT = 2
_KEYS = {"dims", "min", "max", "multiple_of", "one", "count", "shapes"}
_TRIES = 48


@dataclass(frozen=True)
class SizeLinks:
    """Sizes of a shape that belong together: ``follows`` maps a size computed from
    others to the sizes it is computed from (recomputed by ``recompute`` in every derived
    shape, never varied on its own); ``held`` maps a size whose relation to the others
    cannot be seen to why (left as given)."""

    follows: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    held: Mapping[str, str] = field(default_factory=dict)
    recompute: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def fixed(self) -> set[str]:
        """The sizes no derivation varies on its own."""
        return set(self.follows) | set(self.held)


@dataclass(frozen=True)
class UnseenPolicy:
    """How a problem's unseen shapes are derived (its ``UNSEEN``, or the defaults)."""

    enabled: bool = True
    count: int = DEFAULT_COUNT
    dims: tuple[str, ...] | None = None  # None: every integer dimension that varies
    minimum: Mapping[str, int] = field(default_factory=dict)
    maximum: Mapping[str, int] = field(default_factory=dict)
    multiple_of: Mapping[str, int] = field(default_factory=dict)
    allow_one: bool = True
    shapes: tuple[Mapping[str, Any], ...] = ()
    # an importer's: which sizes of the checked shapes belong together (KernelBench)
    links: Callable[[list[dict[str, Any]]], SizeLinks] | None = None

    @classmethod
    def parse(cls, spec: Any, where: str = "UNSEEN") -> UnseenPolicy:
        """A policy from ``UNSEEN`` (None or True: the defaults; False: off; a dict; or a
        policy an importer built)."""
        if isinstance(spec, UnseenPolicy):
            return spec
        if spec is None or spec is True:
            return cls()
        if spec is False:
            return cls(enabled=False)
        if not isinstance(spec, Mapping):
            raise ProblemError(f"{where}: expected False or a dict, got {type(spec).__name__}")
        unknown = set(spec) - _KEYS
        if unknown:
            raise ProblemError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        try:
            return cls(
                enabled=True,
                count=int(spec.get("count", DEFAULT_COUNT)),
                dims=tuple(str(d) for d in spec["dims"]) if "dims" in spec else None,
                minimum={str(k): int(v) for k, v in dict(spec.get("min", {})).items()},
                maximum={str(k): int(v) for k, v in dict(spec.get("max", {})).items()},
                multiple_of={
                    str(k): max(1, int(v)) for k, v in dict(spec.get("multiple_of", {})).items()
                },
                allow_one=bool(spec.get("one", True)),
                shapes=tuple(dict(s) for s in spec.get("shapes", ())),
            )
        except (TypeError, ValueError) as exc:
            raise ProblemError(f"{where}: {exc}") from None

    @classmethod
    def of(cls, problem: Problem) -> UnseenPolicy:
        return cls.parse(getattr(problem, "unseen", None), f"{problem.name}: UNSEEN")


def new_secret() -> int:
    """A secret seed nobody outside this process has seen."""
    return int.from_bytes(os.urandom(8), "little")


def varying_dims(shapes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Integer dimensions that take more than one value across ``shapes`` (all integer
    dimensions when there is a single shape)."""
    names: list[str] = []
    for shape in shapes:
        names.extend(k for k in shape if k not in names)
    out = []
    for name in names:
        values = [s.get(name) for s in shapes]
        if not all(_is_int(v) for v in values):
            continue
        if len(shapes) == 1 or len(set(values)) > 1:
            out.append(name)
    return out


def shape_size(shape: Mapping[str, Any]) -> float:
    """The product of a shape's integer sizes: how much work it holds, roughly (the
    elements of an elementwise op, the multiply-adds of a matmul's m, k, n)."""
    sizes = [v for v in shape.values() if _is_int(v)]
    return math.prod(max(1, v) for v in sizes) if sizes else 0.0


def size_links(problem: Problem, shapes: Sequence[Mapping[str, Any]] | None = None) -> SizeLinks:
    """Which sizes of ``shapes`` (the problem's own by default) belong together."""
    policy = UnseenPolicy.of(problem)
    if policy.links is None:
        return SizeLinks()
    return policy.links([dict(s) for s in (shapes if shapes is not None else problem.shapes)])


def unseen_shapes(
    problem: Problem,
    secret: int,
    *,
    count: int | None = None,
    policy: UnseenPolicy | None = None,
    device: str = "cpu",
    validate: bool = True,
    max_work: float | None = None,
) -> list[dict[str, Any]]:
    """Shapes the problem allows and its public ``SHAPES`` do not contain, derived from
    ``secret``; ``[]`` when the problem switched them off or has nothing to vary. None
    holds more work than the largest public shape, nor than ``max_work`` when given."""
    policy = policy or UnseenPolicy.of(problem)
    if not policy.enabled:
        return []
    want = policy.count if count is None else count
    public = [dict(s) for s in problem.shapes]
    seen = {_key(s) for s in public}
    out: list[dict[str, Any]] = []
    for given in policy.shapes:  # given by the problem: trusted, used as they are
        if len(out) < want and _key(given) not in seen:
            out.append(dict(given))
            seen.add(_key(given))
    links = policy.links(public) if policy.links is not None else SizeLinks()
    dims = [
        d for d in (policy.dims or varying_dims(public)) if d in public[0] and d not in links.fixed
    ]
    if not dims:
        return out

    def work(shape: Mapping[str, Any]) -> float:  # a size that follows others is not more work
        return shape_size({k: v for k, v in shape.items() if k not in links.fixed})

    cap = max(work(s) for s in public)
    if max_work is not None:
        cap = min(cap, max(1.0, max_work))
    rng = random.Random(f"unseen:{secret}")
    index = len(out)
    tries = 0
    while len(out) < want and tries < _TRIES:
        tries += 1
        one = policy.allow_one and index % 2 == 1 and tries <= _TRIES // 3
        # when the problem keeps rejecting them, vary one dimension at a time
        varied = dims if tries <= _TRIES // 2 else [rng.choice(dims)]
        shape = _derive(rng, public, varied, policy, index, one)
        if shape is not None and cap:
            shape = _fit(rng, shape, varied, policy, cap, work)
        if shape is not None and links.recompute is not None:
            shape = links.recompute(shape)
        if shape is None or _key(shape) in seen:
            continue
        if validate and not _builds(problem, shape, secret, device):
            continue
        out.append(shape)
        seen.add(_key(shape))
        index += 1
    return out


def _fit(
    rng: random.Random,
    shape: dict[str, Any],
    dims: list[str],
    policy: UnseenPolicy,
    cap: float,
    work: Callable[[Mapping[str, Any]], float] = shape_size,
) -> dict[str, Any] | None:
    """``shape`` with its largest varied sizes shrunk, one at a time (to odd sizes, odd
    multiples where the problem asks for multiples, never under its ``min``), until its
    work is within ``cap``; None if it cannot be."""
    shape = dict(shape)
    left = [d for d in dims if _is_int(shape.get(d))]
    while work(shape) > cap:
        shrinkable = [d for d in left if shape[d] > policy.minimum.get(d, 1)]
        if not shrinkable:
            return None
        dim = max(shrinkable, key=lambda d: shape[d])
        left.remove(dim)
        rest = work(shape) / max(1, shape[dim])
        lo = policy.minimum.get(dim, 1)
        hi = max(lo, min(int(cap // rest), shape[dim] - 1))
        choices = _candidates(max(1, lo), hi, policy.multiple_of.get(dim, 1), set())
        if not choices:
            return None
        # the larger half of what fits: an unseen shape should still hold some work
        shape[dim] = rng.choice(choices[len(choices) // 2 :])
    return shape


def _derive(
    rng: random.Random,
    public: list[dict[str, Any]],
    dims: list[str],
    policy: UnseenPolicy,
    index: int,
    one: bool,
) -> dict[str, Any] | None:
    shape = dict(public[index % len(public)])
    for dim in dims:
        values = sorted({int(s[dim]) for s in public if _is_int(s.get(dim))})
        value = _pick(rng, dim, values, policy)
        if value is None:
            return None
        shape[dim] = value
    if one:
        low = [
            d for d in dims if policy.minimum.get(d, 1) <= 1 and policy.multiple_of.get(d, 1) == 1
        ]
        if not low:
            return None
        shape[rng.choice(low)] = 1
    return shape


def _pick(rng: random.Random, dim: str, public: list[int], policy: UnseenPolicy) -> int | None:
    """An odd size (an odd multiple of ``multiple_of``) in the public range, not public."""
    step = policy.multiple_of.get(dim, 1)
    lo = policy.minimum.get(dim, max(1, public[0]))
    hi = policy.maximum.get(dim, public[-1])
    taken = set(public)
    for widen in (0, 1, 2, 3):
        top = hi if widen == 0 or dim in policy.maximum else max(hi * (1 + widen), hi + 8 * step)
        choices = _candidates(lo, top, step, taken)
        if choices:
            return rng.choice(choices)
    return None


def _candidates(lo: int, hi: int, step: int, taken: set[int]) -> list[int]:
    """Odd sizes (odd multiples of ``step``) in [lo, hi], the shapes of ragged tails
    first: one past and one short of multiples of 128 and 16, then any."""
    if hi < lo:
        return []
    out: set[int] = set()
    if step == 1:
        for base in (128, 16):
            for m in range(max(1, lo // base), hi // base + 2):
                out.update(v for v in (m * base + 1, m * base - 1) if lo <= v <= hi)
        if len(out) < 8:
            start = lo | 1
            out.update(range(start, hi + 1, 2) if hi - start < 4096 else ())
        if not out and hi - lo >= 4096:
            out.add((lo + (hi - lo) // 2) | 1)
    else:
        first = -(-lo // step)
        for k in range(first, hi // step + 1):
            if k % 2 == 1:
                out.add(k * step)
            if len(out) >= 256:
                break
    return sorted(v for v in out if v not in taken)


def _builds(problem: Problem, shape: dict[str, Any], secret: int, device: str) -> bool:
    """The problem's generator and reference run on this shape."""
    try:
        inputs = problem.generate_input(secret & 0x7FFFFFFF, shape, device)
        problem.ref_output(inputs, shape)
    except Exception:  # the problem's own code may raise anything: not a shape it takes
        return False
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _key(shape: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), repr(v)) for k, v in shape.items()))


__all__ = [
    "SizeLinks",
    "UnseenPolicy",
    "new_secret",
    "shape_size",
    "size_links",
    "unseen_shapes",
    "varying_dims",
]
