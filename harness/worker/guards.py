"""Runtime guards installed in the worker before the candidate is imported: what watches
candidate code while it runs.

- ``install_audit_guard``: a ``sys.addaudithook`` policy, active while candidate code runs:
  no subprocess except an allowlist of compilers, no fork/exec/system, no thread creation
  (audit events where Python has them, wrappers around ``_thread``/``threading`` where it
  does not), no writes outside the worker's temp dir, no memory file opened (a process's
  ``/proc/<pid>/mem`` under any spelling, ``/dev/mem``: the inputs' bytes read past every
  torch call; ``memory_file``), no network, no new audit hooks, no ``__code__`` swaps;
  frame walking and ``gc`` object discovery are refused when the candidate's own code asks
  for them, directly or through standard-library code that hands the frames back
  (``traceback.walk_stack``, ``inspect``; ``_FRAME_KEEPERS`` lists what reads a frame for
  a name only, ``namedtuple``, ``logging``'s caller lookup); ``exec``/``compile`` and new
  code or function objects when it asks directly. Violations are recorded even when the
  candidate catches the exception.
  PyTorch's own compile machinery (``torch.compile``: dynamo, inductor, its progress bars)
  runs inside candidate calls and starts threads, probes the C++ toolchain with a Python
  subprocess and installs tracing hooks: the guard tells it apart by the code that asks
  -- the nearest frame outside the standard library that belongs to the installed
  ``torch`` package -- and allows exactly those (``torch_owned``); the threads it starts
  are not "left running" by the candidate.
- ``OpRecorder``: a TorchDispatchMode + TorchFunctionMode pair that records the ATen ops
  (with the time spent in each) and torch functions a call makes, so a forbidden library
  op is caught at run time. ``torch.compile`` keeps working under it: the dispatch mode
  asks to be left out of compilation (``ignore_compile_internals``) and is back on while
  the compiled code runs, and the function mode records nothing while dynamo traces.

What candidate code must leave as it found (the identity of critical functions, threads,
signal handlers), compared after import and after every call, is in ``snapshots.py``.

An in-process guard cannot be perfect against code that shares the process; the parent's
checks (reference in another process, inputs and outputs compared there) are the primary
defence and these are the second line.
"""

from __future__ import annotations

import importlib
import os
import re
import site
import sys
import sysconfig
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import backends

ALLOWED_PROGRAMS = frozenset(
    {
        "ptxas",
        "nvcc",
        "nvdisasm",
        "cuobjdump",
        "nvlink",
        "fatbinary",
        "cicc",
        "ninja",
        "c++",
        "g++",
        "gcc",
        "cc",
        "clang",
        "clang++",
        "ld",
        "as",
        "ldconfig",
        "which",
        "file",  # platform.architecture() runs it (seen under triton 3.6 on an H200)
        "uname",
        "x86_64-linux-gnu-gcc",
        "x86_64-linux-gnu-g++",
        "aarch64-linux-gnu-gcc",
        "aarch64-linux-gnu-g++",
    }
)
_VERSION_SUFFIX = re.compile(r"^(.*?)(-\d+(\.\d+)*)?$")

