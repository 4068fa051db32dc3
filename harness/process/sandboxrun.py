"""Sandbox run: any command, run exactly as a candidate's worker is run, for audits.

``ctxkernel sandbox run [--device D] [--backend B] -- CMD ARGS...`` starts ``CMD`` through
the same launcher, namespaces, mounts, walls (``walls.py``), limits and scrubbed
environment as a check's worker, in a fresh temp folder that is its working directory
and the only folder it may write, and prints its output and exit status. ``--explain``
runs a built-in probe the same way instead and reports what a worker can see, write and
reach. Operators audit the sandbox with their own probes through it; the tests run
native escape attempts through it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import cleanup, sandbox
from .workerenv import scrubbed_env

# What the probe tries, run inside the sandbox as a worker would be; it prints one JSON
# document. Stdlib only: it must run before anything a candidate could import.
_PROBE = r"""
import errno, json, os, socket, sys
doc = {"uid": os.getuid(), "pid": os.getpid()}
doc["processes_visible"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
status = {}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("NoNewPrivs", "Seccomp", "CapEff", "CapBnd"):
        status[key] = value.strip()
doc["status"] = status
mounts = []
for line in open("/proc/self/mountinfo"):
    parts = line.split()
    mounts.append({"at": parts[4], "options": parts[5]})
doc["mounts"] = mounts
doc["dev"] = sorted(os.listdir("/dev"))
writes = {}
for path in json.loads(sys.argv[1]):
    probe = os.path.join(path, ".ctxkernel-sandbox-probe")
    try:
        with open(probe, "w") as fh:
            fh.write("x")
        os.unlink(probe)
        writes[path] = "writable"
    except OSError as exc:
        writes[path] = errno.errorcode.get(exc.errno or 0, str(exc))
doc["writes"] = writes
net = {}
try:
    net["interfaces"] = [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]]
except OSError as exc:
    net["interfaces"] = str(exc)
for name, family, kind, address in (
    ("tcp 127.0.0.1:22", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 22)),
    ("udp socket", socket.AF_INET, socket.SOCK_DGRAM, None),
    ("unix stream connect", socket.AF_UNIX, socket.SOCK_STREAM, "/nonexistent.sock"),
):
    try:
        s = socket.socket(family, kind)
        if address is not None:
            s.settimeout(1)
            s.connect(address)
        net[name] = "allowed"
        s.close()
    except OSError as exc:
        net[name] = errno.errorcode.get(exc.errno or 0, str(exc))
doc["network"] = net
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.ptrace(16, os.getppid(), 0, 0)  # PTRACE_ATTACH the parent
    doc["ptrace_parent"] = "allowed" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
except OSError as exc:
    doc["ptrace_parent"] = str(exc)
try:
    open("/proc/%d/environ" % os.getppid(), "rb").read(1)
    doc["parent_environ"] = "readable"
except OSError as exc:
    doc["parent_environ"] = errno.errorcode.get(exc.errno or 0, str(exc))
