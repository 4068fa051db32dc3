"""The walls around a candidate's worker, attacked as a hostile candidate would.

Each door a candidate walked out of is tried again here, by the routes the language and
its libraries offer (torch's C++ writers, libc through the ctypes torch imported, sockets,
``setsid`` children, a full disk, other processes' shared memory, terminals, limits and
clocks, other checks' folders, files the parent reads back) and from native code
(``walls/escape.c``, compiled with ``cc`` and run through ``ctxkernel sandbox run``), in
the machine's strongest mode and in ``none`` mode (landlock and seccomp alone). Every
door must be shut, the worker's own folder writable, and the files outside it
byte-identical after all the attempts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cheatspec import EXAMPLES, read_expectation
from conftest import fast_options

from harness.options import RunOptions, memory_cap_for
from harness.paths import check_server_dir, default_runs_dir
from harness.process import cleanup, sandbox
from harness.runner import LocalRunner, check
from harness.server.client import secure_dir

WALLS = Path(__file__).resolve().parent / "walls"
CHEATS = sorted(WALLS.glob("w*.py"))
REPO = Path(__file__).resolve().parents[2]


def _outside_digest() -> dict[str, object]:
    """What lies outside every worker's folder that a planted cheat aimed at: the shipped
    examples byte for byte, the names in site-packages and in the harness."""
    return {
        "examples": _tree_digest(EXAMPLES),
        "site-packages": sorted(os.listdir(_site_packages())),
        "harness": sorted(os.listdir(REPO / "harness")),
    }


@pytest.fixture(scope="module", autouse=True)
def outside_unchanged() -> Iterator[None]:
    """After every attempt of this module, the files outside the workers' folders are as
    they were before the first."""
    before = _outside_digest()
    yield
    after = _outside_digest()
    assert after == before


def _tree_digest(root: Path) -> dict[str, str]:
    """Every file's bytes, and every file's and folder's mode (``root``'s included)."""
    found = {".:mode": oct(root.lstat().st_mode)}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if not path.is_symlink():
            found[f"{rel}:mode"] = oct(path.lstat().st_mode)
        if path.is_file() and not path.is_symlink():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _site_packages() -> Path:
    import torch

    return Path(torch.__file__).resolve().parent.parent


def _sleepers(tag: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if tag.encode() in cmd and b"sleep" in cmd:
                found.append(cmd.decode(errors="replace"))
    return found


def _gone(tag: str, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while _sleepers(tag):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def listening_socket() -> Iterator[Path]:
    """A live Unix socket in this user's check-server folder, as an idle server's is."""
    place = secure_dir(check_server_dir())
    path = place / "wall-test.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    yield path
    server.close()
    path.unlink(missing_ok=True)


@pytest.fixture
def neighbours() -> Iterator[dict[str, str]]:
    """What other processes of this user hold beside a check, for the cheats to reach: a
    System V shared memory segment, a terminal, another check's temp folder."""
    import ctypes
    import tempfile

    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(0, 4096, 0o600 | 0o1000)  # IPC_PRIVATE, IPC_CREAT
    address = libc.shmat(shmid, None, 0) if shmid >= 0 else None
    if address not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(address, b"the owner's words", 17)
    try:
        master, tty = os.openpty()
    except OSError:  # no pseudo-terminals here
        master = tty = -1
    other = Path(tempfile.mkdtemp(prefix="ctxkernel-check-"))
    (other / "work").mkdir()
    (other / "work" / "solution_triton.py").write_text("# the other candidate\n")
    yield {"__SHMID__": str(shmid), "__TTY__": os.ttyname(tty) if tty >= 0 else ""}
    shutil.rmtree(other)
    for fd in (master, tty):
        if fd >= 0:
            os.close(fd)
    if shmid >= 0:
        if address not in (None, ctypes.c_void_p(-1).value):
            libc.shmdt(ctypes.c_void_p(address))
        libc.shmctl(shmid, 0, None)  # IPC_RMID


