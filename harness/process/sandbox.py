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

L waits for W -- counting the tasks of W's tree meanwhile, and ending the tree when they
number more than ``lifetime.task_cap()`` (its reason on stderr, ``LAUNCH_FAILED``) -- and
then exits the way W did (the same status or the same signal), so the parent's ``Popen``
sees the worker's own exit; it writes W's host PID to ``--pid-fd`` (the parent's memory
watchdog reads that PID's RSS). When C exits the kernel kills whatever is left in the
namespace; C exits when L is gone. The worker is never PID 1: the namespace's
init ignores signals it has no handler for, which would change how a candidate dies.

The same steps run without an exec for a worker forked from a warm template
(``harness/worker/zygote.py``): ``run_isolated`` is called in the template's forked child (single
threaded, so ``unshare`` of a user namespace is allowed) and the worker branch returns
into Python instead of exec'ing. An exec would have recomputed the capabilities; without
one ``namespaces.drop_live_caps`` does what it would have done (none left for a non-root user id,
the bounding set's for root).

Private temp folders: in a namespace mode the worker also gets a fresh tmpfs on ``/tmp``,
``/var/tmp`` and ``/dev/shm`` (its mount namespace only), with the paths it needs under
them bound back in (its check's temp root, the problem, the harness): a file one
candidate leaves in a shared temp folder is not there for the next, and no sibling's
working directory is visible.
"""

from __future__ import annotations

# The launcher runs this file for every worker: it imports only what starts in a few
# milliseconds (no dataclasses, json, pathlib, typing or the enum-based ``signal``);
# the parent's helpers import the rest when they are called.
import _signal
import errno
import json
import os
import resource
import sys
from _collections_abc import Callable, Sequence  # already loaded by os: no import cost

try:  # imported as harness.process.sandbox
    from . import lifetime, namespaces, seccomp, walls
    from .folders import parent_folders  # the parent's side
    from .folders import worker_paths as worker_paths  # (for its callers)
except ImportError:  # run by path as the launcher (``python -I -S sandbox.py``): the siblings
    import importlib.util
    from types import ModuleType

    def _sibling(name: str) -> ModuleType:
        here = os.path.dirname(os.path.realpath(__file__))
        spec = importlib.util.spec_from_file_location(
            f"ctxkernel_{name}", os.path.join(here, f"{name}.py")
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # the later siblings look the earlier up by name
        spec.loader.exec_module(module)
        return module

    seccomp = _sibling("seccomp")
    walls = _sibling("walls")
    lifetime = _sibling("lifetime")
    namespaces = _sibling("namespaces")

MODES = ("userns", "pidns", "none")
ALL_WALLS = ("net", "dev", "ro")  # the namespace-mode walls the probe can find refused
ENV_MODE = "CTXKERNEL_ISOLATION"  # declared in harness/envvars.py (not imported here)
LAUNCH_FAILED = 120  # the launcher's exit status when it could not isolate the worker

_SIGKILL = 9
_LAUNCHER = os.path.realpath(__file__)


# -- the parent's side ---------------------------------------------------------------------


class Isolation:
    """The mode workers of this process run in, and why a stronger one was not used."""

    def __init__(
        self,
        mode: str,
        available: tuple[str, ...] = (),
        why: str = "",
        forced: bool = False,
        private_tmp: bool = False,
        landlock: int = 0,
        seccomp: bool = False,
        walls: tuple[str, ...] = (),
        uncovered: tuple[str, ...] = (),
    ) -> None:
        self.mode = mode
        self.available = available
        self.why = why  # what refused the namespaces (the probe's errors), when mode is none
        self.forced = forced
        self.private_tmp = private_tmp and mode != "none"
        self.landlock = landlock  # the kernel's landlock ABI (0: none)
        self.seccomp = seccomp
        # the walls the probe could build in this mode: "net", "dev", "ro" (walls.py), and
        # whether its PID namespace caps its tasks ("pid_max": not a wall the launcher is
        # told to build, the launcher's init sets it wherever the kernel allows)
        found = walls if mode != "none" else ()
        self.walls = tuple(w for w in found if w in ALL_WALLS)
        self.pid_max = "pid_max" in found
        # the parent's folders the probe could not cover with a tmpfs in this mode: a
        # worker keeps them unread with landlock instead, or does not start
        self.uncovered = tuple(uncovered) if self.private_tmp else ()

    def layers(self) -> dict[str, object]:
        """The walls a worker of this mode gets (``walls.py``), by name."""
        walled = self.private_tmp
        ro = walled and "ro" in self.walls
        hidden_by = "tmpfs" if walled else "landlock" if self.landlock else False
        return {
            "pid_namespace": self.namespaces,
            "network_namespace": "net" in self.walls,
            "read_only_world": ro,
            "device_only_dev": walled and "dev" in self.walls,
            "private_tmp": walled,
            # covered by an empty tmpfs, or (no mount namespace) kept unread by landlock
            "parent_folders_hidden": "tmpfs and landlock" if self.uncovered else hidden_by,
            **({"parent_folders_uncovered": list(self.uncovered)} if self.uncovered else {}),
            "landlock": f"ABI {self.landlock}" if self.landlock else "unavailable",
            "seccomp": "on" if self.seccomp else "unavailable on this architecture",
            # no mode or time set on the user's files: the read-only world, else seccomp
            "users_files_kept_by": "read-only world" if ro else "seccomp",
            "subreaper": not self.namespaces,
            "process_cap": self.process_cap(),
            **self.hiding(),
        }

    def hiding(self) -> dict[str, list[str]]:
        """Where else the parent's folders are mounted (hidden there too: ``walls.reaching``)
        and, where landlock hides them, the folders on the way too wide to grant whole,
        narrowed to what a worker needs (``walls._listings``): their other entries are
        unread by workers."""
        hidden = parent_folders(make=False)  # a report: nothing made
        doc = {"parent_folders_also_at": sorted(walls.reaching(hidden))}
        if not self.private_tmp and self.landlock:
            doc["read_rules_narrowed"] = walls.narrowed_folders([*hidden, "/dev"])
        return doc

    def process_cap(self) -> str:
        """How a worker's tree is kept to ``lifetime.task_cap()`` processes and threads: the
        launcher counts them every 10 to 100 ms and ends the tree past the cap; below that
        the kernel refuses the fork past it where it can (a PID namespace's ``pid_max``;
        RLIMIT_NPROC, which spares root, and without a user namespace counts every process
        of the user; in ``none`` mode, where one is writable, a pids cgroup's ``pids.max``)."""
        how = []
        if self.pid_max:
            how.append("pid_max of its PID namespace")
        if not self.namespaces and lifetime.pids_cgroup_base() is not None:
            how.append("pids.max of a cgroup of its own")
        if os.getuid() != 0:
            how.append("RLIMIT_NPROC" + (" over the user's tasks" if not self.namespaces else ""))
        how.append("counted by the launcher" + ("" if how else " alone (root: no kernel limit)"))
        return f"{lifetime.task_cap()} tasks: " + ", ".join(how)

    def __repr__(self) -> str:
        return (
            f"Isolation({self.mode!r}, available={self.available!r}, why={self.why!r}, "
            f"private_tmp={self.private_tmp!r})"
        )

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
        doc: dict[str, object] = {
            "mode": self.mode,
            "pid_namespace": self.namespaces,
            "private_tmp": self.private_tmp,
        }
        if self.why:
            doc["why"] = self.why
        if self.forced:
            doc["forced"] = f"{ENV_MODE}={self.mode}"
        doc["layers"] = self.layers()
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
    from .. import envvars  # the parent's side: the launcher imports nothing of the harness

    try:
        wanted = envvars.CTXKERNEL_ISOLATION.get()
    except envvars.EnvError as exc:
        raise SandboxError(str(exc)) from None
    available, errors = probe()
    private = set(_private_tmp_modes)
    kernel = {"landlock": _probed.get("landlock", 0), "seccomp": _probed.get("seccomp", False)}
    found = dict(_probed.get("walls") or {})  # type: ignore[call-overload]
    uncovered = dict(_probed.get("uncovered") or {})  # type: ignore[call-overload]

    def walls_of(mode: str) -> tuple[str, ...]:
        return tuple(str(w) for w in found.get(mode, ()))

    def uncovered_in(mode: str) -> tuple[str, ...]:
        return tuple(str(p) for p in uncovered.get(mode, ()))

    if wanted == "none":
        return Isolation("none", (), f"{ENV_MODE}=none", forced=True, **kernel)  # type: ignore[arg-type]
    if wanted != "auto":
        if wanted not in available:
            raise SandboxError(
                f"{ENV_MODE}={wanted}: this machine refuses it ({errors.get(wanted, 'not tried')})"
            )
        return Isolation(
            wanted,
            available,
            forced=True,
            private_tmp=wanted in private,
            walls=walls_of(wanted),
            uncovered=uncovered_in(wanted),
            **kernel,  # type: ignore[arg-type]
        )
    if available:
        best = available[0]
        return Isolation(
            best,
            available,
            private_tmp=best in private,
            walls=walls_of(best),
            uncovered=uncovered_in(best),
            **kernel,  # type: ignore[arg-type]
        )
    why = "; ".join(f"{m}: {e}" for m, e in errors.items())
    return Isolation("none", available, why, **kernel)  # type: ignore[arg-type]


_private_tmp_modes: list[str] = []  # the modes whose probe could mount a private /tmp
_probed: dict[str, object] = {}  # the kernel's landlock ABI and seccomp, from the probe


def probe(timeout_s: float = 30.0) -> tuple[tuple[str, ...], dict[str, str]]:
    """Which namespace modes work here, and the error of each that does not (and which of
    the parent's folders each could not cover)."""
    import json
    import subprocess

    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", _LAUNCHER, "--probe", *parent_folders(make=False)],
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        doc = json.loads(done.stdout.decode() or "{}")
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return (), {"probe": f"{type(exc).__name__}: {exc}"}
    available = tuple(m for m in doc.get("available", []) if m in MODES)
    _private_tmp_modes[:] = [m for m in doc.get("private_tmp", []) if m in available]
    _probed["landlock"] = int(doc.get("landlock") or 0)
    _probed["walls"] = dict(doc.get("walls") or {})
    _probed["uncovered"] = dict(doc.get("uncovered") or {})
    _probed["seccomp"] = bool(doc.get("seccomp"))
    return available, {str(k): str(v) for k, v in dict(doc.get("errors", {})).items()}


def command(
    mode: str,
    argv: list[str],
    pid_fd: int,
    keep_admin: bool = False,
    python: str | None = None,
    keep_paths: list[str] | None = None,
    writable: str | None = None,
    hidden: list[str] | None = None,
    profiler: bool = False,
    walls_on: Sequence[str] = ALL_WALLS,
    tool_dir: str | None = None,
    needs: Sequence[str] | None = None,
    serving_later: bool = False,
) -> list[str]:
    """The launcher's command line that runs ``argv`` isolated in ``mode``; with
    ``keep_paths`` (and a namespace mode) the worker's temp folders are private, those
    paths bound back in; with ``writable`` (the worker's own folder) the walls of
    ``enter_worker`` go up, ``hidden`` folders covered, sockets left alone for a
    ``profiler``; ``needs`` (``worker_paths``), where no tmpfs covers a hidden folder and
    landlock keeps it unread: what it grants by name in a folder too wide to grant whole;
    ``serving_later``: a harness worker, which refuses bind and listen itself once CUDA is
    up (``seccomp.refuse_serving``), so the filter leaves them to it."""
    cmd = [python or sys.executable, "-I", "-S", _LAUNCHER, "--mode", mode]
    cmd += ["--parent", str(os.getpid()), "--pid-fd", str(pid_fd)]
    if keep_admin:
        cmd.append("--keep-admin")
    for path in keep_paths if keep_paths is not None and mode != "none" else ():
        cmd += ["--keep", path]
    if keep_paths is not None and mode != "none":
        cmd.append("--private-tmp")
    if mode != "none":
        cmd += ["--walls", ",".join(walls_on) or "-"]
    if writable:
        cmd += ["--writable", writable]
        for path in hidden or ():
            cmd += ["--hide", path]
        if profiler:
            cmd.append("--profiler")
        if tool_dir:
            cmd += ["--tool-dir", tool_dir]
        for path in needs or ():
            cmd += ["--need", path]
        if serving_later:
            cmd.append("--serving-later")
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
        return namespaces.prctl(namespaces.PR_SET_DUMPABLE, 0) == 0
    except OSError:
        return False


def die_with_parent(sig: int = _SIGKILL) -> None:
    """``PR_SET_PDEATHSIG`` for this process (a pool slot calls it first thing)."""
    try:
        namespaces.libc().prctl(namespaces.PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except OSError:
        pass


# -- the launcher ----------------------------------------------------------------------------


def _report_pid(fd: int, pid: int) -> None:
    try:
        os.write(fd, str(pid).encode())
    except OSError:
        pass  # the parent stopped listening; the worker still runs
    os.close(fd)


def enter_worker(
    mode: str,
    keep_admin: bool,
    keep_paths: list[str] | None,
    exec_follows: bool,
    writable: str | None = None,
    hidden: list[str] | None = None,
    profiler: bool = False,
    walls_on: Sequence[str] = ALL_WALLS,
    tool_dir: str | None = None,
    needs: Sequence[str] | None = None,
    serving_later: bool = False,
) -> None:
    """The worker's last steps before it runs. Namespace modes: private temp folders
    (``keep_paths`` bound back in), a ``/dev`` of device nodes only, the parent's own
    folders (``hidden``) covered, wherever they are mounted, the whole tree read-only but
    ``writable`` and the private temp folders (where ``walls_on`` lacks ``ro``: of those,
    only ``writable`` is granted writes where they hold a path bound back). Every mode:
    capabilities dropped (the bounding set; the live ones too when no exec follows), no
    new privileges, landlock (writes only beneath ``writable``; where no tmpfs covers them
    -- no mount namespace, or a cover refused -- nothing read of ``hidden``, through any
    mount, nor, without a mount namespace, of ``/dev`` but the device nodes; ``needs``:
    what the worker reads in a folder too wide to grant whole), the seccomp filter (its
    socket and IPC rules left out for a ``profiler``, bind and listen for a worker that
    refuses them itself once CUDA is up, ``serving_later``; its file rules wherever no read-only
    world is up, its process rules wherever no PID namespace), default SIGPIPE/SIGXFSZ. A
    wall the kernel refuses raises ``OSError`` (a refused cover that landlock cannot
    replace too): the worker does not start without it."""
    devices: list[str] = []
    own: list[str] = [writable] if writable else []
    covered = mode != "none" and keep_paths is not None
    uncovered: list[str] = []  # parent folders no tmpfs could cover: landlock keeps them unread
    if mode != "none" and keep_paths is not None:
        # every other mount of the parent's folders too (a cache bound again under /mnt),
        # found before the private temp folders change the view: another check's folder
        # under /tmp stays reachable wherever /tmp is mounted a second time
        hidden = [*(hidden or ()), *walls.reaching(list(hidden or ()))]
        namespaces.private_tmp(keep_paths)
        own += [p for p in namespaces.PRIVATE_TMP if os.path.isdir(p)]
        devices = walls.minimal_dev() if "dev" in walls_on else walls._device_nodes()
        uncovered = walls.hide([p for p in hidden or () if not walls.holds(p, [*own, *keep_paths])])
        if "ro" not in walls_on:
            # no read-only world: what is bound back under a private temp folder (the
            # problem's snapshot, the check's logs) is the user's, writable through a grant
            # of the folder that holds it; landlock grants only the worker's folder there
            others = [k for k in keep_paths if not (writable and walls.holds(writable, [k]))]
            own = [p for p in own if p == writable or not walls.holds(p, others)]
        # fail closed: landlock keeps them unread, where it can (never beneath a folder the
        # worker may write, whose grant includes reading)
        granted = [*own, *([tool_dir] if tool_dir and profiler else [])]
        for path in uncovered:
            if (
                not writable
                or walls.landlock_abi() < 1
                or any(walls.holds(g, [path]) for g in granted)
            ):
                raise OSError(
                    errno.EPERM,
                    f"{path} could not be covered (mount refused) and landlock cannot keep "
                    "it unread here",
                )
        if "ro" in walls_on:
            walls.read_only_world([*own, *([tool_dir] if tool_dir else [])], proc=profiler)
        try:  # the working directory, resolved again: through the new (writable) mounts
            os.chdir(os.getcwd())
        except OSError:
            pass
    elif writable:
        devices = walls._device_nodes()
    namespaces.drop_caps(keep_admin)
    if not exec_follows:
        namespaces.drop_live_caps()
        if mode != "none":
            namespaces.prctl(
                namespaces.PR_SET_DUMPABLE, 1
            )  # as an exec would (nothing outside can see it)
    namespaces.prctl(namespaces.PR_SET_NO_NEW_PRIVS, 1)
    if writable:
        # without a mount namespace to cover the parent's folders, landlock keeps them unread,
        # and /dev but the device nodes (the raw disks under those folders, terminals,
        # another process's /dev/shm) as a namespace mode's own /dev does
        unread = [*_unread(mode, own, hidden, covered), *uncovered]
        # a profiler (ncu, compute-sanitizer) runs its target as a child, whose /proc/<pid>
        # the CUDA driver writes: the profiler's layer leaves /proc writable, and the target
        # adds a layer of its own at once (``self_walls``), as strict as a plain worker's
        tool = [*own, "/proc", *([tool_dir] if tool_dir else [])]
        walls.landlock(tool if profiler else own, devices, unread, list(needs or ()))
        # the user's files: where no read-only world is up, no mode or time set on them
        # (landlock covers neither); other processes: where no PID namespace hides them
        seccomp.install(
            network=not profiler,
            host_files=not profiler and (not covered or "ro" not in walls_on),
            host_processes=mode == "none" and not profiler,
            abi=walls.landlock_abi(),
            serving=serving_later,
        )
    for name in ("SIGPIPE", "SIGXFSZ"):  # as subprocess's restore_signals leaves them
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)


def _unread(
    mode: str, own: list[str], hidden: Sequence[str] | None, covered: bool | None = None
) -> list[str]:
    """What landlock keeps unread: where no tmpfs covers them (``none`` mode, or a
    namespace mode that could not make the private temp folders), the parent's folders
    and /dev but the device nodes; nothing where they are ``covered``."""
    if covered is None:
        covered = mode != "none"
    if covered:
        return []
    return [p for p in [*(hidden or ()), "/dev"] if not walls.holds(p, own)]


def self_walls_spec(
    mode: str, writable: str, hidden: Sequence[str], needs: Sequence[str] = ()
) -> str:
    """The landlock layer a profiled worker puts on itself (``--self-walls``), as JSON:
    writes only beneath its own folder (its TMPDIR is there) -- not the private temp
    folders a plain worker may also write, beneath which the tool's folder may be bound --
    and the same unread folders (and ``needs``) as a plain worker's."""
    own = [writable]
    unread = _unread(mode, own, hidden)
    return json.dumps({"writable": own, "unread": unread, "needs": list(needs) if unread else []})


def apply_self_walls(spec: str) -> dict[str, object]:
    """In the profiled worker, before anything of the candidate's runs: landlock with
    writes only beneath its own folders, its device nodes and its own /proc/<pid>."""
    doc = json.loads(spec)
    own = [p for p in doc["writable"] if os.path.isdir(p)]
    return walls.landlock(own, walls._device_nodes(), list(doc["unread"]), doc.get("needs"))


def _exec(argv: list[str]) -> None:
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


_fail_hook: Callable[[str], None] | None = None  # run_isolated's on_fail


def _fail(message: str) -> None:
    sys.stderr.write(f"ctxkernel sandbox: {message}\n")
    sys.stderr.flush()
    if _fail_hook is not None:
        try:
            _fail_hook(message)
        except OSError:
            pass
    os._exit(LAUNCH_FAILED)


def launch(
    mode: str,
    parent: int,
    pid_fd: int,
    keep_admin: bool,
    argv: list[str],
    keep_paths: list[str] | None = None,
    writable: str | None = None,
    hidden: list[str] | None = None,
    profiler: bool = False,
    walls_on: Sequence[str] = ALL_WALLS,
    tool_dir: str | None = None,
    needs: list[str] | None = None,
    serving_later: bool = False,
) -> None:
    namespaces.prctl(namespaces.PR_SET_PDEATHSIG, _SIGKILL)
    if os.getppid() != parent:  # the check died before the line above
        os._exit(LAUNCH_FAILED)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def become() -> None:
        os.close(pid_fd)
        enter_worker(
            mode,
            keep_admin,
            keep_paths,
            True,
            writable,
            hidden,
            profiler,
            walls_on,
            tool_dir,
            needs,
            serving_later,
        )
        _exec(argv)

    run_isolated(mode, lambda pid: _report_pid(pid_fd, pid), become, net="net" in walls_on)


def run_isolated(
    mode: str,
    report: Callable[[int], None],
    become_worker: Callable[[], None],
    keep_fds: tuple[int, ...] = (),
    on_exit: Callable[[int], None] | None = None,
    on_fail: Callable[[str], None] | None = None,
    net: bool = True,
) -> None:
    """From a single-threaded process: make ``mode``'s namespaces, fork the init and the
    worker (which runs ``become_worker``: it must exec or end the process), report the
    worker's PID, wait for it, then end this process the way it ended (``on_exit`` sees
    its wait status first; ``on_fail`` the message when the namespaces cannot be made).
    In ``none`` mode only the worker is forked, and this process adopts and kills every
    descendant it leaves behind (a subreaper: no PID namespace does it). Never returns."""
    global _fail_hook
    _fail_hook = on_fail
    life_w = -1
    init = 0
    cap = lifetime.task_cap()
    capped = False  # whether the kernel refuses the fork past the cap (else only the watch)
    cgroup = None  # none mode: a pids cgroup of the worker's own, where one can be made
    if mode == "none":
        lifetime.become_subreaper()
        cgroup = lifetime.make_pids_cgroup(cap + lifetime.TASKS_SLACK)
    else:
        try:
            namespaces.unshare(mode, net)
            if net:
                walls.loopback_up()
        except OSError as exc:
            _fail(str(exc.strerror or exc))
        life_r, life_w = os.pipe()
        ready_r, ready_w = os.pipe()
        init = os.fork()
        if init == 0:
            _init(life_r, life_w, ready_r, ready_w, cap)
        os.close(life_r)
        os.close(ready_w)
        answer = os.read(ready_r, 4096)
        os.close(ready_r)
        if answer not in (b"ok", b"ok capped"):
            os.waitpid(init, 0)
            _fail(answer.decode(errors="replace") or "the namespace's init died")
        capped = answer == b"ok capped"
    me = os.getpid()
    capped = capped or os.getuid() != 0 or cgroup is not None  # RLIMIT_NPROC, pids.max
    worker = os.fork()
    if worker == 0:
        namespaces.prctl(namespaces.PR_SET_PDEATHSIG, _SIGKILL)
        # our parent: outside the namespace (0) unless it died; in none mode, this process
        if os.getppid() != (0 if mode != "none" else me):
            os._exit(LAUNCH_FAILED)
        if life_w >= 0:
            os.close(life_w)
        try:
            if cgroup is not None:
                lifetime.join_cgroup(cgroup)
            lifetime.cap_nproc(cap, host=mode == "none")
            become_worker()
        except BaseException as exc:  # a worker that could not start says why
            try:
                sys.stderr.write(f"ctxkernel sandbox: the worker could not start: {exc!r}\n")
                sys.stderr.flush()
            finally:
                os._exit(LAUNCH_FAILED)
        os._exit(0)
    report(worker)
    # the worker's channel ends: the parent must see EOF when it dies
    namespaces.close_fds({fd for fd in (life_w, *keep_fds) if fd >= 0})
    status, held = lifetime.watch(worker, mode, me, cap, 0.1 if capped else 0.01)
    if held:
        # the whole tree ends: a PID namespace with its init (the kernel refuses every
        # fork in it from then on), else stopped one by one, then killed
        if init:
            os.kill(init, _SIGKILL)
            os.waitpid(worker, 0)
            os.waitpid(init, 0)
        else:
            lifetime.stop_and_kill(me)
            if cgroup is not None:
                lifetime.remove_cgroup(cgroup)
        _fail(
            f"process cap: the worker's processes and threads numbered {held} at once, "
            f"over the cap of {cap} (a fork bomb?); all of them were killed"
        )
    if life_w >= 0:
        os.close(life_w)  # init exits; the kernel kills whatever the worker left behind
        os.waitpid(init, 0)
    else:
        lifetime.reap_all(me)
        if cgroup is not None:
            lifetime.remove_cgroup(cgroup)
    if on_exit is not None:
        on_exit(status)
    _exit_like(status)


def _init(life_r: int, life_w: int, ready_r: int, ready_w: int, cap: int = 0) -> None:
    """PID 1 of the namespace: mount its /proc, cap how many tasks the namespace may hold
    (its ``pid_max``, where the kernel keeps one per namespace), then wait until the
    launcher is gone."""
    try:
        namespaces.prctl(namespaces.PR_SET_PDEATHSIG, _SIGKILL)
        os.close(life_w)
        os.close(ready_r)
        namespaces.mount_proc()
        capped = cap > 0 and lifetime.cap_pid_namespace(cap)
        # the namespace's orphans come to it: reaped by the kernel as they end, or their
        # zombies would hold PIDs, and with them the cap, until the worker ends
        _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)
        namespaces.prctl(namespaces.PR_SET_DUMPABLE, 0)
        namespaces.close_fds({life_r, ready_w})
        os.write(ready_w, b"ok capped" if capped else b"ok")
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


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        namespaces.report_probe(argv[1:])
        return 0
    try:
        split = argv.index("--")
    except ValueError:
        _fail(
            "usage: sandbox.py --mode M --parent PID --pid-fd N [--keep-admin] "
            "[--private-tmp] [--keep PATH]... [--writable DIR [--hide DIR]... [--profiler] "
            "[--tool-dir DIR] [--need PATH]... [--serving-later]] "
            "-- CMD..."
        )
    opts, cmd = argv[:split], argv[split + 1 :]
    values: dict[str, str] = {}
    keep: list[str] = []
    hidden: list[str] = []
    needs: list[str] = []
    walls_on: list[str] = list(ALL_WALLS)
    rest = list(opts)
    while rest:
        key = rest.pop(0)
        if key in ("--keep-admin", "--private-tmp", "--profiler", "--serving-later") or not rest:
            values[key] = "1"
        elif key == "--keep":
            keep.append(rest.pop(0))
        elif key == "--hide":
            hidden.append(rest.pop(0))
        elif key == "--need":
            needs.append(rest.pop(0))
        elif key == "--walls":
            walls_on[:] = [w for w in rest.pop(0).split(",") if w in ALL_WALLS]
        else:
            values[key] = rest.pop(0)
    mode = values.get("--mode", "")
    if mode not in MODES or not cmd:
        _fail(f"bad arguments {opts!r}")
    try:
        parent, pid_fd = int(values["--parent"]), int(values["--pid-fd"])
        private = keep if "--private-tmp" in values else None
        launch(
            mode,
            parent,
            pid_fd,
            "--keep-admin" in values,
            cmd,
            private,
            values.get("--writable"),
            hidden,
            "--profiler" in values,
            walls_on,
            values.get("--tool-dir"),
            needs,
            "--serving-later" in values,
        )
    except (KeyError, ValueError) as exc:
        _fail(f"bad arguments {opts!r}: {exc}")
    except OSError as exc:
        _fail(str(exc))
    return LAUNCH_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
