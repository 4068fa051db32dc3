"""Walls: the kernel-enforced layers around a candidate's worker, beyond its namespaces.

``sandbox.py`` makes the namespaces and forks the worker; this module holds what the
worker's process then does to itself before any candidate code runs, and what its
launcher does for it:

- **a read-only world** (namespace modes): every mount of the worker's mount namespace
  is made read-only, recursively (``mount_setattr``), except its own temp folder and
  the private ``/tmp``, ``/var/tmp`` and ``/dev/shm``; the folders the parent keeps for
  itself (check-server sockets, run records, agent state, caches) are covered by an
  empty read-only tmpfs; ``/dev`` is a tmpfs holding only the device nodes a GPU program
  needs. The worker keeps no capability to remount (``CAP_SYS_ADMIN`` is dropped from
  its bounding set and the seccomp filter refuses every mount call).
- **its own network namespace** (namespace modes): loopback up, nothing listening.
- **landlock** (every mode, where the kernel has it): writes only beneath the worker's
  temp folders and to the device nodes it needs; in ``none`` mode, where no tmpfs can
  cover them, no file of the parent's own folders (nor of other checks' temp folders)
  opened, and no file under ``/dev`` but those device nodes (a raw disk, a terminal,
  another process's ``/dev/shm``); no TCP bind or connect; no abstract Unix socket or
  signal reaching outside its own domain; no ptrace of (nor ``/proc/<pid>/mem`` or
  ``environ`` of) a process outside it.
- **seccomp** (every mode, x86-64 and arm64): no ptrace, ``process_vm_*``, mount calls,
  ``unshare``/``setns``/namespace clones, bpf, ``perf_event_open``, keyrings, kexec,
  modules, io_uring (which would bypass the filter), file handles, ``pidfd_getfd``;
  no socket but a Unix stream socket, no ``connect``, no ``sendto`` an address; no
  System V IPC or POSIX message queue (named machine-wide); no extended attribute set or
  removed (no landlock right covers them: the user's files untagged). In ``none`` mode, where
  other processes have PIDs it can name: limits, priorities and CPUs set for itself
  only, and no file made setuid, setgid, writable by every user or unreadable by its owner.
- **a subreaper** (``none`` mode, where no PID namespace ends the worker's
  descendants): the launcher adopts every orphan of the worker's tree and kills them all
  when the worker ends, ``setsid`` or not.
- **a process cap** (every mode): the worker's tree holds at most ``task_cap()`` processes
  and threads at once. The launcher counts them (every 100 ms, every 10 ms where no kernel
  limit holds) and ends the whole tree past the cap, with its reason; beneath that the
  kernel refuses the fork where it can: a PID namespace's own ``pid_max`` (Linux 6.14; root
  too), RLIMIT_NPROC for a user other than root (the kernel spares root; without a user
  namespace it counts every process of the user, so it is set to what the user holds plus
  the cap). Root in ``none`` mode (no cgroups delegated) has the count alone.

Each function returns what it put in force, so the verdict can say which layers held.
This file is stdlib only and imports in a few milliseconds: the launcher loads it by
path (``sandbox.py`` runs as ``python -I -S sandbox.py``).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

# -- syscalls ------------------------------------------------------------------------------

_ARCH = platform.machine()
_NR: dict[str, dict[str, int]] = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165,
        "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
        "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248,
        "request_key": 249, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "pidfd_getfd": 438, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "name_to_handle_at": 303,
        "open_by_handle_at": 304, "kcmp": 312, "process_madvise": 440, "swapon": 167,
        "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179, "syslog": 103,
        "userfaultfd": 323, "clone3": 435, "clone": 56, "socket": 41, "connect": 42,
        "sendto": 44, "seccomp": 317, "landlock_create_ruleset": 444,
        "landlock_add_rule": 445, "landlock_restrict_self": 446,
        "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
        "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70,
        "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "prlimit64": 302,
        "setpriority": 141, "ioprio_set": 251, "sched_setaffinity": 203,
        "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197,
        "lremovexattr": 198, "fremovexattr": 199, "setxattrat": 463, "removexattrat": 466,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "mount": 40,
        "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268,
        "bpf": 280, "perf_event_open": 241, "keyctl": 219, "add_key": 217,
        "request_key": 218, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "pidfd_getfd": 438, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "name_to_handle_at": 264,
        "open_by_handle_at": 265, "kcmp": 272, "process_madvise": 440, "swapon": 224,
        "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60, "syslog": 116,
        "userfaultfd": 282, "clone3": 435, "clone": 220, "socket": 198, "connect": 203,
        "sendto": 206, "seccomp": 277, "landlock_create_ruleset": 444,
        "landlock_add_rule": 445, "landlock_restrict_self": 446,
        "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190,
        "semop": 193, "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189,
        "msgrcv": 188, "msgctl": 187, "mq_open": 180, "mq_unlink": 181, "prlimit64": 261,
        "setpriority": 140, "ioprio_set": 30, "sched_setaffinity": 122,
        "sched_setscheduler": 119, "sched_setparam": 118, "sched_setattr": 274,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14,
        "lremovexattr": 15, "fremovexattr": 16, "setxattrat": 463, "removexattrat": 466,
    },
}  # fmt: skip
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# extended attributes set or removed: no landlock right covers them, so without a mount
# namespace (and as a second layer with one) a worker could tag or strip the user's files
# (``security.*`` labels, ``user.*`` metadata, ACLs); nothing honest sets one (shutil's
# copy2 ignores EPERM from them), and reading them stays allowed
XATTR_SETTERS = (
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "setxattrat", "removexattrat",
)  # fmt: skip
# refused outright (EPERM): reading or steering other processes, leaving or making
# namespaces and mounts, kernel objects shared beyond the worker, filter bypasses
DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "chroot", "unshare", "setns", "bpf", "perf_event_open", "keyctl", "add_key",
    "request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "pidfd_getfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "name_to_handle_at", "open_by_handle_at", "kcmp",
    "process_madvise", "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
    "userfaultfd", *XATTR_SETTERS,
)  # fmt: skip
# System V IPC and POSIX message queues: objects named machine-wide (no IPC namespace is
# made), so another process's shared memory, semaphores and queues would be reachable by
# id or name; a worker needs none (its shared memory is files under /dev/shm)
IPC_DENIED = (
    "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop",
    "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink",
)  # fmt: skip
# where other processes can be named by PID (no PID namespace): their limits, priority and
# CPUs are the worker's to change only for itself (PID 0); a reference timed in a sibling
# worker must not be reniced, pinned or limited
SELF_ONLY = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr")
# ... and no file of theirs (no landlock right covers a mode) made setuid, setgid or
# writable by every user, nor unreadable by its owner (a file the parent, the user and the
# next check could no longer open): (syscall, the mode's argument)
MODE_SETTERS = (("chmod", 1), ("fchmod", 1), ("fchmodat", 2), ("fchmodat2", 2))
_MODES_REFUSED = 0o6002  # S_ISUID | S_ISGID | S_IWOTH
_MODE_NEEDED = 0o400  # S_IRUSR
_NS_FLAGS = 0x10000000 | 0x20000000 | 0x00020000 | 0x40000000 | 0x08000000 | 0x04000000
_NS_FLAGS |= 0x02000000  # NEWUSER NEWPID NEWNS NEWNET NEWIPC NEWUTS NEWCGROUP
_EPERM, _EINVAL, _ENOSYS = 1, 22, 38
_AF_UNIX, _SOCK_DGRAM = 1, 2

_libc_handle: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _libc_handle
    if _libc_handle is None:
        _libc_handle = ctypes.CDLL(None, use_errno=True)
    return _libc_handle


def _syscall(name: str, *args: object) -> int:
    nr = _NR.get(_ARCH, {}).get(name)
    if nr is None:
        raise OSError(_ENOSYS, f"{name}: no syscall number for {_ARCH}")
    fn = _libc().syscall
    fn.restype = ctypes.c_long
    result = int(fn(ctypes.c_long(nr), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{name}: {os.strerror(code)}")
    return result


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
    if _libc().mount(source, target.encode(), fstype, flags, data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {target}: {os.strerror(code)}")


def _setattr(path: str, attr_set: int, attr_clr: int, recursive: bool) -> None:
    attr = struct.pack("QQQQ", attr_set, attr_clr, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    flags = _AT_RECURSIVE if recursive else 0
    _syscall(
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
    own state: check-server sockets, run records, caches). Returns those covered."""
    covered = []
    for path in paths:
        if path and os.path.isdir(path):
            try:
                _mount(b"tmpfs", path, b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, b"size=4k")
            except OSError:
                continue
            covered.append(path)
    return covered


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
        if exc.errno not in (_ENOSYS, _EINVAL):
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
    libc = _libc()
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
        return _syscall("landlock_create_ruleset", None, ctypes.c_size_t(0), ctypes.c_uint(1))
    except OSError:
        return 0