@pytest.fixture
def check_roots(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The temp folders the checks of a test make (their workers' folders within)."""
    made: list[Path] = []
    make = cleanup.temp_root

    def recorded(prefix: str, parent: Path | None = None) -> Path:
        root = make(prefix, parent)
        if prefix == "ctxkernel-check-":
            made.append(root)
        return root

    monkeypatch.setattr(cleanup, "temp_root", recorded)
    return made


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda p: p.stem)
def test_a_wall_cheat_finds_the_door_shut(
    cheat: Path,
    mode: str,
    tmp_path: Path,
    listening_socket: Path,
    neighbours: dict[str, str],
    check_roots: list[Path],
) -> None:
    problem = tmp_path / "vector_add"
    shutil.copytree(EXAMPLES / "vector_add", problem)
    runs = default_runs_dir()
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "steer.md").write_text("the engineer's own words\n")
    source = cheat.read_text()
    for key, value in neighbours.items():
        if key in source and value in ("", "-1"):
            pytest.skip(f"{key.strip('_').lower()}: this machine could not make one")
    for key, value in {
        "__PROBLEM_DIR__": problem,
        "__RUNS_DIR__": runs,
        "__SITE__": _site_packages(),
        "__HOME__": Path.home(),
        "__SOCKET__": listening_socket,
        **neighbours,
    }.items():
        source = source.replace(key, str(value))
    candidate = tmp_path / "cand" / "solution_triton.py"
    candidate.parent.mkdir()
    candidate.write_text(source)
    expect = read_expectation(cheat)
    before = {"problem": _tree_digest(problem), "runs": _tree_digest(runs)}
    options = fast_options("vector_add", policy_scan=False, **expect.options)
    verdict = check(problem, candidate, options, runner=LocalRunner())
    reasons = [(r.name, r.reason) for r in verdict.rungs if r.ok is False]
    assert not verdict.ok, f"{cheat.name} passed in mode {mode}"
    failed = verdict.failed_rung
    assert failed is not None and failed.name in expect.rungs, reasons
    assert expect.named_in(verdict.reason), reasons
    assert {"problem": _tree_digest(problem), "runs": _tree_digest(runs)} == before
    assert not (_site_packages() / "zz_ctxkernel_wall_test.pth").exists()
    assert not (Path.home() / ".ctxkernel-wall-test").exists()
    assert _gone("27.1828"), _sleepers("27.1828")
    # nothing of the check is left, whatever modes its worker left on its folders
    assert check_roots and not [r for r in check_roots if os.path.lexists(r)], check_roots
    layers = verdict.environment["isolation"]["layers"]
    assert layers["seccomp"] == "on" and layers["landlock"].startswith("ABI")
    assert layers["parent_folders_hidden"] == ("landlock" if mode == "none" else "tmpfs")


def _compile_escape(tmp_path: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine")
    folder = tmp_path / "bin"
    folder.mkdir()
    binary = folder / "escape"
    subprocess.run([cc, "-O1", "-o", str(binary), str(WALLS / "escape.c")], check=True)
    return binary


def test_native_code_finds_every_door_shut_and_its_own_folder_writable(
    mode: str, tmp_path: Path, listening_socket: Path
) -> None:
    binary = _compile_escape(tmp_path)
    problem = tmp_path / "problem"
    problem.mkdir()
    targets = [
        _site_packages(),
        REPO / "harness",
        Path.home(),
        default_runs_dir().parent,
        check_server_dir().parent,
        problem,
    ]
    if mode == "none":  # a namespace mode's /tmp is the worker's own private one
        targets.append(Path("/tmp"))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    env = dict(os.environ)
    if mode == "none":
        env["CTXKERNEL_ISOLATION"] = "none"
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "sandbox", "run", "--bind", str(binary.parent), "--",
         str(binary), str(port), str(listening_socket), *map(str, targets)],
        capture_output=True, text=True, env=env, timeout=120, cwd=REPO,
    )  # fmt: skip
    listener.close()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "write . ok", lines  # its own folder
    opened = [ln for ln in lines[1:] if " ok" in ln]
    assert not opened, f"open doors in mode {mode}: {opened}"
    assert "spawned setsid sleeper" in lines and "spawned fork chain" in lines
    assert _gone("31.4159"), _sleepers("31.4159")
    for target in targets:
        assert not list(Path(target).glob(".ctxkernel-escape-*"))


_LATE_READER = r"""
import os, sys, time
path = sys.argv[1]
print("ready", flush=True)
deadline = time.monotonic() + 15
while time.monotonic() < deadline:
    try:
        with open(path) as fh:
            print("read ok" if "engineer" in fh.read() else "read else", flush=True)
        break
    except FileNotFoundError:
        time.sleep(0.05)
    except OSError as exc:
        print(f"refused {exc.errno}", flush=True)
        break
else:
    print("refused: never seen", flush=True)
"""


def test_a_parent_folder_made_while_a_worker_runs_stays_unread(mode: str, tmp_path: Path) -> None:
    """The run records do not exist yet when a batch's first workers start; the first
    check to finish makes them while the others still run. A folder that does not exist
    can be neither covered nor kept unread, so it is made before any worker starts."""
    home = tmp_path / "late-home"  # nothing of it exists yet
    env = {**os.environ, "CTXKERNEL_HOME": str(home)}
    if mode == "none":
        env["CTXKERNEL_ISOLATION"] = "none"
    steer = home / "runs" / "steer.md"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkernel", "sandbox", "run", "--",
         sys.executable, "-I", "-c", _LATE_READER, str(steer)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
        steer.parent.mkdir(parents=True, exist_ok=True)
        steer.write_text("the engineer's own words\n")
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert out.startswith("refused"), (out, err)


