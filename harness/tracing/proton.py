"""Triton's own intra-kernel profiler (Proton, instrumentation mode) driven for the trace rung.

A Triton candidate marks sections inside its ``@triton.jit`` function with
``triton.profiler.language`` (``pl.enter_scope("mainloop")`` / ``pl.exit_scope(...)`` or
``with pl.scope(...)``). Outside a Proton instrumentation session those calls emit no IR
(the plain build is unchanged); inside one, Proton lowers each to a clock read and a store
into a per-CTA buffer, one record stream per warp, and writes a Chrome trace when the
session is finalized.

``ProtonSession`` wraps the calls that are the same in Triton 3.6 and 3.9:
``pl.enable_semantic("triton")`` (both only instrument Gluon by default),
``proton.start(prefix, data="trace", backend="instrumentation", mode=Default(...))`` and
``proton.finalize(session, output_format="chrome_trace")``, which writes
``prefix.chrome_trace``. ``parse_chrome_trace`` turns that file into a ``Trace``: events
``ph: "X"`` whose ``pid`` is ``"<kernel> Core<sm> CTA<cta>"`` and ``tid`` ``"warp <w>
(line <l>)"``, ``dur`` in microseconds at Proton's assumed 1 GHz (so ``dur x 1000`` is
cycles); launches of the same kernel are told apart by each CTA's ``Init Time (ns)``.
Call-path, flow and async-event records (newer Proton) are skipped.

``neutralize_under_interpreter`` makes the scope calls no-ops under ``TRITON_INTERPRET=1``
(the interpreter does not know Proton's builtins and would fail the candidate).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from .model import Interval, Trace, Unit

PID_PATTERN = re.compile(r"^(?P<kernel>.*) Core(?P<sm>\d+) CTA(?P<cta>\d+)$")
TID_PATTERN = re.compile(r"^warp (?P<warp>\d+)")
_SKIP_CATEGORIES = {"call_path", "flow", "async", "kernel"}
INIT_KEY = "Init Time (ns)"


# -- parsing ---------------------------------------------------------------------------


def load_chrome_events(source: str | Path | dict[str, Any] | list[Any]) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a Chrome trace: a path, a parsed document (object or
    array form), or text holding one JSON document per line (Proton's stream dumps)."""
    if isinstance(source, dict):
        return list(source.get("traceEvents") or [])
    if isinstance(source, list):
        return list(source)
    text = Path(source).read_text()
    try:
        return load_chrome_events(json.loads(text))
    except json.JSONDecodeError:
        events: list[dict[str, Any]] = []
        for line in text.splitlines():
            if line.strip():
                events.extend(load_chrome_events(json.loads(line)))
        return events


