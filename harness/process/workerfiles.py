"""Worker files: what the parent writes into, and reads back from, a worker's own folder.

A worker may write anything in its folder, and more than one worker of a candidate uses
the same folder, so a name the parent uses there may already hold what a candidate left:
a link to a file of the parent's, a FIFO that blocks whoever opens it, a device, a file of
any size. The parent therefore never follows, never blocks on and never trusts the size of
an entry there: it writes only files it has just created itself (``write_fresh``) and reads
only regular files of bounded size, checked on the descriptor it reads
(``read_worker_file``).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from stat import S_ISREG
from typing import Any

from . import workertree


def _open_regular(path: Path) -> tuple[Any, os.stat_result] | None:
    """``path`` opened for reading without following a link or blocking on a FIFO, with
    its status read on the descriptor (nothing swapped in after a check is read); None
    unless it is a regular file."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    st = os.fstat(fd)
    if not S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb"), st


def read_worker_file(path: Path, limit: int) -> bytes | None:
    """A file a worker wrote in its folder, or None unless it is a regular file (never a
    link, a FIFO or a device) of at most ``limit`` bytes."""
    opened = _open_regular(path)
    if opened is None:
        return None
    fh, st = opened
    with fh:
        if st.st_size > limit:
            return None
        return fh.read(limit + 1)[:limit]


def read_tail(path: Path, limit: int) -> tuple[bytes, bool] | None:
    """A file the worker writes to (its stdout/stderr log: a descriptor of ours it holds,
    which it may ``ftruncate`` to terabytes of holes), read without ever holding more than
    its last ``limit`` bytes: (those bytes, whether any came before them), or None unless
    it is a regular file."""
    opened = _open_regular(path)
    if opened is None:
        return None
    fh, _ = opened
    with fh:
        size = fh.seek(0, os.SEEK_END)  # the size now: it may still grow or shrink
        start = max(0, size - limit)
        fh.seek(start)
        return fh.read(limit), start > 0


def write_fresh(path: Path, text: str) -> None:
    """Write a new file of ours in a worker's folder: whatever the worker left under that
    name is removed first, and a link or FIFO put back meanwhile is never followed."""
    remove_entry(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def remove_entry(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            # a folder the worker left there, perhaps closed to its owner (mode 000)
            if not workertree.remove(path):
                raise OSError(errno.ENOTEMPTY, "a worker's folder could not be removed", str(path))
        else:
            path.unlink()
    except FileNotFoundError:
        pass


__all__ = ["read_tail", "read_worker_file", "remove_entry", "write_fresh"]