WRITE_EVENTS: dict[str, tuple[int, ...]] = {
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.mkfifo": (0,),
    "os.mknod": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_WRITABLE_DEVICES = ("/dev/null", "/dev/nvidia")
# files whose content is memory: a process's (/proc/<pid>/mem, a task's too) or the machine's
MEMORY_FILES = frozenset({"mem", "kmem", "kcore"})
_KERNEL_LINKS = ("/proc/", "/dev/", "//")  # where symlinks the candidate did not make lead on
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "__globals__"})
_INDIRECT_FRAME_MODULES = ("inspect.py", os.path.join("ctypes", "__init__.py"))
# Standard-library code that reads a frame for a name only (its module's, a line for a
# message) and hands none back: (file under the standard library, function) -> the
# functions of that file it must be called from (None: any). A frame or the heap asked
# for through any other standard-library code the candidate called (``traceback.
# walk_stack``, ``logging.currentframe``, ``bdb``, ``inspect``) is the candidate's asking.
_FRAME_KEEPERS: dict[tuple[str, str], frozenset[str] | None] = {
    (os.path.join("collections", "__init__.py"), "namedtuple"): None,
    ("typing.py", "_caller"): None,
    ("enum.py", "_create_"): None,
    ("warnings.py", "warn"): None,
    ("gettext.py", "_as_int"): None,
    (os.path.join("logging", "__init__.py"), "<lambda>"): frozenset({"findCaller"}),
    (os.path.join("logging", "__init__.py"), "handleError"): None,
    ("traceback.py", "print_stack"): None,
    ("traceback.py", "format_stack"): None,
    ("traceback.py", "extract_stack"): None,
    ("traceback.py", "clear_frames"): None,
    # generators that yield frames: kept only when traceback's own summary reads them
    ("traceback.py", "walk_stack"): frozenset({"extended_frame_gen"}),
    ("traceback.py", "walk_tb"): frozenset({"extended_frame_gen"}),
    ("traceback.py", "_walk_tb_with_full_positions"): frozenset(
        {"_extract_from_extended_frame_gen"}
    ),
}
# packages whose frames are skipped when looking for who asked (torch's progress bars)
_HELPER_PACKAGES = ("tqdm",)
# events PyTorch's compile machinery may raise from its own frames
_TORCH_HOOK_EVENTS = frozenset(
    {"sys.addaudithook", "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback"}
)


def _site_dirs() -> tuple[str, ...]:
    dirs = set()
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:
        pass
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    return tuple(os.path.realpath(d) + os.sep for d in dirs if d)


