"""Worker templates, the parent's side: warm processes that fork each candidate's worker.

A ``WorkerTemplate`` is one ``python -m harness.worker.zygote`` process (see ``zygote.py``):
torch, triton and the harness's worker side imported, CUDA never initialised, no secret
in its environment, non-dumpable. ``fork(...)`` asks it for a new isolated worker and
returns a ``ForkedProcess``: what ``LocalSession`` needs of a process (``pid`` -- the
launcher's, the leader of the worker's process group --, ``poll``, ``wait``,
``returncode``, the worker's host PID for the memory watchdog), read from the status
pipe the launcher writes to. The worker's channel, scrubbed environment, memory cap,
audit hooks and sandbox are those of a spawned worker.

``template_for(python)`` keeps one template per interpreter and environment fingerprint
for the life of this process, so a long-lived parent (a pool slot, the agent, ``ctxkernel
mcp``) pays the imports once; ``prestart(python)`` starts one in the background (a one-shot
``check`` overlaps it with its own imports). Templates are started from one long-lived
thread (``PR_SET_PDEATHSIG`` follows the thread that started a process) and die with this
process; ``close_all()`` ends them (also at exit and on SIGTERM/SIGHUP through
``cleanup``). A template that died is replaced at the next request.

``CTXKERNEL_WARM=0`` (or ``warm_allowed() == False``) makes every worker a fresh
``python -m harness.worker`` again.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import envvars
from . import cleanup, sandbox
from .workerenv import fingerprint, scrubbed_env
from .workerfiles import read_tail

ENV_WARM = envvars.CTXKERNEL_WARM.name
PREFIX = "ctxkernel-template-"
# environment a worker may not get by replacement after the interpreter started
FRESH_ENV_PREFIXES = ("PYTHON", "LD_", "MALLOC", "OMP_", "MKL_", "KMP_", "GOMP_")
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxkernel-templates")
_templates: dict[tuple[str, str, str], WorkerTemplate] = {}
MAX_TEMPLATES = 4
_lock = threading.Lock()


class TemplateError(RuntimeError):
    """The template could not start or could not fork a worker (the caller spawns one)."""


def warm_allowed() -> bool:
    return envvars.CTXKERNEL_WARM.get()


def needs_fresh_interpreter(env_extra: dict[str, str]) -> bool:
    """Variables read when an interpreter starts cannot be set in a forked worker."""
    return any(k.startswith(FRESH_ENV_PREFIXES) for k in env_extra)


class ForkedProcess:
    """A worker forked from a template, seen through its launcher's status pipe."""

    def __init__(self, pid: int, status_fd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.worker_pid: int | None = None
        self.launch_error = ""  # the launcher's own words when it could not isolate
        self._fd: int | None = status_fd
        self._buffer = b""

    def _feed(self, timeout_s: float) -> bool:
        """Read what the launcher wrote within ``timeout_s``; False at EOF."""
        if self._fd is None:
            return False
        ready, _, _ = select.select([self._fd], [], [], max(0.0, timeout_s))
        if not ready:
            return True
        chunk = os.read(self._fd, 4096)
        if not chunk:
            os.close(self._fd)
            self._fd = None
            if self.returncode is None:  # killed before it could say, or failed saying why
                self.returncode = sandbox.LAUNCH_FAILED if self.launch_error else -signal.SIGKILL
            return False
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            kind, _, value = line.decode(errors="replace").partition(" ")
            if kind == "F":
                self.launch_error = value.strip()
            elif kind == "P" and value.strip().isdigit():
                self.worker_pid = int(value)
            elif kind == "S" and value.strip().lstrip("-").isdigit():
                status = int(value)
                self.returncode = (
                    -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                )
        return True

    def read_pid(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + timeout_s
        while self.worker_pid is None and self.returncode is None:
            left = deadline - time.monotonic()
            if left <= 0 or not self._feed(left):
                break
        return self.worker_pid

    def poll(self) -> int | None:
        while self.returncode is None and self._fd is not None:
            ready, _, _ = select.select([self._fd], [], [], 0)
            if not ready:
                break
            self._feed(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = 3600.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("worker", timeout or 0)
            if not self._feed(left) and self.returncode is None:
                break
        # the status line may come a moment before the EOF: drain what is left
        while self._fd is not None and self._feed(0.05):
            if self.returncode is not None and self._fd is not None:
                ready, _, _ = select.select([self._fd], [], [], 0)
                if not ready:
                    break
        assert self.returncode is not None
        return self.returncode

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class WorkerTemplate:
    """One warm template process and its control socket."""

    def __init__(
        self,
        python: str,
        env_extra: dict[str, str] | None = None,
        backend: str = "",
        startup_timeout_s: float = 300.0,
    ) -> None:
        self.python = python
        self.backend = backend
        self.env_extra = dict(env_extra or {})
        self.startup_timeout_s = startup_timeout_s
        self.root = cleanup.temp_root(PREFIX)
        self.lock = threading.Lock()
        self.ready: dict[str, Any] | None = None
        self.error: str | None = None
        self.forks = 0
        self._seq = 0
        self._ready_event = threading.Event()
        self.ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = self.root / "template.log"
        env = scrubbed_env(self.root, self.env_extra)
        cmd = [python, "-m", "harness.worker.zygote", "--ctl", str(child.fileno())]
        cmd += ["--parent", str(os.getpid()), "--backend", backend]
        future: Future[subprocess.Popen[bytes]] = _spawner.submit(
            self._popen, cmd, env, child.fileno()
        )
        try:
            self.proc = future.result(timeout=60)
        finally:
            child.close()
        cleanup.track(self.proc.pid)
        threading.Thread(
            target=self._wait_ready, name="ctxkernel-template-ready", daemon=True
        ).start()

    def _popen(self, cmd: list[str], env: dict[str, str], fd: int) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as log:
            return subprocess.Popen(
                cmd,
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(fd,),
                start_new_session=True,
                close_fds=True,
            )

    def _wait_ready(self) -> None:
        try:
            ready, _, _ = select.select([self.ctl], [], [], self.startup_timeout_s)
            if not ready:
                self.error = (
                    f"the worker template did not start within {self.startup_timeout_s:g} s"
                )
                return
            data = self.ctl.recv(1 << 20)
            doc = json.loads(data) if data else {}
            if doc.get("type") != "ready":
                self.error = "the worker template exited before it was ready" + self._log_tail()
                return
            if doc.get("shared_writable") or doc.get("cuda_initialized"):
                # its forks would share that memory (or a context that cannot be forked)
                self.error = "the worker template holds shared state: " + ", ".join(
                    doc.get("shared_writable") or ["a CUDA context"]
                )
                return
            self.ready = doc
        except (OSError, ValueError) as exc:
            self.error = f"the worker template failed: {exc}"
        finally:
            self._ready_event.set()

    def _log_tail(self) -> str:
        read = read_tail(self.log, 300)  # its last bytes only, whatever its size
        tail = read[0].decode(errors="replace").strip() if read else ""
        return f" ({' | '.join(tail.splitlines()[-3:])})" if tail else ""

    def wait_ready(self, timeout_s: float) -> None:
        if not self._ready_event.wait(timeout_s):
            raise TemplateError(f"the worker template did not start within {timeout_s:g} s")
        if self.ready is None:
            raise TemplateError(self.error or "the worker template failed")

    def alive(self) -> bool:
        return self.proc.poll() is None and self.error is None

    def fork(
        self,
        workdir: Path,
        env: dict[str, str],
        stdout: Path,
        stderr: Path,
        device: str,
        mem_cap: int,
        mode: str,
        keep_paths: list[str] | None,
        channel_fds: tuple[int, int],
        timeout_s: float,
        walls: dict[str, Any] | None = None,
    ) -> ForkedProcess:
        """A new worker: ``channel_fds`` are its ends of the channel (read, write), handed
        over here (closed in this process whatever happens)."""
        status_r, status_w = os.pipe()
        fds = [*channel_fds, status_w]
        try:
            self.wait_ready(timeout_s)
            with self.lock:
                self._seq += 1
                request = {
                    "op": "fork",
                    "id": self._seq,
                    "workdir": str(workdir),
                    "env": env,
                    "stdout": str(stdout),
                    "stderr": str(stderr),
                    "device": device,
                    "mem_cap": mem_cap,
                    "mode": mode,
                    "keep_paths": keep_paths,
                    "walls": walls or {},
                }
                payload = json.dumps(request).encode()
                try:
                    self.ctl.sendmsg(
                        [payload],
                        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())],
                    )
                except OSError as exc:
                    raise TemplateError(f"the worker template is gone ({exc})") from None
                for fd in fds:
                    os.close(fd)
                fds = []
                ready, _, _ = select.select([self.ctl], [], [], min(timeout_s, 60.0))
                data = self.ctl.recv(1 << 20) if ready else b""
            doc = json.loads(data) if data else {}
            if doc.get("type") != "forked":
                raise TemplateError(
                    str(doc.get("message") or "the worker template did not fork") + self._log_tail()
                )
            self.forks += 1
            return ForkedProcess(int(doc["pid"]), status_r)
        except BaseException:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            with contextlib.suppress(OSError):
                os.close(status_r)
            raise

    def describe(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"pid": self.proc.pid, "forks": self.forks}
        if self.ready:
            doc["imports_s"] = self.ready.get("imports_s")
        return doc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.ctl.send(json.dumps({"op": "bye"}).encode())
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        cleanup.untrack(self.proc.pid)
        with contextlib.suppress(OSError):
            self.ctl.close()
        cleanup.remove_root(self.root)


def _key(python: str, env_extra: dict[str, str], backend: str) -> tuple[str, str, str]:
    return (os.path.realpath(python), fingerprint(), repr((backend, sorted(env_extra.items()))))


def template_for(
    python: str | None = None,
    env_extra: dict[str, str] | None = None,
    backend: str = "",
    start: bool = True,
) -> WorkerTemplate | None:
    """This process's template for ``python``, ``backend`` (whose ``template_imports`` it
    imports) and a worker environment ``env_extra`` (a
    backend's and device's: ``TRITON_INTERPRET`` decides, when triton is imported, what its
    own library functions are), started when ``start``; None when warm workers are off.
    At most ``MAX_TEMPLATES`` are kept (each holds torch in memory): the least recently
    used one is ended first."""
    if not warm_allowed():
        return None
    extra = dict(env_extra or {})
    key = _key(python or sys.executable, extra, backend)
    ended: list[WorkerTemplate] = []
    with _lock:
        found = _templates.pop(key, None)
        if found is not None and not found.alive():
            ended.append(found)
            found = None
        if found is None and start:
            cleanup.sweep_once()
            found = WorkerTemplate(python or sys.executable, extra, backend)
        if found is not None:
            _templates[key] = found  # most recently used last
        while len(_templates) > MAX_TEMPLATES:
            ended.append(_templates.pop(next(iter(_templates))))
    for template in ended:
        template.close()
    return found


def prestart(
    python: str | None = None, env_extra: dict[str, str] | None = None, backend: str = ""
) -> None:
    """Start the template now, in the background (its imports overlap the caller's)."""
    with contextlib.suppress(Exception):  # a head start only: the check starts it again
        template_for(python, env_extra, backend)


def close_all() -> None:
    with _lock:
        found = list(_templates.values())
        _templates.clear()
    for template in found:
        template.close()


atexit.register(close_all)

__all__ = [
    "ENV_WARM",
    "ForkedProcess",
    "TemplateError",
    "WorkerTemplate",
    "close_all",
    "needs_fresh_interpreter",
    "prestart",
    "template_for",
    "warm_allowed",
]
