"""The check server (``harness/server/client.py``): a one-shot check served warm gives what
an in-process check gives; the same server serves the next call; changed code, a killed
server, a cancelled client, an unsafe socket folder and another uid are each handled.

Real processes throughout: ``python -m harness check`` clients, the server they start, the
Triton interpreter. Every test here enables the server with its own short idle timeout
in its own home (the suite's default is ``CTXKERNEL_CHECK_SERVER=0``) and stops what it
started.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cheatspec import EXAMPLES, REPO

from harness.server import client as checkserver

VECTOR_ADD = EXAMPLES / "vector_add"
GOOD = VECTOR_ADD / "solution_triton.py"
SYNTAX = VECTOR_ADD / "bad" / "syntax_error.py"
SMALL = ["--device", "cpu", "--shapes", "n=1000;n=17", "--seeds", "2", "--no-record"]
# long enough under the interpreter (seconds per call) to be interrupted mid-check
SLOW = ["--device", "cpu", "--shapes", "n=3000000", "--seeds", "3", "--no-record"]


def server_env(base: Path, idle: float = 120.0) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XDG_RUNTIME_DIR", None)  # the sockets go under this test's own home
    for name in ("home", "xdg", "triton", "tmp"):
        (base / name).mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "CTXKERNEL_CHECK_SERVER": "1",
            "CTXKERNEL_CHECK_SERVER_IDLE": str(idle),
            "CTXKERNEL_HOME": str(base / "home"),
            "XDG_CACHE_HOME": str(base / "xdg"),
            "TRITON_CACHE_DIR": str(base / "triton"),
            "TRITON_DEFAULT_FP_FUSION": "1",
            "TMPDIR": str(base / "tmp"),
            "PYTHONPATH": str(REPO),
        }
    )
    return env


def check(
    env: dict[str, str], *args: str | Path, module: str = "harness", cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", module, "check", *map(str, args)]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def client(env: dict[str, str], *args: str | Path) -> subprocess.Popen[str]:
    """A client as a terminal starts one: SIGINT at its default even when this run's own is
    ignored (a suite started in the background of a non-interactive shell inherits SIG_IGN,
    and Python then never raises KeyboardInterrupt)."""
    cmd = [sys.executable, "-m", "harness", "check", *map(str, args)]
    return subprocess.Popen(
        cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def status(env: dict[str, str]) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "harness", "check-server", "status", "--json"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=True)
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    assert docs[-1]["type"] == "summary"
    return [d for d in docs if d["type"] == "check_server" and d.get("alive")]


def stop(env: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "harness", "check-server", "stop"]
    subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert status(env) == []


def only_server(env: dict[str, str]) -> dict[str, Any]:
    found = status(env)
    assert len(found) == 1, found
    return found[0]


def gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not checkserver.process_running(pid):
            return True
        time.sleep(0.1)
    return False


def wait_for_line(proc: subprocess.Popen[str], text: str) -> str:
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert text in line, line
    return line


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One server shared by this module's identity tests, started by a first check."""
    env = server_env(tmp_path_factory.mktemp("served"))
    first = check(env, VECTOR_ADD, SYNTAX, "--feedback", "--no-record")
    assert first.returncode == 1, first.stderr
    yield env
    stop(env)


def _floats_aside(value: Any) -> Any:
    """A verdict's JSON without what differs from run to run (times, the secret seed, the
    worker's PID: 2 in a PID namespace, the host's in none mode)."""
    if isinstance(value, float):
        return "F"
    if isinstance(value, dict):
        return {k: _floats_aside(v) for k, v in value.items() if k not in ("seeds", "pid")}
    if isinstance(value, list):
        return [_floats_aside(v) for v in value]
    return value


def _text_aside(text: str) -> str:
    return re.sub(r"_s=\d+\.\d+", "_s=X", text)