def test_the_parent_neither_follows_nor_blocks_on_what_a_worker_left_in_its_folder(
    mode: str, tmp_path: Path
) -> None:
    """A one-shot worker (under a profiler or a sanitizer) shares its folder with the
    candidate's earlier workers, which may leave a link where the parent writes the
    request and a FIFO where it reads the result back: the request goes into a new file
    (the linked file is untouched) and the FIFO is never read (no result, no hang)."""
    import threading

    from harness.process.local import run_oneshot

    victim = tmp_path / "victim.txt"
    victim.write_text("the parent's words\n")
    workdir, logdir = tmp_path / "work", tmp_path / "logs"
    workdir.mkdir()
    logdir.mkdir()
    request = workdir / ".oneshot.request.json"
    request.symlink_to(victim)
    result = Path(f"{request}.result")
    # the "profiler" is the candidate's side: it leaves a FIFO as its result and ends
    plant = ["sh", "-c", 'rm -f "$0"; mkfifo "$0"', str(result)]
    done: dict[str, object] = {}

    def run() -> None:
        options = fast_options("vector_add")
        done["outcome"] = run_oneshot(workdir, logdir, "cpu", options, {}, {"op": "x"}, plant, 30.0)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(90)
    if thread.is_alive():  # unblock the reader, so the test ends
        with contextlib.suppress(OSError):
            os.close(os.open(result, os.O_WRONLY | os.O_NONBLOCK))
    assert not thread.is_alive(), "the parent blocked on a FIFO the worker left"
    assert victim.read_text() == "the parent's words\n"
    assert not request.is_symlink() and '"op": "x"' in request.read_text()
    outcome = done["outcome"]
    assert isinstance(outcome, dict) and outcome["result"] is None


@pytest.mark.parametrize("start", ["template", "spawned"])
def test_a_later_worker_imports_nothing_an_earlier_one_left_in_its_folder(
    start: str, mode: str, tmp_path: Path
) -> None:
    """The workers of a check share its folder: the candidate's first one may leave there
    a ``harness`` package and a module named as one the problem imports. The harness-only
    worker timing the reference, started later in that folder (spawned or forked), must
    import neither: neither its own code nor the problem's imports come from there."""
    from harness.problems.problem import load_problem
    from harness.process.local import LocalSession

    problem = tmp_path / "vector_add"
    shutil.copytree(EXAMPLES / "vector_add", problem)
    with open(problem / "problem.py", "a") as fh:
        fh.write(
            "\ntry:\n    import zz_wall_planted  # noqa: F401\nexcept ImportError:\n    pass\n"
        )
    loaded = load_problem(problem)  # its snapshot lives as long as it does
    snapshot = Path(loaded.path).resolve()
    workdir, logdir = tmp_path / "work", tmp_path / "logs"
    (workdir / "harness").mkdir(parents=True)
    logdir.mkdir()
    planted = "raise SystemExit('what the candidate left ran in the reference worker')\n"
    (workdir / "harness" / "__init__.py").write_text(planted)
    (workdir / "zz_wall_planted.py").write_text(planted)
    options = fast_options("vector_add", warm=start == "template")
    session = LocalSession(workdir, logdir, "cpu", options, {}, "reference", [snapshot], "triton")
    try:
        header = {"op": "load", "subject": "reference", "problem": {"path": str(snapshot)}}
        reply = session.request({**header, "backend": "triton"}, [], 120.0, 1 << 24)
        assert reply.header.get("ok") and not reply.header.get("error"), reply.header.get("error")
    finally:
        session.close()
    assert "what the candidate left" not in session.stderr_tail()
    assert loaded.path


def test_explain_names_the_layers_and_what_the_worker_may_write(mode: str) -> None:
    env = dict(os.environ)
    if mode == "none":
        env["CTXKERNEL_ISOLATION"] = "none"
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "sandbox", "run", "--explain", "--json"],
        capture_output=True, text=True, env=env, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    import json

    doc = json.loads(done.stdout)
    worker = doc["worker"]
    writable = [path for path, what in worker["writes"].items() if what == "writable"]
    assert writable[0] == "<the worker's temp folder>"
    assert str(Path.home()) not in writable and str(REPO / "harness") not in writable
    assert worker["network"]["tcp 127.0.0.1:22"] == "EPERM"
    assert worker["status"]["Seccomp"] == "2" and worker["status"]["NoNewPrivs"] == "1"
    if mode != "none" and doc["isolation"]["mode"] != "none":
        assert len(worker["processes_visible"]) <= 2
        assert set(worker["dev"]) <= {
            "fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout", "urandom", "zero",
        } | {d for d in worker["dev"] if d.startswith("nvidia")}  # fmt: skip


