"""The worker's seccomp filter, and the syscall numbers it names.

What it refuses, in which mode, is summed up in ``walls.py``'s docstring (the walls
together); each list below says why. ``walls.py`` makes its few calls by number
(landlock, ``mount_setattr``) through ``syscall``. Stdlib only: the launcher
(``sandbox.py``, run by path) loads this file by path too, before ``walls.py``.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from _collections_abc import Callable  # already loaded by os: no import cost

# -- syscall numbers ------------------------------------------------------------------------------

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
        "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280, "bind": 49,
        "listen": 50, "socketpair": 53, "kill": 62, "tkill": 200, "tgkill": 234,
        "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424,
        "pidfd_open": 434, "fcntl": 72, "ioctl": 16,
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
        "utimensat": 88, "bind": 200, "listen": 201, "socketpair": 199, "kill": 129,
        "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "pidfd_send_signal": 424, "pidfd_open": 434, "fcntl": 25, "ioctl": 29,
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
# where no read-only world keeps the user's files from the worker (no mount namespace, or
# its read-only remount refused), no landlock right covers a file's mode or its times and
# an owner needs no capability: the user's files could be made setuid, open to every user,
# unreadable by their owner, ``r-x`` (a run-records folder no later check can write), and
# their times set back (a staleness check keyed on the mtime of the user's problem, index
# or run records fooled). No argument tells the worker's own file from the user's (a path
# behind a pointer, an fd opened for reading), and ``shutil.copy``/``copy2`` set the copy's
# mode and times and raise on an error, so each such call is skipped and reports success:
# no file's mode or times change (a worker's own new files keep the mode they were made
# with, its umask's)
MODE_SETTERS = ("chmod", "fchmod", "fchmodat", "fchmodat2")
TIME_SETTERS = ("utime", "utimes", "futimesat", "utimensat")
# a socket the worker serves: without a network namespace an abstract name (or a path)
# that another program of the user expects to own could be taken, or connections taken in.
# The CUDA driver serves one of its own while it starts (an abstract
# ``cuda-uvmfd-<netns>-<pid>``; with bind refused ``cudaGetDeviceCount`` fails with error
# 304), so a worker's filter may leave these two out (``serving``) and the worker refuse
# them itself once CUDA is up, before the candidate is imported (``refuse_serving``)
SERVING = ("bind", "listen")
# where landlock does not scope signals (ABI < 6) and no PID namespace hides the user's
# other processes: a signal only to the worker's own process (its threads: tgkill of its
# own thread group), by PID, never to a group (0, negative) or through a pidfd; nor an
# owner set for a file's SIGIO/SIGURG but itself (fcntl F_SETOWN, ioctl FIOSETOWN)
SIGNALLERS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
PIDFD_SIGNALLERS = ("pidfd_send_signal", "pidfd_open")
LANDLOCK_SCOPES_SIGNALS = 6  # the landlock ABI from which a domain's signals are scoped
_F_SETOWN, _F_SETOWN_EX = 8, 15
_FIOSETOWN, _SIOCSPGRP = 0x8901, 0x8902
_NS_FLAGS = 0x10000000 | 0x20000000 | 0x00020000 | 0x40000000 | 0x08000000 | 0x04000000
_NS_FLAGS |= 0x02000000  # NEWUSER NEWPID NEWNS NEWNET NEWIPC NEWUTS NEWCGROUP
_EPERM, _EINVAL, _ENOSYS = 1, 22, 38
_AF_UNIX, _SOCK_DGRAM = 1, 2

_libc_handle: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL:
    global _libc_handle
    if _libc_handle is None:
        _libc_handle = ctypes.CDLL(None, use_errno=True)
    return _libc_handle


def syscall(name: str, *args: object) -> int:
    """Call the syscall ``name`` by its number on this architecture; raises ``OSError``."""
    nr = _NR.get(_ARCH, {}).get(name)
    if nr is None:
        raise OSError(_ENOSYS, f"{name}: no syscall number for {_ARCH}")
    fn = libc().syscall
    fn.restype = ctypes.c_long
    result = int(fn(ctypes.c_long(nr), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{name}: {os.strerror(code)}")
    return result


# -- seccomp (every mode) --------------------------------------------------------------------

_LD_ABS, _JEQ, _JGE, _JSET, _AND, _RET = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000


def _arg(i: int, high: bool = False) -> int:
    return 16 + 8 * i + (4 if high else 0)


def program(
    network: bool = True,
    host_files: bool = False,
    host_processes: bool = False,
    abi: int = 0,
    pid: int | None = None,
    serving: bool = False,
) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; ``network=False`` leaves sockets and
    IPC objects alone (a profiler's own processes talk to each other over them);
    ``host_files`` (no read-only world keeps the user's files from it: ``none`` mode, or
    a namespace mode whose read-only remount was refused) skips every call that sets a
    file's mode or times (success returned, nothing changed);
    ``host_processes`` (no PID namespace separates it from the machine's processes) keeps
    limits, priorities and CPU affinity to the worker's own process, and where the
    landlock ABI ``abi`` in force does not scope signals, signals to process ``pid`` (this
    one where None: the filter outlives an exec); ``serving`` leaves bind and listen to a
    later ``refuse_serving``."""
    nr = _NR[_ARCH]
    signals = host_processes and abi < LANDLOCK_SCOPES_SIGNALS
    own = os.getpid() if pid is None else pid
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
        op(_JEQ, nr["socketpair"], "socket", 0)  # a datagram pair sends to any name
        op(_JEQ, nr["connect"], "eperm", 0)
        op(_JEQ, nr["sendto"], "sendto", 0)
        for name in (*(() if serving else SERVING), *IPC_DENIED):
            op(_JEQ, nr[name], "eperm", 0)
    if host_processes:
        for name in SELF_ONLY:
            op(_JEQ, nr[name], "self", 0)
        op(_JEQ, nr["prlimit64"], "prlimit", 0)
        op(_JEQ, nr["setpriority"], "priority", 0)
        op(_JEQ, nr["ioprio_set"], "ioprio", 0)
    if host_files:
        for name in (*MODE_SETTERS, *TIME_SETTERS):
            if name in nr:
                op(_JEQ, nr[name], "skip", 0)
    if signals:
        for name in SIGNALLERS:
            op(_JEQ, nr[name], "signal", 0)
        for name in PIDFD_SIGNALLERS:
            op(_JEQ, nr[name], "eperm", 0)
        op(_JEQ, nr["fcntl"], "fcntl", 0)
        op(_JEQ, nr["ioctl"], "ioctl", 0)
    op(_RET, _RET_ALLOW)
    label("clone")
    op(_LD_ABS, _arg(0))
    op(_JSET, _NS_FLAGS, "eperm", "allow")
    if network:
        label("socket")  # (domain, type, ...) of socket and socketpair
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
    if host_processes:
        _process_rules(op, label)
    if signals:
        # a PID is an int: the kernel reads the argument's low 32 bits, as the filter does
        label("signal")  # (pid or tgid, ...)
        op(_LD_ABS, _arg(0))
        op(_JEQ, own, "allow", "eperm")
        label("fcntl")  # (fd, cmd, arg): F_SETOWN of 0 (none) or itself; never F_SETOWN_EX
        op(_LD_ABS, _arg(1))
        op(_JEQ, _F_SETOWN_EX, "eperm", 0)
        op(_JEQ, _F_SETOWN, 0, "allow")
        op(_LD_ABS, _arg(2))
        op(_JEQ, 0, "allow", 0)
        op(_JEQ, own, "allow", "eperm")
        label("ioctl")  # (fd, request, ...): no owner set through a pointer
        op(_LD_ABS, _arg(1))
        op(_JEQ, _FIOSETOWN, "eperm", 0)
        op(_JEQ, _SIOCSPGRP, "eperm", "allow")
    label("allow")
    op(_RET, _RET_ALLOW)
    label("eperm")
    op(_RET, _RET_ERRNO | _EPERM)
    label("enosys")
    op(_RET, _RET_ERRNO | _ENOSYS)
    label("skip")  # not run, and 0 returned: success that changes nothing
    op(_RET, _RET_ERRNO | 0)
    return _assemble(code)


