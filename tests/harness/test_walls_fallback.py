"""A wall the machine refuses leaves no door open: another wall takes its place, or the
worker does not start.

Two walls of the namespace modes can be refused while the others go up: the empty tmpfs
over one of the parent's folders (its mount refused), and the read-only world (the probe
finds the remount refused). Each refusal is made here for real in the launcher, not by a
knob of the production code: the launcher is run by a driver that loads it by path and
refuses the one mount (``walls._mount``) before calling its ``main``, or the parent is
given the isolation the probe reports where the remount is refused (``walls`` without
``ro``). The worker is then an honest reader or writer of the user's files. Last, the
pids cgroup that caps root's tree in ``none`` mode (where RLIMIT_NPROC spares root) is
made and removed per worker, and one a killed launcher left is swept.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import WORKER_READER

from harness.paths import default_runs_dir
from harness.process import sandbox, sandboxrun, walls

REPO = Path(__file__).resolve().parents[2]
SECRET = "the run record's words"

# the launcher, loaded by path as it runs itself, with the tmpfs over one folder refused
# (and with --no-landlock, as on a kernel without landlock), then run on the real arguments
_REFUSING_LAUNCHER = r"""
import errno, importlib.util, sys
refused, launcher, args = sys.argv[1], sys.argv[2], sys.argv[3:]
spec = importlib.util.spec_from_file_location("ctxkernel_launcher", launcher)
sandbox = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sandbox)
real = sandbox.walls._mount
def mount(source, target, fstype, flags, data=None):
    if target == refused and fstype == b"tmpfs":
        raise OSError(errno.EPERM, f"mount {target}: refused here")
    real(source, target, fstype, flags, data)
sandbox.walls._mount = mount
if args[:1] == ["--no-landlock"]:
    sandbox.walls.landlock_abi = lambda: 0
    args = args[1:]
sys.exit(sandbox.main(args))
"""


def _namespace_mode() -> sandbox.Isolation:
    isolation = sandbox.isolation()
    if not isolation.private_tmp:
        pytest.skip(f"no mount namespace here ({isolation.mode}): nothing to cover")
    return isolation


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run records with one in them, outside the temp folder (a namespace mode's private
    ``/tmp`` would hide them whatever else held): under this user's home, as they are."""
    home = Path.home()
    if not os.access(home, os.W_OK) or walls._within(str(home), tempfile.gettempdir()):
        pytest.skip("no writable home outside the temp folder")
    place = Path(tempfile.mkdtemp(prefix="walls-fallback-test-", dir=home))
    monkeypatch.setenv("CTXKERNEL_HOME", str(place / "ckhome"))
    monkeypatch.setattr(sandbox, "_isolation", None)
    runs = default_runs_dir()
    runs.mkdir(parents=True)
    (runs / "record.json").write_text(SECRET + "\n")
    yield runs
    shutil.rmtree(place)
    sandbox._isolation = None


def _refusing(monkeypatch: pytest.MonkeyPatch, folder: Path, *extra: str) -> None:
    """Every launcher this process starts refuses the tmpfs over ``folder``."""
    real = sandbox.command

    def command(*args: object, **kwargs: object) -> list[str]:
        cmd = real(*args, **kwargs)  # type: ignore[arg-type]
        at = cmd.index(sandbox._LAUNCHER)
        refused = os.path.realpath(folder)
        return [*cmd[:at], "-c", _REFUSING_LAUNCHER, refused, sandbox._LAUNCHER, *extra,
                *cmd[at + 1 :]]  # fmt: skip

    monkeypatch.setattr(sandbox, "command", command)


def _problem_beside(records: Path) -> Path:
    """A file the worker reads beside the records (its home, which holds it, stays
    uncovered: the records' own cover is the only one between it and them)."""
    own = records.parent / "problem.txt"
    own.write_text("the problem\n")
    return own


