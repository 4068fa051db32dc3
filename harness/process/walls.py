"""Walls: the kernel-enforced layers around a candidate's worker, beyond its namespaces.

``sandbox.py`` makes the namespaces and forks the worker; this module holds what the
worker's process then does to itself before any candidate code runs, and what its
launcher does for it:

- **a read-only world** (namespace modes): every mount of the worker's mount namespace
  is made read-only, recursively (``mount_setattr``), except its own temp folder and
  the private ``/tmp``, ``/var/tmp`` and ``/dev/shm``; the folders the parent keeps for
  itself (check-server sockets, run records, agent state, caches) are covered by an
  empty read-only tmpfs, at their own path and wherever another mount shows them
  (``reaching``: a volume mounted twice, a home bound again under ``/srv``), or, where
  the machine refuses that cover (``hide`` returns them), kept unread by landlock;
  ``/dev`` is a tmpfs holding only the device nodes a GPU program needs. The worker keeps no capability to remount (``CAP_SYS_ADMIN`` is dropped from
  its bounding set and the seccomp filter refuses every mount call).
- **its own network namespace** (namespace modes): loopback up, nothing listening.
- **landlock** (every mode, where the kernel has it): writes only beneath the worker's
  temp folders and to the device nodes it needs (without the read-only world, of a
  private temp folder holding something bound back only its own); in ``none`` mode,
  where no tmpfs can cover them, and for a folder whose cover was refused, no file of
  the parent's own folders (nor of other checks' temp folders) opened, by any mount of them, and no file under ``/dev`` but those device nodes (a raw
  disk, a terminal, another process's ``/dev/shm``); past a folder too wide to grant
  entry by entry only what the worker needs there is read (``_read_rules``); no TCP bind or connect; no abstract Unix socket or
  signal reaching outside its own domain; no ptrace of (nor ``/proc/<pid>/mem`` or
  ``environ`` of) a process outside it.
- **seccomp** (``seccomp.py``; every mode, x86-64 and arm64): no ptrace, ``process_vm_*``, mount calls,
  ``unshare``/``setns``/namespace clones, bpf, ``perf_event_open``, keyrings, kexec,
  modules, io_uring (which would bypass the filter), file handles, ``pidfd_getfd``;
  no socket (nor socket pair) but a Unix stream one, no ``connect``, no ``sendto`` an
  address, no ``bind`` or ``listen`` (no name another program expects taken; a worker's
  own second filter once CUDA is up, ``seccomp.refuse_serving``); no System
  V IPC or POSIX message queue (named machine-wide); no extended attribute set or removed
  (no landlock right covers them: the user's files untagged). Wherever no read-only
  world is up (``none`` mode, or its remount refused): no file made setuid, setgid,
  writable by every user or unreadable by its owner, no file's times set (the call
  succeeds and changes nothing: ``shutil.copy2`` copies on). In ``none`` mode, where
  other processes have PIDs it can name: limits, priorities and CPUs set for itself
  only, and where landlock does not scope signals (ABI < 6), signals sent only to its own
  process (no group, no pidfd, no file owner but itself).
- **a subreaper** (``none`` mode, where no PID namespace ends the worker's
  descendants): the launcher adopts every orphan of the worker's tree and kills them all
  when the worker ends, ``setsid`` or not.
- **a process cap** (every mode): the worker's tree holds at most ``task_cap()`` processes
  and threads at once. The launcher counts them (every 100 ms, every 10 ms where no kernel
  limit holds) and ends the whole tree past the cap, with its reason; beneath that the
  kernel refuses the fork where it can: a PID namespace's own ``pid_max`` (Linux 6.14; root
  too), RLIMIT_NPROC for a user other than root (the kernel spares root; without a user
  namespace it counts every process of the user, so it is set to what the user holds plus
  the cap); in ``none`` mode, where a pids cgroup is writable, ``pids.max`` of a cgroup of
  the worker's own (``lifetime.make_pids_cgroup``; root included). Root in ``none`` mode
  without one has the count alone.

Each function returns what it put in force, so the verdict can say which layers held.
This file is stdlib only and imports in a few milliseconds: the launcher loads it by
path (``sandbox.py`` runs as ``python -I -S sandbox.py``).
"""

from __future__ import annotations

import bisect
import ctypes
import errno
import os
import struct
import sys

try:  # imported as harness.process.walls
    from . import seccomp
