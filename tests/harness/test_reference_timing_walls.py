"""Work a candidate leaves running cannot slow the reference timed after it.

The benchmark rung times the reference in a worker of its own while the candidate's worker
is still alive. A native thread, a forked child, a ``setsid`` process or an orphan the
candidate left burning would compete with the reference, inflate its time -- and with it the
speedup, and, through the reference-timing cache, every later candidate's. The rung stops
every process of the candidate's workers (``harness/process/freeze.py``) while the
reference is timed, continues them after, and caches a reference timing only when the
candidate's trees were confirmed stopped -- and no other check of the user was running at
any moment of the window (``harness/perf/livechecks.py``): their candidates are not
stopped, and one left burning there would slow this reference and, through the cache,
speed up its own later check.

On the CPU the rung runs against the simulated GPU session (``simgpu.py``), its candidate
worker standing for a real process tree (a launcher, a subreaper as in ``none`` mode, and a
worker that leaves burners behind on its first call); the freeze itself is also shown on a
real sandboxed worker running the planted ``cheats/c16_work_left_behind.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cheatspec import EXAMPLES
from conftest import fast_options, worker_context
from simgpu import FakeGPU, Frames, simulated_bench

from harness.perf import gpuidle, livechecks, reftimes
from harness.process import freeze, lifetime

CHEAT = Path(__file__).resolve().parent / "cheats" / "c16_work_left_behind.py"
REPO = Path(__file__).resolve().parents[2]
WINDOW_S = 0.4  # how long the tree's CPU time is read over to see who burns
BUSY_WAIT_S = 30.0  # at most, for the burners expected to show

# A launcher (a subreaper, as in none mode) and its worker, which on a byte from its stdin
# leaves behind a native thread (libc pthread_create), a setsid child and an orphan (an
# interpreter a shell of libc's system() started in the background), each burning a core,
# and says "left".
_TREE = r"""
import ctypes, os, sys, time
sys.path.insert(0, sys.argv[1])
from harness.process import lifetime
lifetime.become_subreaper()
worker = os.fork()
if worker:
    os.waitpid(worker, 0)
    os._exit(0)
os.nice(19)  # the burners take what the test leaves
libc = ctypes.CDLL(None)
held = ctypes.PyDLL(None)
sys.stdin.buffer.read(1)
buf = ctypes.create_string_buffer(1 << 16)
@ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
def spin(_):
    end = time.monotonic() + 60
    while time.monotonic() < end:
        libc.memset(buf, 0, len(buf))
    return None
libc.pthread_create(ctypes.byref(ctypes.c_ulong()), None, spin, None)
if held.fork() == 0:
    libc.setsid()
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pass
    os._exit(0)
burn = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"
libc.system(f"( exec '{sys.executable}' -I -S -c '{burn}' ) >/dev/null 2>&1 &".encode())
print("left", flush=True)
time.sleep(120)
"""


class FakeNvml:
    """pynvml's utilisation of a GPU busy until ``busy_until`` (``time.time()``): samples
    every ``period`` s (or none: ``samples=False``, the driver keeps none)."""

    NVML_GPU_UTILIZATION_SAMPLES = 1

    def __init__(self, busy_until: float, period: float = 0.05, samples: bool = True) -> None:
        self.busy_until, self.period, self.samples = busy_until, period, samples

    def _busy(self, end: float) -> int:
        return 100 if end - self.period < self.busy_until else 0

    def nvmlDeviceGetSamples(self, handle: Any, kind: int, since_us: int) -> tuple[int, list[Any]]:
        if not self.samples:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        found = []
        stamp = (since_us / 1e6 // self.period + 1) * self.period
        while stamp <= time.time():
            value = SimpleNamespace(uiVal=self._busy(stamp))
            found.append(SimpleNamespace(timeStamp=int(stamp * 1e6), sampleValue=value))
            stamp += self.period
        return 0, found

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        return SimpleNamespace(gpu=self._busy(time.time()))


def _gpu(monkeypatch: pytest.MonkeyPatch, busy_s: float) -> None:
    """The GPU seen by ``gpuidle``: busy for ``busy_s`` more seconds, then idle."""
    fake = FakeNvml(time.time() + busy_s)
    monkeypatch.setattr(gpuidle, "_nvml", lambda: (fake, "handle", ""))


def _cpu_ticks(pid: int) -> int | None:
    """``pid``'s user + system CPU time (all its threads), in clock ticks."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def _ticks(root: int) -> dict[int, int]:
    found = {}
    for pid in lifetime.descendants(root):
        ticks = _cpu_ticks(pid)
        if ticks is not None:
            found[pid] = ticks
    return found


