"""What candidate code may not do to torch's dispatch: the op recorder's blind spots.

The op recorder (``guards.OpRecorder``) sees a call's work through a torch function mode
and a dispatch mode. Three ways around it, each closed here:

- **A mode left on the stack** (pushed at import, or during a call and never popped) sees
  the harness's own tensor work between calls -- the inputs being placed, outputs
  snapshotted -- and can compute the answer there, outside every window the recorder
  and the profiler watch. ``DispatchState.differences`` reports any torch function,
  dispatch or infra (fake, proxy, functional) mode found after import or after a call,
  and pops it.
- **An operator of its own** (``torch.library.custom_op``, a ``Library`` impl): a
  dispatch mode runs an op with the modes off, so the library ops inside ``cand::op``
  would never be seen; the recorder runs an op outside ATen with its modes back on
  (``guards.OpRecorder``). An impl registered for an ATen op the worker itself runs
  (``aten::copy_`` on CPU) would change the harness's own tensor work:
  ``DispatchState.differences`` reports a changed kernel table of those ops.
- **A switch that turns the modes off** (``DisableTorchFunction``, ``_DisableTorchDispatch``,
  ``_disable_current_modes``, a guard excluding the Python dispatch key, popping the
  stacks): ``watch_switches`` replaces each in its module, before the candidate is
  imported, by one that records a violation when candidate code (not torch's own) uses
  it while a call runs. A name built at run time (``getattr(torch._C, "Disable" + ...)``)
  finds the wrapper too.

Imports nothing of the ladder; the worker (``serve.py``) takes the state before import.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .guards import caller_under

# the ops the worker itself runs on inputs and outputs between and around calls
WATCHED_OPS = (
    "aten::copy_",
    "aten::clone",
    "aten::equal",
    "aten::eq.Tensor",
    "aten::fill_.Scalar",
    "aten::zero_",
    "aten::empty.memory_format",
    "aten::empty_strided",
    "aten::_to_copy",
    "aten::view",
    "aten::contiguous",
)


def _dumps() -> dict[str, str]:
    out = {}
    for name in WATCHED_OPS:
        try:
            out[name] = torch._C._dispatch_dump(name)
        except RuntimeError:  # an op this torch does not have
            continue
    return out


def _mode_name(mode: Any) -> str:
    return type(mode).__name__


@dataclass
class DispatchState:
    """The kernels of the ops the worker itself runs, before candidate code ran."""

    dumps: dict[str, str]
    reported: set[str] = field(default_factory=set)

    @classmethod
    def take(cls) -> DispatchState:
        return cls(_dumps())

    def differences(self) -> list[str]:
        """What candidate code left: modes (popped here), kernels of the watched ops."""
        out = [*left_modes()]
        for name, dump in _dumps().items():
            if dump != self.dumps.get(name, dump):
                out.append(
                    f"candidate code replaced a kernel of {name}: the harness's own tensor "
                    "work runs it"
                )
        fresh = [m for m in out if m not in self.reported]
        self.reported.update(fresh)
        return fresh


def left_modes() -> list[str]:
    """Torch function, dispatch and infra modes on the stacks (none should be between
    calls); each is popped, so nothing of the harness's runs under it again."""
    found = []
    while torch._C._len_torch_function_stack() > 0:
        mode = torch._C._pop_torch_function_stack()
        found.append(f"a torch function mode ({_mode_name(mode)})")
    while torch._C._len_torch_dispatch_stack() > 0:
        mode = torch._C._pop_torch_dispatch_stack(None)
        found.append(f"a torch dispatch mode ({_mode_name(mode)})")
    for key in torch._C._TorchDispatchModeKey.__members__.values():
        mode = torch._C._get_dispatch_mode(key)
        if mode is not None:
            torch._C._unset_dispatch_mode(key)
            found.append(f"a torch dispatch mode ({_mode_name(mode)})")
    if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
        torch._C._dispatch_tls_set_dispatch_key_excluded(torch._C.DispatchKey.Python, False)
        found.append("the Python dispatch key excluded (the op recorder switched off)")
    return [
        f"candidate code left {what} active after it returned: it sees the harness's own "
        "tensor work between calls"
        for what in found
    ]


class OpLedger:
    """The op recorder's second book on a CPU: torch's own op records (the autograd
    profiler's RecordFunction events, taken beneath the Python dispatch key), so no mode
    switch, dispatch-key guard, class-dict impl or trampoline hides a library op from the
    count, and nothing in a mode's closure can be edited to erase one. Per call: each
    compute op's elements (its tensor inputs', a list's too), counted once where ops nest
    (the outermost op that was given tensors), and whether the records ran to the end."""

    def __init__(self, is_compute: Callable[[str], bool]) -> None:
        self.is_compute = is_compute
        self._prof: Any = None
        self.elements: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.stopped = False

    def __enter__(self) -> OpLedger:
        self.elements, self.calls, self.stopped = {}, {}, False
        self._prof = torch.autograd.profiler.profile(use_kineto=False, record_shapes=True)
        self._prof.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        prof, self._prof = self._prof, None
        try:
            prof.__exit__(None, None, None)
            events = list(prof.function_events)
        except Exception:  # the records stopped or emptied by candidate code
            self.stopped = True
            return
        counted: set[int] = set()
        for event in events:
            name = str(event.name)
            if not self.is_compute(name):
                continue
            self.calls[name] = self.calls.get(name, 0) + 1
            given = _shape_elements(getattr(event, "input_shapes", None) or [])
            parent = event.cpu_parent
            inside = False
            while parent is not None:
                if id(parent) in counted:
                    inside = True
                    break
                parent = parent.cpu_parent
            if given and not inside:
                counted.add(id(event))
                self.elements[name] = self.elements.get(name, 0) + given

    def warm_up(self) -> None:
        with self:
            torch.ones(2).add(1)


