"""Sandbox: how a candidate's worker is cut off from every other process on the machine.

Each worker starts through this file's launcher (``python -I -S sandbox.py``, stdlib only,
run by path so it imports nothing of the harness) in the strongest mode the machine
allows, probed once per process (``isolation()``):

- ``userns``: new user, PID and mount namespaces. The worker is PID 2 of a PID namespace
  of its own with its own ``/proc``: no other process is visible to it, so it cannot read
  their environment, memory or open files. Its user id maps to itself; it holds
  capabilities in the new user namespace only, minus those that could undo the isolation.
- ``pidns``: PID and mount namespaces without a user namespace (root, where user
  namespaces are refused), with the same capability drops.
- ``none``: no namespace could be made (a container's seccomp profile, a user without
  user namespaces). The parent then makes itself non-dumpable (``harden_parent``: its
  ``/proc/<pid>/environ``, ``mem`` and ``fd`` need ``CAP_SYS_PTRACE``), and the worker
  loses ``CAP_SYS_PTRACE``; other processes of the same user stay visible to it.

``CTXKERNEL_ISOLATION=userns|pidns|none`` picks a mode instead of the probe (a GPU driver
that misbehaves in a namespace can be told apart that way); a refused mode is an error.

In every mode the launcher and the worker have ``PR_SET_PDEATHSIG(SIGKILL)``: they die with
the thread that started them, whatever signal ended its process. In a namespace mode::

    check (thread) -- launcher L -+- init C  (PID 1 of the namespace: mounts /proc, waits)
                                  +- worker W (PID 2: execs the command)

L waits for W and then exits the way W did (the same status or the same signal), so the
parent's ``Popen`` sees the worker's own exit; it writes W's host PID to ``--pid-fd`` (the
parent's memory watchdog reads that PID's RSS). When C exits the kernel kills whatever is
left in the namespace; C exits when L is gone. The worker is never PID 1: the namespace's
init ignores signals it has no handler for, which would change how a candidate dies.
"""

from __future__ import annotations

# The launcher runs this file for every worker: it imports only what starts in a few
# milliseconds (no dataclasses, json, pathlib, typing or the enum-based ``signal``);
# the parent's helpers import the rest when they are called.
import _signal
import ctypes
import os
import resource
import sys

MODES = ("userns", "pidns", "none")
ENV_MODE = "CTXKERNEL_ISOLATION"
LAUNCH_FAILED = 120  # the launcher's exit status when it could not isolate the worker

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
# Capabilities the worker never keeps: mounting (and unmounting our /proc), ptrace and
# process_vm_readv, raw I/O (/proc/kcore, /dev/mem), modules, BPF and perf (both read
# other processes' memory), open_by_handle_at, device nodes, kexec, kernel pointers.
_DROPPED_CAPS = {
    "CAP_DAC_READ_SEARCH": 2,
    "CAP_SYS_MODULE": 16,
    "CAP_SYS_RAWIO": 17,
    "CAP_SYS_PTRACE": 19,
    "CAP_SYS_ADMIN": 21,
    "CAP_SYS_BOOT": 22,
    "CAP_MKNOD": 27,
    "CAP_SYSLOG": 34,
    "CAP_PERFMON": 38,
    "CAP_BPF": 39,
    "CAP_CHECKPOINT_RESTORE": 40,
}
_SYS_ADMIN = 21
_SIGKILL = 9
_LAUNCHER = os.path.realpath(__file__)
_libc_handle: ctypes.CDLL | None = None


# -- the parent's side ---------------------------------------------------------------------


class Isolation:
    """The mode workers of this process run in, and why a stronger one was not used."""

    def __init__(
        self, mode: str, available: tuple[str, ...] = (), why: str = "", forced: bool = False
    ) -> None:
        self.mode = mode
        self.available = available
        self.why = why  # what refused the namespaces (the probe's errors), when mode is none
        self.forced = forced

    def __repr__(self) -> str:
        return f"Isolation({self.mode!r}, available={self.available!r}, why={self.why!r})"

    @property
    def namespaces(self) -> bool:
        return self.mode != "none"

    def profiler_mode(self) -> str:
        """The mode for a worker run under a profiler (ncu): the GPU driver lets only a
        process with ``CAP_SYS_ADMIN`` in the first user namespace read its counters, so
        a root parent uses ``pidns`` and keeps that one capability."""
        if os.geteuid() == 0 and "pidns" in self.available:
            return "pidns"
        return self.mode

    def as_json(self) -> dict[str, object]:
        doc: dict[str, object] = {"mode": self.mode, "pid_namespace": self.namespaces}
        if self.why:
            doc["why"] = self.why
        if self.forced:
            doc["forced"] = f"{ENV_MODE}={self.mode}"
        return doc


class SandboxError(RuntimeError):
    """The mode asked for with ``CTXKERNEL_ISOLATION`` cannot be used on this machine."""


_isolation: Isolation | None = None


