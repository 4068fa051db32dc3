"""The parent's hidden folders stay hidden however a worker reaches for them.

Two ways past the walls that hid a folder at its own path only: another mount of the same
files (a volume mounted twice, a home or cache bound under ``/mnt`` or ``/srv``, common in
containers), and, in ``none`` mode, a folder on the way so wide (a crowded ``/tmp``) that
landlock's read rules were given up and nothing at all was hidden. Both are tried here in
the machine's strongest mode and in ``none`` mode, with an honest worker beside them.

The bind mounts are made in a mount namespace of the test's own (a child process that
unshares one, binds, then runs the check or ``ctxkernel sandbox run``): they vanish with
it, and the machine's mounts are never touched. That needs root (CI runs the suite as
root); as any other user these tests are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cheatspec import EXAMPLES, read_expectation
from conftest import WORKER_READER, fast_options

from harness.paths import default_runs_dir
from harness.process import sandbox, seccomp, walls
from harness.runner import LocalRunner, check

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODES = ["auto", "none"]
WORDS = "the engineer's own words"

# runs in a child: a mount namespace of its own (private: nothing propagates back), an
# empty tmpfs on the scratch folder, each (source, name) bound at scratch/name, then exec
_IN_NAMESPACE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def done(rc, what):
    if rc != 0:
        sys.exit(f"{what}: {os.strerror(ctypes.get_errno())}")
scratch, binds = sys.argv[1], json.loads(sys.argv[2])
done(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
done(libc.mount(None, b"/", None, 0x4000 | (1 << 18), None), "mount --make-rprivate /")
done(libc.mount(b"tmpfs", scratch.encode(), b"tmpfs", 0, b"mode=755,size=1m"), "tmpfs")
for source, name in binds:
    target = os.path.join(scratch, name)
    if os.path.isdir(source):
        os.mkdir(target)
    else:
        open(target, "w").close()
    done(libc.mount(source.encode(), target.encode(), None, 0x1000 | 0x4000, None), "bind")
os.execv(sys.argv[3], sys.argv[3:])
"""


# a real check of a candidate, in the child; prints the verdict's outline
_CHECK = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from conftest import fast_options
from harness.runner import LocalRunner, check
verdict = check(Path(sys.argv[2]), Path(sys.argv[3]), fast_options("vector_add",
    policy_scan=False), runner=LocalRunner())
failed = verdict.failed_rung
print(json.dumps({"ok": verdict.ok, "rung": failed.name if failed else None,
    "reason": verdict.reason, "layers": verdict.environment["isolation"]["layers"]}))
"""


def _scratch() -> str:
    """A folder outside every worker's private temp folders, away from the interpreter,
    the checkout and the temp folder, that the namespace may cover with its own tmpfs."""
    needed = [sys.prefix, os.path.realpath(sys.executable), str(REPO), tempfile.gettempdir()]
    for place in ("/mnt", "/media", "/srv"):
        if os.path.isdir(place) and not any(
            walls._within(os.path.realpath(n), place) for n in needed
        ):
            return place
    pytest.skip("no folder here to mount a scratch tmpfs on (/mnt, /media, /srv)")


def _mounts_allowed() -> str:
    """Empty when this process may make a mount namespace and bind mounts in it; else why
    not."""
    if os.geteuid() != 0:
        return "bind mounts need root (CI runs this suite as root)"
    done = subprocess.run(
        [sys.executable, "-c", _IN_NAMESPACE, _scratch(), "[]", sys.executable, "-c", "pass"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return "" if done.returncode == 0 else f"no mount namespace here: {done.stderr.strip()}"


def _in_namespace(
    binds: list[tuple[Path, str]], argv: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    why = _mounts_allowed()
    if why:
        pytest.skip(why)
    doc = json.dumps([[str(source), name] for source, name in binds])
    return subprocess.run(
        [sys.executable, "-c", _IN_NAMESPACE, _scratch(), doc, *argv],
        capture_output=True, text=True, env=env, timeout=300, cwd=REPO,
    )  # fmt: skip


def _env(mode: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    if mode == "none":
        if walls.landlock_abi() < 1:
            pytest.skip("this kernel has no landlock: none mode keeps only seccomp there")
        env["CTXKERNEL_ISOLATION"] = "none"
    else:
        env.pop("CTXKERNEL_ISOLATION", None)
    return env


def _sandbox_read(paths: list[str], binds: list[str] | None = None) -> list[str]:
    """The argv of ``ctxkernel sandbox run`` running the reader on ``paths``."""
    bound = [arg for b in binds or () for arg in ("--bind", b)]
    return [sys.executable, "-m", "ctxkernel", "sandbox", "run", *bound, "--",
            sys.executable, "-I", "-c", WORKER_READER, *paths]  # fmt: skip


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """The run records (hidden from every worker) with the engineer's words in them, and
    beside them in the test's folder a file every worker may read."""
    runs = default_runs_dir()
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "steer.md").write_text(WORDS + "\n")
    (tmp_path / "open.txt").write_text("open to all\n")
    return runs


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bound", ["a folder above it", "the folder itself"])
def test_a_hidden_folder_bound_at_another_path_stays_unread(
    mode: str, bound: str, tmp_path: Path, records: Path
) -> None:
    """The run records are hidden at their own path; bound again elsewhere (the folder
    that holds them, or the records' folder itself), they must be hidden there too, while
    a file beside them in the same bound folder is read as before."""
    scratch = _scratch()
    if bound == "the folder itself":
        binds = [(records, "records")]
        hidden = [f"{scratch}/records/steer.md", str(records / "steer.md")]
    else:
        binds = [(tmp_path, "holder")]
        inner = records.relative_to(tmp_path)
        hidden = [f"{scratch}/holder/{inner}/steer.md", str(records / "steer.md")]
    binds.append((tmp_path / "open.txt", "open.txt"))
    readable = [f"{scratch}/open.txt"]
    if bound != "the folder itself":
        readable.append(f"{scratch}/holder/open.txt")
    done = _in_namespace(binds, _sandbox_read([*hidden, *readable]), _env(mode))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(hidden) + len(readable), (lines, done.stderr)
    for path, line in zip(hidden, lines, strict=False):
        assert line.startswith("refused"), f"{path} read in mode {mode}: {line}"
    assert lines[len(hidden) :] == ["read open to all"] * len(readable), lines