def _shape_elements(shapes: Any) -> int:
    """Elements of the tensors in a record's input shapes (a list of tensors' shapes too)."""
    total = 0
    for shape in shapes:
        if isinstance(shape, (list, tuple)) and shape and all(isinstance(d, int) for d in shape):
            total += math.prod(shape)
        elif isinstance(shape, (list, tuple)) and shape:
            total += _shape_elements(shape)
    return total


# (module, attribute): what turns the op recorder's modes off, or takes them off the stack
SWITCHES = (
    ("torch._C", "DisableTorchFunction"),
    ("torch._C", "_DisableTorchDispatch"),
    ("torch._C", "_ExcludeDispatchKeyGuard"),
    ("torch._C", "_ForceDispatchKeyGuard"),
    ("torch._C", "_SetExcludeDispatchKeyGuard"),
    ("torch._C", "_dispatch_tls_set_dispatch_key_excluded"),
    ("torch._C", "_pop_torch_function_stack"),
    ("torch._C", "_pop_torch_dispatch_stack"),
    ("torch._C", "_unset_dispatch_mode"),
    ("torch._C", "_disabled_torch_function_impl"),
    ("torch._C", "_disabled_torch_dispatch_impl"),
    ("torch.utils._python_dispatch", "_disable_current_modes"),
    ("torch.utils._python_dispatch", "_pop_mode"),
    ("torch.utils._python_dispatch", "_pop_mode_temporarily"),
    ("torch.overrides", "_pop_mode"),
    ("torch.overrides", "_pop_mode_temporarily"),
)


# (module, class, method): an op called below the Python dispatch key, past every mode
# (and past the profiler's op records too)
METHOD_SWITCHES = (
    ("torch._ops", "OpOverload", "redispatch"),
    ("torch._C", "_DispatchOperatorHandle", "redispatch_boxed"),
)


def watch_switches(active: Callable[[], bool], record: Callable[[str, str], None]) -> None:
    """Replace each of ``SWITCHES`` and ``METHOD_SWITCHES`` by a wrapper that records a
    violation when code outside torch's and the harness's own packages uses it while
    ``active()`` (a candidate call runs)."""
    trusted = tuple(
        os.path.dirname(os.path.realpath(path)) + os.sep
        for path in (str(torch.__file__), os.path.dirname(os.path.abspath(__file__)))
    )

    def from_candidate() -> bool:
        # frames: this, the wrapper, the code that called the switch
        return not caller_under(trusted, 2)

    def wrap(original: Any, label: str) -> Any:
        def switch(*args: Any, **kwargs: Any) -> Any:
            if active() and from_candidate():
                record(
                    "recorder_off",
                    f"candidate code switched the op recorder off ({label}): the work "
                    "it does then is hidden",
                )
            return original(*args, **kwargs)

        switch.__name__ = getattr(original, "__name__", label)
        switch.__qualname__ = getattr(original, "__qualname__", label)
        switch.__doc__ = getattr(original, "__doc__", None)
        return switch

    wrapped: dict[int, Any] = {}
    for module_name, attr in SWITCHES:
        module = sys.modules.get(module_name)
        original = getattr(module, attr, None) if module is not None else None
        if original is not None:
            wrapped[id(original)] = wrap(original, f"{module_name}.{attr}")
            setattr(module, attr, wrapped[id(original)])
    for module_name, cls_name, attr in METHOD_SWITCHES:
        cls = getattr(sys.modules.get(module_name), cls_name, None)
        original = getattr(cls, attr, None) if cls is not None else None
        if original is not None:
            try:
                setattr(cls, attr, wrap(original, f"{module_name}.{cls_name}.{attr}"))
            except (AttributeError, TypeError):  # a type that refuses: left as it is
                continue
    # the same objects under other names (``torch.DisableTorchFunction``, ``no_dispatch``
    # in torch's own modules): a module imported later reads the wrapped attribute
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for attr, value in list(names.items()):
            if id(value) in wrapped and names.get(attr) is value:
                try:
                    setattr(module, attr, wrapped[id(value)])
                except (AttributeError, TypeError):  # a read-only module: nothing to swap
                    continue


__all__ = [
    "METHOD_SWITCHES",
    "SWITCHES",
    "WATCHED_OPS",
    "DispatchState",
    "OpLedger",
    "left_modes",
    "watch_switches",
]