@pytest.mark.parametrize(
    ("args", "code", "module"),
    [
        ([GOOD, *SMALL], 0, "harness"),
        ([GOOD, *SMALL, "--json"], 0, "harness"),
        ([SYNTAX, "--feedback", "--no-record"], 1, "harness"),
        ([VECTOR_ADD / "bad" / "torch_add.py", "--json", "--no-record"], 1, "harness"),
        (["missing.py", "--no-record"], 2, "harness"),
        ([GOOD, *SMALL], 0, "ctxkernel"),
    ],
    ids=["text", "json", "feedback-failing", "json-failing", "usage-error", "ctxkernel-text"],
)
def test_a_check_through_the_server_prints_what_an_in_process_one_prints(
    served: dict[str, str], args: list[Any], code: int, module: str
) -> None:
    before = only_server(served)
    through = check(served, VECTOR_ADD, *args, module=module)
    here = check(served, VECTOR_ADD, *args, "--no-server", module=module)
    assert through.returncode == here.returncode == code, through.stderr + here.stderr
    if "--json" in args:
        assert len(through.stdout.splitlines()) == 1
        assert _floats_aside(json.loads(through.stdout)) == _floats_aside(json.loads(here.stdout))
    else:
        assert _text_aside(through.stdout) == _text_aside(here.stdout)
    assert through.stderr == here.stderr  # the progress line, or the usage error's one line
    if code == 2:
        assert len(through.stderr.splitlines()) == 1
        assert "error: candidate not found" in through.stderr
    after = only_server(served)
    assert after["pid"] == before["pid"] and after["requests"] == before["requests"] + 1