def test_sandbox_run_exits_with_the_commands_status_and_bad_input_is_one_line() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "sandbox", "run", "--", "sh", "-c", "echo hi; exit 3"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (3, "hi\n")
    bad = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "sandbox", "run"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize("kind", ["devzero", "fifo", "huge"])
def test_a_problem_file_that_is_not_a_sane_regular_file_is_refused_in_one_line(
    kind: str, tmp_path: Path
) -> None:
    problem = tmp_path / "p"
    problem.mkdir()
    target = problem / "problem.py"
    if kind == "devzero":
        target.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        with open(target, "wb") as fh:
            fh.truncate(64 << 20)
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "check", str(problem),
         str(EXAMPLES / "vector_add" / "solution_triton.py"), "--no-record"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    words = {"devzero": "character device", "fifo": "FIFO", "huge": "MiB"}[kind]
    assert words in done.stderr


def test_a_problem_in_a_checks_temp_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ctxkernel-check-abc123" / "work"
    shutil.copytree(EXAMPLES / "vector_add", folder)
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "check", str(folder),
         str(EXAMPLES / "vector_add" / "solution_triton.py"), "--no-record"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 2 and "check's temp folder" in done.stderr, done.stderr


def test_the_problem_is_imported_from_a_snapshot_not_from_the_users_path(tmp_path: Path) -> None:
    from harness.problems.problem import load_problem

    problem = tmp_path / "vector_add"
    shutil.copytree(EXAMPLES / "vector_add", problem)
    loaded = load_problem(problem)
    assert Path(loaded.path).resolve() != problem.resolve()
    assert (Path(loaded.path) / "problem.py").read_bytes() == (problem / "problem.py").read_bytes()
    # a later change of the user's file does not reach the loaded problem
    (problem / "problem.py").write_text("TOLERANCE = {'atol': 1e9}\n")
    assert "1e9" not in (Path(loaded.path) / "problem.py").read_text()


def test_the_memory_cap_follows_the_machine_and_the_workers_at_once() -> None:
    one = memory_cap_for("cuda", RunOptions())
    four = memory_cap_for("cuda", RunOptions(concurrent_workers=4))
    assert 3.5 < one / four < 4.5 or four == 1 << 30
    assert memory_cap_for("cpu", RunOptions(memory_cap_bytes=123 << 20)) == 123 << 20


@pytest.mark.gpu
def test_cuda_host_code_finds_every_door_shut(mode: str, tmp_path: Path) -> None:
    """The host side of a ``load_inline`` candidate (no audit hook sees it) tries to write
    site-packages, the harness, HOME and the problem, connect to 127.0.0.1 and read its
    parent's environment; it computes the add (and so passes) only when all are refused."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU; none is present on this machine")
    problem = tmp_path / "vector_add"
    shutil.copytree(EXAMPLES / "vector_add", problem)
    targets = [
        _site_packages() / "zz_wall_host.pth",
        REPO / "harness" / "zz_wall_host.py",
        Path.home() / ".zz_wall_host",
        problem / "problem.py.zz",
    ]
    source = (WALLS / "gpu_host_code_escapes.py").read_text()
    source = source.replace("__TARGETS__", ", ".join(f'"{t}"' for t in targets))
    candidate = tmp_path / "cand" / "solution_cuda.py"
    candidate.parent.mkdir()
    candidate.write_text(source)
    options = fast_options(None, device="cuda", shapes=[{"n": 4096}], compile_timeout_s=600.0)
    verdict = check(problem, candidate, options, runner=LocalRunner())
    assert verdict.ok, [(r.name, r.reason) for r in verdict.rungs]
    assert not any(t.exists() for t in targets)


_PROFILED_DRIVER = r"""
import json, os, subprocess, sys
from pathlib import Path
from harness.process import sandbox
from harness.process.workerenv import scrubbed_env

work, outside, tool_dir = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[4])
isolation = sandbox.isolation()
mode = isolation.profiler_mode()
if mode == "none" or mode == "pidns":
    sandbox.harden_parent()
hidden = sandbox.parent_folders([work])
spec = sandbox.self_walls_spec(mode, str(work), hidden)
target = [sys.executable, "-c", sys.argv[3], spec, str(outside), str(tool_dir / "report")]
# the "profiler": a shell that writes its report into its own folder and starts the
# target as its child, as ncu and compute-sanitizer do
script = 'echo tool > /proc/$$/comm && echo clean > "$0/report" && echo tool-proc-ok; "$@"'
wrapper = ["sh", "-c", script, str(tool_dir)]
pid_r, pid_w = os.pipe()
keep = (
    sandbox.worker_paths(work, tool_dir, sys.prefix)
    if isolation.private_tmp and mode != "none" else None
)
cmd = sandbox.command(mode, [*wrapper, *target], pid_w, keep_admin=mode == "pidns",
                      keep_paths=keep, writable=str(work), hidden=hidden, profiler=True,
                      walls_on=isolation.walls, tool_dir=str(tool_dir))
