"""The compile clock: time a candidate's call spends compiling is budgeted apart from run time.

A JIT compiles inside the first call (Triton's ``compile``, its autotuner's benchmarking,
``torch.compile``'s dynamo and inductor, a lazy ``load_inline`` build, CuTeDSL's and
TileLang's compilers). Giving every first call minutes would let a hanging kernel hold its
slot for minutes; giving it the run timeout would fail an honest kernel that compiles
slowly. So the worker tells the parent when a compile starts and ends, and the parent's
clock pauses the request's run budget (``--timeout``) while a compile runs, up to a
compile budget per worker (``CompileClock``). A hang after the last compile is caught
within the run timeout.

Worker side: ``install(send)`` gives the hooks a way to send an interim frame
(``{"stage": "compile", "event": "start" | "end"}``, only for the outermost of nested
compiles), ``wrap_hooks(names)`` wraps the compile entry points a backend declares
(``Backend.compile_hooks``: ``"module:attr.path"``, wrapped only where the module is
already imported). Parent side: ``CompileClock``, which ``LocalSession.request`` feeds the
interim frames. Imports nothing of the ladder.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

_Send = Callable[[dict[str, Any]], None]
_state: dict[str, Any] = {"send": None, "depth": 0}
MARK = "_ctxkernel_compile_phase"


def install(send: _Send | None) -> None:
    """Where compile frames go (the worker's channel); None: nowhere (a oneshot worker)."""
    _state["send"] = send


def _notify(event: str) -> None:
    send = _state["send"]
    if send is not None:
        try:
            send({"stage": "compile", "event": event})
        except Exception:  # a note only: a closed channel ends the worker elsewhere
            pass


def phase(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` wrapped so that a call to it is a compile phase."""
    if getattr(fn, MARK, False):
        return fn

    @functools.wraps(fn)
    def compiling(*args: Any, **kwargs: Any) -> Any:
        outer = _state["depth"] == 0
        _state["depth"] += 1
        if outer:
            _notify("start")
        try:
            return fn(*args, **kwargs)
        finally:
            _state["depth"] -= 1
            if outer:
                _notify("end")

    setattr(compiling, MARK, True)
    return compiling


def wrap_hooks(names: Iterable[str]) -> list[str]:
    """Wrap each ``"module:attr.path"`` whose module is imported; the names wrapped."""
    done = []
    for name in names:
        module_name, _, path = name.partition(":")
        module = sys.modules.get(module_name)
        if module is None or not path:
            continue
        owner: Any = module
        parts = path.split(".")
        try:
            for part in parts[:-1]:
                owner = getattr(owner, part)
            original = (
                vars(owner).get(parts[-1]) if isinstance(owner, type) else getattr(owner, parts[-1])
            )
        except AttributeError:
            continue
        if original is None or not callable(original) or getattr(original, MARK, False):
            continue
        setattr(owner, parts[-1], phase(original))
        done.append(name)
    return done


class CompileClock:
    """The parent's side: a request's deadline, paused while the worker compiles.

    ``start(deadline, now)`` on a compile start returns the deadline during the compile (at
    least what is left of the compile budget); ``end(now)`` returns the run deadline again,
    with the run time that was left when the compile began."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.used_s = 0.0
        self._started: float | None = None
        self._run_left = 0.0

    @property
    def compiling(self) -> bool:
        return self._started is not None

    def start(self, deadline: float, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        if self._started is not None:
            return deadline
        self._started = now
        self._run_left = max(0.0, deadline - now)
        return max(deadline, now + max(0.0, self.budget_s - self.used_s))

    def end(self, deadline: float, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        if self._started is None:
            return deadline
        self.used_s += now - self._started
        self._started = None
        return now + self._run_left

    def on_frame(self, header: dict[str, Any], deadline: float) -> float:
        """The deadline after an interim ``compile`` frame."""
        if header.get("event") == "start":
            return self.start(deadline)
        return self.end(deadline)


__all__ = ["MARK", "CompileClock", "install", "phase", "wrap_hooks"]