def test_the_second_call_is_served_by_the_same_server_and_its_client_imports_no_torch(
    served: dict[str, str],
) -> None:
    script = (
        "import sys; from harness.cli import main; code = main(sys.argv[1:]); "
        "print('torch' in sys.modules, 'triton' in sys.modules, file=sys.stderr); sys.exit(code)"
    )
    cmd = [sys.executable, "-c", script, "check", str(VECTOR_ADD), str(GOOD), *SMALL]
    seen = []
    for _ in range(2):
        done = subprocess.run(
            cmd, env=served, cwd=REPO, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        assert "verdict: PASSED" in done.stdout
        assert done.stderr.splitlines()[-1] == "False False"
        seen.append(only_server(served))
    first, second = seen
    assert second["pid"] == first["pid"] and second["requests"] == first["requests"] + 1
    forks = {t["pid"]: t["forks"] for t in first["templates"]}
    assert any(t["forks"] > forks.get(t["pid"], 0) > 0 for t in second["templates"])  # kept


def test_two_clients_at_once_both_get_their_verdicts(served: dict[str, str]) -> None:
    before = only_server(served)
    procs = [client(served, VECTOR_ADD, GOOD, *SMALL, "--json") for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out)["ok"] is True
    after = only_server(served)
    assert after["pid"] == before["pid"] and after["requests"] == before["requests"] + 2


def test_ctrl_c_in_the_client_cancels_its_check_and_the_server_serves_the_next(
    served: dict[str, str],
) -> None:
    before = only_server(served)
    proc = client(served, VECTOR_ADD, GOOD, *SLOW)
    wait_for_line(proc, "checking solution_triton.py")
    time.sleep(1.5)  # inside the check now
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    tmp = Path(served["TMPDIR"])
    deadline = time.monotonic() + 20
    while list(tmp.glob("ctxkernel-check-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(tmp.glob("ctxkernel-check-*")) == []  # its workers and temp dir are gone
    after = only_server(served)
    assert after["pid"] == before["pid"] and not after["busy"]
    nxt = check(served, VECTOR_ADD, SYNTAX, "--feedback", "--no-record")
    assert nxt.returncode == 1 and nxt.stdout.startswith("FAILED at rung 'pre-checks'")
    assert only_server(served)["requests"] == before["requests"] + 2


def test_a_server_killed_mid_check_is_one_line_and_its_dead_socket_is_replaced(
    tmp_path: Path,
) -> None:
    env = server_env(tmp_path / "s")
    try:
        proc = client(env, VECTOR_ADD, GOOD, *SLOW)
        wait_for_line(proc, "checking solution_triton.py")
        killed = only_server(env)
        os.kill(killed["pid"], signal.SIGKILL)
        _, err = proc.communicate(timeout=30)  # an EOF, never a hang
        assert proc.returncode == 2
        assert err.splitlines() == [
            f"harness: error: the check server (pid {killed['pid']}) ended during the check "
            f"(log {killed['log']}); run it again, or with --no-server"
        ]
        assert Path(killed["socket"]).exists()  # SIGKILL left the socket file behind
        again = check(env, VECTOR_ADD, SYNTAX, "--feedback", "--no-record")
        assert again.returncode == 1 and again.stderr == ""
        successor = only_server(env)
        assert successor["pid"] != killed["pid"] and successor["socket"] == killed["socket"]
    finally:
        stop(env)


def test_edited_code_gets_a_new_server_and_the_old_one_exits(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "harness", tree / "harness", ignore=ignore)
    shutil.copytree(VECTOR_ADD, tree / "examples" / "vector_add", ignore=ignore)
    env = {**server_env(tmp_path / "s"), "PYTHONPATH": str(tree)}
    args = (tree / "examples/vector_add", tree / "examples/vector_add/bad/syntax_error.py")
    try:
        assert check(env, *args, "--feedback", "--no-record", cwd=tree).returncode == 1
        old = only_server(env)
        assert old["code"] == str(tree)
        edited = tree / "harness" / "verdict.py"
        os.utime(edited, ns=(edited.stat().st_atime_ns, edited.stat().st_mtime_ns + 10**9))
        assert check(env, *args, "--feedback", "--no-record", cwd=tree).returncode == 1
        assert gone(old["pid"], 15)  # its code changed: it leaves by itself
        new = only_server(env)
        assert new["pid"] != old["pid"] and new["fingerprint"] != old["fingerprint"]
        assert new["requests"] == 1
    finally:
        stop(env)


def test_the_server_exits_after_its_idle_timeout(tmp_path: Path) -> None:
    env = server_env(tmp_path / "s", idle=1.0)
    folder = tmp_path / "s/home/cache/check-server"
    try:
        assert check(env, VECTOR_ADD, SYNTAX, "--feedback", "--no-record").returncode == 1
        deadline = time.monotonic() + 20
        while list(folder.glob("*.sock")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(folder.glob("*.sock")) == [] and status(env) == []
        (log,) = folder.glob("*.log")
        # the socket goes first, the last log line a moment after it
        while time.monotonic() < deadline and "exiting" not in log.read_text():
            time.sleep(0.1)
        assert (
            log.read_text()
            .splitlines()[-1]
            .endswith("check server: exiting: idle for 1 s (1 checks served)")
        )
    finally:
        stop(env)


def test_a_socket_folder_others_may_open_is_refused_and_the_check_runs_here(
    tmp_path: Path,
) -> None:
    env = server_env(tmp_path / "s")
    folder = tmp_path / "s/home/cache/check-server"
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    done = check(env, VECTOR_ADD, SYNTAX, "--feedback", "--no-record")
    assert done.returncode == 1 and done.stdout.startswith("FAILED at rung 'pre-checks'")
    assert done.stderr.splitlines() == [
        f"check server: {folder} is open to others (mode 755, needs 700); checking in-process"
    ]
    assert list(folder.iterdir()) == []  # no server was started there


def test_secure_dir_refuses_links_files_and_other_owners(tmp_path: Path) -> None:
    made = checkserver.secure_dir(tmp_path / "a" / "servers")
    assert made.stat().st_mode & 0o777 == 0o700
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(made)
    for bad in (tmp_path / "file", tmp_path / "link"):
        with pytest.raises(checkserver.UnsafeDir, match="not a directory"):
            checkserver.secure_dir(bad)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(checkserver.UnsafeDir, match="others may replace"):
        checkserver.secure_dir(shared / "servers")
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(checkserver.UnsafeDir, match="belongs to uid 65534"):
            checkserver.secure_dir(theirs)


def test_a_peer_of_another_uid_is_refused() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        assert checkserver.peer_refused(ours) is None
        refused = checkserver.peer_refused(ours, uid=os.getuid() + 1)
        assert refused == f"uid {os.getuid()} may not use uid {os.getuid() + 1}'s check server"


def test_an_oversized_garbled_or_stale_request_is_refused_and_the_server_goes_on(
    served: dict[str, str],
) -> None:
    server = only_server(served)
    for payload in (b"x" * (checkserver.MAX_REQUEST + 10), b"{not json\n", b"[1, 2]\n"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30)
            conn.connect(server["socket"])
            with contextlib.suppress(OSError):  # it may hang up before all is sent
                conn.sendall(payload)
            answer = json.loads(conn.makefile("rb").readline())
        assert answer["type"] == "refused", answer
    token = checkserver.read_token(Path(server["socket"]))
    other = {"type": "check", "protocol": checkserver.PROTOCOL, "fingerprint": "0" * 24}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:  # not its fingerprint
        conn.settimeout(30)
        conn.connect(server["socket"])
        conn.sendall(
            json.dumps({**other, "values": {}, "env": {}, "token": token}).encode() + b"\n"
        )
        assert json.loads(conn.makefile("rb").readline()) == {
            "type": "stale",
            "pid": server["pid"],
        }
    for wrong in (None, "", token[:-1] + ("0" if token[-1] != "0" else "1")):
        # a process that reaches the socket but cannot read the server's token file (a
        # worker that got past every wall) is refused before anything is read of it
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30)
            conn.connect(server["socket"])
            doc = {"type": "status"} if wrong is None else {"type": "status", "token": wrong}
            conn.sendall(json.dumps(doc).encode() + b"\n")
            answer = json.loads(conn.makefile("rb").readline())
        assert answer == {"type": "refused", "message": "the request lacks this server's token"}
    assert Path(server["socket"]).with_suffix(".token").stat().st_mode & 0o077 == 0
    after = only_server(served)
    assert after["pid"] == server["pid"] and after["requests"] == server["requests"]


def _ask_as(uid: int, sock: Path) -> str:
    """Connect to ``sock`` from a child process running as ``uid``; its first answer line."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, only the connection
        try:
            os.close(read)
            os.setgid(uid)
            os.setuid(uid)
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(20)
            conn.connect(str(sock))
            try:  # a refusing server answers and closes without reading: the send may fail
                conn.sendall(json.dumps({"type": "status"}).encode() + b"\n")
            except BrokenPipeError:
                pass
            os.write(write, conn.makefile("rb").readline())
        except BaseException as exc:
            os.write(write, f"child: {type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        text = answer.read().decode()
    os.waitpid(pid, 0)
    return text


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another uid")
def test_a_client_of_another_uid_is_refused_by_the_server(served: dict[str, str]) -> None:
    server = only_server(served)
    sock = Path(server["socket"])
    opened = [p for p in [sock.parent, *sock.parent.parents] if not p.stat().st_mode & 0o001]
    modes = {p: p.stat().st_mode & 0o7777 for p in [*opened, sock]}
    try:  # let uid 65534 reach the socket: the server's peer check must stop it
        for p in opened:
            p.chmod(modes[p] | 0o011)
        sock.chmod(0o666)
        text = _ask_as(65534, sock)
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert json.loads(text) == {
        "type": "refused",
        "message": f"uid 65534 may not use uid {os.getuid()}'s check server",
    }, text
    assert only_server(served)["pid"] == server["pid"]


def test_the_suite_checks_in_process_unless_a_test_asks() -> None:
    assert os.environ["CTXKERNEL_CHECK_SERVER"] == "0"
    assert checkserver.enabled() is False
    assert checkserver.enabled({"CTXKERNEL_CHECK_SERVER": "1"}) is True
    assert checkserver.enabled({"CTXKERNEL_CHECK_SERVER": "1", "CTXKERNEL_WARM": "0"}) is False


def test_ctxkernel_has_the_check_server_group(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxkernel.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["check-server", "status", "--json"])
    assert exit_info.value.code == 0
    (doc,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert doc == {
        "type": "summary",
        "running": 0,
        "dir": str(isolated_home / "cache" / "check-server"),
    }
    assert not (isolated_home / "cache" / "check-server").exists()  # status makes nothing


def test_options_travel_with_their_paths_and_tuples() -> None:
    values = {"problem": Path("p"), "candidates": (Path("c.py"),), "shapes": ("n=1",), "jobs": None}
    sent = json.loads(json.dumps(checkserver.encode_values(values)))
    assert checkserver.decode_values(sent) == values
    with pytest.raises(TypeError):
        checkserver.encode_values({"x": object()})