def _stdlib_dirs() -> tuple[str, ...]:
    dirs = {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")}
    return tuple(os.path.realpath(d) + os.sep for d in dirs if d)


def _package_dir(name: str) -> str | None:
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    return os.path.realpath(os.path.dirname(path)) + os.sep if path else None


def thread_target_file(function: Any) -> str:
    """The file of the code a new thread will run: a ``threading.Thread``'s target (its
    ``_bootstrap`` is what reaches ``_thread``), else the function itself."""
    owner = getattr(function, "__self__", None)
    target = getattr(owner, "_target", None) if isinstance(owner, threading.Thread) else None
    target = target if target is not None else function
    target = getattr(target, "func", target)  # functools.partial
    code = getattr(target, "__code__", None) or getattr(
        getattr(target, "__func__", None), "__code__", None
    )
    return str(code.co_filename) if code is not None else ""


class HarnessGuardError(PermissionError):
    """Raised inside the candidate when a guard refuses an operation."""


@dataclass
class Violation:
    kind: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


@dataclass
class AuditGuard:
    """Handle on the installed hook: switch it on around candidate code, read violations."""

    activate: Callable[[], None]
    deactivate: Callable[[], None]
    take_violations: Callable[[], list[Violation]]
    is_active: Callable[[], bool]
    owned_threads: set[int] = field(default_factory=set)  # idents of threads torch started
    record: Callable[[str, str], None] = lambda kind, message: None  # a violation, not refused


def caller_under(dirs: tuple[str, ...], depth: int) -> bool:
    """Whether the code ``depth`` frames above the function calling this one lies under
    one of ``dirs`` (real paths ending in a separator); False when there is no such frame."""
    try:
        name = sys._getframe(depth + 1).f_code.co_filename
    except ValueError:
        return False
    return os.path.realpath(name).startswith(dirs)


def memory_file(path: Any) -> str:
    """What ``path`` (an ``open`` event's file or a symlink's target) names when it is a
    memory file -- ``/proc/<pid>/mem`` as ``self``, ``thread-self``, a task's or the pid
    itself, ``/dev/mem``, ``/proc/kcore`` -- else "". Judged by the last component of the
    path as written (a path relative to a directory descriptor, which the audit event does
    not carry, is only seen as written) and, for a descriptor and for a path that is
    relative or under ``/proc`` or ``/dev`` (where the kernel's own links are: ``/dev/fd``,
    ``/proc/self/fd/N``, ``/proc/<pid>/root``), of the file it leads to; a symlink of the
    candidate's own is judged when it is made. A non-dumpable process still reads its own
    ``mem`` (the kernel lets its own thread group in), so the refusal is this guard's;
    native code opening it is not seen here."""
    if isinstance(path, int):
        try:
            text = os.readlink(f"/proc/self/fd/{path}")
        except OSError:
            return ""
    else:
        try:
            text = os.fsdecode(path)
        except TypeError:
            return ""
    written = os.path.normpath(text)
    if os.path.basename(written) in MEMORY_FILES:
        return text
    if written.startswith("/") and not written.startswith(_KERNEL_LINKS):
        return ""  # imports open absolute paths: no realpath on their way
    try:
        full = os.path.realpath(text)
    except ValueError:  # a NUL in the path: the open itself refuses it
        return ""
    return full if os.path.basename(full) in MEMORY_FILES else ""


def program_name(path: Any) -> str:
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    base = os.path.basename(text.strip())
    match = _VERSION_SUFFIX.match(base)
    return match.group(1) if match else base


def install_audit_guard(
    workdir: str,
    allowed_programs: Iterable[str] | None = None,
    code_rewriters: Iterable[str] | None = None,
) -> AuditGuard:
    """Install the audit hook (permanently: audit hooks cannot be removed) and return its handle.

    ``allowed_programs``: what may run (default: the compilers plus what the backends
    declare); ``code_rewriters``: path fragments of kernel-DSL compilers whose frames may
    swap a ``__code__`` (default: the backends'). State lives in this closure, not in
    module globals, so the candidate cannot flip it through ``sys.modules``.
    """
    root = os.path.realpath(workdir)
    allowed = frozenset(
        allowed_programs
        if allowed_programs is not None
        else ALLOWED_PROGRAMS | backends.allowed_programs()
    )
    rewriters = tuple(code_rewriters if code_rewriters is not None else backends.code_rewriters())
    state = {"active": False, "busy": False, "torch_thread": False}
    violations: list[Violation] = []
    seen: set[str] = set()
    owned_threads: set[int] = set()
    getframe = sys._getframe
    realpath = os.path.realpath
    fspath = os.fsdecode
    start_new_thread_names = ("_thread.start_new_thread", "_thread.start_joinable_thread")
    stdlib = _stdlib_dirs()
    site_dirs = _site_dirs()
    torch_dir = _package_dir("torch")
    helpers = tuple(d for d in (_package_dir(n) for n in _HELPER_PACKAGES) if d)
    this_file = os.path.realpath(__file__)
    python_names = {program_name(sys.executable), "python", "python3"}
    # what inductor runs itself: a Python probe of the toolchain, openssl to hash headers
    torch_programs = python_names | {"openssl"}
    real_paths: dict[str, str] = {}

    def record(kind: str, message: str) -> None:
        if message not in seen and len(violations) < 64:
            seen.add(message)
            violations.append(Violation(kind, message))

    def refuse(kind: str, message: str) -> None:
        record(kind, message)
        raise HarnessGuardError(f"ctxkernel harness: {message}")

    def inside(path: Any) -> bool:
        if isinstance(path, int):
            return True
        try:
            text = fspath(path)
        except TypeError:
            return True
        full = realpath(text)
        if full == root or full.startswith(root + os.sep):
            return True
        return any(full == dev or full.startswith(dev) for dev in _WRITABLE_DEVICES)

    def candidate_frame(depth: int) -> bool:
        """Whether the code that triggered the event is the candidate's own (or reached
        it through ``inspect``)."""
        frame: types.FrameType | None
        try:
            frame = getframe(3)  # 0 this, 1 _check, 2 hook, 3 the code that raised the event
        except ValueError:
            return False
        for level in range(depth):
            if frame is None:
                return False
            filename = frame.f_code.co_filename
            if filename.startswith(root + os.sep):
                return True
            if level == 0 and not filename.endswith(_INDIRECT_FRAME_MODULES):
                return False
            frame = frame.f_back
        return False

    keepers = {
        (os.path.realpath(os.path.join(d, file)), name): callers
        for d in stdlib
        for (file, name), callers in _FRAME_KEEPERS.items()
    }

    def standard(filename: str) -> bool:
        path = real(filename)
        return filename.startswith("<frozen") or (
            path.startswith(stdlib) and not path.startswith(site_dirs)
        )

    def keeps_frames(raiser: types.FrameType) -> bool:
        """Whether the standard-library code that raised a frame event keeps the frame to
        itself (``_FRAME_KEEPERS``), called from where it must be."""
        path = real(raiser.f_code.co_filename)
        key = (path, raiser.f_code.co_name)
        if key not in keepers:
            return False
        callers = keepers[key]
        if callers is None:
            return True
        caller = raiser.f_back
        return (
            caller is not None
            and caller.f_code.co_name in callers
            and real(caller.f_code.co_filename) == path
        )

    def asks_for_frames() -> bool:
        """Whether candidate code asked for a frame or the heap: its own code raised the
        event, or standard-library code it called (the first frame up the stack outside
        the standard library is the candidate's) that does not keep the frame to itself.
        A module's body run by an import asks for itself, not for the importer."""
        frame: types.FrameType | None
        try:
            frame = getframe(3)  # 0 this, 1 _check, 2 hook, 3 the code that raised the event
        except ValueError:
            return False
        raiser = frame
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(root + os.sep):
                return frame is raiser or not keeps_frames(raiser)
            if not standard(filename):
                return False  # torch's, a backend's or the harness's own code asked
            back = frame.f_back
            if (
                frame.f_code.co_name == "<module>"
                and back is not None
                and back.f_code.co_filename.startswith("<frozen importlib")
            ):
                return False
            frame = back
        return False

    def real(filename: str) -> str:
        path = real_paths.get(filename)
        if path is None:
            path = realpath(filename) if not filename.startswith("<") else filename
            if len(real_paths) < 4096:
                real_paths[filename] = path
        return path

    def asker(start: types.FrameType | None) -> str:
        """The file of the code that asked: the nearest frame from ``start`` up that is not
        the standard library, this module or a helper package (``tqdm``)."""
        frame = start
        for _ in range(64):
            if frame is None:
                return ""
            filename = frame.f_code.co_filename
            path = real(filename)
            if not (standard(filename) or path == this_file or path.startswith(helpers)):
                return path
            frame = frame.f_back
        return ""

    def torch_owned(start: types.FrameType | None, under: str = "") -> bool:
        """Whether PyTorch's own code (``under``: one of its subpackages) asked, not the
        candidate's: the candidate cannot create frames of another file (new code objects
        are refused from its frames)."""
        if torch_dir is None:
            return False
        path = asker(start)
        return path.startswith(torch_dir + under) and not path.startswith(root + os.sep)

    def dsl_frame() -> bool:
        """Whether a ``__code__`` swap comes from a kernel DSL's own compiler (CuTeDSL
        rewrites the ``@cute.jit`` function it compiles); the identity snapshot still
        reports a critical function whose code changed, whoever changed it."""
        frame: types.FrameType | None
        try:
            frame = getframe(3)
        except ValueError:
            return False
        filename = frame.f_code.co_filename if frame is not None else ""
        return any(part in filename for part in rewriters)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not state["active"] or state["busy"]:
            return
        state["busy"] = True
        try:
            _check(event, args)
        finally:
            state["busy"] = False

    def _check(event: str, args: tuple[Any, ...]) -> None:
        if event in ("open", "os.symlink") and args and args[0] is not None:
            # whoever asks (a library helper opens files for the candidate too); a symlink
            # to one would be opened later through a directory descriptor, as a bare name
            named = memory_file(args[0])
            if named:
                refuse(
                    "memory",
                    f"opening a memory file ({named}) is not allowed: its bytes are the "
                    "process's memory, the inputs' included, read past every torch call",
                )
        if event == "open":
            path, mode, flags = ([*list(args), None, None, None])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and mode is None and bool(flags & _WRITE_FLAGS)
            )
            if writing and path is not None and not inside(path):
                refuse(
                    "write",
                    f"writing outside the worker's temp dir is not allowed ({fspath(path)!s})",
                )
            return
        if event in WRITE_EVENTS:
            for index in WRITE_EVENTS[event]:
                if index < len(args) and args[index] is not None and not inside(args[index]):
                    refuse(
                        "write",
                        f"{event} outside the worker's temp dir is not allowed ({args[index]!s})",
                    )
            return
        if event in ("subprocess.Popen", "os.posix_spawn"):
            executable = args[0] if args and args[0] else None
            argv = args[1] if len(args) > 1 else None
            name = program_name(executable) if executable else ""
            if not name and isinstance(argv, (list, tuple)) and argv:
                name = program_name(argv[0])
            elif not name and isinstance(argv, (str, bytes)):
                name = program_name(os.fsdecode(argv).split()[0]) if argv.strip() else ""
            if name not in allowed and not (
                name in torch_programs and torch_owned(getframe(1), f"_inductor{os.sep}")
            ):
                refuse(
                    "process",
                    f"starting a subprocess ({name or argv!s}) is not allowed; only compilers may run",
                )
            return
        if event in ("os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn", "pty.spawn"):
            refuse("process", f"process creation ({event}) is not allowed in candidate code")
        if event in start_new_thread_names:
            if state["torch_thread"] or thread_allowed(args[0] if args else None):
                return
            refuse("thread", f"thread creation ({event}) is not allowed in candidate code")
        if event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            target = args[0] if args else None
            if event != "os.kill" or target not in (os.getpid(), 0):
                refuse("process", f"sending signals ({event}) is not allowed in candidate code")
            return
        if event in (
            "socket.connect",
            "socket.bind",
            "socket.sendto",
            "socket.sendmsg",
            "socket.getaddrinfo",
        ):
            refuse("network", f"network access ({event}) is not allowed in candidate code")
        if event in _TORCH_HOOK_EVENTS:
            if torch_owned(getframe(1)):
                return
            refuse("introspection", f"{event} is not allowed in candidate code")
        if event == "object.__setattr__":
            if len(args) >= 2 and args[1] == "__code__" and not dsl_frame():
                refuse(
                    "monkeypatch",
                    f"replacing the __code__ of {getattr(args[0], '__qualname__', args[0])!s} is not allowed",
                )
            return
        if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
            if asks_for_frames():
                refuse(
                    "introspection", f"{event} (walking the heap) is not allowed in candidate code"
                )
            return
        if event in ("sys._getframe", "sys._current_frames", "sys._getframemodulename"):
            if asks_for_frames():
                refuse("introspection", f"frame walking ({event}) is not allowed in candidate code")
            return
        if event == "object.__getattr__":
            attr = args[1] if len(args) >= 2 else None
            if attr in _FRAME_ATTRS and (
                candidate_frame(1) if attr == "__globals__" else asks_for_frames()
            ):
                refuse(
                    "introspection",
                    f"reading {args[1]} (frame walking) is not allowed in candidate code",
                )
            return
        if event in ("exec", "compile", "marshal.loads", "pickle.find_class"):
            if candidate_frame(1):
                refuse("dynamic-code", f"dynamic code ({event}) is not allowed in candidate code")
            return
        if event in ("code.__new__", "function.__new__"):
            # a code object with another file's name would pass for that file's frames
            if candidate_frame(1):
                refuse(
                    "dynamic-code",
                    f"building code objects ({event}) is not allowed in candidate code",
                )
            return
        if event in ("ctypes.string_at", "ctypes.cdata", "ctypes.addressof", "ctypes.wstring_at"):
            if candidate_frame(2):
                refuse("memory", f"raw memory access ({event}) is not allowed in candidate code")
            return

    sys.addaudithook(hook)

    def thread_allowed(function: Any) -> bool:
        # frames of this module and the standard library (threading) are skipped; a thread
        # PyTorch starts must not run the candidate's code (a torch helper that starts a
        # thread on a callable it is given would otherwise be a way around the guard)
        target = thread_target_file(function)
        if target and real(target).startswith(root + os.sep):
            return False
        return torch_owned(getframe(1))

    _wrap_thread_starters(state, refuse, thread_allowed, owned_threads)

    def take() -> list[Violation]:
        out = list(violations)
        violations.clear()
        return out

    def activate() -> None:
        state["active"] = True

    def deactivate() -> None:
        state["active"] = False

    def active() -> bool:
        return bool(state["active"])

    return AuditGuard(activate, deactivate, take, active, owned_threads, record)


