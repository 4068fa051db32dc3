"""Snapshots taken before candidate code runs and compared after it: what it must leave
as it found.

- ``IdentitySnapshot``: the identity of critical functions (timers, validators, the
  reference's building blocks, harness internals, ``sys.modules`` entries); checked after
  import and after every call so a monkeypatch is reported by name. Of the harness's own
  modules it keeps every module-level name (a table such as the worker's ``OPS`` by its
  content too) and the methods of every class they define (``Worker.integrity``,
  ``OpRecorder.reset``): the worker reads them while it answers, after candidate code ran.
- ``ProcessState``: live thread count and signal handlers, to catch work left running;
  ``settle`` waits a moment for it.

The worker compares them while no candidate code runs (its guards off), and reports what
changed beside what the guards refused (``guards.py``, which holds what watches candidate
code while it runs).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import backends

# -- identity snapshot -------------------------------------------------------------------

CRITICAL = [
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.time",
    "time.time_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.sleep",
    "torch.allclose",
    "torch.isclose",
    "torch.equal",
    "torch.testing.assert_close",
    "torch.softmax",
    "torch.matmul",
    "torch.mm",
    "torch.bmm",
    "torch.addmm",
    "torch.nn.functional.softmax",
    "torch.nn.functional.linear",
    "torch.nn.functional.rms_norm",
    "torch.nn.functional.layer_norm",
    "torch.cuda.synchronize",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.record",
    "torch.cuda.Event.synchronize",
]  # and each backend's protected_names
_SNAPSHOT_MODULES = [
    "time",
    "builtins",
    "torch",
    "torch.nn.functional",
    "torch.testing",
    "torch.cuda",
    "torch.utils._python_dispatch",
    "torch.overrides",
    "numpy",
]  # and each backend's protected_modules
_SNAPSHOT_CLASSES = [
    ("torch", "Tensor"),
    ("torch._C", "TensorBase"),
    ("torch.cuda", "Event"),
    ("torch.cuda", "Stream"),
]  # and each backend's protected_classes


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj: Any = module
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(dotted)


def _fingerprint(value: Any) -> tuple[Any, ...]:
    if isinstance(value, types.FunctionType):
        return (value, value.__code__, value.__defaults__, value.__kwdefaults__)
    return (value,)


# a table's content, compared item by item (its values by identity)
_TABLES = (dict, list, set, types.MappingProxyType)


def _table_content(value: Any) -> tuple[Any, ...]:
    if isinstance(value, (dict, types.MappingProxyType)):
        return (value, *[x for item in value.items() for x in item])
    if isinstance(value, set):
        return (value, *sorted(value, key=repr))
    return (value, *value)


def _harness_module(name: str) -> bool:
    return name == "harness" or name.startswith("harness.")


_MISSING = object()


def _lookup(owner: Any, attr: str) -> Any:
    # Raw class-dict values: getattr would bind classmethods into fresh objects, and a
    # class's own __name__ would hide a property of that name.
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in vars(klass):
                return vars(klass)[attr]
        return _MISSING
    if isinstance(owner, types.ModuleType):
        return vars(owner).get(attr, _MISSING)
    return getattr(owner, attr, _MISSING)


@dataclass
class IdentitySnapshot:
    """Which object each critical name pointed to when the worker started.

    Each entry keeps the object it was looked up on (a module or a class) and the
    attribute name, so the check after every call is a dict lookup per name.
    """

    entries: dict[str, tuple[Any, str, tuple[Any, ...]]] = field(default_factory=dict)
    modules: dict[str, types.ModuleType] = field(default_factory=dict)

    def _add(self, name: str, owner: Any, attr: str, content: bool = False) -> None:
        if name in self.entries:
            return
        value = _lookup(owner, attr)
        if value is _MISSING:
            return
        if content and isinstance(value, _TABLES):
            self.entries[name] = (owner, attr, _table_content(value))
        else:
            self.entries[name] = (owner, attr, _fingerprint(value))

    def _add_harness_module(self, module_name: str, module: types.ModuleType) -> None:
        """Every name of one of the harness's own modules (tables by content), and the
        methods of each class it defines."""
        for attr, value in list(vars(module).items()):
            if attr.startswith("__") and attr.endswith("__"):
                continue
            self._add(f"{module_name}.{attr}", module, attr, content=True)
            if isinstance(value, type) and getattr(value, "__module__", None) == module_name:
                for name, member in list(vars(value).items()):
                    if name in ("__dict__", "__weakref__", "__doc__"):
                        continue
                    if callable(member) or isinstance(
                        member, (property, classmethod, staticmethod, _TABLES)
                    ):
                        self._add(f"{module_name}.{attr}.{name}", value, name)

    @classmethod
    def take(cls, extra_modules: Iterable[str] = ()) -> IdentitySnapshot:
        snap = cls()
        for name in [*CRITICAL, *backends.protected_names()]:
            owner_name, _, attr = name.rpartition(".")
            try:
                owner = _resolve(owner_name)
            except (LookupError, AttributeError):
                continue
            snap._add(name, owner, attr)
        for module_name in [*_SNAPSHOT_MODULES, *backends.protected_modules(), *extra_modules]:
            module = sys.modules.get(module_name)
            if module is None:
                continue
            snap.modules[module_name] = module
            if _harness_module(module_name):
                snap._add_harness_module(module_name, module)
                continue
            for attr, value in list(vars(module).items()):
                if module_name in ("torch", "torch.cuda", "numpy") and attr.startswith("_"):
                    continue
                if callable(value) or isinstance(value, types.ModuleType):
                    snap._add(f"{module_name}.{attr}", module, attr)
        for module_name, class_name in [*_SNAPSHOT_CLASSES, *backends.protected_classes()]:
            module = sys.modules.get(module_name)
            cls_obj = getattr(module, class_name, None) if module is not None else None
            if not isinstance(cls_obj, type):
                continue
            # TensorBase methods are looked up through torch.Tensor, so a patch on either shows
            owner = sys.modules["torch"].Tensor if module_name == "torch._C" else cls_obj
            prefix = "torch.Tensor" if module_name == "torch._C" else f"{module_name}.{class_name}"
            for attr, value in list(vars(cls_obj).items()):
                if callable(value) or isinstance(value, (property, classmethod, staticmethod)):
                    snap._add(f"{prefix}.{attr}", owner, attr)
        return snap

    def changed(
        self,
        _lookup: Any = _lookup,
        _fingerprint: Any = _fingerprint,
        _table_content: Any = _table_content,
        _tables: Any = _TABLES,
        _modules: Any = sys.modules,
        _missing: Any = _MISSING,
    ) -> list[str]:
        """Names whose object (or function code/defaults, or table content) is no longer
        the original. Its helpers are bound as defaults, when this module is imported: a
        candidate rebinding this module's names does not change what the check calls."""
        out: list[str] = []
        for name, module in self.modules.items():
            if _modules.get(name) is not module:
                out.append(f"sys.modules[{name!r}]")
        for name, (owner, attr, original) in self.entries.items():
            current = _lookup(owner, attr)
            if current is _missing:
                out.append(name + " (deleted)")
                continue
            if current is original[0] and len(original) == 1:
                continue
            fp = (
                _table_content(current)
                if current is original[0] and isinstance(current, _tables)
                else _fingerprint(current)
            )
            if len(fp) != len(original) or any(
                a is not b for a, b in zip(fp, original, strict=False)
            ):
                if _unchanged(original) and _dynamo_rewrap(current, original[0]):
                    continue
                out.append(name)
        return out


