"""The worker template: a warm process that forks each candidate's worker, isolated.

``python -m harness.worker.zygote --ctl FD --parent PID --backend NAME`` is started by ``templates.py`` (the
parent's side) with the scrubbed environment of a worker and no secret. It imports
what every worker needs -- torch, the harness's worker side, the backend's
``template_imports`` (triton and its interpreter) -- makes itself non-dumpable (no worker can ptrace it or read its ``/proc`` files,
even in the ``none`` sandbox mode) and never initialises CUDA (a CUDA context does not
survive a fork: each worker creates its own), never runs candidate code and never sees a
seed. It says ``ready`` on its control socket (a ``SOCK_SEQPACKET`` pair), then serves
``fork`` requests, each carrying three descriptors (the worker's two channel pipes and a
status pipe) and the worker's working directory, environment, log files and sandbox mode.

For each request it forks a launcher L (its own session and process group, dead with
the template by ``PR_SET_PDEATHSIG``) that runs ``sandbox.run_isolated``: new user, PID
and mount namespaces as for a spawned worker, an init, and the worker W (PID 2), which
does not exec but becomes the worker in place:

- every descriptor of the template is closed (its control socket first), stdout and
  stderr go to the worker's own log files, stdin is ``/dev/null``;
- ``sandbox.enter_worker``: private temp folders, the capabilities an exec would have
  left (none for a non-root user id), no new privileges; dumpable again in a namespace
  mode (nothing outside can see it), not in ``none`` mode;
- the environment is replaced by the worker's (``os.environ`` and the C environment),
  the working directory, ``sys.path[0]``, ``sys.argv``, ``tempfile``'s cached folder and
  name sequence, and the random generators are reset; signal handlers are Python's
  defaults;
- then ``lifecycle.run`` serves the parent on the channel exactly as a spawned worker does.

L writes ``P <pid>`` (W's host PID, for the memory watchdog) and, when W has ended,
``S <wait status>`` on the status pipe, then exits the same way; W never holds the status
pipe, so a candidate cannot forge its own exit. Each candidate gets a fresh copy of the
template: nothing one candidate does to its process (modules, environment, files in its
temp folders, CUDA memory -- its context dies with it) is seen by the next. A template
with a writable shared mapping (memory its forks would all share) or a CUDA context is
refused by the parent, which then spawns its workers.
"""

from __future__ import annotations

import argparse
import array
import importlib
import json
import os
import select
import signal
import socket
import sys
import time
import warnings
from typing import Any

from ..process import sandbox

MAX_MESSAGE = 1 << 20
PREIMPORTS = (
    "torch",
    "harness.worker.serve",
    "harness.worker.lifecycle",
    "harness.worker.benchworker",
    "harness.worker.kernelrecords",
    "harness.problems.problem",
    "harness.tracing",
)  # and the backend's ``template_imports``
_PY_IGNORED = ("SIGPIPE", "SIGXFSZ")  # what a fresh interpreter leaves ignored


def _backend(name: str) -> Any:
    try:
        from ..backends import get_backend

        return get_backend(name) if name else None
    except KeyError:  # a backend this harness does not know: no template imports
        return None


def _preimport(backend: Any) -> dict[str, float]:
    """Import what every worker of ``backend`` needs; a missing optional package is left out."""
    took: dict[str, float] = {}
    extra = tuple(getattr(backend, "template_imports", ()) or ())
    for name in (*PREIMPORTS, *extra):
        t0 = time.perf_counter()
        try:
            importlib.import_module(name)
        except Exception:  # an optional package failing to import: the worker finds out
            continue
        took[name] = round(time.perf_counter() - t0, 4)
    return took


def _warm_backend(backend: Any) -> dict[str, float]:
    """The backend's harness-only warm-up (``Backend.warm_template``)."""
    if backend is None:
        return {}
    t0 = time.perf_counter()
    try:
        backend.warm_template()
    except Exception:  # a warm-up only: the worker does the work itself
        return {}
    return {backend.name: round(time.perf_counter() - t0, 4)}


def _open_fds() -> list[int]:
    try:
        return sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    except OSError:
        return []


def shared_writable_mappings() -> list[str]:
    """This process's writable shared mappings: memory every forked worker would share
    with the next one (none is allowed in a template)."""
    found = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[1][1] == "w" and parts[1][3] == "s":
                    found.append(parts[5] if len(parts) > 5 else parts[0])
    except OSError:
        pass
    return found


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


class Template:
    def __init__(self, ctl: socket.socket, parent: int, backend: Any = None) -> None:
        self.ctl = ctl
        self.parent = parent
        self.backend = backend
        self.pid = os.getpid()
        self.cwd = os.getcwd()
        self.children: set[int] = set()

    def send(self, doc: dict[str, Any]) -> None:
        self.ctl.send(json.dumps(doc).encode())

    def serve(self) -> int:
        while True:
            ready, _, _ = select.select([self.ctl], [], [], 1.0)
            self.reap()
            if os.getppid() != self.parent:
                return 0
            if not ready:
                continue
            try:
                data, ancdata, _, _ = self.ctl.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(16 * 4))
            except InterruptedError:
                continue
            except OSError:
                return 0
            fds = _received_fds(ancdata)
            if not data:
                for fd in fds:
                    os.close(fd)
                return 0
            try:
                request = json.loads(data)
            except ValueError:
                for fd in fds:
                    os.close(fd)
                continue
            if request.get("op") == "bye":
                return 0
            if request.get("op") == "fork":
                self.fork(request, fds)
            else:
                for fd in fds:
                    os.close(fd)

    def reap(self) -> None:
        while self.children:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)

    def fork(self, request: dict[str, Any], fds: list[int]) -> None:
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            self.send({"type": "error", "id": request.get("id"), "message": "expected 3 fds"})
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _launcher(self, request, fds)
            finally:
                os._exit(sandbox.LAUNCH_FAILED)
        for fd in fds:
            os.close(fd)
        self.children.add(pid)
        self.send({"type": "forked", "id": request.get("id"), "pid": pid})