proc = subprocess.Popen(cmd, cwd=work, env=scrubbed_env(work, {}), stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        pass_fds=(pid_w,), start_new_session=True)
os.close(pid_w)
sandbox.read_pid(pid_r, 60.0)
out, err = proc.communicate(timeout=120)
print(out)
sys.stderr.write(err)
"""

_PROFILED_TARGET = r"""
import json, os, sys
from harness.process import sandbox

def attempt(path, text="x"):
    try:
        with open(path, "w") as fh:
            fh.write(text)
        return "written"
    except OSError as exc:
        return f"refused {exc.errno}"

doc = {"own_proc_before": attempt("/proc/self/comm", "target")}
sandbox.apply_self_walls(sys.argv[1])
doc["own_proc"] = attempt("/proc/self/comm", "target")
tool = f"/proc/{os.getppid()}/oom_score_adj"  # the tool's: its owner may write it
doc["tool_proc"] = attempt(tool, open(tool).read().strip())
doc["outside"] = attempt(sys.argv[2])
doc["own_folder"] = attempt(os.path.join(os.getcwd(), "mine.txt"))
doc["tool_report"] = attempt(sys.argv[3], "ERROR SUMMARY: 0 errors")
print(json.dumps(doc))
"""


def test_a_profilers_target_walls_itself_as_strictly_as_a_plain_worker(
    mode: str, tmp_path: Path
) -> None:
    """ncu and compute-sanitizer run the worker as their child: the CUDA driver writes the
    child's own /proc/<pid>, which does not exist when the launcher's layer is made (seen
    on the H200: error 304 under either tool inside the walls). The profiler's layer leaves
    /proc writable; the target then walls itself: its own /proc/<pid> and folder writable,
    the tool's /proc/<pid>, the tool's report and everything outside refused."""
    work = tmp_path / "work"
    work.mkdir()
    tool_dir = tmp_path / ".sanitize.tool"
    tool_dir.mkdir(mode=0o700)
    outside = EXAMPLES / "vector_add" / "a-profiled-target-was-here.txt"  # the user's files
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if mode == "none":
        env["CTXKERNEL_ISOLATION"] = "none"
    done = subprocess.run(
        [sys.executable, "-c", _PROFILED_DRIVER, str(work), str(outside), _PROFILED_TARGET,
         str(tool_dir)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=180,
    )  # fmt: skip
    assert "tool-proc-ok" in done.stdout, (done.stdout, done.stderr)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("{")), None)
    assert line is not None, (done.stdout, done.stderr)
    doc = json.loads(line)
    assert doc["own_proc_before"] == "written" and doc["own_proc"] == "written", doc
    assert doc["tool_proc"].startswith("refused"), doc
    assert doc["outside"].startswith("refused") and not outside.exists(), doc
    assert doc["own_folder"] == "written", doc
    assert doc["tool_report"].startswith("refused"), doc
    assert (tool_dir / "report").read_text() == "clean\n"  # as the tool wrote it


def _sandbox_run(
    mode: str, argv: list[str], binds: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``argv`` through ``ctxkernel sandbox run`` in ``mode`` (``binds``: more it may read)."""
    env = dict(os.environ)
    if mode == "none":
        env["CTXKERNEL_ISOLATION"] = "none"
    bound = [arg for b in binds for arg in ("--bind", str(b))]
    return subprocess.run(
        [sys.executable, "-m", "ctxkernel", "sandbox", "run", *bound, "--", *argv],
        capture_output=True, text=True, env=env, timeout=180, cwd=REPO,
    )  # fmt: skip


def test_a_fork_bomb_from_native_code_meets_the_process_cap(mode: str, tmp_path: Path) -> None:
    """A C program forks waiting children without end (bounded here: 3000 attempts or 4 s,
    each child gone after 20 s by itself, so a broken cap cannot take a shared machine
    down). Its tree never holds many more than the cap -- the kernel refuses the fork
    where it can, the launcher counts and ends the tree in every mode, root included --
    and the run ends with the launcher's reason; no child outlives it."""
    from harness.process import lifetime

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine")
    folder = tmp_path / "bin"
    folder.mkdir()
    binary = folder / "forkbomb"
    subprocess.run([cc, "-O1", "-o", str(binary), str(WALLS / "forkbomb.c")], check=True)
    done = _sandbox_run(mode, [str(binary), "3000", "4", "sleep-61.8034"], (folder,))
    assert done.returncode == sandbox.LAUNCH_FAILED, (done.returncode, done.stdout, done.stderr)
    assert "process cap" in done.stderr and f"cap of {lifetime.task_cap()}" in done.stderr
    assert "held" not in done.stdout, done.stdout  # ended before it could say
    assert _gone("61.8034"), _sleepers("61.8034")[:3]
    if mode == "none" and lifetime.pids_cgroup_base() is not None:
        # root spared by RLIMIT_NPROC: the kernel still refuses the fork past the cap (a
        # pids cgroup's pids.max), where the launcher's count alone let 650-940 through
        refusal = [ln for ln in done.stderr.splitlines() if ln.startswith("first refusal")]
        assert refusal, done.stderr
        held = int(refusal[0].split()[3])
        assert held + 1 <= lifetime.task_cap() + lifetime.TASKS_SLACK, refusal
        base = lifetime.pids_cgroup_base() or ""
        left = [n for n in os.listdir(base) if n.startswith(lifetime.CGROUP_PREFIX)]
        assert not [n for n in left if not _alive(int(n[len(lifetime.CGROUP_PREFIX) :]))], left


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