def landlock(
    writable: list[str], devices: list[str], hidden: list[str] | None = None
) -> dict[str, object]:
    """Writes only beneath ``writable`` and to ``devices``; with ABI 4 no TCP, with ABI 6
    no abstract Unix socket or signal outside the domain; with ``hidden`` (where no mount
    namespace can cover them) no file beneath those folders readable. Returns what it put
    in force (``{"abi": 0}`` where the kernel has no landlock)."""
    abi = landlock_abi()
    if abi < 1:
        return {"abi": 0}
    reads = _read_rules(hidden or [])
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
    ruleset = _syscall("landlock_create_ruleset", buf, ctypes.c_size_t(len(attr)), ctypes.c_uint(0))
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
        _syscall("landlock_restrict_self", ctypes.c_int(ruleset), ctypes.c_uint(0))
    finally:
        os.close(ruleset)
    done: dict[str, object] = {"abi": abi, "tcp": bool(net), "scoped": bool(scoped)}
    if reads:
        done["unreadable"] = sorted(_existing_dirs(hidden or []))
    return done


# a folder tree wider than this (a home folder of thousands of entries on the way to a
# hidden folder) is not worth one rule per entry: the walls then say nothing is hidden
_MAX_READ_RULES = 20000


def _existing_dirs(paths: list[str]) -> set[str]:
    return {os.path.realpath(p) for p in paths if p and os.path.isdir(p)}