except ImportError:  # loaded by path (the launcher, a test): its sibling by path too
    seccomp = sys.modules.get("ctxkernel_seccomp")  # type: ignore[assignment]
    if seccomp is None:
        import importlib.util

        _here = os.path.dirname(os.path.realpath(__file__))
        _spec = importlib.util.spec_from_file_location(
            "ctxkernel_seccomp", os.path.join(_here, "seccomp.py")
        )
        assert _spec is not None and _spec.loader is not None
        seccomp = importlib.util.module_from_spec(_spec)
        sys.modules[_spec.name] = seccomp
        _spec.loader.exec_module(seccomp)

# -- mounts (namespace modes) ----------------------------------------------------------------

_MS_RDONLY, _MS_NOSUID, _MS_NODEV = 1, 2, 4
_MS_BIND, _MS_REC = 0x1000, 0x4000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID = 0x1, 0x2
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_O_PATH = getattr(os, "O_PATH", 0o10000000)
# the device nodes a CPU or GPU program opens: the usual character devices, then NVIDIA's
DEV_NODES = ("null", "zero", "full", "random", "urandom")
DEV_PREFIXES = ("nvidia",)  # nvidia0.., nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-caps/


def _mount(source: bytes | None, target: str, fstype: bytes | None, flags: int,
           data: bytes | None = None) -> None:  # fmt: skip
    if seccomp.libc().mount(source, target.encode(), fstype, flags, data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {target}: {os.strerror(code)}")


def _setattr(path: str, attr_set: int, attr_clr: int, recursive: bool) -> None:
    attr = struct.pack("QQQQ", attr_set, attr_clr, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    flags = _AT_RECURSIVE if recursive else 0
    seccomp.syscall(
        "mount_setattr",
        ctypes.c_int(_AT_FDCWD),
        ctypes.c_char_p(path.encode()),
        ctypes.c_uint(flags),
        buf,
        ctypes.c_size_t(len(attr)),
    )


def _device_nodes() -> list[str]:
    """The device nodes this machine has that a worker may need."""
    found = [f"/dev/{n}" for n in DEV_NODES if os.path.exists(f"/dev/{n}")]
    try:
        names = sorted(os.listdir("/dev"))
    except OSError:
        names = []
    found += [f"/dev/{n}" for n in names if n.startswith(DEV_PREFIXES)]
    return found


def minimal_dev() -> list[str]:
    """Replace ``/dev`` with a tmpfs holding only ``_device_nodes()`` (bound from the
    real ones, so the driver sees the same devices), ``fd``/``stdin``/``stdout``/
    ``stderr`` links and an empty ``shm``. Returns the nodes bound."""
    nodes = _device_nodes()
    held = []
    for node in nodes:
        try:
            held.append((node, os.open(node, _O_PATH), os.path.isdir(node)))
        except OSError:
            continue
    _mount(b"tmpfs", "/dev", b"tmpfs", _MS_NOSUID, b"mode=755,size=1m")
    bound = []
    for node, fd, is_dir in held:
        try:
            if is_dir:
                os.makedirs(node, exist_ok=True)
            else:
                os.close(os.open(node, os.O_CREAT | os.O_WRONLY, 0o600))
            _mount(f"/proc/self/fd/{fd}".encode(), node, None, _MS_BIND | _MS_REC)
            bound.append(node)
        finally:
            os.close(fd)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm", 0o1777)
    _mount(b"tmpfs", "/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=1777,size=1g")
    return bound


def hide(paths: list[str]) -> list[str]:
    """Cover each existing folder in ``paths`` with an empty read-only tmpfs (the parent's
    own state: check-server sockets, run records, caches), and each file (one mounted on
    its own from inside such a folder: ``reaching``) with ``/dev/null``. Returns those
    left uncovered (a mount refused, something neither folder nor file): the caller keeps
    them unread another way (landlock) or does not start the worker."""
    uncovered = []
    for path in paths:
        if not path or not os.path.exists(path):  # nothing there (or a dangling link)
            continue
        try:
            if os.path.isdir(path):
                _mount(b"tmpfs", path, b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, b"size=4k")
            elif os.path.isfile(path):
                _mount(b"/dev/null", path, None, _MS_BIND)
            else:
                uncovered.append(path)
        except OSError:
            uncovered.append(path)
    return [p for p in uncovered if os.path.exists(p)]  # not under another's cover since


def _mount_table() -> list[tuple[str, str, str]]:
    """``/proc/self/mountinfo`` as (device, root of the mount within its filesystem, mount
    point), in the kernel's order: a mount stacked on another comes after it."""
    try:
        with open("/proc/self/mountinfo") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    table = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            table.append((fields[2], _unescape(fields[3]), _unescape(fields[4])))
    return table


def reaching(paths: list[str]) -> list[str]:
    """Every other path of this mount namespace to the files of ``paths`` (folders or files):
    a mount of the same filesystem whose root is one of them, a folder above one (a volume
    mounted twice, a home bound again under ``/srv``: the folder is there too, at the same
    place below the mount), or a folder or file inside one (then the whole mount point).
    A folder mounted inside one of ``paths`` is followed the same way (its files are inside
    too), and so are the paths found. A path is kept when it leads to the same inode, or
    when that cannot be told (covering too much hides only what is the parent's anyway);
    never one that shows something else there (a mount stacked on it)."""
    known = {os.path.realpath(p) for p in paths if p and os.path.lexists(p)}
    if not known:
        return []
    table = _mount_table()
    by_device: dict[str, list[tuple[str, str]]] = {}
    for device, root, point in table:
        by_device.setdefault(device, []).append((root, point))
    points = sorted({point.rstrip("/") + "/" for _, _, point in table})
    queue = sorted(known)
    followed: set[tuple[str, str]] = set()
    found: list[str] = []
    while queue:
        path = queue.pop(0)
        for device, inner, origin in _sources(path, table):
            if (device, inner) in followed:  # the same files, seen from another path
                continue
            followed.add((device, inner))
            for root, point in by_device.get(device, ()):
                if _within(inner, root):  # the mount shows the folder below its point
                    alias = os.path.normpath(os.path.join(point, os.path.relpath(inner, root)))
                    twin = origin
                elif _within(root, inner):  # the mount shows part of it, at its point
                    alias = point
                    twin = os.path.normpath(os.path.join(origin, os.path.relpath(root, inner)))
                else:
                    continue
                if _under(alias, known) or not _same_file(alias, twin):
                    continue
                known.add(alias)
                found.append(alias)
                if _mounts_inside(alias, points):  # what is mounted in it there is too
                    queue.append(alias)
    return found


def _mounts_inside(path: str, points: list[str]) -> bool:
    """Whether a mount point lies strictly inside ``path`` (``points``: sorted, each
    ending in ``/``)."""
    prefix = path.rstrip("/") + "/"
    i = bisect.bisect_right(points, prefix)
    return i < len(points) and points[i].startswith(prefix)


def _under(path: str, folders: set[str]) -> bool:
    """Whether ``path`` is one of ``folders`` or lies inside one (normalized paths)."""
    while True:
        if path in folders:
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def _sources(path: str, table: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Where ``path``'s files live: (device, path within that filesystem, the path it is
    seen at here) for the mount that shows ``path`` and for each mount inside it."""
    holder = None
    for entry in table:  # the deepest mount point above it; of a stack, the last mounted
        if _within(path, entry[2]) and (holder is None or len(entry[2]) >= len(holder[2])):
            holder = entry
    found = []
    if holder is not None:
        device, root, point = holder
        inner = os.path.normpath(os.path.join(root, os.path.relpath(path, point)))
        found.append((device, inner, path))
    for device, root, point in table:
        if point != path and _within(point, path):
            found.append((device, root, point))
    return found


def _same_file(alias: str, twin: str) -> bool:
    """Whether ``alias`` leads to ``twin``'s inode; True when ``twin`` cannot be looked at
    (a mount stacked on it), False when ``alias`` cannot (nothing reachable there)."""
    try:
        seen = os.stat(alias)
    except OSError:
        return False
    try:
        mine = os.stat(twin)
    except OSError:
        return True
    return (seen.st_dev, seen.st_ino) == (mine.st_dev, mine.st_ino)


def read_only_world(writable: list[str], proc: bool = False) -> None:
    """Every mount read-only and nosuid, recursively, then the ``writable`` folders (each
    made a mount of its own first) writable again; with ``proc`` all of ``/proc`` too (a
    profiler's target is its child: its own ``/proc/<pid>`` does not exist yet)."""
    own = []
    for path in writable:
        if path and os.path.isdir(path):
            _mount(path.encode(), path, None, _MS_BIND | _MS_REC)
            own.append(path)
    if proc:
        own.append("/proc")  # each process's landlock keeps it to its own /proc/<pid>
    else:
        # its own /proc/<pid> stays writable (the CUDA driver writes there while it starts;
        # landlock keeps every other /proc file unwritten): a mount of its own, if allowed
        mine = os.path.realpath("/proc/self")
        try:
            _mount(mine.encode(), mine, None, _MS_BIND)
            own.append(mine)
        except OSError:
            pass  # no bind of proc here: the world stays read-only, /proc/<pid> included
    try:
        _setattr("/", _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0, recursive=True)
        for path in own:
            _setattr(path, 0, _MOUNT_ATTR_RDONLY, recursive=False)
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EINVAL):
            raise
        _remount_each(own)  # a kernel without mount_setattr (before 5.12, gVisor)


_MS_NOEXEC, _MS_REMOUNT = 8, 32
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_KEPT_FLAGS = {"nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME,
               "nodiratime": _MS_NODIRATIME, "relatime": _MS_RELATIME}  # fmt: skip


def _remount_each(own: list[str]) -> None:
    """Read-only the old way: each mount of the tree remounted ``ro,nosuid`` on its own,
    keeping the flags a user namespace may not clear; the ``own`` mounts left writable."""
    keep = [p.rstrip("/") + "/" for p in own]
    with open("/proc/self/mountinfo") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        fields = line.split()
        point = _unescape(fields[4])
        options = fields[5].split(",")
        if any((point.rstrip("/") + "/").startswith(k) for k in keep) or "ro" in options:
            continue
        flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID
        for name, flag in _KEPT_FLAGS.items():
            if name in options:
                flags |= flag
        _mount(None, point, None, flags)


def _unescape(text: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are octal escapes."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 4].isdigit():
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def loopback_up() -> None:
    """Bring ``lo`` up in a fresh network namespace (``SIOCSIFFLAGS``); needs
    ``CAP_NET_ADMIN`` there, which the launcher holds right after ``unshare``."""
    libc = seccomp.libc()
    fd = libc.socket(2, 2, 0)  # AF_INET, SOCK_DGRAM
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"socket: {os.strerror(code)}")
    try:
        ifreq = ctypes.create_string_buffer(struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))
        if libc.ioctl(fd, 0x8914, ifreq) != 0:  # SIOCSIFFLAGS: UP | LOOPBACK | RUNNING
            code = ctypes.get_errno()
            raise OSError(code, f"ioctl SIOCSIFFLAGS lo: {os.strerror(code)}")
    finally:
        os.close(fd)


# -- landlock (every mode) -------------------------------------------------------------------

_LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1 << 1, 1 << 2, 1 << 3
_LL_REMOVE_DIR, _LL_REMOVE_FILE = 1 << 4, 1 << 5
_LL_MAKE = sum(1 << b for b in range(6, 13))  # char dir reg sock fifo block sym
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14
_LL_NET_BIND_TCP, _LL_NET_CONNECT_TCP = 1, 2
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1, 2


def landlock_abi() -> int:
    """The kernel's landlock ABI version; 0 where there is none."""
    try:
        return seccomp.syscall(
            "landlock_create_ruleset", None, ctypes.c_size_t(0), ctypes.c_uint(1)
        )
    except OSError:
        return 0


def landlock(
    writable: list[str],
    devices: list[str],
    hidden: list[str] | None = None,
    needs: list[str] | None = None,
) -> dict[str, object]:
    """Writes only beneath ``writable`` and to ``devices``; with ABI 4 no TCP, with ABI 6
    no abstract Unix socket or signal outside the domain; with ``hidden`` (where no mount
    namespace can cover them) no file beneath those folders readable, nor through any
    other mount of them (``reaching``); ``needs``: what the worker reads beside them (its
    interpreter, packages, harness, problem), granted by name in a folder too wide to
    grant whole (``_read_rules``). Returns what it put in force (``{"abi": 0}`` where the
    kernel has no landlock), with the folders narrowed so."""
    abi = landlock_abi()
    if abi < 1:
        return {"abi": 0}
    unread = [*(hidden or []), *reaching(hidden or [])]
    reads, narrowed = _read_rules(unread, needs or [])
    handled = _LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE
    if reads:
        handled |= _LL_READ_FILE | _LL_READ_DIR
    if abi >= 2:
        handled |= _LL_REFER
    if abi >= 3:
        handled |= _LL_TRUNCATE
    net = _LL_NET_BIND_TCP | _LL_NET_CONNECT_TCP if abi >= 4 else 0
    scoped = _LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", handled, net, scoped)[: 24 if abi >= 6 else 16 if abi >= 4 else 8]
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = seccomp.syscall(
        "landlock_create_ruleset", buf, ctypes.c_size_t(len(attr)), ctypes.c_uint(0)
    )
    try:
        for path in writable:
            _beneath(ruleset, path, handled)
        file_rights = _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0)
        if reads:
            file_rights |= _LL_READ_FILE
        for node in devices:
            _beneath(ruleset, node, file_rights if not os.path.isdir(node) else handled)
        for path, rights in reads.items():
            _beneath(ruleset, path, rights)
        # its own /proc/<pid> (threads included): the CUDA driver writes there while it
        # starts, and cudaGetDeviceCount fails with error 304 without it (seen on the
        # H200); "self" resolves to this process's folder when the rule is made
        _beneath(ruleset, "/proc/self", file_rights)
        seccomp.syscall("landlock_restrict_self", ctypes.c_int(ruleset), ctypes.c_uint(0))
    finally:
        os.close(ruleset)
    done: dict[str, object] = {"abi": abi, "tcp": bool(net), "scoped": bool(scoped)}
    if reads:
        done["unreadable"] = sorted(_existing(unread))
        done["narrowed"] = narrowed
    return done


