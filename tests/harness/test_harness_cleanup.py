"""No worker outlives its check, no limit that does not hold.

``ctxkernel check`` killed with SIGTERM or SIGKILL while the candidate sleeps in
``custom_kernel`` (the local runner and the pool's slot processes): within 5 s no process
works under the check's temp dir, and the dir is gone (SIGTERM) or swept by the next run
(SIGKILL). A candidate that hangs at import stops at ``--timeout``, not at a fixed 300 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cheatspec import EXAMPLES, REPO
from conftest import fast_options

from harness.process import cleanup
from harness.runner import check

SLEEPER = """\
import sys
import time


def custom_kernel(inputs):
    print("sleeping in custom_kernel", flush=True)
    time.sleep(600)
    return inputs[0] + inputs[1]
"""


def _working_under(root: Path) -> list[int]:
    """Live processes whose working directory lies under ``root``."""
    prefix = str(root.resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and (cwd == prefix or cwd.startswith(prefix + os.sep)):
            found.append(int(entry.name))
    return found


def _state_and_parent(pid: int) -> tuple[str, int] | None:
    """A process's state letter and parent PID from ``/proc/<pid>/stat`` (readable by anyone,
    unlike ``cwd``: a walled worker of an unprivileged user cannot be read that way)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def _descendants(root: int) -> set[int]:
    """Live (not zombie) processes below ``root``, by their parent links."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        found = _state_and_parent(int(entry.name)) if entry.name.isdigit() else None
        if found and found[0] != "Z":
            children.setdefault(found[1], []).append(int(entry.name))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if (found := _state_and_parent(pid)) and found[0] != "Z"}


def _ours(tmp: Path) -> list[Path]:
    return [p for p in tmp.iterdir() if p.name.startswith(cleanup.PREFIXES)]


def _wait(predicate, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


@pytest.mark.parametrize("runner", ["local", "local-jobs", "pool"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killing_check_mid_candidate_leaves_no_worker_and_no_temp_dir(
    sig: signal.Signals, runner: str, tmp_path: Path
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    candidates = [tmp_path / "sleeper.py", tmp_path / "sleeper_2.py"]
    for index, path in enumerate(candidates):  # not the same source: a batch runs each once
        path.write_text(SLEEPER + f"# sleeper {index}\n")
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "ctxkernel", "check", str(EXAMPLES / "vector_add")]
    cmd += [str(candidates[0]), "--no-record", "--timeout", "300", "--shapes", "n=1000"]
    cmd += ["--seeds", "1"]
    if runner == "pool":
        cmd += ["--runner", "pool", "--jobs", "1"]
    elif runner == "local-jobs":  # workers started by the --jobs threads, not the main one
        cmd += [str(candidates[1]), "--runner", "local", "--jobs", "2"]
    expected = {"local": 2, "local-jobs": 4, "pool": 3}[runner]  # (slot,) launcher + worker each
    proc = subprocess.Popen(
        cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:

        def sleeping() -> bool:
            logs = tmp.rglob("worker.stdout.log")
            started = sum(
                "sleeping in custom_kernel" in p.read_text(errors="replace") for p in logs
            )
            return started == (2 if runner == "local-jobs" else 1)

        assert _wait(sleeping, 240), "the candidates never started"
        # the check's process tree (what an unprivileged user can see of walled workers)
        # and whatever works under the temp dir (what root can also see)
        tree = _descendants(proc.pid) | set(_working_under(tmp))
        assert len(tree) >= expected, tree
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert proc.returncode == -sig
        # a pool slot's process removes its own folder when its handler runs, which waits
        # for the C code it is in (torch's import, on a loaded CI core: seconds)
        assert _wait(lambda: not _alive(tree) and not _working_under(tmp), 30), (
            _alive(tree),
            _working_under(tmp),
        )
        if sig == signal.SIGTERM:
            assert _wait(lambda: not _ours(tmp), 30), _ours(tmp)
        else:  # nothing could run in the killed check; the next run sweeps its dirs
            left = _ours(tmp)
            assert left
            assert sorted(cleanup.sweep(tmp)) == sorted(left)
            assert not _ours(tmp)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        cleanup.sweep(tmp)


def test_sweep_spares_live_owners_and_unmarked_dirs(tmp_path: Path) -> None:
    live = cleanup.temp_root("ctxkernel-check-", parent=tmp_path)
    unmarked = tmp_path / "ctxkernel-check-older"
    unmarked.mkdir()
    dead = tmp_path / "ctxkernel-pool-dead"
    dead.mkdir()
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    (dead / cleanup.MARKER).write_text(json.dumps({"pid": int(done.stdout), "start": "1"}))
    reused = tmp_path / "ctxkernel-check-reused"  # a live PID that is another process now
    reused.mkdir()
    (reused / cleanup.MARKER).write_text(json.dumps({"pid": os.getpid(), "start": "0"}))
    assert sorted(cleanup.sweep(tmp_path)) == sorted([dead, reused])
    assert live.is_dir() and unmarked.is_dir()
    cleanup.remove_root(live)
    assert not live.exists()


def _close_to_its_owner(root: Path, outside: Path) -> None:
    """What a worker may leave in its folder, running as its parent's user: filled folders
    closed (mode 000, one in another; 0300), links out to folders and files of the user's,
    a chain of folders deeper than a path can name, and one deeper than Python recurses."""
    work = root / "work"
    (work / "stash" / "inner").mkdir(parents=True)
    (work / "stash" / "blob.bin").write_bytes(b"x" * (1 << 20))
    (work / "stash" / "inner" / "blob.bin").write_bytes(b"y" * (1 << 20))
    (work / "stash" / "inner" / "folder").symlink_to(outside)
    (work / "stash" / "file").symlink_to(outside / "kept.txt")
    (work / "hidden").mkdir()
    (work / "hidden" / "blob.bin").write_bytes(b"z" * (1 << 20))
    for folder, mode in (
        (work / "stash" / "inner", 0),
        (work / "stash", 0),
        (work / "hidden", 0o300),
    ):
        folder.chmod(mode)
    for name, depth in (("d" * 250, 24), ("n", 1500)):
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("blob.bin", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
        os.chmod(f"/proc/self/fd/{fd}", 0)  # the deepest one closed too
        os.close(fd)


def test_a_folder_a_worker_closed_to_its_owner_is_removed_and_nothing_beyond_it_changes(
    tmp_path: Path,
) -> None:
    """An unprivileged parent cannot list a folder of mode 000 (root can): rmtree left the
    check's temp folder behind for good, and a chain of folders deeper than Python's
    recursion limit raised out of the cleanup. The modes are given back, never through a
    link, and everything goes."""
    outside = tmp_path / "users"
    outside.mkdir()
    (outside / "kept.txt").write_text("the user's\n")
    (outside / "kept.txt").chmod(0o400)
    outside.chmod(0o500)
    root = cleanup.temp_root("ctxkernel-check-", parent=tmp_path)
    _close_to_its_owner(root, outside)
    cleanup.remove_root(root)
    assert not os.path.lexists(root)
    assert oct(outside.stat().st_mode & 0o7777) == oct(0o500)
    assert oct((outside / "kept.txt").stat().st_mode & 0o7777) == oct(0o400)
    outside.chmod(0o700)


def test_a_swept_folder_a_worker_closed_to_its_owner_goes_too(tmp_path: Path) -> None:
    dead = tmp_path / "ctxkernel-check-dead"
    dead.mkdir()
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    (dead / cleanup.MARKER).write_text(json.dumps({"pid": int(done.stdout), "start": "1"}))
    outside = tmp_path / "users"
    outside.mkdir()
    (outside / "kept.txt").write_text("the user's\n")
    _close_to_its_owner(dead, outside)
    assert cleanup.sweep(tmp_path) == [dead]
    assert not os.path.lexists(dead)


def test_import_hang_stops_at_the_timeout_not_at_300_s(tmp_path: Path) -> None:
    candidate = tmp_path / "hangs_at_import.py"
    candidate.write_text("import time\n\ntime.sleep(600)\n\n\ndef custom_kernel(inputs):\n    return inputs[0]\n")  # fmt: skip
    started = time.monotonic()
    verdict = check(EXAMPLES / "vector_add", candidate, fast_options("vector_add", timeout_s=3.0))
    elapsed = time.monotonic() - started
    failed = verdict.failed_rung
    assert failed is not None and failed.name == "compile", verdict.lines()
    assert "timed out after 3 s (killed) while importing the candidate" in failed.reason
    # start-up (torch, triton) is not charged to the candidate; the whole check is far
    # from the 300 s it took before
    assert elapsed < 90, elapsed


def test_a_slow_worker_start_does_not_eat_the_candidates_import_time(tmp_path: Path) -> None:
    """With ``--timeout 1`` an honest candidate still loads: the worker's own start-up
    (importing torch and triton here takes longer than that) has a limit of its own."""
    verdict = check(
        EXAMPLES / "vector_add",
        EXAMPLES / "vector_add" / "solution_triton.py",
        fast_options("vector_add", timeout_s=1.0),
    )
    compile_rung = next(r for r in verdict.rungs if r.name == "compile")
    assert compile_rung.ok, verdict.lines()