_THREADS = r"""
import sys, threading
gate = threading.Event()
threads = [threading.Thread(target=gate.wait) for _ in range(int(sys.argv[1]))]
for t in threads:
    t.start()
print("started", len(threads), flush=True)
gate.set()
for t in threads:
    t.join()
"""


def test_a_worker_of_a_few_hundred_threads_stays_under_the_process_cap(mode: str) -> None:
    """The cap counts threads (the kernel's counters do): a worker holding more than any
    honest one does (torch's pools, a CUDA context, a compile's helpers) runs to its end."""
    from harness.process import lifetime

    many = lifetime.task_cap() - 64
    done = _sandbox_run(mode, [sys.executable, "-I", "-c", _THREADS, str(many)])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"started {many}"


_XATTRS = r"""
import errno, os, sys
own = os.path.join(os.getcwd(), "own.txt")  # its own file, in the one folder it may write
with open(own, "w") as fh:
    fh.write("mine")
for path in (sys.argv[1], own):
    for name, call in (
        ("setxattr", lambda: os.setxattr(path, "user.ctxkernel-wall", b"1")),
        ("lsetxattr", lambda: os.setxattr(path, "user.ctxkernel-wall", b"1", follow_symlinks=False)),
        ("fsetxattr", lambda: os.setxattr(os.open(path, os.O_RDONLY), "user.ctxkernel-wall", b"1")),
        ("removexattr", lambda: os.removexattr(path, "user.ctxkernel-old")),
        ("lremovexattr", lambda: os.removexattr(path, "user.ctxkernel-old", follow_symlinks=False)),
        ("fremovexattr", lambda: os.removexattr(os.open(path, os.O_RDONLY), "user.ctxkernel-old")),
    ):
        try:
            call()
            print(name, path, "ok")
        except OSError as exc:
            print(name, path, errno.errorcode.get(exc.errno or 0, str(exc.errno)))
print("read", os.getxattr(sys.argv[1], "user.ctxkernel-old"))
"""


def test_a_worker_sets_and_removes_no_extended_attribute(mode: str, tmp_path: Path) -> None:
    """No landlock right covers extended attributes: without a mount namespace a worker
    could tag or strip any file of the user's, and with one its own. The seccomp filter
    refuses all six calls (EPERM) on the user's files and on its own; reading works."""
    outside = tmp_path / "users-file.txt"
    outside.write_text("the user's file\n")
    try:
        os.setxattr(outside, "user.ctxkernel-old", b"kept")
    except OSError as exc:
        pytest.skip(f"this file system keeps no user extended attributes: {exc}")
    done = _sandbox_run(mode, [sys.executable, "-I", "-c", _XATTRS, str(outside)], (tmp_path,))
    assert done.returncode == 0, done.stderr
    tried = [ln for ln in done.stdout.splitlines() if not ln.startswith("read")]
    assert len(tried) == 12, (done.stdout, done.stderr)
    assert all(ln.endswith(" EPERM") for ln in tried), tried
    assert "read b'kept'" in done.stdout
    assert os.listxattr(outside) == ["user.ctxkernel-old"]


_ORPHANS = r"""
import os, sys, time
for _ in range(int(sys.argv[1])):  # one at a time: never many alive at once
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)  # its child is an orphan
    os.waitpid(pid, 0)
time.sleep(0.5)  # for the launcher to count them, were they kept
print("done", flush=True)
"""


def test_orphans_that_ended_hold_no_place_under_the_process_cap(mode: str) -> None:
    """Orphans go to the namespace's init (or the launcher, a subreaper): reaped as they
    end, or their zombies would hold PIDs, and the cap, until the worker ends."""
    from harness.process import lifetime

    done = _sandbox_run(
        mode, [sys.executable, "-I", "-c", _ORPHANS, str(lifetime.task_cap() + 100)]
    )
    assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr


