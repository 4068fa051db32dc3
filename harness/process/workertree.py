"""A worker's folder tree as its owner walks it: weighed (``weigh``, the disk cap) and
removed (``remove``, cleanup) whatever modes the worker left on it and however deep it nests.

A worker runs as this process's user (a user namespace maps it back to that user), so it
may close a folder of its own to its owner: mode 000, or 0300 (write and search, no
listing), data written into it by name. Its owner needs no permission on a folder to
change its mode, only to list, enter or empty it: a folder without them is given them back
(``u+rx`` to weigh it, ``u+rwx`` to remove it) -- through a descriptor opened without
following a link (``O_PATH | O_NOFOLLOW``) and checked to be the folder that was listed
(device and inode), its mode changed through ``/proc/self/fd``: a link the worker swaps in
is never followed out of the tree. A folder still closed after that (no ``/proc``, a
folder of another owner) is ``Unweighable``, and the disk cap ends the worker rather than
count it as empty.

Everything is opened relative to its folder's descriptor (``openat``), so a folder deeper
than a path can name (PATH_MAX) is reached too, and nothing recurses: ``weigh`` holds one
descriptor a level and stops past ``MAX_DEPTH`` levels (``Unweighable``), ``remove``
moves each folder's subfolders up to the top before it empties it (three descriptors at
most, however deep the tree).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

__all__ = ["ENTRY_BYTES", "MAX_DEPTH", "Unweighable", "remove", "weigh"]

# what an entry costs at least, whatever it holds: an empty file, a link or a FIFO takes
# no block but an inode and a directory slot (millions of them exhaust the file system)
ENTRY_BYTES = 4096
# how deep ``weigh`` follows a worker's folders (one descriptor a level): no backend's
# caches nest past a dozen
MAX_DEPTH = 128
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MOVED = ".ctxkernel-rm-"  # a subfolder's name once moved up to the top by ``remove``


class Unweighable(Exception):
    """A folder in the tree that stays closed to its owner, or lies too deep to weigh."""


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _open_up(dirfd: int, name: str, seen: os.stat_result, bits: int) -> bool:
    """Give the folder ``name`` in ``dirfd`` the owner's ``bits`` back, if it is still the
    folder ``seen`` (never a link, never another folder swapped in under that name)."""
    try:
        fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError:
        return False
    try:
        now = os.fstat(fd)
        if not _same(now, seen):
            return False
        if now.st_mode & bits != bits:
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(now.st_mode) | bits)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _open_dir(dirfd: int, name: str, seen: os.stat_result, bits: int) -> int:
    """The folder ``name`` in ``dirfd`` opened for listing, its owner's ``bits`` given back
    first where it lacks them; ``FileNotFoundError`` if it is no longer the folder ``seen``."""
    if seen.st_mode & bits != bits and not _open_up(dirfd, name, seen, bits):
        raise PermissionError(errno.EACCES, "closed to its owner", name)
    fd = os.open(name, _DIR_FLAGS, dir_fd=dirfd)
    if not _same(os.fstat(fd), seen):  # swapped for another since it was listed
        os.close(fd)
        raise FileNotFoundError(errno.ENOENT, "replaced while it was weighed", name)
    return fd


def _open_top(root: Path, bits: int) -> int:
    parent = os.open(root.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        seen = os.stat(root.name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(seen.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(root))
        return _open_dir(parent, root.name, seen, bits)
    finally:
        os.close(parent)


def weigh(root: Path, stop_above: int) -> int:
    """Bytes allocated under ``root`` (links not followed; each entry at least
    ``ENTRY_BYTES``), counted until past ``stop_above``. Raises ``Unweighable`` for a
    folder that stays closed to its owner or lies more than ``MAX_DEPTH`` levels down."""
    try:
        top = _open_top(root, stat.S_IRUSR | stat.S_IXUSR)
    except FileNotFoundError:
        return 0
    except PermissionError as exc:
        raise Unweighable(f"{root.name}: {exc.strerror}") from None
    total = 0
    # one level each: its descriptor, its path (for the reason), its subfolders not yet weighed
    stack: list[tuple[int, str, list[tuple[str, os.stat_result]]]] = []
    here: tuple[int, str] | None = (top, root.name)
    try:
        while here is not None or stack:
            if here is not None:
                fd, path = here
                here = None
                subfolders, total = _list(fd, total)
                stack.append((fd, path, subfolders))
                if total > stop_above:
                    break
            fd, path, pending = stack[-1]
            if not pending:
                os.close(fd)
                stack.pop()
                continue
            name, seen = pending.pop()
            if len(stack) >= MAX_DEPTH:
                raise Unweighable(f"{root.name}: folders nested more than {MAX_DEPTH} deep")
            try:
                here = (_open_dir(fd, name, seen, stat.S_IRUSR | stat.S_IXUSR), f"{path}/{name}")
            except PermissionError as exc:
                raise Unweighable(f"{_shown(path, name)}: {exc.strerror}") from None
            except OSError:
                continue  # gone, or replaced, since it was listed: the next weighing sees it
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return total


def _list(fd: int, total: int) -> tuple[list[tuple[str, os.stat_result]], int]:
    """Add the folder's entries to ``total``; its subfolders, to weigh next."""
    subfolders = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += max(st.st_blocks * 512, ENTRY_BYTES)
                if stat.S_ISDIR(st.st_mode):
                    subfolders.append((entry.name, st))
    except OSError:
        pass  # removed while it was listed
    return subfolders, total


