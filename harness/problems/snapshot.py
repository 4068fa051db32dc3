"""Problem snapshot: the files a problem is loaded from, copied where no worker can write.

A candidate's worker must never be able to change what the parent imports: a problem's
``TOLERANCE`` rewritten between two checks would make every later verdict a lie. So the
parent never imports a problem from the path the user gave. Before anything imports
it, ``snapshot`` copies the problem's folder (its regular files, each read through one
descriptor with a size cap: no FIFO, device or oversized file is read) into a fresh
temp folder of the parent's, and loading happens from there. In a namespace mode that
folder is under the parent's ``/tmp``, which no worker sees (its ``/tmp`` is private);
the copy a worker needs is bound in read-only. In ``none`` mode landlock keeps workers'
writes inside their own folders.

``read_regular`` is the one way a problem or candidate file is read: a path that is not
a regular file of sane size is refused with one line (a ``problem.py`` that is a link to
``/dev/zero`` was read until the server was killed for memory; a FIFO hung it).
``in_check_folder`` says whether a path lies in some check's temp folder (a problem or
candidate there was written by another check's worker).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import weakref
from pathlib import Path

from ..errors import UsageError
from ..process import cleanup

MAX_FILE_BYTES = 8 << 20  # one file of a problem or a candidate
MAX_TOTAL_BYTES = 64 << 20  # one problem's snapshot
MAX_FILES = 2000  # files a snapshot copies (a KernelBench level folder holds ~100)
PREFIX = "ctxkernel-problem-"
# the temp folders a worker writes in: checks', sandbox runs', templates'
_CHECK_FOLDER = re.compile(r"^ctxkernel-(check|sandbox|template)-")


def read_regular(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path`` when it is a regular file (links followed) of at most
    ``limit`` bytes; else ``UsageError`` naming what it is instead."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot open it ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _kind(st.st_mode)
            raise UsageError(f"{what} {path}: is {kind}, not a regular file")
        if st.st_size > limit:
            raise UsageError(
                f"{what} {path}: {st.st_size / 2**20:.1f} MiB, over the {limit / 2**20:.0f} MiB a "
                f"{what} may have"
            )
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise UsageError(f"{what} {path}: grew past {limit / 2**20:.0f} MiB while read")
        return data
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def in_check_folder(path: Path) -> bool:
    """Whether ``path`` lies inside a temp folder of one of the harness's processes."""
    real = Path(os.path.realpath(path))
    return any(_CHECK_FOLDER.match(part) for part in real.parts)


def is_snapshot(path: Path) -> bool:
    """Whether ``path`` is already inside a snapshot (a worker loads the parent's copy)."""
    return any(part.startswith(PREFIX) for part in Path(os.path.realpath(path)).parts)


def refuse_check_folder(path: Path, what: str) -> None:
    if in_check_folder(path):
        raise UsageError(
            f"{what} {path}: lies in a check's temp folder (written by a candidate's worker); "
            "refused"
        )


def snapshot(target: Path, with_parent: bool = False) -> tuple[Path, Path]:
    """Copy ``target``'s folder (``target`` itself when a folder), and with ``with_parent``
    the regular files beside that folder, into a fresh parent-only temp folder. Returns
    (the copy of ``target``, the snapshot's root: removed with ``release``)."""
    refuse_check_folder(target, "problem")
    directory = target if target.is_dir() else target.parent
    root = cleanup.temp_root(PREFIX)
    try:
        copy_dir = root / (directory.name or "problem")
        copy_dir.mkdir()
        budget = [MAX_TOTAL_BYTES, MAX_FILES]
        if not target.is_dir():
            _copy(target, copy_dir / target.name, budget, required=True)
        elif (target / "problem.py").exists():
            _copy(target / "problem.py", copy_dir / "problem.py", budget, required=True)
        _copy_files(directory, copy_dir, budget)
        if with_parent and directory.parent != directory:
            _copy_files(directory.parent, root, budget)
    except BaseException:
        cleanup.remove_root(root)
        raise
    copied = copy_dir if target.is_dir() else copy_dir / target.name
    return copied, root


def _copy_files(source: Path, dest: Path, budget: list[int]) -> None:
    try:
        entries = sorted(os.scandir(source), key=lambda e: e.name)
    except OSError as exc:
        raise UsageError(f"problem folder {source}: cannot list it ({exc.strerror})") from None
    for entry in entries:
        if entry.name.startswith(".") or (dest / entry.name).exists():
            continue
        try:
            if not entry.is_file():  # links to regular files are followed, the rest skipped
                continue
        except OSError:
            continue
        _copy(Path(entry.path), dest / entry.name, budget, required=False)


def _copy(source: Path, dest: Path, budget: list[int], required: bool) -> None:
    """Copy one file; a file the problem does not need is skipped when it is too large or
    not regular, one it does (``required``) is refused with its reason."""
    if budget[1] <= 0:
        if required:
            raise UsageError(f"problem {source}: its folder holds more than {MAX_FILES} files")
        return
    try:
        data = read_regular(source, "problem file", min(MAX_FILE_BYTES, budget[0]))
    except UsageError:
        if required:
            raise
        return
    budget[0] -= len(data)
    budget[1] -= 1
    dest.write_bytes(data)


def release_with(owner: object, root: Path) -> None:
    """Remove the snapshot ``root`` once ``owner`` (the loaded problem) is gone."""
    weakref.finalize(owner, shutil.rmtree, str(root), True)
