"""What a worker's tree holds in memory, for the memory cap: resident pages and shared memory.

``VmRSS`` counts only the pages a process maps. Shared memory it holds without mapping
them is charged to no process: a ``memfd`` filled with ``write()`` and kept open, a file
in a tmpfs (``/dev/shm``, a private ``/tmp``) written with libc past the audit hook, one
of them unlinked and held open. ``MemoryWatch`` counts, beside the worker's ``VmRSS``:

- every ``memfd`` and every unlinked tmpfs file open in a process of the worker's tree
  (its allocated pages: ``st_blocks``; one file open twice counted once), found among
  ``/proc/<pid>/fd``;
- the pages used in the worker's private tmpfs mounts (``/tmp``, ``/var/tmp``,
  ``/dev/shm`` of a namespace mode: ``statvfs`` through ``/proc/<pid>/root``).

A mapped ``memfd`` still open is in ``VmRSS`` (``RssShmem``) and in the count: counted
twice, on the safe side (an honest worker holds no shared memory of its own). A process
whose ``/proc/<pid>/fd`` this one may not list (a non-dumpable worker of a non-root user
in ``none`` mode: one forked from the warm template) shows none of its descriptors.

It runs on every tick of the watchdog, so it is kept cheap: the descriptors are listed
(a ``readlink`` each) only every ``SCAN_EVERY_S`` or when a process of the tree holds a
different number of them (one ``stat`` of ``/proc/<pid>/fd``: its size is that number on
Linux 6.2+); between listings, only the files found are weighed again (a ``stat`` each).
"""

from __future__ import annotations

import os
import time
from stat import S_ISREG

from . import lifetime

__all__ = ["MemoryWatch", "rss_bytes"]

SCAN_EVERY_S = 1.0  # how often the tree and its descriptors are listed whatever changed
PRIVATE_MOUNTS = ("tmp", "var/tmp", "dev/shm")  # a namespace worker's own tmpfs, under its root
_SHM_TYPES = ("tmpfs", "shm", "hugetlbfs", "ramfs")


def rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class MemoryWatch:
    """The memory of the worker ``pid``'s tree; ``private_mounts``: whether it has private
    tmpfs mounts (a namespace mode's ``/tmp``, ``/var/tmp``, ``/dev/shm``)."""

    def __init__(self, pid: int, private_mounts: bool) -> None:
        self.pid = pid
        self.tree = [pid]
        self.fd_counts: dict[int, int] = {}
        self.held: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) -> /proc/<pid>/fd/<n>
        self.scanned = float("-inf")
        self.private_mounts = private_mounts
        self.mounts: list[str] | None = None  # the private tmpfs mounts, by /proc/<pid>/root
        self.mount_devs: set[int] = set()
        self.shm_devs: set[int] | None = None  # devices of the tmpfs the worker sees

    def resident(self) -> int | None:
        return rss_bytes(self.pid)

    def shared(self) -> int:
        """Bytes of shared memory the tree holds outside ``VmRSS``."""
        now = time.monotonic()
        if now - self.scanned >= SCAN_EVERY_S or self._fds_changed():
            self.scanned = now
            self._scan()
        total = 0
        for key, path in list(self.held.items()):
            try:
                st = os.stat(path)
            except OSError:
                del self.held[key]
                continue
            if (st.st_dev, st.st_ino) != key:  # the descriptor now names another file
                del self.held[key]
                continue
            total += st.st_blocks * 512
        return total + self._mounts_used()

    def _fds_changed(self) -> bool:
        for pid in self.tree:
            try:
                count = os.stat(f"/proc/{pid}/fd").st_size
            except OSError:  # ended, or not ours to list: the periodic listing sees to it
                continue
            if count != self.fd_counts.get(pid):
                return True
        return False

    def _scan(self) -> None:
        if self.shm_devs is None or (self.private_mounts and not self.mounts):
            # once; where private mounts are due, until they are up (a worker starting)
            self.shm_devs = self._shm_devices()
        self.tree = [self.pid, *lifetime.descendants(self.pid)]
        held: dict[tuple[int, int], str] = {}
        for pid in self.tree:
            folder = f"/proc/{pid}/fd"
            try:
                self.fd_counts[pid] = os.stat(folder).st_size
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                path = f"{folder}/{name}"
                try:
                    link = os.readlink(path)
                except OSError:
                    continue
                memfd = link.startswith("/memfd:")
                if not memfd and not link.endswith(" (deleted)"):
                    continue  # a file with a name is weighed where it lies (disk cap, mounts)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if not S_ISREG(st.st_mode) or st.st_dev in self.mount_devs:
                    continue  # a private mount's pages are counted by its statvfs
                if memfd or st.st_dev in (self.shm_devs or ()):
                    held.setdefault((st.st_dev, st.st_ino), path)
        self.held = held
        for pid in list(self.fd_counts):
            if pid not in self.tree:
                del self.fd_counts[pid]

    def _shm_devices(self) -> set[int]:
        """The devices of every memory-backed file system the worker sees (its mountinfo),
        and of its private tmpfs mounts."""
        devs: set[int] = set()
        try:
            with open(f"/proc/{self.pid}/mountinfo") as fh:
                for line in fh:
                    head, _, tail = line.partition(" - ")
                    fields = head.split()
                    if len(fields) > 2 and tail.split()[:1] and tail.split()[0] in _SHM_TYPES:
                        major, _, minor = fields[2].partition(":")
                        devs.add(os.makedev(int(major), int(minor)))
        except (OSError, ValueError):
            pass
        if self.private_mounts:
            self.mounts = []
            host = set()
            for rel in PRIVATE_MOUNTS:
                try:
                    host.add(os.stat(f"/{rel}").st_dev)
                except OSError:
                    pass
            for rel in PRIVATE_MOUNTS:
                path = f"/proc/{self.pid}/root/{rel}"
                try:
                    dev = os.stat(path).st_dev
                except OSError:
                    continue
                if dev not in host and dev not in self.mount_devs:  # its own mount
                    self.mount_devs.add(dev)
                    self.mounts.append(path)
        return devs

    def _mounts_used(self) -> int:
        total = 0
        for path in self.mounts or ():
            try:
                st = os.statvfs(path)
            except OSError:
                continue
            total += (st.f_blocks - st.f_bfree) * st.f_frsize
        return total