_TIMES = r"""
import errno, os, shutil, sys
own = os.path.join(os.getcwd(), "own.txt")  # its own file, in the one folder it may write
with open(own, "w") as fh:
    fh.write("mine")
for where, path in (("outside", sys.argv[1]), ("own", own)):
    before = os.stat(path).st_mtime_ns
    back = before - 86400 * 10**9
    fd = os.open(path, os.O_RDONLY)
    for name, call in (
        ("utimensat", lambda: os.utime(path, ns=(back, back))),
        ("utimensat-nofollow", lambda: os.utime(path, ns=(back, back), follow_symlinks=False)),
        ("futimens-read-only", lambda: os.utime(fd, ns=(back, back))),
        ("now", lambda: os.utime(path)),
    ):
        try:
            call()
            result = "ok"
        except OSError as exc:
            result = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        moved = os.stat(path).st_mtime_ns != before
        print(where, name, result, "moved" if moved else "kept")
shutil.copy2(own, own + ".copy")
shutil.copytree(os.getcwd(), os.path.join(os.getcwd(), "tree"), ignore=lambda d, n: ["tree"])
print("copied", open(own + ".copy").read())
"""


def test_a_worker_sets_no_time_on_the_users_files_and_still_copies_its_own(
    mode: str, tmp_path: Path
) -> None:
    """No landlock right covers a file's times and an owner needs no capability: without
    a mount namespace a worker could set any file of the user's back (a staleness check
    keyed on mtimes fooled). In ``none`` mode the seccomp filter skips every call that sets
    times (success, nothing changed: ``shutil.copy2`` copies on); with a read-only world
    the file system refuses them outside its folder."""
    outside = tmp_path / "users-file.txt"
    outside.write_text("the user's file\n")
    os.utime(outside, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = os.stat(outside)
    done = _sandbox_run(mode, [sys.executable, "-I", "-c", _TIMES, str(outside)], (tmp_path,))
    assert done.returncode == 0, done.stderr
    tried = [ln for ln in done.stdout.splitlines() if ln.startswith("outside ")]
    assert len(tried) == 4, (done.stdout, done.stderr)
    assert all(ln.endswith(" kept") for ln in tried), tried
    assert "copied mine" in done.stdout
    after = os.stat(outside)
    assert (after.st_atime_ns, after.st_mtime_ns) == (before.st_atime_ns, before.st_mtime_ns)


_SERVE = r"""
import errno, os, socket
def attempt(name, call):
    try:
        call()
        print(name, "ok")
    except OSError as exc:
        print(name, errno.errorcode.get(exc.errno or 0, str(exc.errno)))
unix = lambda kind=socket.SOCK_STREAM: socket.socket(socket.AF_UNIX, kind)
attempt("bind-abstract", lambda: unix().bind("\0ctxkernel-wall-test-squat"))
attempt("bind-path", lambda: unix().bind(os.path.join(os.getcwd(), "srv")))
attempt("listen", lambda: unix().listen(1))
attempt("datagram-pair", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
attempt("stream-pair", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
"""


def test_a_worker_serves_no_unix_socket(mode: str) -> None:
    """Without a network namespace a worker could take an abstract name (or a path) that
    another program of the user expects to own, and listen there: ``bind`` and ``listen``
    are refused in every mode, and so is a datagram socket pair (whose ``sendmsg`` reaches
    any named socket); a stream pair, talking only to itself, stays allowed."""
    done = _sandbox_run(mode, [sys.executable, "-I", "-c", _SERVE])
    assert done.returncode == 0, done.stderr
    results = dict(ln.split(" ", 1) for ln in done.stdout.splitlines())
    assert results == {
        "bind-abstract": "EPERM",
        "bind-path": "EPERM",
        "listen": "EPERM",
        "datagram-pair": "EPERM",
        "stream-pair": "ok",
    }, done.stdout


_FILTER_THEN_EXEC = r"""
import ctypes, importlib.util, os, sys
path, abi, host = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "host"
spec = importlib.util.spec_from_file_location("seccomp", path)
seccomp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seccomp)
ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
seccomp.install(network=True, host_files=host, host_processes=host, abi=abi)  # this PID: the exec keeps it
numbers = ",".join(f"{k}={v}" for k, v in seccomp._NR[seccomp._ARCH].items())
os.execv(sys.executable, [sys.executable, "-I", "-c", sys.argv[4], sys.argv[5], numbers])
"""

_SIGNALS = r"""
import ctypes, errno, fcntl, json, os, signal, socket, struct, sys, threading
neighbour = int(sys.argv[1])
nr = {k: int(v) for k, v in (item.split("=") for item in sys.argv[2].split(","))}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
info = (ctypes.c_int * 32)(0, 0, -1)  # siginfo with si_code SI_QUEUE, as sigqueue() sends
got, out = [], {}
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
def attempt(name, call):
    try:
        rc = call()
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        return
    failed = isinstance(rc, int) and rc < 0
    out[name] = errno.errorcode.get(ctypes.get_errno(), "?") if failed else "ok"
def from_child():
    child = os.fork()
    if child == 0:
        try:
            os.kill(os.getppid(), signal.SIGUSR1)
            os._exit(0)
        except OSError as exc:
            os._exit(exc.errno or 1)
    status = os.waitpid(child, 0)[1]
    if os.waitstatus_to_exitcode(status):
        raise OSError(os.waitstatus_to_exitcode(status), "from the child")
main = threading.get_ident()
me = os.getpid()
r, w = os.pipe()
a, b = socket.socketpair()
attempt("kill-itself", lambda: os.kill(me, signal.SIGUSR1))
attempt("raise", lambda: signal.raise_signal(signal.SIGUSR1))
attempt("pthread_kill-itself", lambda: signal.pthread_kill(main, signal.SIGUSR1))
thread = threading.Thread(target=attempt, args=("thread-to-main", lambda: signal.pthread_kill(main, signal.SIGUSR1)))
thread.start(); thread.join()
attempt("sigqueue-itself", lambda: libc.syscall(nr["rt_sigqueueinfo"], me, signal.SIGUSR1, info))
attempt("child-to-worker", from_child)
attempt("F_SETOWN-itself", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, me))
attempt("F_SETOWN-none", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, 0))
# signal 0: the door is tried, never the harm
attempt("kill", lambda: os.kill(neighbour, 0))
attempt("kill-group", lambda: os.kill(0, 0))
attempt("kill-every", lambda: os.kill(-1, 0))
attempt("kill-its-group", lambda: os.kill(-os.getpgid(neighbour), 0))
attempt("tkill", lambda: libc.syscall(nr["tkill"], neighbour, 0))
attempt("tgkill", lambda: libc.syscall(nr["tgkill"], neighbour, neighbour, 0))
attempt("sigqueue", lambda: libc.syscall(nr["rt_sigqueueinfo"], neighbour, 0, info))
attempt("tgsigqueue", lambda: libc.syscall(nr["rt_tgsigqueueinfo"], neighbour, neighbour, 0, info))
attempt("pidfd_open", lambda: libc.syscall(nr["pidfd_open"], neighbour, 0))
proc = os.open(f"/proc/{neighbour}", os.O_RDONLY | os.O_DIRECTORY)  # a pidfd too
attempt("pidfd_send_signal", lambda: libc.syscall(nr["pidfd_send_signal"], proc, 0, None, 0))
attempt("F_SETOWN", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, neighbour))
attempt("F_SETOWN_EX", lambda: fcntl.fcntl(r, 15, struct.pack("ii", 1, neighbour)))
attempt("FIOSETOWN", lambda: fcntl.ioctl(a.fileno(), 0x8901, struct.pack("i", neighbour)))
attempt("SIOCSPGRP", lambda: fcntl.ioctl(a.fileno(), 0x8902, struct.pack("i", neighbour)))
print(json.dumps({"signals_received": len(got), **out}))
"""
_OWN_SIGNALS = (
    "kill-itself", "raise", "pthread_kill-itself", "thread-to-main", "sigqueue-itself",
    "child-to-worker", "F_SETOWN-itself", "F_SETOWN-none",
)  # fmt: skip


@pytest.mark.parametrize(
    ("abi", "host", "refused"),
    [(5, True, True), (6, True, False), (5, False, False)],
    ids=["none-mode-landlock-5", "none-mode-landlock-6", "namespace-landlock-5"],
)
def test_where_landlock_scopes_no_signal_a_none_mode_worker_signals_only_itself(
    abi: int, host: bool, refused: bool
) -> None:
    """Landlock scopes signals only from its ABI 6 (Linux 6.12): before it, a worker
    without a PID namespace could kill or stop the check and every process of the user.
    The filter, built for the landlock ABI the worker holds, then lets a signal go to the
    worker's own process only (the PID it had when the filter went on, which the exec
    keeps): no group, no pidfd, no other file owner. Here the filter is built as for ABI 5
    in a process without landlock, beside a neighbour of the same user; with ABI 6, or
    a PID namespace (not ``host``), the filter leaves signals alone."""
    from harness.process import seccomp

    if not seccomp.supported():
        pytest.skip("no seccomp table for this architecture")
    neighbour = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _FILTER_THEN_EXEC, str(REPO / "harness/process/seccomp.py"),
             str(abi), "host" if host else "namespace", _SIGNALS, str(neighbour.pid)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert neighbour.poll() is None
    finally:
        neighbour.kill()
        neighbour.wait()
    assert out.pop("signals_received") == 6, out
    assert {name: out.pop(name) for name in _OWN_SIGNALS} == dict.fromkeys(_OWN_SIGNALS, "ok")
    if refused:
        assert out == dict.fromkeys(out, "EPERM"), out
    else:
        assert out["kill"] == out["tgkill"] == out["pidfd_send_signal"] == "ok", out
