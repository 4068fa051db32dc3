"""What one rung hands the next: typed results, and ``Earlier``, the rungs' shared record of them.

A rung returns a ``RungResult``; its ``output`` (not part of the verdict JSON) is a typed
result for the rungs after it, and the ladder keeps each by its type in ``Earlier``:

==================  ================  ========================================
result              made by           read by
==================  ================  ========================================
``ScanResult``      pre-checks        compile (kernel line ranges)
``FirstCall``       compile           run, correctness (which takes it: its
                                      inputs and output go once its trial is judged)
``Timings``         benchmark         roofline, profile, trace; the verdict
``Roofline``        roofline          the verdict (``summary``, ``performance``)
``DumpReport``      dumps             the verdict
``ProfileReport``   profile           isa; the verdict
``TraceReport``     trace             the verdict
==================  ================  ========================================

A result with a ``performance()`` method contributes those entries to the verdict's
``performance`` document (``benchmark``, the roofline keys, ``dump``, ``profile``,
``trace``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from ..perf.isa import Executed
    from .checks import CallRecord

T = TypeVar("T")


@runtime_checkable
class Reported(Protocol):
    """A result that fills part of the verdict's ``performance`` document."""

    def performance(self) -> dict[str, Any]: ...


class Earlier:
    """The typed results of the rungs run so far, one per type."""

    def __init__(self, *items: object) -> None:
        self._items: dict[type, object] = {}
        for item in items:
            self.add(item)

    def add(self, item: object | None) -> None:
        if item is not None:
            self._items[type(item)] = item

    def get(self, kind: type[T]) -> T | None:
        item = self._items.get(kind)
        return item if isinstance(item, kind) else None

    def take(self, kind: type[T]) -> T | None:
        """``get``, and the result is no longer kept here (its last reader holds it)."""
        item = self._items.pop(kind, None)
        return item if isinstance(item, kind) else None

    def __iter__(self) -> Iterator[object]:
        return iter(self._items.values())

    def performance(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in self:
            if isinstance(item, Reported):
                out.update(item.performance())
        return out


@dataclass(frozen=True)
class FirstCall:
    """The compile rung's first call of the entry point (shape 0, trial 0)."""

    record: CallRecord


@dataclass(frozen=True)
class ShapeTiming:
    """One benchmarked shape: what the later rungs need, and the benchmark's whole record."""

    label: str
    shape: dict[str, Any]
    median_ms: float
    speedup: float | None
    flushed: bool
    input_bytes: int | None
    output_bytes: int | None
    output_dtype: str | None
    record: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ShapeTiming:
        outputs = record.get("outputs") or [{}]
        return cls(
            label=str(record["label"]),
            shape=dict(record["shape"]),
            median_ms=float((record.get("candidate") or {}).get("median_ms") or 0.0),
            speedup=record.get("speedup"),
            flushed=bool(record.get("flushed")),
            input_bytes=record.get("input_bytes"),
            output_bytes=record.get("output_bytes"),
            output_dtype=(outputs[0] or {}).get("dtype") if outputs else None,
            record=record,
        )


@dataclass(frozen=True)
class Timings:
    """The benchmark rung's result: every benchmarked shape, in order."""

    shapes: list[ShapeTiming]

    def for_shape(self, shape: dict[str, Any]) -> ShapeTiming | None:
        return next((s for s in self.shapes if s.shape == shape), None)

    def performance(self) -> dict[str, Any]:
        keys = (
            "label",
            "candidate",
            "reference",
            "reference_compiled",
            "reference_library",
            "library",
            "speedup",
            "speedup_vs_compiled",
            "speedup_vs_library",
            "l2",
            "mode",
        )
        return {"benchmark": [{k: s.record.get(k) for k in keys} for s in self.shapes]}


@dataclass(frozen=True)
class Roofline:
    """The roofline rung's result: the first shape's percent of roofline, and every shape's."""

    pct_of_roofline: float
    bound: str
    sentence: str
    shape: str
    ceilings: dict[str, Any]
    shapes: list[dict[str, Any]]
    review: list[str] = field(default_factory=list)

    def performance(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pct_of_roofline": self.pct_of_roofline,
            "bound": self.bound,
            "roofline": self.sentence,
            "shape": self.shape,
            "ceilings": self.ceilings,
            "shapes": self.shapes,
        }
        if self.review:
            out["review"] = self.review
        return out


@dataclass(frozen=True)
class DumpReport:
    """What the dumps rung found in the compiled code (directory, findings, per kernel)."""

    summary: dict[str, Any]

    def performance(self) -> dict[str, Any]:
        return {"dump": self.summary}


@dataclass(frozen=True)
class ProfileReport:
    summary: dict[str, Any]
    executed: Executed | None = None  # what the hot kernel executed (``perf/isa.py``)

    def performance(self) -> dict[str, Any]:
        return {"profile": self.summary}


@dataclass(frozen=True)
class TraceReport:
    summary: dict[str, Any]

    def performance(self) -> dict[str, Any]:
        return {"trace": self.summary}