def _shown(path: str, name: str) -> str:
    shown = f"{path}/{name}"
    return shown if len(shown) <= 120 else f"{shown[:50]}...{shown[-60:]}"


def remove(root: Path, last: str | None = None, within_s: float = 30.0) -> bool:
    """Remove ``root`` and all under it whatever modes its folders were left with (links
    removed, never followed), ``last`` (an entry of ``root``: its owner's marker) only once
    all else is gone, so that what a failed removal leaves is still marked. Whether
    ``root`` is gone; gives up after ``within_s`` (something still making entries)."""
    rwx = stat.S_IRWXU
    try:
        top = _open_top(root, rwx)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        emptied = _empty(top, last, time.monotonic() + within_s)
    finally:
        os.close(top)
    try:
        if emptied and last is not None:
            os.unlink(root / last)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        os.rmdir(root)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _empty(top: int, keep: str | None, deadline: float) -> bool:
    """Empty the folder ``top`` but for ``keep``: each subfolder's own subfolders are moved
    up into ``top`` (their owner's ``u+rwx`` given back: a folder's ``..`` changes with the
    move), its other entries unlinked, then the subfolder removed; until no entry is left."""
    rwx = stat.S_IRWXU
    moved = time.monotonic_ns()  # names a removal given up earlier left are not reused
    while time.monotonic() < deadline:
        try:
            names = [n for n in os.listdir(top) if n != keep]
        except OSError:
            return False
        if not names:
            return True
        progress = False
        for name in names:
            try:
                seen = os.stat(name, dir_fd=top, follow_symlinks=False)
                if not stat.S_ISDIR(seen.st_mode):
                    os.unlink(name, dir_fd=top)
                    progress = True
                    continue
                if seen.st_nlink <= 2 and _rmdir(top, name):  # no subfolder: maybe empty
                    progress = True
                    continue
                folder = _open_dir(top, name, seen, rwx)
            except OSError:
                continue
            try:
                moved = _move_up(folder, top, moved)
            finally:
                os.close(folder)
            progress |= _rmdir(top, name)
        if not progress:
            return False
    return False


def _move_up(folder: int, top: int, moved: int) -> int:
    """Unlink ``folder``'s entries and move its subfolders into ``top``; the next free
    number for a moved one's name."""
    try:
        names = os.listdir(folder)
    except OSError:
        return moved
    for name in names:
        try:
            seen = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if not stat.S_ISDIR(seen.st_mode):
                os.unlink(name, dir_fd=folder)
                continue
            if not _open_up(folder, name, seen, stat.S_IRWXU):
                continue
        except OSError:
            continue
        for _ in range(1000):  # a name not taken in ``top``
            moved += 1
            try:
                os.rename(name, f"{_MOVED}{moved}", src_dir_fd=folder, dst_dir_fd=top)
                break
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                    break
    return moved


def _rmdir(top: int, name: str) -> bool:
    try:
        os.rmdir(name, dir_fd=top)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