def test_a_parent_folder_whose_cover_is_refused_stays_unread(
    records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tmpfs over the run records is refused: landlock keeps them unread instead (the
    worker reads its own problem beside them as before); the cover was silently skipped,
    and the records read."""
    _namespace_mode()
    _refusing(monkeypatch, records)
    own = _problem_beside(records)
    rc, out, err, _ = sandboxrun.run_sandboxed(
        [sys.executable, "-I", "-c", WORKER_READER, str(records / "record.json"), str(own)],
        capture=True,
        binds=[str(own)],
    )
    assert rc == 0, err
    assert out.splitlines() == ["refused PermissionError", "read the problem"], (out, err)


def test_without_landlock_a_refused_cover_stops_the_worker(
    records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no landlock can keep the folder unread either, the worker does not start, and
    says which folder in one line."""
    _namespace_mode()
    _refusing(monkeypatch, records, "--no-landlock")
    own = _problem_beside(records)
    rc, out, err, _ = sandboxrun.run_sandboxed(
        [sys.executable, "-I", "-c", WORKER_READER, str(records / "record.json")],
        capture=True,
        binds=[str(own)],
    )
    assert rc == sandbox.LAUNCH_FAILED, (rc, out, err)
    assert out == ""
    assert f"{os.path.realpath(records)} could not be covered" in err, err


def test_the_layers_name_a_folder_the_probe_could_not_cover(records: Path) -> None:
    """The probe tries the covers too, and the verdict's layers say which of the parent's
    folders fell back to landlock."""
    isolation = _namespace_mode()
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _REFUSING_LAUNCHER, os.path.realpath(records),
         sandbox._LAUNCHER, "--probe", os.path.realpath(records)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert json.loads(done.stdout)["uncovered"][isolation.mode] == [os.path.realpath(records)]
    isolation = sandbox.Isolation(
        "userns", ("userns",), private_tmp=True, landlock=6, seccomp=True,
        walls=("net", "dev", "ro"), uncovered=("/home/u/.ctxkernel/runs",),
    )  # fmt: skip
    layers = isolation.layers()
    assert layers["parent_folders_hidden"] == "tmpfs and landlock"
    assert layers["parent_folders_uncovered"] == ["/home/u/.ctxkernel/runs"]


_FILES = r"""
import errno, json, os, sys
path = sys.argv[1]
out = {}
def attempt(name, call):
    try:
        call()
        out[name] = "ok"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
attempt("chmod-000", lambda: os.chmod(path, 0))
attempt("chmod-setuid", lambda: os.chmod(path, 0o4755))
attempt("chmod-world-writable", lambda: os.chmod(path, 0o666))
attempt("utime", lambda: os.utime(path, (0, 0)))
attempt("write", lambda: open(path, "a").write("the worker's words"))
mine = os.path.join(os.getcwd(), "mine")
open(mine, "w").close()
attempt("chmod-own", lambda: os.chmod(mine, 0o600))
print(json.dumps(out))
"""


def test_without_the_read_only_world_the_users_files_keep_their_modes_and_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe found the read-only remount refused (``walls`` without ``ro``): the user's
    files are then writable in the worker's mount namespace, and landlock covers neither
    a file's mode nor its times. The seccomp filter's file rules come on as in ``none``
    mode: no mode and no time set (the call skipped: success, nothing changed, its own
    file's included: no argument tells it from the user's); landlock still refuses the
    write."""
    isolation = _namespace_mode()
    if walls.landlock_abi() < 1:
        pytest.skip("no landlock here: the write would not be refused")
    monkeypatch.setattr(
        sandbox,
        "_isolation",
        sandbox.Isolation(
            isolation.mode, isolation.available, private_tmp=True, landlock=isolation.landlock,
            seccomp=isolation.seccomp, walls=tuple(w for w in isolation.walls if w != "ro"),
        ),
    )  # fmt: skip
    outside = tmp_path / "users-file.txt"
    outside.write_text("the user's file\n")
    os.chmod(outside, 0o644)
    os.utime(outside, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = os.stat(outside)
    rc, out, err, _ = sandboxrun.run_sandboxed(
        [sys.executable, "-I", "-c", _FILES, str(outside)], capture=True, binds=[str(tmp_path)]
    )
    assert rc == 0, err
    assert json.loads(out) == {
        "chmod-000": "ok",  # skipped: success, nothing changed
        "chmod-setuid": "ok",
        "chmod-world-writable": "ok",
        "utime": "ok",
        "write": "EACCES",
        "chmod-own": "ok",
    }, (out, err)
    after = os.stat(outside)
    assert stat.S_IMODE(after.st_mode) == 0o644
    assert (after.st_atime_ns, after.st_mtime_ns) == (before.st_atime_ns, before.st_mtime_ns)
    assert outside.read_text() == "the user's file\n"
    assert sandbox._isolation is not None
    assert sandbox._isolation.layers()["users_files_kept_by"] == "seccomp"


def test_a_cgroup_a_killed_launcher_left_is_swept_and_the_workers_own_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In ``none`` mode, where a pids cgroup is writable (root's v1 hierarchy, a delegated
    v2 subtree), each worker's tree has a cgroup of its own (``pids.max``: the kernel
    refuses root's fork past the cap too); one a killed launcher left behind, empty, is
    removed by the next launcher, and the worker's own once it ended."""
    from harness.process import lifetime

    base = lifetime.pids_cgroup_base()
    if base is None:
        pytest.skip("no writable pids cgroup here (a user without a delegated subtree)")
    monkeypatch.setenv("CTXKERNEL_ISOLATION", "none")
    monkeypatch.setattr(sandbox, "_isolation", None)
    gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can hold it
    left = os.path.join(base, f"{lifetime.CGROUP_PREFIX}{gone}")
    os.mkdir(left)
    try:
        rc, out, err, _ = sandboxrun.run_sandboxed(
            [sys.executable, "-I", "-c", "print(open('/proc/self/cgroup').read())"],
            capture=True,
        )
        assert rc == 0, err
        assert lifetime.CGROUP_PREFIX in out, out  # the worker was in its own
        assert not os.path.exists(left)
        mine = [ln.rsplit("/", 1)[-1] for ln in out.splitlines() if lifetime.CGROUP_PREFIX in ln]
        assert not os.path.exists(os.path.join(base, mine[0]))
    finally:
        lifetime.remove_cgroup(left, 0.0)
        sandbox._isolation = None


def test_a_check_started_in_the_temp_folder_keeps_the_workers_temp_folder_private() -> None:
    """``python -m ctxkernel`` started in /tmp puts /tmp on sys.path: kept whole, it made the
    worker's "private" /tmp the real one, writable by the worker (a file left there for
    whoever reads /tmp next). The worker writes into a private /tmp; the real one is
    untouched."""
    if not sandbox.isolation().private_tmp:
        pytest.skip("no private temp folders in this sandbox mode: /tmp is shared")
    name = f"ctxkernel-door-{os.getpid()}-{time.monotonic_ns()}"
    target = Path(tempfile.gettempdir()).resolve() / name
    if str(target.parent) != "/tmp":
        pytest.skip("the temp folder here is not /tmp")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "sandbox", "run", "--", "sh", "-c",
         f"echo left > /tmp/{name} && cat /tmp/{name}"],
        cwd="/tmp", env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    try:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "left"  # its own /tmp is writable
        assert not target.exists(), "the worker wrote the real /tmp"
    finally:
        target.unlink(missing_ok=True)
