"""No secret reaches a candidate.

The worker runs in a PID namespace of its own where the machine allows one
(``harness/process/sandbox.py``), else beside a non-dumpable parent; the agent's key leaves the
parent's environment once its client has read it; and whatever gets through, verdicts,
feedback and records are redacted of every secret value the parent knows
(``harness/redact.py``). The planted candidate ``cheats/c15_proc_parent.py`` reads the
parent's environment, command line and open files (no memory file opens in a worker at
all: ``cheats/c15_proc_self_mem.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cheatspec import EXAMPLES, REPO
from conftest import fast_options

from harness import redact
from harness.errors import UsageError
from harness.process import sandbox
from harness.runner import check, resolved_isolation

CHEAT = Path(__file__).resolve().parent / "cheats" / "c15_proc_parent.py"
KEY = "sk-test-0123456789-planted-key"
TOKEN = "tok-planted-service-token-42"
AVAILABLE, _ = sandbox.probe()
MODES = [*AVAILABLE, "none"]


def _launch(mode: str, code: str) -> tuple[int, str, int | None]:
    """Run ``python -c code`` through the launcher: (exit status, stdout, reported PID)."""
    r, w = os.pipe()
    cmd = sandbox.command(mode, [sys.executable, "-I", "-S", "-c", code], w)
    proc = subprocess.Popen(cmd, pass_fds=(w,), stdout=subprocess.PIPE, text=True)
    os.close(w)
    pid = sandbox.read_pid(r, 30)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out, pid


@pytest.mark.parametrize("mode", MODES)
def test_launcher_exits_like_its_worker_and_drops_the_capabilities(mode: str) -> None:
    code = (
        "import os, signal\n"
        "status = open('/proc/self/status').read()\n"
        "bounding = int(status.split('CapBnd:')[1].split()[0], 16)\n"
        "effective = int(status.split('CapEff:')[1].split()[0], 16)\n"
        "caps = bounding if os.geteuid() == 0 else effective\n"
        "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "print(os.getpid(), os.getppid(), caps >> 21 & 1, caps >> 19 & 1, len(pids), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    status, out, pid = _launch(mode, code)
    assert status == -11, out  # the parent sees the worker's own death
    me, parent, admin, ptrace, visible = (int(x) for x in out.split())
    # CAP_SYS_ADMIN, CAP_SYS_PTRACE gone from the bounding set (root), or never held: a
    # non-root user outside a namespace cannot drop from a bounding set it never uses
    assert admin == 0 and ptrace == 0
    assert pid is not None and pid > 0
    if mode == "none":  # the launcher stays between us and the worker: its subreaper
        assert me == pid and parent not in (os.getpid(), 1)
    else:  # PID 2 of its own namespace: its parent is outside, only it and the init exist
        assert (me, parent, visible) == (2, 0, 2)
        assert pid != 2 and not Path(f"/proc/{pid}").exists()  # and it is gone now


def test_the_key_is_out_of_proc_environ_once_forgotten() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from harness.redact import forget_env, known\n"
        "before = open('/proc/self/environ', 'rb').read()\n"
        "assert forget_env('ANTHROPIC_API_KEY')\n"
        "after = open('/proc/self/environ', 'rb').read()\n"
        "print(sys.argv[2].encode() in before, sys.argv[2].encode() in after, sys.argv[2] in known())\n"
    )
    env = {"PATH": os.environ.get("PATH", ""), "ANTHROPIC_API_KEY": KEY}
    done = subprocess.run(
        [sys.executable, "-c", code, str(REPO), KEY], env=env, capture_output=True, text=True
    )
    assert done.stdout.split() == ["True", "False", "True"], done.stderr


def test_the_proc_reading_cheat_finds_a_key_it_can_reach(tmp_path: Path) -> None:
    """The planted candidate is not blind: as a plain child of a process holding a key
    in its environment, it reports where it found it."""
    child = (
        "import json, runpy, sys\n"
        f"found = runpy.run_path({str(CHEAT)!r})['FOUND']\n"
        "print(json.dumps(found))\n"
    )
    middle = (
        "import os, subprocess, sys\n"
        "env = {k: v for k, v in os.environ.items() if k != 'MY_SERVICE_TOKEN'}\n"
        f"sys.exit(subprocess.run([sys.executable, '-c', {child!r}], env=env).returncode)\n"
    )
    env = dict(os.environ, MY_SERVICE_TOKEN=TOKEN, TRITON_CACHE_DIR=str(tmp_path / "triton"))
    done = subprocess.run(
        [sys.executable, "-c", middle], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert any(f.startswith("MY_SERVICE_TOKEN in /proc/") for f in found), found


@pytest.mark.parametrize("mode", ["auto", "none"])
def test_a_planted_key_reaches_no_candidate_file_or_feedback(
    mode: str, tmp_path: Path, isolated_home: Path
) -> None:
    """``ctxkernel check --feedback`` with a key and a token in its environment: the
    candidate reading the parent's environ, cmdline and fds finds neither, and neither
    is in the output or in any file under the runs or index directories."""
    runs = tmp_path / "runs"
    env = dict(os.environ, ANTHROPIC_API_KEY=KEY, MY_SERVICE_TOKEN=TOKEN)
    env["CTXKERNEL_ISOLATION"] = mode
    env["PYTHONPATH"] = str(REPO)
    cmd = [sys.executable, "-m", "ctxkernel", "check", str(EXAMPLES / "vector_add"), str(CHEAT)]
    cmd += ["--feedback", "--runs-dir", str(runs), "--shapes", "n=1000", "--seeds", "1"]
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output  # the cheat raises when it finds a planted secret
    assert output.startswith("PASSED all rungs"), output
    for secret in (KEY, TOKEN):
        assert secret not in output
        for root in (runs, isolated_home):
            hits = [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
            assert hits == [], hits
    [record] = (runs / "vector_add").iterdir()
    isolation = json.loads((record / "result.json").read_text())["environment"]["isolation"]
    expected = "none" if mode == "none" else (AVAILABLE[0] if AVAILABLE else "none")
    assert isolation["mode"] == expected


def test_a_secret_the_candidate_prints_is_redacted_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redaction is the last line of defence: a value equal to a secret of the parent,
    printed and raised by the candidate, is in no verdict, feedback, log or record."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    candidate = tmp_path / "leaky.py"
    candidate.write_text(
        "import sys\n"
        f"SEEN = {TOKEN!r}\n"
        "def custom_kernel(inputs):\n"
        "    print('found', SEEN)\n"
        "    print('found', SEEN, file=sys.stderr)\n"
        "    raise RuntimeError('leaked ' + SEEN)\n"
    )
    runs = tmp_path / "runs"
    verdict = check(
        EXAMPLES / "vector_add",
        candidate,
        fast_options("vector_add", record=True, runs_dir=runs, policy_scan=False),
    )
    assert not verdict.ok and verdict.failed_rung is not None
    assert "leaked [redacted]" in verdict.reason
    texts = [json.dumps(verdict.to_json()), verdict.feedback(), "\n".join(verdict.lines())]
    assert all(TOKEN not in text for text in texts)
    files = [p for p in runs.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"result.json", "feedback.txt", "worker.stdout.log"}
    assert [p for p in files if TOKEN.encode() in p.read_bytes()] == []
    log = next(p for p in files if p.name == "worker.stdout.log")
    assert "found [redacted]" in log.read_text()


def test_secret_names_and_values() -> None:
    for name in ("ANTHROPIC_API_KEY", "MY_SERVICE_TOKEN", "AWS_SECRET_ACCESS_KEY",
                 "DB_PASSWORD", "ANTHROPIC_AUTH_TOKEN", "HF_TOKEN", "GITHUB_PAT_KEY"):  # fmt: skip
        assert redact.looks_secret(name), name
    for name in ("PATH", "PWD", "SSH_AUTH_SOCK", "KEYBOARD", "GIT_AUTHOR_NAME", "HOME",
                 "ANTHROPIC_BASE_URL", "TOKEN_FILE"):  # fmt: skip
        assert not redact.looks_secret(name), name
    values = ["abcdefgh12345678", "abcdefgh"]
    doc = {"k abcdefgh": ["x abcdefgh12345678 y", 3, None], "n": 1.5}
    assert redact.redact_obj(doc, values) == {"k [redacted]": ["x [redacted] y", 3, None], "n": 1.5}
    assert redact.redact_bytes(b"..abcdefgh..", values) == b"..[redacted].."


def test_a_bad_isolation_setting_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "_isolation", None)
    monkeypatch.setenv("CTXKERNEL_ISOLATION", "bogus")
    with pytest.raises(UsageError, match="CTXKERNEL_ISOLATION='bogus': expected one of"):
        resolved_isolation()


def test_the_memory_watchdog_reads_the_worker_not_the_launcher(tmp_path: Path) -> None:
    from harness.options import RunOptions
    from harness.process.local import LocalSession
    from harness.process.memwatch import rss_bytes as _rss_bytes

    work, logs = tmp_path / "work", tmp_path / "logs"
    work.mkdir()
    logs.mkdir()
    session = LocalSession(work, logs, "cpu", RunOptions(), {})
    try:
        reply = session.request({"op": "load", "subject": "harness"}, [], 120.0, 1 << 20)
        assert reply.header.get("ok"), reply.header
        assert session.worker_pid is not None
        # the channel's pipes hold a megabyte in flight, both ways (channel.pipe)
        F_GETPIPE_SZ = 1032
        import fcntl

        for fd in (session.end.fd_out, session.end.fd_in):
            assert fcntl.fcntl(fd, F_GETPIPE_SZ) >= min(
                1 << 20, int(Path("/proc/sys/fs/pipe-max-size").read_text())
            )
        cmdline = Path(f"/proc/{session.worker_pid}/cmdline").read_bytes()
        # spawned: its own interpreter; forked from the warm template: the template's
        assert b"harness.worker" in cmdline or (
            session.started_by == "template" and b"harness.worker.zygote" in cmdline
        )
        status = Path(f"/proc/{session.worker_pid}/status").read_text()
        nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid"))
        worker_rss, launcher_rss = _rss_bytes(session.worker_pid), _rss_bytes(session.pid)
        assert worker_rss is not None and launcher_rss is not None
        assert session.worker_pid != session.pid  # the launcher waits (a subreaper in none mode)
        if session.isolation.namespaces:
            assert nspid[-1] == "2"
        if session.started_by == "spawned":
            assert worker_rss > launcher_rss  # torch lives in the worker
    finally:
        session.close()
    stat = Path(f"/proc/{session.worker_pid}/stat")
    # gone, or a zombie of a worker killed in its teardown, waiting to be reaped
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_the_sandboxed_worker_sees_the_gpu(mode: str) -> None:
    """In every mode the worker opens /dev/nvidia*, runs a CUDA kernel and reads the
    driver's /proc entry (its own /proc in a namespace)."""
    code = (
        "import glob, os, torch\n"
        "x = torch.arange(1 << 20, device='cuda', dtype=torch.float32)\n"
        "ok = bool(((x * 2).sum() == (1 << 20) * ((1 << 20) - 1)).item())\n"
        "print(torch.cuda.device_count(), ok, len(glob.glob('/dev/nvidia*')) > 0,\n"
        "      os.path.exists('/proc/driver/nvidia/version'), flush=True)\n"
    )
    r, w = os.pipe()
    cmd = sandbox.command(mode, [sys.executable, "-c", code], w)
    done = subprocess.run(cmd, pass_fds=(w,), capture_output=True, text=True, timeout=300)
    os.close(w)
    os.close(r)
    assert done.returncode == 0, done.stderr[-3000:]
    count, ok, devices, driver = done.stdout.split()
    assert int(count) >= 1 and ok == "True" and devices == "True" and driver == "True"
