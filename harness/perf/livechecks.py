"""Checks of this user running at once on this machine, seen by each other.

A reference timing is cached and reused for every later candidate of the problem
(``reftimes.py``), so it must be measured with nothing of a candidate running beside it.
The benchmark rung stops its own candidate's processes while it times the reference
(``process/freeze.py``), but the other checks of a batch -- ``--jobs`` threads, a pool's
slots, another ``ctxkernel check`` or agent session, the check server -- have candidates
of their own, which may burn a core or keep the GPU busy right then. A candidate could use
that: left burning in one check, it slows the reference another check times and caches,
and its own later check then reads the inflated reference time as a speedup.

Each check registers for as long as its ladder runs (``registered``): a file in
``<cache>/live-checks/`` it holds a shared ``flock`` on (so a check that died leaves a
file nobody holds, swept by the next look). Each start and end also bumps an epoch (a
counter under an exclusive lock), so a neighbour that came and went inside a window is
seen too. ``LiveCheck.watch()`` opens a window; ``alone(window)`` says whether no other
check was live at any moment of it. The benchmark caches a reference timing only then.
Workers cannot write the folder (in the namespace modes they do not see it; in ``none``
mode they can read it): a lock a worker takes on a file there can only make a check think
it is not alone (no cache), and the epoch's lock is waited for at most ``LOCK_WAIT_S``, so
it cannot hang a check either.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..paths import cache_dir

FOLDER = "live-checks"
EPOCH = "epoch"
LOCK_WAIT_S = 0.5  # at most, for the epoch's lock


def folder() -> Path:
    return cache_dir() / FOLDER


@dataclass(frozen=True)
class Window:
    """What a window saw when it opened: other checks live then, and the epoch."""

    others: int
    epoch: int | None  # None: not read (its lock held elsewhere)


class LiveCheck:
    """One check's registration: its own file's name, and how it sees the others."""

    def __init__(self, where: Path, name: str) -> None:
        self.where = where
        self.name = name

    def others(self) -> int:
        """Other checks live now: files whose shared lock is held; a file nobody holds
        (its check died) is removed."""
        count = 0
        try:
            entries = list(self.where.iterdir())
        except OSError:
            return 0
        for entry in entries:
            if entry.name in (self.name, EPOCH) or not entry.name.startswith("check-"):
                continue
            try:
                fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue  # ended meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                count += 1  # held: a check is running
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()  # left by a check that died
            finally:
                os.close(fd)
        return count

    def epoch(self) -> int | None:
        return _epoch(self.where, bump=False)

    def watch(self) -> Window:
        return Window(self.others(), self.epoch())

    def alone(self, window: Window) -> bool:
        """No other check was live at any moment since ``window`` opened: none then, none
        now, and none started or ended between."""
        if window.others or window.epoch is None:
            return False
        return self.epoch() == window.epoch and self.others() == 0


def _epoch(where: Path, bump: bool) -> int | None:
    """The epoch counter, bumped when ``bump``; None when its lock is not had within
    ``LOCK_WAIT_S`` (a none-mode worker can read the folder and so hold a lock on the file:
    that must cost a cached timing, never hang a check)."""
    try:
        fd = os.open(where / EPOCH, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.002)
        raw = os.pread(fd, 32, 0).strip()
        value = int(raw) if raw.isdigit() else 0
        if bump:
            value += 1
            text = str(value).encode()
            os.pwrite(fd, text, 0)
            os.ftruncate(fd, len(text))
        return value
    except OSError:
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def registered(where: Path | None = None) -> Iterator[LiveCheck | None]:
    """Register this check for the ``with`` block; ``None`` when the folder cannot be
    written (then nothing is known of the others, and the caller treats it as not alone)."""
    where = where or folder()
    try:
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"check-{os.getpid()}-{secrets.token_hex(6)}"
        fd = os.open(where / name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError:
        yield None
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        _epoch(where, bump=True)
        yield LiveCheck(where, name)
    finally:
        with contextlib.suppress(OSError):
            (where / name).unlink()
        os.close(fd)
        with contextlib.suppress(OSError):
            _epoch(where, bump=True)
