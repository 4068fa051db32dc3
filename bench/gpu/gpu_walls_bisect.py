"""Which wall stops CUDA: a CUDA program started behind each wall alone, then behind all.

On a GPU machine where CUDA works outside the sandbox but not in a worker, each step
runs ``torch.cuda`` (device count, a tensor, a sum) in a fresh interpreter after the
process put up one layer of ``harness/process/walls.py`` on itself (seccomp; landlock
writes-only; landlock hiding folders; the device nodes alone under landlock), then the
full launcher in each isolation mode (``sandbox run --device cuda``), and prints one
line per step with CUDA's own error. Results as JSON under ``$OUT`` when set.

    python3 bench/gpu/gpu_walls_bisect.py       # about a minute on the H200
    ONLY=seccomp python3 bench/gpu/gpu_walls_bisect.py   # the seccomp steps alone
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CUDA = (
    "import torch\n"
    "n = torch.cuda.device_count()\n"
    "x = torch.ones(1024, device='cuda')\n"
    "print('cuda ok', n, float(x.sum()))\n"
)
WALL = (
    "import ctypes, os, sys, tempfile\n"
    "sys.path.insert(0, {root!r})\n"
    "from harness.process import seccomp, walls\n"
    "ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # no new privileges\n"
    "own = tempfile.mkdtemp()\n"
    "{setup}\n"
    "os.execv(sys.executable, [sys.executable, '-c', {cuda!r}])\n"
)
STEPS = {
    "plain": None,
    "no_new_privs": "pass",
    "seccomp": "seccomp.install(network=True, abi=walls.landlock_abi())",
    "seccomp_profiler": "seccomp.install(network=False, abi=walls.landlock_abi())",
    "landlock_writes": "walls.landlock([own], walls._device_nodes())",
    "landlock_hidden": "walls.landlock([own], walls._device_nodes(), [os.path.expanduser('~/.cache')])",
    # which seccomp rule refuses CUDA: each variant lifts one rule of the network group
    **{
        f"seccomp_without_{rule}": (
            "nr = dict(seccomp._NR[seccomp._ARCH]); "
            + "; ".join(f"nr[{n!r}] = 4095" for n in names)
            + "; seccomp._NR[seccomp._ARCH] = nr; "
            "seccomp.install(network=True, abi=walls.landlock_abi())"
        )
        for rule, names in {
            "socket": ["socket"],
            "socketpair": ["socketpair"],
            "connect": ["connect"],
            "sendto": ["sendto"],
            "bind": ["bind"],
            "listen": ["listen"],
            "ipc": [
                "shmget",
                "shmat",
                "shmctl",
                "shmdt",
                "semget",
                "semop",
                "semctl",
                "semtimedop",
                "msgget",
                "msgsnd",
                "msgrcv",
                "msgctl",
                "mq_open",
                "mq_unlink",
            ],
        }.items()
    },
    "landlock_and_seccomp": "walls.landlock([own], walls._device_nodes()); seccomp.install(abi=walls.landlock_abi())",
    # which write landlock refuses CUDA: each variant lets one more tree be written
    "landlock_plus_dev": "walls.landlock([own, '/dev'], walls._device_nodes())",
    "landlock_plus_tmp_shm": "walls.landlock([own, '/tmp', '/dev/shm'], walls._device_nodes())",
    "landlock_plus_proc": "walls.landlock([own, '/proc'], walls._device_nodes())",
    "landlock_plus_proc_self": "walls.landlock([own, f'/proc/{os.getpid()}'], walls._device_nodes())",
    "landlock_plus_proc_driver": "walls.landlock([own, '/proc/driver'], walls._device_nodes())",
    "landlock_plus_sys": "walls.landlock([own, '/sys'], walls._device_nodes())",
    "landlock_plus_home": "walls.landlock([own, os.path.expanduser('~')], walls._device_nodes())",
    "landlock_plus_root": "walls.landlock([own, '/'], walls._device_nodes())",
}


def run(argv: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"rc": None, "line": "timed out"}
    lines = (done.stdout + done.stderr).strip().splitlines()
    ok = any(line.startswith("cuda ok") for line in lines)
    tail = next((ln for ln in reversed(lines) if ln.strip()), "")
    return {"rc": done.returncode, "ok": ok, "line": tail[:300], "tail": lines[-12:]}


def main() -> None:
    results: dict[str, dict[str, object]] = {}
    from harness.process import walls

    print("device nodes:", walls._device_nodes(), "landlock ABI", walls.landlock_abi())
    strace = subprocess.run(["sh", "-c", "command -v strace"], capture_output=True, text=True)
    if strace.stdout.strip():  # the refused calls themselves, where strace is installed
        code = WALL.format(
            root=str(ROOT), setup="walls.landlock([own], walls._device_nodes())", cuda=CUDA
        )
        traced = subprocess.run(
            ["strace", "-f", "-e", "trace=%file,mknodat,ioctl", "-o", "/tmp/ll.strace",
             sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        denied = [
            ln for ln in Path("/tmp/ll.strace").read_text().splitlines()
            if "EACCES" in ln or "EPERM" in ln
        ]  # fmt: skip
        print("strace rc", traced.returncode, "refused:", *denied[:40], sep="\n  ")
    else:
        print("no strace here")
    only = os.environ.get("ONLY", "")  # a prefix: run those steps alone (ONLY=seccomp)
    for name, setup in STEPS.items():
        if only and not name.startswith(only):
            continue
        if setup is None:
            argv = [sys.executable, "-c", CUDA]
        else:
            code = WALL.format(root=str(ROOT), setup=setup, cuda=CUDA)
            argv = [sys.executable, "-c", code]
        results[name] = run(argv)
        print(f"{name:22s} {results[name]}", flush=True)
    if only:
        return
    from harness.process.workerenv import scrubbed_env

    work = Path(tempfile.mkdtemp())
    results["scrubbed_env"] = run([sys.executable, "-c", CUDA], scrubbed_env(work, {}))
    print(f"{'scrubbed_env':22s} {results['scrubbed_env']}", flush=True)
    probe = Path(tempfile.mkdtemp()) / "cuda_probe.py"
    probe.write_text(CUDA)
    for mode in ("auto", "userns", "pidns", "none"):
        env = {**os.environ, "CTXKERNEL_ISOLATION": mode, "PYTHONPATH": str(ROOT)}
        code = (
            "import sys; from harness.process import sandboxrun; "
            f"rc, out, err, _ = sandboxrun.run_sandboxed([sys.executable, {str(probe)!r}],"
            f" device='cuda', capture=True, binds=[{str(probe.parent)!r}]); "
            "print(out); print(err); sys.exit(rc)"
        )
        results[f"sandbox_{mode}"] = run([sys.executable, "-c", code], env)
        print(f"sandbox_{mode:14s} {results[f'sandbox_{mode}']}", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "walls_bisect.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