def _received_fds(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds = array.array("i")
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return list(fds)


def _launcher(template: Template, request: dict[str, Any], fds: list[int]) -> None:
    """L: in the template's forked child (one thread). Never returns."""
    to_worker, from_worker, status = fds
    os.setsid()
    sandbox.die_with_parent()
    if os.getppid() != template.pid:
        os._exit(sandbox.LAUNCH_FAILED)
    ctl_fd = template.ctl.detach()  # the Python object no longer owns it: nothing closes it twice
    os.close(ctl_fd)
    mode = str(request["mode"])

    def report(pid: int) -> None:
        os.write(status, f"P {pid}\n".encode())

    def on_exit(wait_status: int) -> None:
        try:
            os.write(status, f"S {wait_status}\n".encode())
        except OSError:
            pass

    def on_fail(message: str) -> None:
        os.write(status, f"F {' '.join(message.split())}\n".encode())

    # the logs are opened here, before the namespaces: a file opened for writing through
    # the worker's own mount tree would keep that mount from being made read-only
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    out = os.open(str(request["stdout"]), flags, 0o644)
    err = os.open(str(request["stderr"]), flags, 0o644)

    def become() -> None:
        _become_worker(template, request, to_worker, from_worker, status, mode, (out, err))

    walls_on = list(dict(request.get("walls") or {}).get("on", sandbox.ALL_WALLS))
    sandbox.run_isolated(
        mode,
        report,
        become,
        keep_fds=(status,),
        on_exit=on_exit,
        on_fail=on_fail,
        net="net" in walls_on,
    )


def _become_worker(
    template: Template,
    request: dict[str, Any],
    to_worker: int,
    from_worker: int,
    status: int,
    mode: str,
    logs: tuple[int, int],
) -> None:
    """W: the template's copy becomes a worker in place. Never returns."""
    os.close(status)
    workdir = str(request["workdir"])
    null = os.open(os.devnull, os.O_RDONLY)
    out, err = logs
    for source, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(source, target)
        os.close(source)
    keep = sorted({0, 1, 2, to_worker, from_worker})
    _close_all_but(keep)
    keep_paths = request.get("keep_paths")
    walls = dict(request.get("walls") or {})
    sandbox.enter_worker(
        mode,
        False,
        list(keep_paths) if keep_paths is not None else None,
        False,
        writable=walls.get("writable"),
        hidden=list(walls.get("hidden") or []),
        walls_on=list(walls.get("on", sandbox.ALL_WALLS)),
        needs=list(walls.get("needs") or []),
        serving_later=bool(walls.get("serving_later")),
    )
    _reset_process(template, request, workdir)
    _seed_worker(template.backend)
    from . import lifecycle

    code = lifecycle.run(
        to_worker, from_worker, workdir, str(request["device"]), int(request.get("mem_cap") or 0)
    )
    lifecycle.exit_now(code)


def _seed_worker(backend: Any) -> None:
    """The backend's ``seed_worker``: what the template prepared, into the worker's own
    folders (a failure costs only the time the seed saves)."""
    if backend is None:
        return
    try:
        backend.seed_worker()
    except Exception:  # a failure costs only the time the seed saves
        pass


def _close_all_but(keep: list[int]) -> None:
    start = 0
    for fd in keep:
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 20)


def _reset_process(template: Template, request: dict[str, Any], workdir: str) -> None:
    """What a fresh ``python -m harness.worker`` would have: its environment, cwd, path,
    argv, default signal handlers, unshared random state and temp-name sequence."""
    import random
    import tempfile

    env = {str(k): str(v) for k, v in dict(request["env"]).items()}
    os.environ.clear()  # unsetenv for each: the C environment follows
    os.environ.update(env)
    os.chdir(workdir)
    # not its folder, which an earlier worker of the candidate may have filled: the
    # worker puts it first itself, right before the candidate (as a spawned one does)
    sys.path[:] = [p for p in sys.path if p not in ("", template.cwd)]
    sys.argv = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")]
    tempfile.tempdir = None
    tempfile._name_sequence = None  # type: ignore[attr-defined]
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            numpy.random.seed()
        except Exception:  # best effort: a broken numpy fails the candidate that uses it
            pass
    for name in ("SIGCHLD", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in _PY_IGNORED:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    sys.dont_write_bytecode = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.worker.zygote")
    parser.add_argument("--ctl", type=int, required=True, help="the control socket's fd")
    parser.add_argument("--parent", type=int, required=True, help="the parent's PID")
    parser.add_argument("--backend", default="", help="the backend whose modules to import")
    args = parser.parse_args(argv)
    sandbox.die_with_parent()  # with the parent's thread that started it
    if os.getppid() != args.parent:
        return 1
    sandbox.harden_parent()  # non-dumpable: out of reach of every worker it forks
    warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
    ctl = socket.socket(fileno=args.ctl)
    t0 = time.perf_counter()
    backend = _backend(args.backend)
    took = _preimport(backend)
    warmed = _warm_backend(backend)
    template = Template(ctl, args.parent, backend)
    template.send(
        {
            "type": "ready",
            "pid": os.getpid(),
            "imports_s": round(time.perf_counter() - t0, 3),
            "imported": took,
            "warmed": warmed,
            "threads": _threads(),
            "fds": _open_fds(),
            "cuda_initialized": _cuda_initialized(),
            "shared_writable": shared_writable_mappings(),
        }
    )
    try:
        return template.serve()
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # a torch whose CUDA module cannot answer has no context
        return False


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
