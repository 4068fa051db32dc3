"""The lifetime and size of a worker's tree: the subreaper that takes its orphans (``none``
mode), the sweep that kills what is left, and the cap on its processes and threads (every
mode): how many it may hold (``task_cap``), the kernel limits that refuse the fork past it
where the kernel keeps one (a PID namespace's ``pid_max``, RLIMIT_NPROC, a pids cgroup's
``pids.max`` in ``none`` mode where one is writable), and the count
the launcher keeps meanwhile (``watch``), ending the whole tree past the cap."""

from __future__ import annotations

import ctypes
import functools
import os
import platform

# no package import: the launcher loads this file by its path (``python -I -S sandbox.py``)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


# -- lifetime (none mode) ---------------------------------------------------------------------

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    return int(_libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0


def children(pid: int) -> list[int]:
    """``pid``'s children (its threads' ``children`` lists, else a scan of /proc)."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(c) for c in fh.read().split()]
        return found
    except (OSError, ValueError):
        pass
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def reap_all(me: int, rounds: int = 200) -> int:
    """Kill every remaining descendant (each orphan comes back to this subreaper) and reap
    them. Returns how many were killed."""
    killed = 0
    for _ in range(rounds):
        left = children(me)
        for pid in left:
            try:
                os.kill(pid, 9)
                killed += 1
            except OSError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return killed
            except InterruptedError:
                continue
            if pid == 0:
                break
        if not left:
            import time

            time.sleep(0.005)
    return killed


# -- a cap on the worker's processes and threads (every mode) ---------------------------------

# What a worker's tree may hold at once, threads included: the kernel's own counters (a
# PID namespace's numbers, RLIMIT_NPROC) count tasks, not processes. An honest worker holds
# a few dozen (a CUDA context about ten, torch's CPU pools one per core each, a compile's
# helper processes); a fork bomb thousands.
TASKS_BASE = 512
TASKS_PER_CPU = 4
TASKS_SLACK = 16  # the kernel's limit lies this far above the cap: the watch sees it passed
_RESERVED_PIDS = 300  # a PID namespace's numbers wrap back to this, never below
_PID_MAX_PER_NS = (6, 14)  # the first kernel whose pid_max belongs to each PID namespace


def task_cap() -> int:
    """The processes and threads a worker's tree may hold at once (its one home)."""
    return TASKS_BASE + TASKS_PER_CPU * (os.cpu_count() or 1)


def pid_max_per_namespace() -> bool:
    """Whether this kernel keeps a ``pid_max`` per PID namespace (Linux 6.14). Before it
    the file is the machine's own: writing it would cap every process of the machine."""
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)) >= (
            _PID_MAX_PER_NS
        )
    except (ValueError, IndexError):
        return False


def cap_pid_namespace(cap: int) -> bool:
    """In a new PID namespace's init, its ``/proc`` mounted: the namespace's ``pid_max``,
    so that it never holds more than about ``cap`` tasks (numbers wrap back to 300, so
    up to 300 more before the first wrap). The kernel refuses the fork past it, root or
    not. False where the kernel keeps one ``pid_max`` for the machine or refuses."""
    if not pid_max_per_namespace():
        return False
    try:
        with open("/proc/sys/kernel/pid_max", "w") as fh:
            fh.write(str(_RESERVED_PIDS + cap + TASKS_SLACK))
        return True
    except OSError:
        return False


def _status_fields(pid: int | str, *keys: str) -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in keys:
                    found[key] = value.strip()
    except OSError:
        pass
    return found


def user_tasks(uid: int) -> int:
    """The tasks (threads included) of every process whose real user id is ``uid``, as far
    as this ``/proc`` shows them (what RLIMIT_NPROC counts without a user namespace)."""
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            got = _status_fields(entry, "Uid", "Threads")
            try:
                if int(got["Uid"].split()[0]) == uid:
                    total += int(got["Threads"])
            except (KeyError, ValueError, IndexError):
                continue
    return total


def cap_nproc(cap: int, host: bool) -> int:
    """RLIMIT_NPROC for a worker of a user other than root (the kernel never refuses root
    a fork for it): the tasks of its real user id in its user namespace -- with a user
    namespace of its own (``userns``), its launcher, its init and its own tree; without
    one (``host``), every process of the user, so the limit is what the user holds now
    plus the cap. Returns the limit set (0: none)."""
    import resource

    uid = os.getuid()
    if uid == 0:
        return 0
    limit = (user_tasks(uid) if host else 2) + cap + TASKS_SLACK
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    return limit


# -- a pids cgroup (none mode, where one is writable: root, a delegated subtree) -----------

CGROUP_PREFIX = "ctxkernel-worker-"  # then the launcher's PID