def _wrap_thread_starters(
    state: dict[str, bool],
    refuse: Callable[[str, str], None],
    allowed: Callable[[Any], bool],
    owned: set[int],
) -> None:
    """Python < 3.12 has no audit event for thread creation: wrap the starters instead.
    A thread PyTorch's own code starts (``allowed``) goes ahead and its ident is kept."""
    import _thread

    def make(original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if state["active"] and not state["torch_thread"]:
                if not allowed(args[0] if args else None):
                    refuse("thread", f"thread creation ({name}) is not allowed in candidate code")
                state["torch_thread"] = True
                try:
                    handle = original(*args, **kwargs)
                finally:
                    state["torch_thread"] = False
                ident = handle if isinstance(handle, int) else getattr(handle, "ident", None)
                if isinstance(ident, int):
                    owned.add(ident)
                return handle
            return original(*args, **kwargs)

        guarded.__name__ = getattr(original, "__name__", name)
        return guarded

    for module, attr in (
        (_thread, "start_new_thread"),
        (_thread, "start_new"),
        (_thread, "start_joinable_thread"),
        (threading, "_start_new_thread"),
        (threading, "_start_joinable_thread"),
    ):
        original = getattr(module, attr, None)
        if original is not None:
            setattr(module, attr, make(original, f"{module.__name__}.{attr}"))


# -- op recording ------------------------------------------------------------------------


# op namespaces whose ops are torch's own kernels: the rest (a candidate's
# ``torch.library`` ops, C++ ones too) run with the recorder's modes on inside them
OPAQUE_SAFE = frozenset({"aten", "prims"})


def _inside(mode: Any, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """``func`` redispatched past the Python key, ``mode`` pushed again for its inner ops."""
    import torch

    after = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)
    tensors = [
        a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)
    ]
    keys = after
    if tensors:
        keys = torch._C._dispatch_keys(tensors[0])
        for t in tensors[1:]:
            keys = keys | torch._C._dispatch_keys(t)
        keys = keys & after
    with mode:
        return func.redispatch(keys, *args, **kwargs)