def _process_rules(op: Callable[..., None], label: Callable[[str], None]) -> None:
    """The ``host_processes`` rules' arguments: limits, priorities and CPUs of others."""
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


def _assemble(code: list[tuple[str, int, object, object, int]]) -> list[tuple[int, int, int, int]]:
    """Labels resolved into the one-byte relative jumps of classic BPF."""
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


def supported() -> bool:
    return _ARCH in _NR


def install(
    network: bool = True,
    host_files: bool = False,
    host_processes: bool = False,
    abi: int = 0,
    serving: bool = False,
) -> bool:
    """Install the filter (``program``) on this process (and every thread: ``TSYNC``) for
    this process's PID, which an exec keeps; ``abi``: the landlock ABI the worker's
    landlock layer holds. False where this architecture has no table here. Needs
    ``no_new_privs`` first."""
    if _ARCH not in _NR:
        return False
    _load(program(network, host_files, host_processes, abi, serving=serving))
    return True


def refuse_serving() -> bool:
    """A second filter on this process and its threads: ``bind`` and ``listen`` refused
    (EPERM). A worker whose first filter left them out (``serving``) calls it once the
    CUDA driver has served its own socket, before any candidate code runs; filters only
    add up, so nothing undoes it. False where this architecture has no table here."""
    if _ARCH not in _NR:
        return False
    nr = _NR[_ARCH]
    libc().prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS (the sandbox set it already)
    _load(
        [
            (_LD_ABS, 0, 0, 4),
            (_JEQ, 0, 3, _AUDIT_ARCH[_ARCH]),  # another ABI: the first filter's to answer
            (_LD_ABS, 0, 0, 0),
            (_JEQ, 2, 0, nr["bind"]),
            (_JEQ, 1, 0, nr["listen"]),
            (_RET, 0, 0, _RET_ALLOW),
            (_RET, 0, 0, _RET_ERRNO | _EPERM),
        ]
    )
    return True


def _load(instructions: list[tuple[int, int, int, int]]) -> None:
    raw = b"".join(struct.pack("HBBI", c, jt, jf, k) for c, jt, jf, k in instructions)
    filt = ctypes.create_string_buffer(raw, len(raw))
    prog = struct.pack("HxxxxxxQ", len(instructions), ctypes.addressof(filt))
    prog_buf = ctypes.create_string_buffer(prog, len(prog))
    # SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_TSYNC
    syscall("seccomp", ctypes.c_uint(1), ctypes.c_uint(1), prog_buf)