def parse_chrome_trace(
    source: str | Path | dict[str, Any] | list[Any],
    ns_per_cycle: float | None = None,
    clock_source: str = "",
) -> Trace:
    """A Proton instrumentation Chrome trace as a ``Trace`` (cycles from ``dur x 1000``)."""
    trace = Trace(backend="proton", granularity="warp")
    skipped = 0
    rows: list[tuple[str, int, int, int, int, str, int, int]] = []
    inits: dict[tuple[str, int], set[int]] = defaultdict(set)
    for event in load_chrome_events(source):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        pid = PID_PATTERN.match(str(event.get("pid", "")))
        tid = TID_PATTERN.match(str(event.get("tid", "")))
        if pid is None or tid is None or event.get("cat") in _SKIP_CATEGORIES:
            skipped += 1
            continue
        try:
            ts = float(event["ts"])
            dur = float(event.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            skipped += 1
            continue
        args = event.get("args") or {}
        init = int(args.get(INIT_KEY, 0) or 0)
        kernel, cta = pid["kernel"], int(pid["cta"])
        inits[(kernel, cta)].add(init)
        start = round(ts * 1000.0)
        rows.append(
            (kernel, int(pid["sm"]), cta, int(tid["warp"]), init, str(event.get("name", "?")),
             start, start + round(dur * 1000.0))
        )  # fmt: skip
    if not rows:
        trace.notes.append("the Proton trace holds no scope records")
        return trace
    launch_of = {
        (key, init): rank
        for key, values in inits.items()
        for rank, init in enumerate(sorted(values))
    }
    min_init = min(r[4] for r in rows)
    npc = ns_per_cycle
    if npc:
        trace.ns_per_cycle = npc
        trace.clock_source = clock_source or "given"
    else:
        trace.clock_source = "Proton assumes 1 GHz"
    unit_index: dict[tuple[int, str, int, int], int] = {}
    for kernel, sm, cta, warp, init, name, start, end in rows:
        launch = launch_of[((kernel, cta), init)]
        key = (launch, kernel, cta, warp)
        index = unit_index.get(key)
        if index is None:
            trace.units.append(Unit(launch, trace.kernel_id(kernel), cta, warp, sm))
            index = unit_index[key] = len(trace.units) - 1
        ts_ns = start
        if npc and init:
            # Proton's ts: (init - min_init) ns + cycles since the CTA's first record
            offset = init - min_init
            ts_ns = round(offset + (start - offset) * npc)
        trace.intervals.append(Interval(index, trace.section_id(name), start, end, ts_ns))
    if skipped:
        trace.notes.append(f"{skipped} non-scope records skipped (call paths, flows, async events)")
    return trace


# -- running a session ---------------------------------------------------------------


class ProtonUnavailable(RuntimeError):
    """Proton's instrumentation mode cannot run here (no GPU, an old Triton, no libproton)."""


class ProtonSession:
    """One instrumentation session writing ``<prefix>.chrome_trace`` on ``finish()``.

    ``buffer_type``: ``"shared"`` (Proton's default: per-CTA shared memory that does not
    cost occupancy) or ``"global"`` (for kernels that leave no shared memory spare)."""

    def __init__(self, prefix: Path, buffer_type: str = "shared") -> None:
        self.prefix = Path(prefix)
        self.buffer_type = buffer_type
        self.session: Any = None
        self.proton: Any = None

    @staticmethod
    def unavailable_reason() -> str | None:
        try:
            import triton.profiler as proton
            import triton.profiler.language  # noqa: F401
        except Exception as exc:  # an old Triton, or a build without libproton
            return f"triton.profiler (Proton) is not importable: {type(exc).__name__}: {exc}"
        if not hasattr(proton, "start") or not hasattr(proton, "finalize"):
            return "this Triton's profiler has no start/finalize"
        return None

    def start(self) -> None:
        why = self.unavailable_reason()
        if why:
            raise ProtonUnavailable(why)
        import triton.profiler as proton
        import triton.profiler.language as pl

        if hasattr(pl, "enable_semantic"):
            try:
                pl.enable_semantic("triton")  # Triton 3.5+: only Gluon is instrumented by default
            except Exception:  # a Triton that instruments Triton anyway
                pass
        mode: Any = None
        mode_module = getattr(proton, "mode", None)
        if mode_module is not None and hasattr(mode_module, "Default"):
            mode = mode_module.Default(buffer_type=self.buffer_type)
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self.proton = proton
        self.session = proton.start(
            str(self.prefix), data="trace", backend="instrumentation", mode=mode
        )

    def finish(self) -> Path | None:
        """Finalize and return the Chrome trace file (``None`` if Proton wrote none)."""
        if self.proton is None:
            return None
        proton, self.proton = self.proton, None
        try:
            proton.finalize(self.session, output_format="chrome_trace")
        except TypeError:  # a Triton whose finalize takes no output_format
            proton.finalize(self.session)
        found = sorted(self.prefix.parent.glob(self.prefix.name + "*.chrome_trace"))
        return found[-1] if found else None


def neutralize_under_interpreter() -> bool:
    """Under ``TRITON_INTERPRET=1`` Proton's scope builtins raise (the interpreter does not
    patch them); make them no-ops there so a traced candidate still runs on a CPU.
    Returns whether anything was patched."""
    try:
        import triton.profiler.language as pl
    except Exception:  # a Triton without Proton: nothing to patch
        return False

    def enter_scope(name: Any, _semantic: Any = None) -> None:
        return None

    def exit_scope(name: Any, _semantic: Any = None) -> None:
        return None

    for attr, fn in (("enter_scope", enter_scope), ("exit_scope", exit_scope)):
        if hasattr(pl, attr):
            setattr(pl, attr, fn)
    return True