def test_every_other_path_to_a_hidden_folder_is_found(tmp_path: Path, records: Path) -> None:
    """``walls.reaching``: a bind of a folder above the hidden one, of the hidden one
    itself, of a file inside it; not a bind of something beside it."""
    (records / "one.json").write_text("{}\n")
    scratch = _scratch()
    binds = [(tmp_path, "holder"), (records, "records"), (records / "one.json", "one.json"),
             (tmp_path / "open.txt", "open.txt")]  # fmt: skip
    probe = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "from harness.process import walls; print(json.dumps(walls.reaching(sys.argv[2:])))"
    )
    done = _in_namespace(
        binds, [sys.executable, "-c", probe, str(REPO), str(records)], _env("auto")
    )
    assert done.returncode == 0, done.stderr
    found = set(json.loads(done.stdout))
    inner = records.relative_to(tmp_path)
    expected = {f"{scratch}/holder/{inner}", f"{scratch}/records", f"{scratch}/one.json"}
    assert found == expected


def test_a_machine_of_many_mounts_is_searched_in_milliseconds(
    tmp_path: Path, records: Path
) -> None:
    """A worker starts after ``reaching`` on every start: with hundreds of mounts of the
    same folder (a host of many containers) it stays fast (each way is followed once)."""
    binds = [(tmp_path, f"b{i}") for i in range(300)]
    probe = (
        "import json, sys, time; sys.path.insert(0, sys.argv[1]); "
        "from harness.process import walls; start = time.perf_counter(); "
        "found = walls.reaching(sys.argv[2:]); "
        "print(json.dumps([len(found), time.perf_counter() - start]))"
    )
    argv = [sys.executable, "-c", probe, str(REPO), str(records)]
    done = _in_namespace(binds, argv, _env("auto"))
    assert done.returncode == 0, done.stderr
    count, took = json.loads(done.stdout)
    assert count == 300 and took < 2.0, (count, took)


@pytest.mark.parametrize("mode", MODES)
def test_a_planted_cheat_finds_no_other_mount_of_the_run_records(
    mode: str, tmp_path: Path, records: Path
) -> None:
    """w27 hunts every mount point it sees for another way to the run records; here the
    folder that holds them is bound at another path, as a real check runs."""
    cheat = HERE / "walls" / "w27_reads_the_run_records_through_another_mount.py"
    candidate = tmp_path / "cand" / "solution_triton.py"
    candidate.parent.mkdir()
    candidate.write_text(cheat.read_text().replace("__RUNS_DIR__", str(records)))
    problem = tmp_path / "vector_add"
    shutil.copytree(EXAMPLES / "vector_add", problem)
    argv = [sys.executable, "-c", _CHECK, str(HERE), str(problem), str(candidate)]
    done = _in_namespace([(tmp_path, "holder")], argv, _env(mode))
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    expect = read_expectation(cheat)
    assert not verdict["ok"], f"{cheat.name} passed in mode {mode}"
    assert verdict["rung"] in expect.rungs and expect.named_in(verdict["reason"]), verdict
    assert verdict["layers"]["parent_folders_also_at"], verdict["layers"]


# -- a folder too wide to grant entry by entry (none mode) -------------------------------------