# read rules past this many entries of the folders on the way to a hidden folder (a home
# or a /tmp of tens of thousands) cost more than they are worth at every worker start: a
# folder past it is narrowed to its listing and the entries the worker needs
_MAX_READ_RULES = 20000


def _existing(paths: list[str]) -> set[str]:
    return {os.path.realpath(p) for p in paths if p and os.path.lexists(p)}


def _on_way(targets: set[str]) -> set[str]:
    """Every folder from ``/`` down to each of ``targets``, the targets included."""
    on_way: set[str] = set()
    for target in targets:
        path = target
        while True:
            on_way.add(path)
            if path == "/":
                break
            path = os.path.dirname(path)
    return on_way


def _listings(folders: set[str], needs: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """The entries to grant in each of ``folders`` (outermost first): all of them while
    the entries listed stay within ``_MAX_READ_RULES``; past it, only the first name on the
    way to each of ``needs`` inside the folder (the folder then ``narrowed``). A need that
    is the folder or holds it is granted nothing by this (fail closed: only its listing)."""
    listings: dict[str, list[str]] = {}
    narrowed: list[str] = []
    listed = 0
    for folder in sorted(folders):
        try:
            names = os.listdir(folder)
        except OSError:
            listings[folder] = []
            continue
        if listed + len(names) > _MAX_READ_RULES:
            narrowed.append(folder)
            inside = [
                os.path.relpath(n, folder) for n in needs if n != folder and _within(n, folder)
            ]
            names = sorted({n.split("/", 1)[0] for n in inside})
        else:
            listed += len(names)
        listings[folder] = names
    return listings, narrowed


def narrowed_folders(hidden: list[str]) -> list[str]:
    """The folders ``landlock`` narrows to what a worker needs, for ``hidden`` (and every
    other mount of them): the parent says so in the verdict."""
    targets = _existing([*hidden, *reaching(hidden)])
    return _listings(_on_way(targets) - targets, [])[1] if targets else []


def _read_rules(hidden: list[str], needs: list[str]) -> tuple[dict[str, int], list[str]]:
    """Landlock grants, never denies: to keep ``hidden`` folders unread, every entry of
    every folder on the way from ``/`` to one of them is granted reading (files) or
    reading beneath (folders), except the folders on the way, which may only be listed
    (an import scans the folders on ``sys.path``), and the hidden ones, which inherit
    only that listing. A link is granted as what it resolves to (never a way in), the
    worker's own folders by the caller. A folder too wide (``_listings``) has only the
    entries on the way to ``needs`` granted: it is returned among the narrowed. Empty when
    nothing is to be hidden; never a grant of a hidden folder."""
    targets = _existing(hidden)
    if not targets:
        return {}, []
    on_way = _on_way(targets)
    listings, narrowed = _listings(on_way - targets, [os.path.realpath(n) for n in needs])
    rules: dict[str, int] = {"/": _LL_READ_DIR}
    for folder, names in listings.items():
        rules.setdefault(folder, _LL_READ_DIR)
        for name in names:
            real = os.path.realpath(os.path.join(folder, name))
            if real in on_way or _under(real, targets):
                continue
            if not os.path.lexists(real):
                continue
            rules[real] = _LL_READ_FILE | _LL_READ_DIR if os.path.isdir(real) else _LL_READ_FILE
    return rules, narrowed


def holds(outer: str, paths: list[str]) -> bool:
    """Whether ``outer`` is or contains one of ``paths``, links resolved (never hide what
    must be seen)."""
    real = os.path.realpath(outer).rstrip("/") + "/"
    return any((os.path.realpath(p).rstrip("/") + "/").startswith(real) for p in paths)


def _within(path: str, folder: str) -> bool:
    return (path.rstrip("/") + "/").startswith(folder.rstrip("/") + "/")


def _beneath(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd), 12)
        seccomp.syscall(
            "landlock_add_rule", ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint(0)
        )
    finally:
        os.close(fd)