print(json.dumps(doc))
"""


def audit_paths(workdir: Path) -> list[str]:
    """The folders whose writability the probe reports: its own, then the user's and the
    tool's (home, caches, runs, the harness, the interpreter's packages)."""
    from ..paths import cache_dir, config_dir, default_runs_dir

    paths = [
        str(workdir),
        "/tmp",
        str(Path.home()),
        str(cache_dir()),
        str(default_runs_dir()),
        str(config_dir()),
        str(Path(__file__).resolve().parents[1]),
        *[p for p in sys.path if p.endswith(("site-packages", "dist-packages"))],
    ]
    return list(dict.fromkeys(paths))


def run_sandboxed(
    argv: list[str],
    device: str = "cpu",
    backend: str = "",
    capture: bool = False,
    extra_env: dict[str, str] | None = None,
    binds: list[str] | None = None,
) -> tuple[int, str, str, Path]:
    """Run ``argv`` as a worker is run (``binds``: more paths it may read, as a check's
    worker reads its problem); returns (exit status, stdout, stderr, the temp folder it
    ran in — removed already). Output goes to ours unless ``capture``."""
    isolation = sandbox.isolation()
    if isolation.mode == "none":
        sandbox.harden_parent()
    root = cleanup.temp_root("ctxkernel-sandbox-")
    try:
        workdir = root / "work"
        workdir.mkdir()
        env_extra: dict[str, str] = dict(extra_env or {})
        if backend:
            from ..backends import worker_env_for

            env_extra = {**worker_env_for(backend, device), **env_extra}
        env = scrubbed_env(workdir, env_extra)
        extra = [os.path.realpath(b) for b in binds or ()]
        needs = sandbox.worker_paths(workdir, *extra)
        keep = needs if isolation.private_tmp else None
        pid_r, pid_w = os.pipe()
        cmd = sandbox.command(
            isolation.mode,
            argv,
            pid_w,
            keep_paths=keep,
            writable=str(workdir),
            hidden=sandbox.parent_folders([workdir, *extra]),
            walls_on=isolation.walls,
            needs=needs,
            # the CUDA driver serves a socket as it starts (seccomp.SERVING); a network
            # namespace of its own keeps an abstract name from the machine's: without one
            # (none mode) bind and listen stay refused, and CUDA with them
            serving_later=device == "cuda"
            and "net" in isolation.walls
            and isolation.mode != "none",
        )
        out = subprocess.PIPE if capture else None
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            pass_fds=(pid_w,),
            start_new_session=True,
        )
        os.close(pid_w)
        cleanup.track(proc.pid)
        sandbox.read_pid(pid_r, 60.0)
        stdout, stderr = proc.communicate()
        cleanup.untrack(proc.pid)
        return (
            proc.returncode,
            (stdout or b"").decode(errors="replace"),
            (stderr or b"").decode(errors="replace"),
            workdir,
        )
    finally:
        cleanup.remove_root(root)


def explain(device: str = "cpu", backend: str = "") -> dict[str, Any]:
    """What a worker can see, write and reach here: the probe's report, with the mode and
    the layers the parent put in force."""
    isolation = sandbox.isolation()
    workdir_note = "<the worker's temp folder>"
    root = cleanup.temp_root("ctxkernel-sandbox-paths-")
    try:
        paths = audit_paths(root / "work")
    finally:
        cleanup.remove_root(root)
    code, out, err, _ = run_sandboxed(
        [sys.executable, "-I", "-c", _PROBE, json.dumps(paths[1:])],
        device,
        backend,
        capture=True,
    )
    try:
        seen = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        seen = {"error": f"the probe failed (status {code}): {err.strip()[-500:]}"}
    # the probe tried its own folder under its own name: report it under a stable one
    writes = dict(seen.get("writes") or {})
    seen["writes"] = {workdir_note: "writable", **writes} if "error" not in seen else {}
    return {"type": "sandbox", "isolation": isolation.as_json(), "worker": seen}


def render_explain(doc: dict[str, Any]) -> str:
    """The explanation as lines a person reads."""
    iso = doc["isolation"]
    worker = doc["worker"]
    lines = [f"mode: {iso['mode']}" + (f" ({iso['why']})" if iso.get("why") else "")]
    lines += [f"  {k}: {v}" for k, v in iso.get("layers", {}).items()]
    if "error" in worker:
        return "\n".join([*lines, f"probe: {worker['error']}"])
    lines.append(f"worker: uid {worker['uid']}, pid {worker['pid']}")
    lines.append(f"  processes it sees: {len(worker['processes_visible'])}")
    lines.append(f"  status: {worker['status']}")
    writable = [m["at"] for m in worker["mounts"] if m["options"].split(",")[0] == "rw"]
    lines.append(f"  read-write mounts: {', '.join(writable) or 'none'}")
    lines.append(f"  /dev: {' '.join(worker['dev'])}")
    lines.append("  writes:")
    lines += [f"    {path}: {what}" for path, what in worker["writes"].items()]
    lines.append("  network:")
    lines += [f"    {k}: {v}" for k, v in worker["network"].items()]
    lines.append(f"  ptrace its parent: {worker['ptrace_parent']}")
    lines.append(f"  read its parent's environment: {worker['parent_environ']}")
    return "\n".join(lines)