@pytest.fixture
def crowded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp folder holding more entries than landlock's read rules are given (a busy
    machine's ``/tmp``), and in it another check's folder, as this process's temp folder."""
    place = tmp_path / "crowded-tmp"
    place.mkdir()
    for i in range(walls._MAX_READ_RULES + 1):
        os.close(os.open(place / f"stale-{i:05d}", os.O_CREAT | os.O_WRONLY, 0o600))
    other = place / "ctxkernel-check-other" / "work"
    other.mkdir(parents=True)
    (other / "solution_triton.py").write_text("# the other candidate\n")
    monkeypatch.setenv("TMPDIR", str(place))
    monkeypatch.setattr(tempfile, "tempdir", str(place))
    yield place
    shutil.rmtree(place)


@pytest.fixture
def none_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if walls.landlock_abi() < 1:
        pytest.skip("this kernel has no landlock: none mode keeps only seccomp there")
    monkeypatch.setenv("CTXKERNEL_ISOLATION", "none")
    monkeypatch.setattr(sandbox, "_isolation", None)
    yield
    sandbox._isolation = None


def test_past_a_crowded_temp_folder_hidden_folders_stay_unread(
    crowded: Path, records: Path, none_mode: None, tmp_path: Path
) -> None:
    """Past a folder of more entries than the read rules' cap, the run records and the
    other check's folder stay unread; what the worker needs there (its problem) is read."""
    problem = crowded / "problem"
    problem.mkdir()
    (problem / "problem.py").write_text("the problem\n")
    hidden = [
        str(records / "steer.md"),
        str(crowded / "ctxkernel-check-other/work/solution_triton.py"),
    ]
    argv = _sandbox_read([*hidden, str(problem / "problem.py")], binds=[str(problem)])
    done = subprocess.run(
        argv, capture_output=True, text=True, env=dict(os.environ), timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [ln.split()[0] for ln in lines[:2]] == ["refused", "refused"], lines
    assert lines[2:] == ["read the problem"], lines


@pytest.mark.parametrize(
    "candidate",
    ["solution_triton.py", "w08_reads_the_run_records.py", "w14_reads_another_checks_folder.py"],
)
def test_a_check_past_a_crowded_temp_folder(
    candidate: str, crowded: Path, records: Path, none_mode: None, tmp_path: Path
) -> None:
    """An honest check passes with its temp folder crowded (its own folder and problem
    granted by name), the narrowed folder named in the verdict; the planted readers of the
    run records and of another check's folder are refused."""
    problem = tmp_path / "vector_add"
    shutil.copytree(EXAMPLES / "vector_add", problem)
    source = HERE / "walls" / candidate if candidate.startswith("w") else problem / candidate
    staged = tmp_path / "cand" / "solution_triton.py"
    staged.parent.mkdir()
    staged.write_text(source.read_text().replace("__RUNS_DIR__", str(records)))
    verdict = check(
        problem, staged, fast_options("vector_add", policy_scan=False), runner=LocalRunner()
    )
    if candidate.startswith("w"):
        expect = read_expectation(source)
        assert not verdict.ok, f"{candidate} passed past a crowded temp folder"
        failed = verdict.failed_rung
        assert failed is not None and failed.name in expect.rungs, verdict.reason
        assert expect.named_in(verdict.reason), verdict.reason
    else:
        assert verdict.ok, verdict.reason
    layers = verdict.environment["isolation"]["layers"]
    assert str(crowded.resolve()) in layers["read_rules_narrowed"], layers


def test_the_read_rules_narrow_a_wide_folder_to_what_the_worker_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process, with the cap lowered: a folder past it is narrowed to its listing and
    the entries the worker needs, never granted whole; a hidden folder in it stays unread."""
    if walls.landlock_abi() < 1:
        pytest.skip("this kernel has no landlock")
    monkeypatch.setattr(walls, "_MAX_READ_RULES", 40)
    wide = tmp_path / "wide"
    (wide / "secret").mkdir(parents=True)
    (wide / "secret" / "key").write_text("secret\n")
    (wide / "needed").mkdir()
    (wide / "needed" / "module.py").write_text("needed\n")
    for i in range(50):
        (wide / f"entry-{i}").write_text("any\n")
    own = tmp_path / "own"
    own.mkdir()
    paths = [wide / "secret" / "key", wide / "needed" / "module.py", wide / "entry-7"]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the landlock layer is for the child alone
        os.close(read)
        try:
            seccomp.libc().prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: a user but root needs it
            done = walls.landlock(
                [str(own)], [], [str(wide / "secret")], needs=[str(wide / "needed")]
            )
            seen = []
            for path in paths:
                try:
                    seen.append(path.read_text().strip())
                except OSError as exc:
                    seen.append(type(exc).__name__)
            os.write(write, json.dumps({"done": done, "seen": seen}).encode())
        except BaseException as exc:
            os.write(write, json.dumps({"error": repr(exc)}).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        doc = json.loads(fh.read() or "{}")
    os.waitpid(child, 0)
    assert "error" not in doc, doc
    assert doc["seen"] == ["PermissionError", "needed", "PermissionError"], doc
    assert str(wide.resolve()) in doc["done"]["narrowed"], doc  # /tmp too, past so low a cap