def _read_rules(hidden: list[str]) -> dict[str, int]:
    """Landlock grants, never denies: to keep ``hidden`` folders unread, every entry of
    every folder on the way from ``/`` to one of them is granted reading (files) or
    reading beneath (folders), except the folders on the way, which may only be listed
    (an import scans the folders on ``sys.path``), and the hidden ones, which inherit
    only that listing. A link is granted as what it resolves to (never a way in), the
    worker's own folders by the caller. Empty when nothing is to be hidden or the tree is
    too wide."""
    targets = _existing_dirs(hidden)
    if not targets:
        return {}
    on_way: set[str] = set()
    for target in targets:
        path = target
        while True:
            on_way.add(path)
            if path == "/":
                break
            path = os.path.dirname(path)
    rules: dict[str, int] = {"/": _LL_READ_DIR}
    for folder in sorted(on_way - targets):
        rules.setdefault(folder, _LL_READ_DIR)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            real = os.path.realpath(os.path.join(folder, name))
            if real in on_way or any(_within(real, t) for t in targets):
                continue
            rules[real] = _LL_READ_FILE | _LL_READ_DIR if os.path.isdir(real) else _LL_READ_FILE
            if len(rules) > _MAX_READ_RULES:
                return {}
    return rules


def _within(path: str, folder: str) -> bool:
    return (path.rstrip("/") + "/").startswith(folder.rstrip("/") + "/")


def _beneath(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd), 12)
        _syscall(
            "landlock_add_rule", ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint(0)
        )
    finally:
        os.close(fd)


# -- seccomp (every mode) --------------------------------------------------------------------

_LD_ABS, _JEQ, _JGE, _JSET, _AND, _RET = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000


def _arg(i: int, high: bool = False) -> int:
    return 16 + 8 * i + (4 if high else 0)


