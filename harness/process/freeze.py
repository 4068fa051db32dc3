"""Freezing a worker's tree: every process beneath a session's launcher stopped (SIGSTOP)
while the parent measures something the tree must not disturb, then continued.

The benchmark rung times the reference in a worker of its own while the candidate's worker
is still alive: a native thread, a forked child or a ``setsid`` process the candidate left
running would steal the CPU (and queue GPU work) during the reference's window, so that the
reference looks slower. ``frozen(sessions)`` stops every process beneath each session's
launcher -- the worker, its threads (a stop holds the whole thread group), its children,
and its orphans, which come back to the launcher (``none`` mode: a subreaper) or to the
namespace's init (a namespace mode), both beneath the launcher -- walking the tree again
until a walk finds nothing new and every task of every process it found is seen stopped
(``T``) or gone: a stopped process forks no more, so a tree forking fast ends up stopped
too, or the walk runs past its deadline and the freeze is not confirmed. The launcher
itself is not stopped (harness code that only waits). Every process is continued in a
``finally``.

Signals go through a PID file descriptor opened while the process was seen as its parent's
child (``pidfd_open``), so a PID reused by another process is never stopped or continued.
A worker stopped between requests waits on its channel as before; one stopped mid-request
only answers later.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from . import lifetime

FREEZE_DEADLINE_S = 2.0  # a tree not confirmed stopped by then: the freeze is not confirmed
_STOPPED_STATES = frozenset("TtZX")  # stopped, traced-stopped, zombie, dead


@dataclass
class Freeze:
    """What ``stop`` did: whether every process of the trees was seen stopped, how many
    processes and tasks (threads) they held, and in how many seconds."""

    confirmed: bool = False
    reason: str = ""
    processes: int = 0
    tasks: int = 0
    stop_s: float = 0.0
    resume_s: float = 0.0
    roots: list[int] = field(default_factory=list)
    _held: dict[int, int] = field(default_factory=dict, repr=False)  # pid -> pidfd (or -1)

    @property
    def pids(self) -> list[int]:
        return sorted(self._held)

    def as_info(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "confirmed": self.confirmed,
            "processes": self.processes,
            "tasks": self.tasks,
            "stop_ms": round(self.stop_s * 1e3, 3),
            "resume_ms": round(self.resume_s * 1e3, 3),
        }
        if self.reason:
            doc["reason"] = self.reason
        return doc


def session_root(session: Any) -> int | None:
    """The PID above a session's whole tree (a ``LocalSession``'s launcher: the worker,
    the namespace's init and every orphan are beneath it), None for a worker that is not a
    process of this machine."""
    proc = getattr(session, "proc", None)
    pid = getattr(proc, "pid", None) if proc is not None else getattr(session, "pid", None)
    if isinstance(pid, int) and pid > 0 and pid != os.getpid():
        return pid
    return None


def _task_states(pid: int) -> list[str] | None:
    """The state letter of each of ``pid``'s tasks; None once the process is gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    states: list[str] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                states.append(fh.read().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
    return states


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _open(pid: int, parent: int) -> int | None:
    """A descriptor of ``pid`` while it is still ``parent``'s child (-1 where the kernel
    has no ``pidfd_open``), None when it is not (gone, or the PID now names another)."""
    try:
        fd = os.pidfd_open(pid)
    except AttributeError:
        return -1 if _parent(pid) == parent else None
    except OSError:
        return None
    if _parent(pid) != parent:
        os.close(fd)
        return None
    return fd


def _signal(pid: int, fd: int, sig: int) -> str:
    """Send ``sig``; '' when sent or the process is gone, else why not."""
    try:
        if fd >= 0:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return ""
    except OSError as exc:
        return f"{os.strerror(exc.errno or 0)} (pid {pid})"
    return ""


def _walk(root: int) -> list[tuple[int, int]]:
    """(pid, its parent) of every process beneath ``root``."""
    found: list[tuple[int, int]] = []
    todo, seen = [root], {root}
    while todo:
        parent = todo.pop()
        for child in lifetime.children(parent):
            if child not in seen:
                seen.add(child)
                found.append((child, parent))
                todo.append(child)
    return found


def stop(roots: Iterable[int], deadline_s: float | None = None) -> Freeze:
    """SIGSTOP every process beneath each of ``roots`` until the trees are seen stopped
    (within ``deadline_s``, ``FREEZE_DEADLINE_S`` by default)."""
    deadline_s = FREEZE_DEADLINE_S if deadline_s is None else deadline_s
    started = time.perf_counter()
    freeze = Freeze(roots=sorted(set(roots)))
    held = freeze._held
    end = time.monotonic() + deadline_s
    gone = [r for r in freeze.roots if _task_states(r) is None]
    if gone:  # its orphans went above it, out of reach of a walk
        freeze.reason = f"the launcher of the tree is gone (pid {gone[0]})"
        return freeze
    try:
        _stop_all(freeze, end, deadline_s)
    except BaseException:  # nothing is left stopped behind an error (or an interrupt)
        resume(freeze)
        raise
    freeze.processes = len(held)
    freeze.stop_s = time.perf_counter() - started
    return freeze


def _stop_all(freeze: Freeze, end: float, deadline_s: float) -> None:
    held = freeze._held
    while True:
        # the states first, then a walk: when every process held was stopped before a walk
        # that finds none new, none can appear any more (a stopped process does not fork)
        states = {pid: _task_states(pid) for pid in held}
        running = [pid for pid, s in states.items() if s is not None and set(s) - _STOPPED_STATES]
        new = [(p, q) for root in freeze.roots for p, q in _walk(root) if p not in held]
        for pid, parent in new:
            fd = _open(pid, parent)
            if fd is None:
                continue  # gone, or reparented: the next walk finds it where it went
            held[pid] = fd
            why = _signal(pid, fd, signal.SIGSTOP)
            if why:
                freeze.reason = f"could not stop a process of the tree: {why}"
        if not new and not running and not freeze.reason:
            freeze.confirmed = True
            freeze.tasks = sum(len(s) for s in states.values() if s)
            break
        if freeze.reason or time.monotonic() > end:
            if not freeze.reason:
                freeze.reason = (
                    f"{len(running)} process(es) of the tree not seen stopped within "
                    f"{deadline_s:g} s" + ("; still forking" if new else "")
                )
            break
        if running and not new:
            time.sleep(0.0005)  # a stop is delivered on the task's next way out of the kernel


def resume(freeze: Freeze) -> None:
    """SIGCONT every process ``stop`` stopped, and close their descriptors."""
    started = time.perf_counter()
    for pid, fd in sorted(freeze._held.items()):
        _signal(pid, fd, signal.SIGCONT)
        if fd >= 0:
            os.close(fd)
    freeze._held.clear()
    freeze.resume_s = time.perf_counter() - started


@contextmanager
def frozen(sessions: Iterable[Any], deadline_s: float | None = None) -> Iterator[Freeze]:
    """Every process of the sessions' trees stopped for the block, then continued. The
    freeze is not confirmed when a session is not a process of this machine."""
    listed = list(sessions)
    roots = [session_root(s) for s in listed]
    freeze = stop([r for r in roots if r is not None], deadline_s)
    if None in roots:
        freeze.confirmed = False
        freeze.reason = freeze.reason or "a worker is not a process of this machine"
    try:
        yield freeze
    finally:
        resume(freeze)


__all__ = ["FREEZE_DEADLINE_S", "Freeze", "frozen", "resume", "session_root", "stop"]