# Tensor methods that hand a tensor's content to host code (numpy arrays, Python lists and
# numbers, DLPack capsules numpy reads, raw storage)
HOST_READS = frozenset(
    {
        "numpy",
        "__array__",
        "tolist",
        "__dlpack__",
        "to_dlpack",
        "untyped_storage",
        "storage",
        "_typed_storage",
        "__reduce_ex__",
        # one element each: a loop of them reads a whole tensor
        "item",
        "__float__",
        "__int__",
        "__index__",
        "__bool__",
        "__complex__",
    }
)


# frames from a launcher's read up to its launch's entry (the Triton interpreter's: 4)
_LAUNCHER_FRAMES = 16


def _function_code(spec: str) -> types.CodeType | None:
    """The code of the function ``module:qualname`` names; None when it is gone."""
    module_name, _, qualname = spec.partition(":")
    if not module_name or not qualname:
        return None
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError:
        return None
    for part in qualname.split("."):
        target = getattr(target, part, None)
    code = getattr(target, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


class OpRecorder:
    """Records ATen ops (dispatch mode, with the seconds spent in each) and torch functions
    (function mode) during a call."""

    def __init__(
        self,
        launching: Callable[[], bool] | None = None,
        host_launcher: str = "",
        with_dtypes: bool = False,
    ) -> None:
        """``launching``: whether a kernel launch of the backend runs now; ``host_launcher``:
        the function that runs a launch on the host (``module:qualname``, an interpreter's):
        the host reads its module's code makes inside it are the kernel's, not host compute
        (``launcher_read``); ``with_dtypes``: also the dtypes each op was given (the
        reference's run only: not paid on every op of a candidate's calls)."""
        import torch
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        self.aten: Counter[str] = Counter()
        self.seconds: dict[str, float] = {}
        self.elements: dict[str, int] = {}  # tensor elements each op was given
        self.dtypes: dict[str, set[str]] = {}  # the dtypes of the tensors each op was given
        self.functions: Counter[str] = Counter()
        # tensor elements candidate code turned into host data (numpy, lists, DLPack)
        # outside a kernel launch: work done there is nobody's kernel
        self.host: Counter[str] = Counter()
        host = self.host
        in_launch = launching or (lambda: False)
        entry = _function_code(host_launcher)
        getframe = sys._getframe

        def launcher_read() -> bool:
            """Whether the read is the launcher's own: inside a launch, made by the
            launcher's module and with only that module's frames up to the launch's entry.
            Code between them -- a kernel body the interpreter runs, a grid function, a
            pre-run hook, another package's helper the body calls -- is not the launcher,
            whatever package it belongs to."""
            if entry is None or not in_launch():
                return False
            frame: types.FrameType | None = getframe(2)  # this, __torch_function__, the reader
            for _ in range(_LAUNCHER_FRAMES):
                if frame is None or frame.f_code.co_filename != entry.co_filename:
                    return False
                if frame.f_code is entry:
                    return True
                frame = frame.f_back
            return False

        aten = self.aten
        seconds = self.seconds
        elements = self.elements
        dtypes = self.dtypes
        tensor_type = torch.Tensor
        functions = self.functions
        clock = time.perf_counter
        compiling = torch.compiler.is_compiling

        class _Dispatch(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:  # keeps torch._dynamo (2 s import) out
                return False

            @classmethod
            def ignore_compile_internals(cls) -> bool:
                # off while torch.compile traces and compiles, on while the compiled code
                # runs: otherwise dynamo would run a compiled candidate eagerly
                return True

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                packet = getattr(func, "_overloadpacket", func)
                name = str(packet).replace(".", "::", 1)
                aten[name] += 1
                start = clock()
                if getattr(func, "namespace", "aten") in OPAQUE_SAFE:
                    out = func(*args, **(kwargs or {}))
                else:
                    # an op of its own (torch.library): run below the Python key with the
                    # modes back on, so the ops inside it are seen too
                    out = _inside(self, func, args, kwargs or {})
                seconds[name] = seconds.get(name, 0.0) + clock() - start
                given = sum(a.numel() for a in args if isinstance(a, tensor_type))
                elements[name] = elements.get(name, 0) + given
                if with_dtypes:
                    seen = dtypes.setdefault(name, set())
                    seen.update(str(a.dtype) for a in args if isinstance(a, tensor_type))
                return out

        class _Function(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                if not compiling():  # dynamo traces modes: record nothing into its graphs
                    name = getattr(func, "__name__", str(func))
                    functions[name] += 1
                    if (
                        name in HOST_READS
                        and args
                        and isinstance(args[0], tensor_type)
                        and args[0].device.type == "cpu"  # a device tensor's DLPack is no read
                        and not launcher_read()
                    ):
                        host[name] += args[0].numel()
                return func(*args, **(kwargs or {}))

        self._dispatch_cls = _Dispatch
        self._function_cls = _Function
        self._modes: list[Any] = []
        self._torch = torch

    def reset(self) -> None:
        self.host.clear()
        self.aten.clear()
        self.seconds.clear()
        self.elements.clear()
        self.dtypes.clear()
        self.functions.clear()

    def __enter__(self) -> OpRecorder:
        self._modes = [self._function_cls(), self._dispatch_cls()]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)
        self._modes = []

    def warm_up(self) -> None:
        """The first use of the modes imports a lot; pay for it before the candidate runs."""
        with self:
            x = self._torch.ones(4)
            (x + x).sum()


__all__ = [
    "ALLOWED_PROGRAMS",
    "MEMORY_FILES",
    "AuditGuard",
    "HarnessGuardError",
    "OpRecorder",
    "Violation",
    "caller_under",
    "install_audit_guard",
    "memory_file",
]