def _unchanged(original: tuple[Any, ...]) -> bool:
    fp = _fingerprint(original[0])
    return len(fp) == len(original) and all(a is b for a, b in zip(fp, original, strict=False))


def _dynamo_rewrap(current: Any, original: Any) -> bool:
    """Whether ``current`` is PyTorch's own wrapper of ``original``: importing
    ``torch._dynamo`` (``torch.profiler.profile`` does on first use, ``torch.compile`` too) rebinds ``torch.manual_seed``
    and other RNG functions to ``torch._disable_dynamo(original)``, a closure over the
    original. Accepted only when the wrapper's code is that closure's (candidate frames
    cannot make code objects), it closes over the untouched original, and the disable
    function it caches on the original, if any, is dynamo's."""
    code = getattr(current, "__code__", None)
    if not isinstance(code, types.CodeType) or code.co_name != "inner":
        return False
    if not code.co_filename.endswith(os.path.join("torch", "_compile.py")):
        return False
    if getattr(current, "__wrapped__", None) is not original:
        return False
    cells = dict(zip(code.co_freevars, current.__closure__ or (), strict=False))
    try:
        if cells["fn"].cell_contents is not original:
            return False
    except (KeyError, ValueError):
        return False
    cached = getattr(original, "__dynamo_disable", None)
    if cached is not None:
        cached_code = getattr(cached, "__code__", None)
        where = getattr(cached_code, "co_filename", "")
        if f"torch{os.sep}_dynamo{os.sep}" not in where:
            return False
    return True


def snapshot_harness_modules() -> list[str]:
    return sorted(name for name in sys.modules if _harness_module(name))


# -- process state -----------------------------------------------------------------------


def _thread_count() -> int:
    import _thread

    counter = getattr(_thread, "_count", None)
    return int(counter()) if counter is not None else threading.active_count()


@dataclass
class ProcessState:
    """Live Python threads and signal handlers, to notice work left behind by a call.
    Threads PyTorch's own code started (``exempt``: idents the guard kept) do not count."""

    threads: int
    handlers: dict[int, Any]
    exempt: set[int] = field(default_factory=set)

    @classmethod
    def take(cls, exempt: set[int] | None = None) -> ProcessState:
        handlers = {}
        for sig in (
            signal.SIGALRM,
            signal.SIGVTALRM,
            signal.SIGPROF,
            signal.SIGUSR1,
            signal.SIGUSR2,
            signal.SIGCHLD,
        ):
            try:
                handlers[int(sig)] = signal.getsignal(sig)
            except (ValueError, OSError):
                continue
        owned = exempt if exempt is not None else set()
        return cls(_thread_count() - _alive(owned), handlers, owned)

    def differences(self) -> list[str]:
        now = ProcessState.take(self.exempt)
        out = []
        if now.threads > self.threads:
            out.append(
                f"{now.threads - self.threads} thread(s) started by candidate code are still running"
            )
        for sig, handler in now.handlers.items():
            if handler is not self.handlers.get(sig):
                out.append(f"candidate code installed a handler for {signal.Signals(sig).name}")
        return out

    def restore(self) -> None:
        """Cancel timers and put handlers back, so a stray signal cannot fire later."""
        for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
            try:
                signal.setitimer(timer, 0)
            except (ValueError, OSError):
                pass
        for sig, handler in self.handlers.items():
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError, TypeError):
                pass


def _alive(idents: set[int]) -> int:
    if not idents:
        return 0
    return sum(1 for t in threading.enumerate() if t.ident in idents)


def settle(seconds: float) -> None:
    """Wait a moment while letting pending signal handlers run."""
    end = time.monotonic() + seconds
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(remaining, 0.01))


__all__ = [
    "IdentitySnapshot",
    "ProcessState",
    "settle",
    "snapshot_harness_modules",
]
