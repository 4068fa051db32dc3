"""Which wall stops ncu and compute-sanitizer: each tool run around a small CUDA program
behind one layer at a time, then through the launcher in each mode as a profiled worker.

On a GPU machine where both tools work outside the sandbox but a check's ``profile`` and
``sanitize`` rungs skip inside it, each step runs the tool exactly as those rungs do
(``ncu.command`` / ``sanitizer.command``, the tool itself inside the walls) around a
program that launches one kernel inside the harness's NVTX range, after the process put
up one layer of ``harness/process/walls.py`` on itself, then the full launcher per mode
with the profiler's relaxed seccomp and each namespace wall left out in turn. One line
per step: whether the tool produced its report, and its last words. Where ``strace`` is
installed, the refused calls of the full launcher are listed too. JSON under ``$OUT``.

    python3 bench/gpu/gpu_profilers_bisect.py        # about two minutes on the H200
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEP_S = float(os.environ.get("STEP_S", "60"))  # a tool that waits for a blocked peer hangs
sys.path.insert(0, str(ROOT))

from harness.perf import ncu, sanitizer  # noqa: E402
from harness.process import sandbox  # noqa: E402
from harness.process.workerenv import scrubbed_env  # noqa: E402

PROGRAM = (
    "import torch\n"
    "x = torch.ones(1 << 20, device='cuda')\n"
    f"torch.cuda.nvtx.range_push({ncu.NVTX_RANGE!r})\n"
    "y = x * 2\n"
    "torch.cuda.synchronize()\n"
    "torch.cuda.nvtx.range_pop()\n"
    "print('cuda ok', float(y.sum()))\n"
)
LAYER = (
    "import ctypes, os, sys\n"
    "sys.path.insert(0, {root!r})\n"
    "from harness.process import seccomp, walls\n"
    "ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # no new privileges\n"
    "own = {own!r}\n"
    "{setup}\n"
    "os.execvp({argv0!r}, {argv!r})\n"
)
LAYERS = {
    "plain": None,
    "seccomp_profiler": "seccomp.install(network=False, abi=walls.landlock_abi())",
    "seccomp_full": "seccomp.install(abi=walls.landlock_abi())",
    "landlock": "walls.landlock([own], walls._device_nodes())",
    "landlock_tmp": "walls.landlock([own, '/tmp', '/dev/shm'], walls._device_nodes())",
    "landlock_root": "walls.landlock([own, '/'], walls._device_nodes())",
    "landlock_seccomp_profiler": (
        "walls.landlock([own], walls._device_nodes()); seccomp.install(network=False, abi=walls.landlock_abi())"
    ),
}


def tool_cmd(tool: str, workdir: Path) -> list[str]:
    if tool == "ncu":
        binary = ncu.find_ncu() or "ncu"
        return ncu.command(binary, str(workdir / "tool.log"))
    binary = shutil.which("compute-sanitizer") or "compute-sanitizer"
    return sanitizer.command(binary, "memcheck", str(workdir / "tool.log"))


def outcome(done_out: str, done_err: str, rc: int | None, workdir: Path) -> dict[str, object]:
    log = workdir / "tool.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    lines = [ln for ln in (done_out + done_err).splitlines() if ln.strip()]
    report = "ERROR SUMMARY" in text or '"ID"' in text or text.count("\n") > 3
    return {
        "rc": rc,
        "cuda_ok": any(ln.startswith("cuda ok") for ln in lines),
        "report": report,
        "log_tail": [ln[:200] for ln in text.strip().splitlines()[-6:]],
        "tail": lines[-10:],
    }


def layered(tool: str, setup: str | None) -> dict[str, object]:
    own = Path(tempfile.mkdtemp(prefix="ck-prof-"))
    prog = own / "prog.py"
    prog.write_text(PROGRAM)
    argv = [*tool_cmd(tool, own), sys.executable, str(prog)]
    if setup is not None:
        code = LAYER.format(root=str(ROOT), own=str(own), setup=setup, argv0=argv[0], argv=argv)
        argv = [sys.executable, "-c", code]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_S, cwd=own)
    except subprocess.TimeoutExpired:
        return {"rc": None, "tail": ["timed out"]}
    except OSError as exc:
        return {"rc": None, "tail": [repr(exc)]}
    return outcome(done.stdout, done.stderr, done.returncode, own)


def launched(tool: str, mode: str, walls_on: list[str], strace: bool = False) -> dict[str, object]:
    """The tool around the program, through the launcher as local.run_oneshot starts a
    profiled one-shot worker."""
    isolation = sandbox.isolation()
    own = Path(tempfile.mkdtemp(prefix="ck-prof-"))
    work = own / "work"
    work.mkdir()
    prog = work / "prog.py"
    prog.write_text(PROGRAM)
    wrapper = tool_cmd(tool, work)
    found = shutil.which(wrapper[0])
    tool_dirs = [os.path.dirname(os.path.realpath(found))] if found else []
    keep_admin = mode == "pidns"
    if mode == "none" or keep_admin:
        sandbox.harden_parent()
    pid_r, pid_w = os.pipe()
    cmd = sandbox.command(
        mode,
        [*wrapper, sys.executable, str(prog)],
        pid_w,
        keep_admin=keep_admin,
        keep_paths=sandbox.worker_paths(work, *tool_dirs)
        if isolation.private_tmp and mode != "none"
        else None,
        writable=str(work),
        hidden=sandbox.parent_folders([work]),
        profiler=True,
        walls_on=walls_on,
    )
    trace = own / "strace.txt"
    if strace:
        cmd = ["strace", "-f", "-qq", "-o", str(trace), *cmd]
    proc = subprocess.Popen(
        cmd,
        cwd=work,
        env=scrubbed_env(work, {}),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=(pid_w,),
        start_new_session=True,
    )
    os.close(pid_w)
    try:
        sandbox.read_pid(pid_r, 60.0)
        out, err = proc.communicate(timeout=STEP_S)
    except Exception as exc:  # a bench probe: any failure is the finding, printed
        proc.kill()
        out, err = proc.communicate()
        err += f"\nprobe: {exc!r}"
    result = outcome(out, err, proc.returncode, work)
    if strace and trace.exists():
        refused = [
            ln.strip()
            for ln in trace.read_text(errors="replace").splitlines()
            if any(e in ln for e in ("EACCES", "EPERM", "ENOSYS", "EROFS", "ECONNREFUSED"))
            and "prctl" not in ln
        ]
        result["refused"] = refused[:80]
    return result


def main() -> None:
    results: dict[str, dict[str, object]] = {}
    isolation = sandbox.isolation()
    print("isolation", isolation, "profiler mode", isolation.profiler_mode(), flush=True)
    print("ncu", ncu.find_ncu(), "sanitizer", shutil.which("compute-sanitizer"), flush=True)
    for tool in ("ncu", "sanitizer"):
        mode = isolation.profiler_mode()
        steps = [(mode, list(sandbox.ALL_WALLS))]
        steps += [(mode, [w for w in sandbox.ALL_WALLS if w != drop]) for drop in sandbox.ALL_WALLS]
        steps += [(mode, []), ("none", list(sandbox.ALL_WALLS))]
        for mode, walls_on in steps:
            key = f"{tool}:launch:{mode}:{'+'.join(walls_on) or '-'}"
            results[key] = launched(tool, mode, walls_on)
            r = results[key]
            print(f"{key:34s} rc={r.get('rc')} report={r.get('report')} "
                  f"tail={r.get('tail', [])[-6:]} log={r.get('log_tail', [])[-3:]}", flush=True)  # fmt: skip
        if shutil.which("strace"):
            key = f"{tool}:launch:{isolation.profiler_mode()}:strace"
            results[key] = launched(tool, isolation.profiler_mode(), list(sandbox.ALL_WALLS), True)
            print(key, *results[key].get("refused", [])[:60], sep="\n  ", flush=True)
    for tool in ("ncu", "sanitizer"):
        for name, setup in LAYERS.items():
            key = f"{tool}:{name}"
            results[key] = layered(tool, setup)
            r = results[key]
            print(f"{key:34s} rc={r.get('rc')} report={r.get('report')} "
                  f"tail={r.get('tail', [])[-3:]} log={r.get('log_tail', [])[-2:]}", flush=True)  # fmt: skip
    out = os.environ.get("OUT")
    if out:
        Path(out, "profilers_bisect.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
