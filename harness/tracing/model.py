"""The trace data model: timed sections per warp or CTA, whatever recorded them.

A ``Trace`` is what every recorder produces (Proton's instrumentation mode for Triton,
the ``ck_trace`` buffer helper for CUDA C++ and CuTeDSL): a list of ``Unit`` (one writer:
a warp, or a whole CTA) and a list of ``Interval`` (one entered-and-left section of one
unit). An interval's ``start``/``end`` are cycles on its unit's SM clock (only
differences within a unit mean anything); ``ts_ns`` places its start on a timeline
shared by all units (nanoseconds from the earliest unit), for pictures.

Traces travel from the worker to the parent as two int64 tensors plus a small JSON
header (``to_wire``/``from_wire``) and are kept on disk as plain JSON (``to_json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

UNIT_COLUMNS = ("launch", "kernel", "cta", "warp", "sm")
INTERVAL_COLUMNS = ("unit", "section", "start", "end", "ts_ns")


@dataclass(frozen=True)
class Unit:
    """One writer: ``warp`` is the warp index inside its CTA, -1 for a CTA-wide record."""

    launch: int
    kernel: int  # index into Trace.kernels
    cta: int
    warp: int
    sm: int = -1

    @property
    def cta_key(self) -> tuple[int, int]:
        return (self.launch, self.cta)


@dataclass(frozen=True)
class Interval:
    unit: int  # index into Trace.units
    section: int  # index into Trace.sections
    start: int  # cycles (unit clock)
    end: int
    ts_ns: int = 0  # timeline position of ``start``

    @property
    def cycles(self) -> int:
        return self.end - self.start


@dataclass
class Trace:
    """Sections recorded inside one or more kernel launches of one candidate call."""

    backend: str  # "proton" | "ck_trace"
    granularity: str  # "warp" | "cta" | "mixed"
    sections: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    ns_per_cycle: float | None = None  # None: unknown (timelines then assume 1 GHz)
    clock_source: str = ""  # how ns_per_cycle was obtained
    dropped: int = 0  # events lost to a full buffer
    notes: list[str] = field(default_factory=list)

    # -- building -------------------------------------------------------------------

    def section_id(self, name: str) -> int:
        try:
            return self.sections.index(name)
        except ValueError:
            self.sections.append(name)
            return len(self.sections) - 1

    def kernel_id(self, name: str) -> int:
        try:
            return self.kernels.index(name)
        except ValueError:
            self.kernels.append(name)
            return len(self.kernels) - 1

    @property
    def launches(self) -> int:
        return len({u.launch for u in self.units})

    @property
    def ctas(self) -> int:
        return len({u.cta_key for u in self.units})

    def is_empty(self) -> bool:
        return not self.intervals

    # -- plain JSON -----------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "granularity": self.granularity,
            "sections": list(self.sections),
            "kernels": list(self.kernels),
            "ns_per_cycle": self.ns_per_cycle,
            "clock_source": self.clock_source,
            "dropped": self.dropped,
            "notes": list(self.notes),
        }

    def to_json(self) -> dict[str, Any]:
        doc = self.meta()
        doc["units"] = [[getattr(u, c) for c in UNIT_COLUMNS] for u in self.units]
        doc["intervals"] = [[getattr(i, c) for c in INTERVAL_COLUMNS] for i in self.intervals]
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Trace:
        trace = cls._from_meta(doc)
        trace.units = [Unit(*map(int, row)) for row in doc.get("units", [])]
        trace.intervals = [Interval(*map(int, row)) for row in doc.get("intervals", [])]
        return trace

    @classmethod
    def _from_meta(cls, doc: dict[str, Any]) -> Trace:
        npc = doc.get("ns_per_cycle")
        return cls(
            backend=str(doc.get("backend", "?")),
            granularity=str(doc.get("granularity", "warp")),
            sections=[str(s) for s in doc.get("sections", [])],
            kernels=[str(k) for k in doc.get("kernels", [])],
            ns_per_cycle=float(npc) if isinstance(npc, (int, float)) else None,
            clock_source=str(doc.get("clock_source", "")),
            dropped=int(doc.get("dropped", 0)),
            notes=[str(n) for n in doc.get("notes", [])],
        )

    # -- over the worker channel ------------------------------------------------------

    def to_wire(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        """A JSON header and two int64 CPU tensors (units, intervals): compact for the
        hundreds of thousands of records a large grid produces."""
        import torch

        units = torch.tensor(
            [[getattr(u, c) for c in UNIT_COLUMNS] for u in self.units] or [[0] * 5],
            dtype=torch.int64,
        )
        intervals = torch.tensor(
            [[getattr(i, c) for c in INTERVAL_COLUMNS] for i in self.intervals] or [[0] * 5],
            dtype=torch.int64,
        )
        header = self.meta()
        header["n_units"] = len(self.units)
        header["n_intervals"] = len(self.intervals)
        return header, [units, intervals]

    @classmethod
    def from_wire(cls, header: dict[str, Any], tensors: list[torch.Tensor]) -> Trace:
        trace = cls._from_meta(header)
        n_units = int(header.get("n_units", 0))
        n_intervals = int(header.get("n_intervals", 0))
        if len(tensors) < 2:
            raise ValueError("a trace needs two tensors (units, intervals)")
        units = tensors[0].to("cpu").tolist()[:n_units]
        intervals = tensors[1].to("cpu").tolist()[:n_intervals]
        trace.units = [Unit(*map(int, row)) for row in units]
        trace.intervals = [Interval(*map(int, row)) for row in intervals]
        bad = [i for i in trace.intervals if not 0 <= i.unit < len(trace.units)]
        if bad:
            raise ValueError(f"{len(bad)} intervals name a unit that does not exist")
        return trace
