"""Confinement: the reads of indexed files at query time (``show``, ``grep``, the ``read``
and ``grep`` tools) stay inside the corpus snapshot the index was built from.

The index records where each file's bytes were. Index time never follows a link out of
the snapshot; this module keeps that true later, when a recorded file (or a folder on
its path) may have been replaced by a symlink leading elsewhere (``/etc/passwd``), by
something that is not a regular file (a FIFO that would block a read), or by a hard link
to a file outside (its path still resolves inside: the file it names is another one, so
the device and inode the index recorded differ, or its link count grew). The snapshot's
root is recovered from the recorded paths themselves, so indexes made before this
module work too (those recorded no identities: only the paths are checked).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from .errors import UserError

_ROOTS: dict[tuple[str, str, str], Path | None] = {}


class Refused(UserError):
    """A recorded file whose copy on disk now leads out of the corpus."""


def snapshot_root(locals_by_path: Mapping[str, str]) -> Path | None:
    """The directory the recorded files were taken from: each local path minus the
    upstream path it ends with, then the common ancestor of those."""
    roots: set[str] = set()
    for path, local in locals_by_path.items():
        if not local:
            continue
        lp, pp = Path(local).parts, PurePosixPath(path).parts
        n = 0
        while n < min(len(lp), len(pp)) and lp[-1 - n] == pp[-1 - n]:
            n += 1
        roots.add(str(Path(*lp[: len(lp) - n])) if n < len(lp) else os.sep)
    if not roots:
        return None
    return Path(os.path.commonpath(sorted(roots)))


Identity = tuple[int, int, int]  # (device, inode, link count) of a file when indexed


class Confinement:
    """Which recorded local copies may be read, for one request (folder lookups are
    remembered for that request only); ``ids`` maps a local copy to the identity the
    index recorded for it, when it recorded one."""

    def __init__(self, root: Path | None, ids: Mapping[str, Identity] | None = None) -> None:
        self.root = os.path.realpath(root) if root is not None else None
        self.ids: Mapping[str, Identity] = ids or {}
        self._dirs: dict[str, bool] = {}
        self._reals: dict[str, str] = {}

    @classmethod
    def for_corpus(
        cls,
        key: tuple[str, str, str],
        locals_by_path: Mapping[str, str],
        ids: Mapping[str, Identity] | None = None,
    ) -> Confinement:
        """The confinement of a corpus; ``key`` (index dir, corpus, generation) caches its
        root; ``ids``: the recorded identities by upstream path (``CorpusCache.file_ids``)."""
        if key not in _ROOTS:
            _ROOTS[key] = snapshot_root(locals_by_path)
        by_local = {locals_by_path[p]: i for p, i in (ids or {}).items() if locals_by_path.get(p)}
        return cls(_ROOTS[key], by_local)

    def same_file(self, local: str, st: os.stat_result) -> bool:
        """``st`` (of the file ``local`` names now) is the file the index read: the same
        device and inode, and no new name for it since (a link count that fell is
        allowed: a package manager's cache that shared the file was cleaned)."""
        known = self.ids.get(local)
        if known is None:
            return True
        dev, ino, nlink = known
        return st.st_dev == dev and st.st_ino == ino and st.st_nlink <= nlink

    def _inside(self, real: str) -> bool:
        return self.root is not None and (
            real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep)
        )

    def _real_dir(self, folder: str) -> str:
        """realpath of a folder, one lstat per folder not seen yet in this request (the
        parents' answers are reused)."""
        real = self._reals.get(folder)
        if real is not None:
            return real
        parent, name = os.path.split(folder)
        if not name or parent == folder:
            real = os.path.realpath(folder)
        else:
            try:
                link = stat.S_ISLNK(os.lstat(folder).st_mode)
            except OSError:
                link = True  # gone or unreadable: let realpath say what it is
            real = os.path.realpath(folder) if link else os.path.join(self._real_dir(parent), name)
        self._reals[folder] = real
        return real

    def allows(self, local: str) -> bool:
        """Whether ``local`` is a regular file that resolves inside the snapshot."""
        folder = os.path.dirname(local)
        ok = self._dirs.get(folder)
        if ok is None:
            ok = self._dirs[folder] = self._inside(self._real_dir(folder))
        if not ok:
            return False
        try:
            st = os.lstat(local)
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(local)
            try:
                st = os.stat(real)
            except OSError:
                return False
            if not self._inside(real):
                return False
        return stat.S_ISREG(st.st_mode) and self.same_file(local, st)

    def read_bytes(self, local: str, what: str) -> bytes | None:
        """The file's bytes, None when it is gone; Refused when it now leads outside.

        The check is made on the open descriptor, so a link swapped in between the check
        and the read cannot slip through."""
        try:
            fd = os.open(local, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError:
            if os.path.lexists(local):
                raise self._refuse(what) from None
            return None
        try:
            st = os.fstat(fd)
            real = _fd_path(fd) or os.path.realpath(local)
            if not stat.S_ISREG(st.st_mode) or not self._inside(real):
                raise self._refuse(what)
            if not self.same_file(local, st):
                raise self._refuse(what, swapped=True)
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read()
        finally:
            os.close(fd)

    @staticmethod
    def _refuse(what: str, *, swapped: bool = False) -> Refused:
        corpus = what.split(":", 1)[0]
        how = (
            "is another file than the one indexed (a hard link or a copy put there after indexing)"
            if swapped
            else "resolves outside the corpus (a symlink or special file put there after indexing)"
        )
        return Refused(
            f"refusing {what}: its file on disk {how}; re-index with `ctxkernel index {corpus}`"
        )


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