def _advanced(before: dict[int, int], after: dict[int, int]) -> dict[int, int]:
    return {p: after[p] - before[p] for p in before if p in after and after[p] > before[p]}


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _TREE, str(REPO)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        for pid in lifetime.descendants(proc.pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        proc.kill()
        proc.wait(timeout=10)


def _leave_work(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"x")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == b"left"


def _burning(root: int, at_least: int = 0) -> dict[int, int]:
    """The processes beneath ``root`` whose CPU time advances over ``WINDOW_S`` (over up to
    ``BUSY_WAIT_S`` until ``at_least`` of them did: on a loaded 2-core machine a burner may
    get no tick for seconds)."""
    before = _ticks(root)
    deadline = time.monotonic() + (BUSY_WAIT_S if at_least else 0.0)
    time.sleep(WINDOW_S)
    gained = _advanced(before, _ticks(root))
    while len(gained) < at_least and time.monotonic() < deadline:
        time.sleep(0.1)
        gained = _advanced(before, _ticks(root))
    return gained


def _bench_with_tree(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch, proc: subprocess.Popen[bytes]
) -> tuple[Any, dict[str, Any]]:
    """Run the benchmark rung, the candidate's worker standing for ``proc``'s tree, which
    leaves its burners behind on the candidate's first call; what the reference's window
    saw: the CPU time each process of the tree gained while it was open."""
    from harness.rungs.benchmark import BenchmarkRung
    from harness.rungs.results import Earlier

    seen: dict[str, Any] = {}

    def on_call(subject: str, calls: int, frames: Frames) -> None:
        if subject == "candidate" and calls == 1:
            _leave_work(proc)
        if subject == "reference":  # the tree's CPU time at the window's first and last calls
            seen.setdefault("first", (time.monotonic(), _ticks(proc.pid)))
            seen["last"] = (time.monotonic(), _ticks(proc.pid))

    ctx, _ = simulated_bench(
        fake_gpu,
        monkeypatch,
        n=1 << 16,
        on_call=on_call,
        root_of=lambda role: None if role.startswith("reference") else proc.pid,
    )
    ctx.options.bench_budget_s = 0.3  # simulated seconds: fewer calls on a busy machine
    with livechecks.registered() as ctx.live:  # as the runner registers a check
        result = BenchmarkRung().run(ctx, Earlier())
    assert result.ok, result.reason
    (start, before), (end, after) = seen["first"], seen["last"]
    seen["window_s"] = end - start
    seen["window"] = _advanced(before, after)
    return result, seen


def test_the_candidates_tree_is_stopped_while_the_reference_is_timed(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch, tree: subprocess.Popen[bytes]
) -> None:
    _gpu(monkeypatch, busy_s=0.0)
    result, seen = _bench_with_tree(fake_gpu, monkeypatch, tree)
    # (a) nothing of the candidate's tree ran during the reference's window (seconds of
    # wall time on this machine: a burner left running gains ticks in far less)
    assert seen["window_s"] > 0.5
    assert seen["window"] == {}, f"CPU ticks gained while the reference was timed: {seen}"
    # (b) and it runs again afterwards: the worker (its native thread), the setsid child,
    # the orphan
    assert len(_burning(tree.pid, 3)) >= 3
    shape = result.details["shapes"][0]
    round_info = shape["rounds"][0]
    assert round_info["candidate_frozen"] is True
    assert round_info["freeze"]["confirmed"] is True
    assert round_info["freeze"]["processes"] >= 3  # the worker, the setsid child, the orphan
    assert "could not be confirmed stopped" not in shape["timing_note"]
    # the reference's timing, measured with the tree stopped, is cached
    doc = reftimes._read(reftimes.cache_file())
    assert len(doc.get("entries") or {}) == 1


def test_a_tree_that_cannot_be_confirmed_stopped_is_said_and_its_reference_not_cached(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch, tree: subprocess.Popen[bytes]
) -> None:
    # (c) a task that never shows as stopped (one stuck in the kernel, say): the freeze
    # gives up at its deadline; the reference is timed and reported, never cached
    monkeypatch.setattr(freeze, "_task_states", lambda pid: ["R"])
    monkeypatch.setattr(freeze, "FREEZE_DEADLINE_S", 0.05)
    _gpu(monkeypatch, busy_s=0.0)
    result, _ = _bench_with_tree(fake_gpu, monkeypatch, tree)
    shape = result.details["shapes"][0]
    round_info = shape["rounds"][0]
    assert round_info["candidate_frozen"] is False
    assert "not seen stopped" in round_info["freeze"]["reason"]
    assert "could not be confirmed stopped" in shape["timing_note"]
    assert shape["speedup"] is not None
    assert not (reftimes._read(reftimes.cache_file()).get("entries") or {})
    assert len(_burning(tree.pid, 3)) >= 3  # continued all the same


def test_a_worker_that_is_no_process_here_is_not_cached(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.rungs.benchmark import BenchmarkRung
    from harness.rungs.results import Earlier

    _gpu(monkeypatch, busy_s=0.0)
    ctx, _ = simulated_bench(fake_gpu, monkeypatch, n=1 << 16)  # in-process workers
    result = BenchmarkRung().run(ctx, Earlier())
    assert result.ok, result.reason
    round_info = result.details["shapes"][0]["rounds"][0]
    assert round_info["candidate_frozen"] is False
    assert round_info["freeze"]["reason"] == "a worker is not a process of this machine"
    assert not (reftimes._read(reftimes.cache_file()).get("entries") or {})


def test_a_gpu_still_busy_after_the_stop_gives_no_speedup_and_nothing_is_cached(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch, tree: subprocess.Popen[bytes]
) -> None:
    """The candidate's queued kernels (or, on a shared GPU, another process's) run on
    though its processes are stopped: the reference is not timed beside them, so no
    speedup is reported (the rung does not fail: the busy GPU may be someone else's), and
    nothing is cached."""
    from harness.rungs.benchmark import BenchmarkRung
    from harness.rungs.results import Earlier

    _gpu(monkeypatch, busy_s=3600.0)
    monkeypatch.setattr(gpuidle, "IDLE_TIMEOUT_S", 0.2)
    ctx, _ = simulated_bench(fake_gpu, monkeypatch, n=1 << 16, root_of=lambda role: tree.pid)
    ctx.options.bench_budget_s = 0.3
    result = BenchmarkRung().run(ctx, Earlier())
    assert result.ok, result.reason
    shape = result.details["shapes"][0]
    assert "the GPU stayed busy" in shape["timing_note"] and "no speedup" in shape["timing_note"]
    assert shape.get("speedup") is None
    round_info = shape["rounds"][0]
    assert round_info["gpu_idle"]["idle"] is False and "reference" not in round_info
    assert round_info["candidate_frozen"] is False
    assert not (reftimes._read(reftimes.cache_file()).get("entries") or {})


def test_the_gpu_is_idle_once_a_sample_after_the_stop_reads_zero() -> None:
    stopped = time.time()
    busy = FakeNvml(stopped + 0.15)
    idle = gpuidle.wait_idle(stopped, timeout_s=2.0, nvml=(busy, "h"))
    assert idle.idle is True and 0.1 <= idle.waited_s < 1.0, idle
    assert idle.how == "NVML utilisation samples"
    # a sample before the stop that read 0 says nothing of what was queued at the stop
    earlier = FakeNvml(stopped + 0.15)
    assert gpuidle.wait_idle(stopped - 1.0, timeout_s=2.0, nvml=(earlier, "h")).idle is True
    never = gpuidle.wait_idle(time.time(), timeout_s=0.2, nvml=(FakeNvml(time.time() + 60), "h"))
    assert never.idle is False and never.busy_pct == 100
    no_samples = FakeNvml(time.time(), samples=False)
    fallback = gpuidle.wait_idle(time.time() - gpuidle.MAX_PERIOD_S, nvml=(no_samples, "h"))
    assert fallback.idle is True and fallback.how == "NVML utilisation"


def test_without_nvml_the_gpu_cannot_be_told_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpuidle, "_nvml", lambda: (None, None, "ModuleNotFoundError: pynvml"))
    idle = gpuidle.wait_idle(time.time())
    assert idle.idle is None and "cannot tell" in idle.how


def test_a_tree_forking_fast_is_stopped_whole() -> None:
    """A tree still forking (40 processes, each forking a child that ends at once, every
    millisecond): the walk goes on until every process it found is stopped and a walk
    finds none new."""
    code = (
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from harness.process import lifetime\n"
        "lifetime.become_subreaper()\n"
        "worker = os.fork()\n"  # the launcher waits (it is not stopped); its worker forks
        "if worker:\n"
        "    os.waitpid(worker, 0)\n"
        "    os._exit(0)\n"
        "end, depth, kids = time.monotonic() + 30, 0, 0\n"
        "while time.monotonic() < end:\n"
        "    if depth < 3 and kids < 3:\n"  # 40 processes that live on
        "        kids += 1\n"
        "        if os.fork() == 0:\n"
        "            depth, kids = depth + 1, 0\n"
        "        continue\n"
        "    if os.fork() == 0:\n"  # and a churn of children that end at once
        "        os._exit(0)\n"
        "    os.wait()\n"
        "    time.sleep(0.001)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        time.sleep(0.5)
        held = freeze.stop([proc.pid])
        try:
            assert held.confirmed, held.reason
            pids = set(held.pids)
            assert set(lifetime.descendants(proc.pid)) <= pids  # nothing new beneath it
            time.sleep(0.2)
            assert set(lifetime.descendants(proc.pid)) <= pids
            states = {freeze._task_states(p)[0] for p in pids if freeze._task_states(p)}
            assert states <= {"T", "t", "Z"}, states
        finally:
            freeze.resume(held)
    finally:
        os.killpg(proc.pid, 9)
        for pid in lifetime.descendants(proc.pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        proc.wait(timeout=10)


def test_the_planted_cheats_leftovers_are_stopped_in_a_sandboxed_worker(
    mode: str, tmp_path: Path
) -> None:
    """The planted cheat in a real worker (through the sandbox, spawned or forked from the
    warm template): its native thread, its setsid child and its orphan -- the orphan
    adopted by the launcher (none mode) or the namespace's init -- all stop, then run."""
    from harness.problems.candidate import load_candidate
    from harness.problems.problem import load_problem

    problem = load_problem(EXAMPLES / "vector_add")
    candidate = load_candidate(CHEAT, problem)
    options = fast_options("vector_add", policy_scan=False)
    ctx = worker_context(problem, candidate, options, "cpu", tmp_path)
    work = tmp_path / "work"
    try:
        assert not ctx.workers.load().get("error")
        record = ctx.workers.call(ctx.inputs.make(0, 0))
        assert record.gone is None and record.error is None, record.error
        left = (work / "burners.txt").read_text().split()
        assert {"thread", "setsid", "orphan"} <= set(left), left
        root = freeze.session_root(ctx.workers.session)
        assert root is not None
        assert len(_burning(root, 3)) >= 3
        with freeze.frozen(ctx.workers.candidate_sessions()) as held:
            assert held.confirmed, held.reason
            assert _burning(root) == {}
        assert held.stop_s < freeze.FREEZE_DEADLINE_S, held.as_info()
        assert len(_burning(root, 3)) >= 3
    finally:
        ctx.close()


_NEIGHBOUR = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from harness.perf import livechecks
with livechecks.registered(Path(sys.argv[3]) if sys.argv[3] else None):
    print("live", flush=True)
    time.sleep(float(sys.argv[2]))
print("gone", flush=True)
"""


def _neighbour(seconds: float, where: Path | None = None) -> subprocess.Popen[str]:
    """Another check of this user (another process), live for ``seconds``, registered in
    ``where`` (default: the user's folder, as a check does)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _NEIGHBOUR, str(REPO), str(seconds), str(where or "")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "live"
    return proc


def test_live_checks_see_each_other_in_threads_and_processes_and_not_the_dead(
    tmp_path: Path,
) -> None:
    where = tmp_path / "live"
    with livechecks.registered(where) as one:
        assert one is not None and one.others() == 0
        with livechecks.registered(where) as two:  # another check of this process
            assert two is not None
            assert one.others() == 1 and two.others() == 1
        assert one.others() == 0
        # a check that died left its file: nobody holds it, so it is not counted, and swept
        (where / "check-1-dead").write_text("")
        assert one.others() == 0 and not (where / "check-1-dead").exists()
        neighbour = _neighbour(30.0, where)  # another process
        try:
            assert one.others() == 1
        finally:
            neighbour.kill()
            neighbour.wait()
        assert one.others() == 0  # killed: its lock went with it


def test_a_neighbour_that_came_and_went_inside_a_window_is_seen(tmp_path: Path) -> None:
    where = tmp_path / "live"
    with livechecks.registered(where) as me:
        assert me is not None
        quiet = me.watch()
        assert me.alone(quiet)
        window = me.watch()
        neighbour = _neighbour(0.0, where)  # starts and ends while the window is open
        assert neighbour.stdout is not None and neighbour.stdout.readline().strip() == "gone"
        neighbour.wait()
        assert me.others() == 0  # nothing live now ...
        assert not me.alone(window)  # ... but it was, inside the window
        assert me.alone(me.watch())


def test_a_reference_timed_while_another_check_runs_is_not_cached(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch, tree: subprocess.Popen[bytes]
) -> None:
    """Another check's candidate is not stopped while this check times its reference (it
    may burn a core or keep the GPU busy right then): the reference is timed and reported,
    never cached, and the note says why."""
    _gpu(monkeypatch, busy_s=0.0)
    neighbour = _neighbour(300.0)
    try:
        result, _ = _bench_with_tree(fake_gpu, monkeypatch, tree)
    finally:
        neighbour.kill()
        neighbour.wait()
    shape = result.details["shapes"][0]
    round_info = shape["rounds"][0]
    assert round_info["candidate_frozen"] is True  # its own candidate was stopped ...
    assert round_info["beside_other_checks"] is True  # ... another's was not
    assert "another check of this user was running" in shape["timing_note"]
    assert shape["speedup"] is not None
    assert not (reftimes._read(reftimes.cache_file()).get("entries") or {})


def test_a_lock_held_on_the_epoch_costs_the_cache_never_a_hang(tmp_path: Path) -> None:
    """In none mode a worker can read the folder, so it can hold a lock on the epoch file
    (opened read-only): a check then neither hangs nor takes itself to be alone."""
    import fcntl

    where = tmp_path / "live"
    with livechecks.registered(where) as me:
        assert me is not None
        fd = os.open(where / livechecks.EPOCH, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            start = time.monotonic()
            window = me.watch()
            with livechecks.registered(where) as other:  # another check starts meanwhile
                assert other is not None
            assert not me.alone(window)
            assert time.monotonic() - start < 5 * livechecks.LOCK_WAIT_S + 2.0
        finally:
            os.close(fd)
        assert me.alone(me.watch())  # the lock gone, the count is read again
