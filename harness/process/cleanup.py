"""Cleanup: nothing a check started outlives it -- its worker processes and its temp dirs.

- Workers die with their check through the sandbox (``PR_SET_PDEATHSIG``, one PID
  namespace per worker); this module covers what remains.
- ``temp_root(prefix)`` makes a check's (or a pool's) temp dir with an ``.owner`` marker
  (PID and start time of the owning process); ``remove_root`` removes it at the end.
  ``sweep()`` removes the dirs of owners that died without cleaning up (SIGKILL), with
  any process still working in them; every runner calls ``sweep_once()`` at its start.
  Both remove through ``workertree.remove``: a folder a worker closed to its owner (mode
  000) is opened up again, never through a link, and the marker goes last -- a dir that
  could not be emptied keeps it, and a later sweep tries again once its owner is gone.
- ``track(pgid)`` / ``untrack(pgid)``: the live worker process groups of this process.
  ``install_signal_cleanup()`` (from the main thread) makes SIGTERM and SIGHUP kill
  them, remove the live temp dirs and then end the process with the same signal, as it
  would have ended without the handler. SIGINT already unwinds through ``finally``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType

from . import workertree

MARKER = ".owner"
PREFIXES = ("ctxkernel-check-", "ctxkernel-pool-", "ctxkernel-template-")
_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_roots: dict[str, None] = {}
_groups: dict[int, None] = {}
_swept = threading.Event()


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused PID apart)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def owner_alive(pid: int, start: str | None) -> bool:
    if Path("/proc").is_dir():
        now = _start_time(pid)
        return now is not None and (start is None or now == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def temp_root(prefix: str, parent: Path | None = None) -> Path:
    """A new temp dir owned by this process (marker written, removed by SIGTERM/SIGHUP)."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    me = os.getpid()
    (root / MARKER).write_text(json.dumps({"pid": me, "start": _start_time(me)}))
    _roots[str(root)] = None
    return root


def remove_root(root: Path) -> None:
    _roots.pop(str(root), None)
    remove_tree(root)


def remove_tree(root: Path) -> bool:
    """Remove a temp dir, its marker last, whatever modes a worker left in it; if something
    is still left, end whatever process of ours still works in it and try once more (the
    callers end their workers first: this is for what escaped them). Whether it is gone."""
    if workertree.remove(root, last=MARKER):
        return True
    kill_processes_under(root)
    return workertree.remove(root, last=MARKER)


def sweep(directory: Path | None = None) -> list[Path]:
    """Remove the ctxkernel temp dirs under ``directory`` (default: the temp dir) whose
    owner is dead, killing any process still working in them. Returns what was removed."""
    base = Path(directory or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIXES):
            continue
        try:
            owner = json.loads((entry / MARKER).read_text())
            pid, start = int(owner["pid"]), owner.get("start")
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not ours to judge: no marker (an older harness), or not readable
        if owner_alive(pid, start):
            continue
        kill_processes_under(entry)
        if remove_tree(entry):
            removed.append(entry)
    return removed


def sweep_once() -> None:
    if not _swept.is_set():
        _swept.set()
        sweep()


def track(pgid: int) -> None:
    _groups[pgid] = None


def untrack(pgid: int) -> None:
    _groups.pop(pgid, None)


def _snapshot(items: dict[str, None] | dict[int, None]) -> list[object]:
    for _ in range(10):  # another thread may add one meanwhile
        try:
            return list(items)
        except RuntimeError:
            continue
    return []


def cleanup_now() -> None:
    """Kill every tracked worker group, then remove every live temp dir (and whatever
    still runs in it)."""
    for pgid in _snapshot(_groups):
        with contextlib.suppress(OSError):
            os.killpg(int(pgid), signal.SIGKILL)  # type: ignore[call-overload]
    roots = [Path(str(r)) for r in _snapshot(_roots)]
    for root in roots:
        kill_processes_under(root)
    if roots:
        time.sleep(0.05)  # let the killed processes go before their dirs do
    for root in roots:
        workertree.remove(root, last=MARKER)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    try:
        cleanup_now()
    finally:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def install_signal_cleanup() -> bool:
    """From the main thread, where SIGTERM/SIGHUP have their default action: clean up on
    them first. Returns whether a handler is (now) installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    installed = False
    for sig in _SIGNALS:
        try:
            current = signal.getsignal(sig)
            if current is _on_signal:
                installed = True
            elif current in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)
                installed = True
        except (ValueError, OSError):
            continue
    return installed


def kill_processes_under(directory: Path) -> list[int]:
    """SIGKILL every process of ours whose working directory lies under ``directory``
    (with its process group when it leads one): the isolated workers of a slot or a
    remote job that died before it could clean up. Linux only; a no-op elsewhere."""
    root = os.path.realpath(directory)
    killed: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return killed
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd != root and not cwd.startswith(root + os.sep):
            continue
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return killed
