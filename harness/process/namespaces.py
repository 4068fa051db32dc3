"""The kernel's primitives a worker's namespaces are built from, for the launcher
(``sandbox.py``): new user, PID, mount and network namespaces with our own ids mapped, a
PID namespace's ``/proc``, private temp folders with the paths a worker needs bound back
in, the capabilities a worker never keeps; and the probe of which modes this machine
allows (``sandbox.py --probe``).

Stdlib only, loaded by path beside ``seccomp.py``, ``walls.py`` and ``lifetime.py`` when
the launcher runs as ``python -I -S sandbox.py`` (which loads those first, under the
names this file looks them up by).
"""

from __future__ import annotations

import ctypes
import os
import sys

try:  # imported as harness.process.namespaces
    from . import lifetime, seccomp, walls
except ImportError:  # loaded by path by the launcher, which loaded these three first
    lifetime = sys.modules["ctxkernel_lifetime"]
    seccomp = sys.modules["ctxkernel_seccomp"]
    walls = sys.modules["ctxkernel_walls"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 1 << 18
PR_SET_PDEATHSIG = 1
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_READ = 23
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAP_VERSION_3 = 0x20080522
O_PATH = getattr(os, "O_PATH", 0o10000000)
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
PRIVATE_TMP_OPTIONS = b"mode=1777,size=1g"
# Capabilities the worker never keeps: mounting (and unmounting our /proc), ptrace and
# process_vm_readv, raw I/O (/proc/kcore, /dev/mem), modules, BPF and perf (both read
# other processes' memory), open_by_handle_at, device nodes, kexec, kernel pointers.
# And what a root worker outside a user namespace would otherwise hold over the machine:
# the clocks every timing reads (``adjtimex`` slews them by 10%), realtime priority (a
# spinning child starves the reference's worker) and others' priorities, limits beyond
# their maximum, the owner, mode, file capabilities and immutability of any file (no
# landlock right covers them), other users' identities and processes, the host's network
# interfaces (their ioctls work on any socket, a Unix one included), security modules.
DROPPED_CAPS = {
    "CAP_CHOWN": 0,
    "CAP_DAC_READ_SEARCH": 2,
    "CAP_FOWNER": 3,
    "CAP_KILL": 5,
    "CAP_SETGID": 6,
    "CAP_SETUID": 7,
    "CAP_LINUX_IMMUTABLE": 9,
    "CAP_NET_ADMIN": 12,
    "CAP_SYS_MODULE": 16,
    "CAP_SYS_RAWIO": 17,
    "CAP_SYS_PTRACE": 19,
    "CAP_SYS_ADMIN": 21,
    "CAP_SYS_BOOT": 22,
    "CAP_SYS_NICE": 23,
    "CAP_SYS_RESOURCE": 24,
    "CAP_SYS_TIME": 25,
    "CAP_MKNOD": 27,
    "CAP_AUDIT_CONTROL": 30,
    "CAP_SETFCAP": 31,
    "CAP_MAC_OVERRIDE": 32,
    "CAP_MAC_ADMIN": 33,
    "CAP_SYSLOG": 34,
    "CAP_PERFMON": 38,
    "CAP_BPF": 39,
    "CAP_CHECKPOINT_RESTORE": 40,
}
SYS_ADMIN = 21
libc = seccomp.libc  # one handle of the C library for the launcher's files


def check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def prctl(option: int, arg: int) -> int:
    return int(libc().prctl(option, arg, 0, 0, 0))


def unshare(mode: str, net: bool = True) -> None:
    """New PID and mount namespaces, a network one with ``net`` (loopback up) and a user
    one in ``userns`` mode; our own ids mapped, mounts private."""
    flags = CLONE_NEWPID | CLONE_NEWNS | (CLONE_NEWNET if net else 0)
    flags |= CLONE_NEWUSER if mode == "userns" else 0
    uid, gid = os.geteuid(), os.getegid()
    names = "CLONE_NEWUSER|" if mode == "userns" else ""
    names += "CLONE_NEWPID|CLONE_NEWNS" + ("|CLONE_NEWNET" if net else "")
    check(libc().unshare(flags), f"unshare({names})")
    if mode == "userns":  # map our own ids (the one mapping a process may write for itself)
        # A non-dumpable process's /proc/self belongs to root, so a non-root user could not
        # write its own maps (a warm template is non-dumpable, and its forks inherit that):
        # dumpable for the three writes, as before after them.
        was = prctl(PR_GET_DUMPABLE, 0)
        if was != 1:
            prctl(PR_SET_DUMPABLE, 1)
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                               ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
        finally:
            if was != 1:
                prctl(PR_SET_DUMPABLE, 0)
    check(libc().mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


def mount_proc() -> None:
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    check(libc().mount(b"proc", b"/proc", b"proc", flags, None), "mount -t proc proc /proc")


def drop_caps(keep_admin: bool) -> None:
    """Drop the dangerous capabilities from the bounding set (what an exec'd root may
    hold); needs CAP_SETPCAP, which a non-root process without a namespace lacks and
    does not need: it holds no capability anyway."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 40
    for cap in DROPPED_CAPS.values():
        if cap <= last and not (keep_admin and cap == SYS_ADMIN):
            prctl(PR_CAPBSET_DROP, cap)


def close_fds(keep: set[int]) -> None:
    start = 3
    for fd in sorted(k for k in keep if k >= 3):
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 20)


def caps_mask(read_bounding: bool) -> int:
    """The bounding set as a bit mask (what an exec'd root keeps)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 40
    mask = 0
    for cap in range(last + 1):
        if not read_bounding or prctl(PR_CAPBSET_READ, cap) == 1:
            mask |= 1 << cap
    return mask


def capset(mask: int) -> None:
    header = (ctypes.c_uint32 * 2)(CAP_VERSION_3, 0)
    lo, hi = mask & 0xFFFFFFFF, (mask >> 32) & 0xFFFFFFFF
    data = (ctypes.c_uint32 * 6)(lo, lo, 0, hi, hi, 0)  # effective, permitted, inheritable
    check(int(libc().capset(header, data)), "capset")


def drop_live_caps() -> None:
    """What an exec would do to the capabilities (no file capabilities, no ambient set):
    none for a non-root user id, the bounding set's for root. For a worker that is not
    exec'd (forked from a template)."""
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass
    mask = caps_mask(read_bounding=True) if os.geteuid() == 0 else 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("CapPrm:"):
                mask &= int(line.split()[1], 16)
    capset(mask)


def private_tmp(keep: list[str]) -> None:
    """A fresh tmpfs on each shared temp folder, with the ``keep`` paths under it bound
    back in (opened first, as O_PATH descriptors, then bound from ``/proc/self/fd``)."""
    lib = libc()
    done: set[str] = set()
    for folder in PRIVATE_TMP:
        if not os.path.isdir(folder):
            continue
        real = os.path.realpath(folder)
        if real in done:
            continue
        done.add(real)
        wanted = [os.path.realpath(p) for p in keep]
        if any(real == p or real.startswith(p.rstrip("/") + "/") for p in wanted):
            continue  # a kept path holds the whole folder
        inside = sorted({p for p in wanted if p.startswith(real.rstrip("/") + "/")})
        inside = [p for p in inside if not any(p.startswith(q + "/") for q in inside)]
        held = []
        for path in inside:
            try:
                held.append((path, os.open(path, O_PATH), os.path.isdir(path)))
            except OSError:
                continue
        flags = MS_NOSUID | MS_NODEV
        check(
            lib.mount(b"tmpfs", real.encode(), b"tmpfs", flags, PRIVATE_TMP_OPTIONS),
            f"mount -t tmpfs tmpfs {real}",
        )
        for path, fd, is_dir in held:
            if is_dir:
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            source = f"/proc/self/fd/{fd}".encode()
            check(lib.mount(source, path.encode(), None, MS_BIND | MS_REC, None), f"bind {path}")
            os.close(fd)


def probe_mode(mode: str, net: bool, hidden: list[str] | None = None) -> dict[str, object]:
    """What ``mode`` gives here: ``{"error": ...}`` when its namespaces cannot be made (with
    a network namespace when ``net``), else which walls its worker can have: ``private``
    temp folders, a device-only ``dev``, a read-only tree (``ro``), and which of the
    ``hidden`` folders (the parent's) no tmpfs could cover (``uncovered``: a worker keeps
    them unread with landlock instead)."""
    import json

    rd, wr = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(rd)
        doc: dict[str, object] = {}
        try:
            unshare(mode, net)
            if net:
                walls.loopback_up()
            init = os.fork()
            if init == 0:
                found: dict[str, object] = {}
                try:
                    mount_proc()
                    if os.getpid() != 1 or not os.path.isfile("/proc/self/status"):
                        found["error"] = "the namespace's /proc is not its own"
                except OSError:
                    found["error"] = "mount -t proc proc /proc: refused"
                if "error" not in found:
                    found["pid_max"] = lifetime.cap_pid_namespace(lifetime.task_cap())
                    covers = [*(hidden or ()), *walls.reaching(list(hidden or ()))]
                    for wall, build in (
                        ("private", lambda: private_tmp([])),
                        ("dev", walls.minimal_dev),
                        ("uncovered", lambda: walls.hide(covers)),
                        ("ro", lambda: walls.read_only_world(["/tmp"])),
                    ):
                        try:
                            built = build()
                            found[wall] = built if wall == "uncovered" else True
                        except OSError as exc:
                            found[wall] = False
                            found[f"{wall}_error"] = str(exc)
                            if wall == "private":
                                break
                os.write(wr, json.dumps(found).encode())
                os._exit(0)
            os.waitpid(init, 0)
        except OSError as exc:
            doc = {"error": str(exc.strerror or exc)}
            os.write(wr, json.dumps(doc).encode())
        os._exit(0)
    os.close(wr)
    chunks = []
    while chunk := os.read(rd, 4096):
        chunks.append(chunk)
    os.close(rd)
    os.waitpid(child, 0)
    try:
        got = json.loads(b"".join(chunks).decode(errors="replace") or "{}")
    except ValueError:
        got = {}
    if not got:
        got = {"error": "the namespace's init died"}
    got["net"] = net and "error" not in got
    return dict(got)


def report_probe(hidden: list[str] | None = None) -> None:
    """Print which modes work here, with the walls each can build (``sandbox.py --probe
    [HIDDEN...]``) and the ``hidden`` folders each could not cover."""
    available: list[str] = []
    private: list[str] = []
    errors: dict[str, str] = {}
    found: dict[str, list[str]] = {}
    uncovered: dict[str, list[str]] = {}
    for mode in ("userns", "pidns"):
        if mode == "pidns" and os.geteuid() != 0:
            errors[mode] = "needs root"
            continue
        got = probe_mode(mode, net=True, hidden=hidden)
        if "error" in got:  # a machine that makes the other namespaces but not a network one
            got = probe_mode(mode, net=False, hidden=hidden)
        if "error" in got:
            errors[mode] = str(got["error"])
            continue
        available.append(mode)
        if got.get("private"):
            private.append(mode)
        found[mode] = [w for w in ("net", "dev", "ro", "pid_max") if got.get(w)]
        uncovered[mode] = [str(p) for p in got.get("uncovered") or []]  # type: ignore[attr-defined]
        refused = [f"{w}: {got[w + '_error']}" for w in ("dev", "ro") if f"{w}_error" in got]
        if refused:
            errors[f"{mode} walls"] = "; ".join(refused)
    import json

    doc = {
        "available": available,
        "errors": errors,
        "private_tmp": private,
        "walls": found,
        "uncovered": uncovered,
        "landlock": walls.landlock_abi(),
        "seccomp": seccomp.supported(),
    }
    sys.stdout.write(json.dumps(doc) + "\n")