def isolation() -> Isolation:
    """Probe once which namespaces this machine lets us make (one short-lived process)."""
    global _isolation
    if _isolation is None:
        _isolation = _decide()
    return _isolation


def _decide() -> Isolation:
    wanted = os.environ.get(ENV_MODE, "").strip().lower() or "auto"
    if wanted not in (*MODES, "auto"):
        raise SandboxError(f"{ENV_MODE}={wanted!r}: expected one of auto, {', '.join(MODES)}")
    if wanted == "none":
        return Isolation("none", (), f"{ENV_MODE}=none", forced=True)
    available, errors = probe()
    if wanted != "auto":
        if wanted not in available:
            raise SandboxError(
                f"{ENV_MODE}={wanted}: this machine refuses it ({errors.get(wanted, 'not tried')})"
            )
        return Isolation(wanted, available, forced=True)
    if available:
        return Isolation(available[0], available)
    return Isolation("none", available, "; ".join(f"{m}: {e}" for m, e in errors.items()))


def probe(timeout_s: float = 30.0) -> tuple[tuple[str, ...], dict[str, str]]:
    """Which namespace modes work here, and the error of each that does not."""
    import json
    import subprocess

    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", _LAUNCHER, "--probe"],
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        doc = json.loads(done.stdout.decode() or "{}")
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return (), {"probe": f"{type(exc).__name__}: {exc}"}
    available = tuple(m for m in doc.get("available", []) if m in MODES)
    return available, {str(k): str(v) for k, v in dict(doc.get("errors", {})).items()}


def command(
    mode: str, argv: list[str], pid_fd: int, keep_admin: bool = False, python: str | None = None
) -> list[str]:
    """The launcher's command line that runs ``argv`` isolated in ``mode``."""
    cmd = [python or sys.executable, "-I", "-S", _LAUNCHER, "--mode", mode]
    cmd += ["--parent", str(os.getpid()), "--pid-fd", str(pid_fd)]
    if keep_admin:
        cmd.append("--keep-admin")
    return [*cmd, "--", *argv]


def read_pid(fd: int, timeout_s: float) -> int | None:
    """The worker's host PID as the launcher reports it; None when the launcher died first."""
    import select
    import time

    deadline = time.monotonic() + timeout_s
    data = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 32)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    try:
        return int(data.decode().strip())
    except ValueError:
        return None


def harden_parent() -> bool:
    """Make this process non-dumpable: its environment, memory and open files under
    ``/proc/<pid>`` are then out of reach of a worker without ``CAP_SYS_PTRACE``."""
    try:
        return _prctl(_PR_SET_DUMPABLE, 0) == 0
    except OSError:
        return False


def die_with_parent(sig: int = _SIGKILL) -> None:
    """``PR_SET_PDEATHSIG`` for this process (a pool slot calls it first thing)."""
    try:
        _libc().prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except OSError:
        pass


# -- the launcher ----------------------------------------------------------------------------


def _libc() -> ctypes.CDLL:
    global _libc_handle
    if _libc_handle is None:
        _libc_handle = ctypes.CDLL(None, use_errno=True)
    return _libc_handle


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _prctl(option: int, arg: int) -> int:
    return int(_libc().prctl(option, arg, 0, 0, 0))


def _unshare(mode: str) -> None:
    flags = _CLONE_NEWPID | _CLONE_NEWNS | (_CLONE_NEWUSER if mode == "userns" else 0)
    uid, gid = os.geteuid(), os.getegid()
    names = "CLONE_NEWUSER|" if mode == "userns" else ""
    _check(_libc().unshare(flags), f"unshare({names}CLONE_NEWPID|CLONE_NEWNS)")
    if mode == "userns":  # map our own ids (the one mapping a process may write for itself)
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    libc = _libc()
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")


def _mount_proc() -> None:
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _check(_libc().mount(b"proc", b"/proc", b"proc", flags, None), "mount -t proc proc /proc")