def pids_cgroup_base() -> str | None:
    """Where this process may make a child cgroup whose ``pids.max`` caps a tree: its own
    cgroup of the unified hierarchy (v2) where ``pids`` is on for its children, else its
    cgroup of the v1 ``pids`` hierarchy; None where neither is there and writable (the
    kernel counts and refuses the fork past ``pids.max``, root included)."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
        with open("/proc/self/mountinfo") as fh:
            mounts = fh.read().splitlines()
    except OSError:
        return None
    v2 = v1 = ""
    for line in mounts:  # (..., mount point, ...) - fstype source options
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) > 4 and len(rest) > 2:
            if rest[0] == "cgroup2":
                v2 = v2 or fields[4]
            elif rest[0] == "cgroup" and "pids" in rest[2].split(","):
                v1 = v1 or fields[4]
    found: list[str] = []
    for line in lines:  # hierarchy:controllers:path
        hierarchy, _, named = line.partition(":")
        controllers, _, path = named.partition(":")
        if hierarchy == "0" and not controllers and v2:
            base = os.path.normpath(os.path.join(v2, path.lstrip("/")))
            try:
                with open(os.path.join(base, "cgroup.subtree_control")) as fh:
                    if "pids" in fh.read().split():
                        found.insert(0, base)
            except OSError:
                continue
        elif "pids" in controllers.split(",") and v1:
            found.append(os.path.normpath(os.path.join(v1, path.lstrip("/"))))
    return next((b for b in found if os.path.isdir(b) and os.access(b, os.W_OK)), None)


def make_pids_cgroup(limit: int) -> str | None:
    """A child cgroup (``pids_cgroup_base``) for this launcher's worker, holding at most
    ``limit`` tasks; those a launcher that died left empty are removed first. None where
    none can be made (the launcher's count alone then)."""
    base = pids_cgroup_base()
    if base is None:
        return None
    _sweep_cgroups(base)
    path = os.path.join(base, f"{CGROUP_PREFIX}{os.getpid()}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "pids.max"), "w") as fh:
            fh.write(str(limit))
    except OSError:
        remove_cgroup(path, 0.0)
        return None
    return path


def join_cgroup(path: str) -> None:
    """Move this process (and what it will fork) into the cgroup at ``path``."""
    with open(os.path.join(path, "cgroup.procs"), "w") as fh:
        fh.write(str(os.getpid()))


def remove_cgroup(path: str, within_s: float = 2.0) -> bool:
    """Remove the cgroup at ``path`` once its last task is gone (the kernel refuses while one
    is there: each reaped a moment after its kill)."""
    import time

    deadline = time.monotonic() + within_s
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _sweep_cgroups(base: str) -> None:
    """Remove the workers' cgroups in ``base`` whose launcher is gone (a killed check)."""
    try:
        names = [n for n in os.listdir(base) if n.startswith(CGROUP_PREFIX)]
    except OSError:
        return
    for name in names:
        try:
            os.kill(int(name[len(CGROUP_PREFIX) :]), 0)
            continue  # its launcher runs
        except ProcessLookupError:
            remove_cgroup(os.path.join(base, name), 0.0)  # refused while a task is left in it
        except (OSError, ValueError):
            continue


def _threads(pid: int | str) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[17])
    except (OSError, ValueError, IndexError):
        return 0


def descendants(pid: int) -> list[int]:
    """Every process beneath ``pid``: its children, theirs, and so on."""
    found: list[int] = []
    todo = [pid]
    seen = {pid}
    while todo:
        for child in children(todo.pop()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                todo.append(child)
    return found


def tree_tasks(root: int | None, above: int = 1 << 30) -> int:
    """The tasks (threads included) of every process beneath ``root``; with None, of every
    process this ``/proc`` shows (a PID namespace's own: the worker's tree and its init).
    Stops counting once past ``above`` (a tree that is still forking: answer at once)."""
    total = 0
    if root is None:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                total += _threads(entry)
                if total > above:
                    break
        return total
    todo, seen = [root], {root}
    while todo and total <= above:
        for child in children(todo.pop()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
                total += _threads(child)
    return total


def machine_tasks() -> int:
    """Every task of the machine (``/proc/loadavg``'s total): one read, where walking a
    tree is one per thread; -1 where it cannot be read."""
    try:
        with open("/proc/loadavg") as fh:
            return int(fh.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return -1


def stop_and_kill(me: int, rounds: int = 100) -> int:
    """End a tree that may still be forking (no PID namespace to end it at once): stop
    every descendant (a stopped process forks no more) until a sweep finds none new, then
    kill and reap them all. Returns how many were stopped."""
    stopped: set[int] = set()
    for _ in range(rounds):
        new = [p for p in descendants(me) if p not in stopped]
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, 19)  # SIGSTOP
            except OSError:
                pass
        stopped.update(new)
    for pid in {*stopped, *descendants(me)}:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    import time

    # a thousand dying processes take the kernel a while: reap until none is left (each
    # orphan comes back to this subreaper before its parent is gone), killing any again
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == 0:
            for child in children(me):
                try:
                    os.kill(child, 9)
                except OSError:
                    pass
            time.sleep(0.005)
    return len(stopped)


def watch(worker: int, mode: str, me: int, cap: int, every_s: float) -> tuple[int, int]:
    """Wait for the worker, counting the tasks of its tree every ``every_s`` (in a PID
    namespace, every task its ``/proc`` shows; in ``none`` mode, every descendant of this
    subreaper, whose orphans it reaps meanwhile: a zombie holds its PID). Returns (its wait
    status, 0) when it ended, (0, how many) as soon as they number more than ``cap``.

    Walking a tree in ``none`` mode reads a file per thread: it is walked every quarter
    second, and at once whenever the machine's own count of tasks (one read) has grown by
    an eighth of the cap since the last walk."""
    import select
    import time

    margin = max(16, cap // 8)
    walked, machine = 0.0, -1
    try:
        ended = os.pidfd_open(worker)
    except (AttributeError, OSError):  # a kernel before 5.3: sleep between the counts
        ended = -1
    try:
        while True:
            while True:
                try:
                    pid, status = os.waitpid(-1 if mode == "none" else worker, os.WNOHANG)
                except InterruptedError:
                    continue
                if pid == worker:
                    return status, 0
                if pid == 0:
                    break
            if mode != "none":
                held = tree_tasks(None, cap)  # a listing and a read per process
            else:
                now, total = time.monotonic(), machine_tasks()
                held = 0
                if total < 0 or total - machine > margin or now - walked >= 0.25:
                    held = tree_tasks(me, cap)
                    walked, machine = now, total
            if held > cap:
                return 0, held
            if ended >= 0:
                select.select([ended], [], [], every_s)
            else:
                time.sleep(every_s)
    finally:
        if ended >= 0:
            os.close(ended)