def seccomp_program(network: bool = True, host: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; ``network=False`` leaves sockets and
    IPC objects alone (a profiler's own processes talk to each other over them); ``host``
    (no namespace separates the worker from the machine's processes and files) keeps
    limits, priorities and CPU affinity to the worker's own process and refuses the file
    modes that would open a file of the user's to every other user."""
    nr = _NR[_ARCH]
    code: list[tuple[str, int, object, object, int]] = []  # (op, code, jt, jf, k)

    def op(c: int, k: int, jt: object = 0, jf: object = 0) -> None:
        code.append(("op", c, jt, jf, k))

    def label(name: str) -> None:
        code.append(("label", 0, name, 0, 0))

    op(_LD_ABS, 4)
    op(_JEQ, _AUDIT_ARCH[_ARCH], 0, "enosys")
    op(_LD_ABS, 0)
    if _ARCH == "x86_64":
        op(_JGE, 0x40000000, "enosys", 0)  # the x32 ABI's numbers
    for name in DENIED:
        op(_JEQ, nr[name], "eperm", 0)
    op(_JEQ, nr["clone3"], "enosys", 0)  # its flags are behind a pointer: glibc falls back
    op(_JEQ, nr["clone"], "clone", 0)
    if network:
        op(_JEQ, nr["socket"], "socket", 0)
        op(_JEQ, nr["connect"], "eperm", 0)
        op(_JEQ, nr["sendto"], "sendto", 0)
        for name in IPC_DENIED:
            op(_JEQ, nr[name], "eperm", 0)
    if host:
        for name in SELF_ONLY:
            op(_JEQ, nr[name], "self", 0)
        op(_JEQ, nr["prlimit64"], "prlimit", 0)
        op(_JEQ, nr["setpriority"], "priority", 0)
        op(_JEQ, nr["ioprio_set"], "ioprio", 0)
        for name, index in MODE_SETTERS:
            if name in nr:
                op(_JEQ, nr[name], f"mode{index}", 0)
    op(_RET, _RET_ALLOW)
    label("clone")
    op(_LD_ABS, _arg(0))
    op(_JSET, _NS_FLAGS, "eperm", "allow")
    if network:
        label("socket")
        op(_LD_ABS, _arg(0))
        op(_JEQ, _AF_UNIX, 0, "eperm")
        op(_LD_ABS, _arg(1))
        op(_AND, 0xF)
        op(_JEQ, _SOCK_DGRAM, "eperm", "allow")
        label("sendto")
        op(_LD_ABS, _arg(4))
        op(_JEQ, 0, 0, "eperm")
        op(_LD_ABS, _arg(4, high=True))
        op(_JEQ, 0, "allow", "eperm")
    if host:
        for index in sorted({i for _, i in MODE_SETTERS}):
            label(f"mode{index}")
            op(_LD_ABS, _arg(index))
            op(_JSET, _MODES_REFUSED, "eperm", 0)
            op(_JSET, _MODE_NEEDED, "allow", "eperm")
        label("self")  # (pid, ...): 0, this process
        op(_LD_ABS, _arg(0))
        op(_JEQ, 0, "allow", "eperm")
        label("prlimit")  # (pid, resource, new, old): another process's only read
        op(_LD_ABS, _arg(0))
        op(_JEQ, 0, "allow", 0)
        op(_LD_ABS, _arg(2))
        op(_JEQ, 0, 0, "eperm")
        op(_LD_ABS, _arg(2, high=True))
        op(_JEQ, 0, "allow", "eperm")
        label("priority")  # (which, who, prio): PRIO_PROCESS of 0 (PRIO_USER is everyone's)
        op(_LD_ABS, _arg(0))
        op(_JEQ, 0, 0, "eperm")
        op(_LD_ABS, _arg(1))
        op(_JEQ, 0, "allow", "eperm")
        label("ioprio")  # (which, who, prio): IOPRIO_WHO_PROCESS of 0
        op(_LD_ABS, _arg(0))
        op(_JEQ, 1, 0, "eperm")
        op(_LD_ABS, _arg(1))
        op(_JEQ, 0, "allow", "eperm")
    label("allow")
    op(_RET, _RET_ALLOW)
    label("eperm")
    op(_RET, _RET_ERRNO | _EPERM)
    label("enosys")
    op(_RET, _RET_ERRNO | _ENOSYS)
    where: dict[str, int] = {}
    index = 0
    for kind, _, target, _, _ in code:
        if kind == "label":
            where[str(target)] = index
        else:
            index += 1
    program: list[tuple[int, int, int, int]] = []
    for kind, c, jt, jf, k in code:
        if kind == "label":
            continue
        here = len(program)
        offsets = [where[j] - here - 1 if isinstance(j, str) else int(j) for j in (jt, jf)]  # type: ignore[call-overload]
        if not all(0 <= o <= 255 for o in offsets):  # a BPF jump is one byte
            raise ValueError(f"seccomp filter too long: jump of {offsets} at {here}")
        program.append((c, offsets[0], offsets[1], k))
    return program


def seccomp_supported() -> bool:
    return _ARCH in _NR


def seccomp(network: bool = True, host: bool = False) -> bool:
    """Install the filter on this process (and every thread: ``TSYNC``); False where
    this architecture has no table here. Needs ``no_new_privs`` first."""
    if _ARCH not in _NR:
        return False
    program = seccomp_program(network, host)
    raw = b"".join(struct.pack("HBBI", c, jt, jf, k) for c, jt, jf, k in program)
    filt = ctypes.create_string_buffer(raw, len(raw))
    prog = struct.pack("HxxxxxxQ", len(program), ctypes.addressof(filt))
    prog_buf = ctypes.create_string_buffer(prog, len(prog))
    # SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_TSYNC
    _syscall("seccomp", ctypes.c_uint(1), ctypes.c_uint(1), prog_buf)
    return True