def _drop_caps(keep_admin: bool) -> None:
    """Drop the dangerous capabilities from the bounding set (what an exec'd root may
    hold); needs CAP_SETPCAP, which a non-root process without a namespace lacks and
    does not need: it holds no capability anyway."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 40
    for cap in _DROPPED_CAPS.values():
        if cap <= last and not (keep_admin and cap == _SYS_ADMIN):
            _prctl(_PR_CAPBSET_DROP, cap)


def _close_fds(keep: set[int]) -> None:
    start = 3
    for fd in sorted(k for k in keep if k >= 3):
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 20)


def _report_pid(fd: int, pid: int) -> None:
    try:
        os.write(fd, str(pid).encode())
    except OSError:
        pass  # the parent stopped listening; the worker still runs
    os.close(fd)


def _exec(argv: list[str], keep_admin: bool) -> None:
    _drop_caps(keep_admin)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    for name in ("SIGPIPE", "SIGXFSZ"):  # as subprocess's restore_signals leaves them
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"ctxkernel sandbox: cannot run {argv[0]}: {exc}\n")
    os._exit(127)


def _exit_like(status: int) -> None:
    """End this process the way a child with wait status ``status`` ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        _signal.signal(sig, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _fail(message: str) -> None:
    sys.stderr.write(f"ctxkernel sandbox: {message}\n")
    sys.stderr.flush()
    os._exit(LAUNCH_FAILED)


def launch(mode: str, parent: int, pid_fd: int, keep_admin: bool, argv: list[str]) -> None:
    _prctl(_PR_SET_PDEATHSIG, _SIGKILL)
    if os.getppid() != parent:  # the check died before the line above
        os._exit(LAUNCH_FAILED)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if mode == "none":
        _report_pid(pid_fd, os.getpid())
        _exec(argv, keep_admin)
    try:
        _unshare(mode)
    except OSError as exc:
        _fail(str(exc.strerror or exc))
    life_r, life_w = os.pipe()
    ready_r, ready_w = os.pipe()
    init = os.fork()
    if init == 0:
        _init(life_r, life_w, ready_r, ready_w)
    os.close(life_r)
    os.close(ready_w)
    answer = os.read(ready_r, 4096)
    os.close(ready_r)
    if answer != b"ok":
        os.waitpid(init, 0)
        _fail(answer.decode(errors="replace") or "the namespace's init died")
    worker = os.fork()
    if worker == 0:
        _prctl(_PR_SET_PDEATHSIG, _SIGKILL)
        if os.getppid() != 0:  # our parent is outside the namespace: 0 unless it died
            os._exit(LAUNCH_FAILED)
        os.close(life_w)
        os.close(pid_fd)
        _exec(argv, keep_admin)
    _report_pid(pid_fd, worker)
    _close_fds({life_w})  # the worker's channel ends: the parent must see EOF when it dies
    _, status = os.waitpid(worker, 0)
    os.close(life_w)  # init exits; the kernel kills whatever the worker left behind
    os.waitpid(init, 0)
    _exit_like(status)


def _init(life_r: int, life_w: int, ready_r: int, ready_w: int) -> None:
    """PID 1 of the namespace: mount its /proc, then wait until the launcher is gone."""
    try:
        _prctl(_PR_SET_PDEATHSIG, _SIGKILL)
        os.close(life_w)
        os.close(ready_r)
        _mount_proc()
        _prctl(_PR_SET_DUMPABLE, 0)
        _close_fds({life_r, ready_w})
        os.write(ready_w, b"ok")
        os.close(ready_w)
    except OSError as exc:
        try:
            os.write(ready_w, str(exc.strerror or exc).encode())
        finally:
            os._exit(1)
    while True:
        try:
            if not os.read(life_r, 64):
                os._exit(0)
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)


def _probe_mode(mode: str) -> str:
    """'' when ``mode`` works here (namespaces made, /proc mounted), else the error."""
    rd, wr = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(rd)
        message = ""
        try:
            _unshare(mode)
            init = os.fork()
            if init == 0:
                try:
                    _mount_proc()
                    ok = os.getpid() == 1 and os.path.isfile("/proc/self/status")
                    os._exit(0 if ok else 3)
                except OSError:
                    os._exit(2)
            _, status = os.waitpid(init, 0)
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
            if code == 2:
                message = "mount -t proc proc /proc: refused"
            elif code != 0:
                message = f"the namespace's init failed (status {code})"
        except OSError as exc:
            message = str(exc.strerror or exc)
        os.write(wr, message.encode())
        os._exit(0)
    os.close(wr)
    chunks = []
    while chunk := os.read(rd, 4096):
        chunks.append(chunk)
    os.close(rd)
    os.waitpid(child, 0)
    return b"".join(chunks).decode(errors="replace")


def _probe() -> None:
    available: list[str] = []
    errors: dict[str, str] = {}
    for mode in ("userns", "pidns"):
        if mode == "pidns" and os.geteuid() != 0:
            errors[mode] = "needs root"
            continue
        error = _probe_mode(mode)
        if error:
            errors[mode] = error
        else:
            available.append(mode)
    import json

    sys.stdout.write(json.dumps({"available": available, "errors": errors}) + "\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        _probe()
        return 0
    try:
        split = argv.index("--")
    except ValueError:
        _fail("usage: sandbox.py --mode M --parent PID --pid-fd N [--keep-admin] -- CMD...")
    opts, cmd = argv[:split], argv[split + 1 :]
    values: dict[str, str] = {}
    rest = list(opts)
    while rest:
        key = rest.pop(0)
        values[key] = "1" if key == "--keep-admin" or not rest else rest.pop(0)
    mode = values.get("--mode", "")
    if mode not in MODES or not cmd:
        _fail(f"bad arguments {opts!r}")
    try:
        parent, pid_fd = int(values["--parent"]), int(values["--pid-fd"])
        launch(mode, parent, pid_fd, "--keep-admin" in values, cmd)
    except (KeyError, ValueError) as exc:
        _fail(f"bad arguments {opts!r}: {exc}")
    except OSError as exc:
        _fail(str(exc))
    return LAUNCH_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
