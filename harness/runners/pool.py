"""The local pool: one slot process per visible GPU (or ``jobs`` CPU slots), one queue.

``PoolRunner`` starts slot processes (``harness.runners.slot``) lazily, each with
``CUDA_VISIBLE_DEVICES`` pinned to its own GPU (slot *i* gets visible GPU *i mod n*; with
``device="cpu"`` the slots see no GPU), and feeds them candidates from one shared queue.
Each slot runs the ordinary ladder, whose candidate runs in its own isolated worker, so
several candidates are checked at once and a pool of N GPUs does N at a time.

A slot that dies (a crash, SIGKILL, the OOM killer) or stops answering (no verdict within
``job_timeout_s``) is killed with the workers it left behind, replaced by a fresh process
at its next job, and its candidate goes back on the queue once (``max_attempts``); the
reason is kept in the verdict. Nothing else in the queue is lost. Slots stay warm between
``run_many`` calls (an agent's successive rounds) until ``close()``.

Slots die with the pool's process whatever signal ends it (``PR_SET_PDEATHSIG``; SIGTERM
and SIGHUP also remove the pool's temp dir, see ``harness/process/cleanup.py``), and they start
with no secret in their environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..process import cleanup, sandbox
from ..process.cleanup import kill_processes_under
from ..process.local import describe_exit
from ..process.workerenv import harness_root
from ..process.workerfiles import read_tail
from ..redact import looks_secret
from ..runner import RunOptions
from .base import (
    DEFAULT_ATTEMPTS,
    Job,
    RunnerError,
    annotate,
    default_deadline,
    failure_verdict,
    first_of,
    options_to_wire,
    record_failure,
    runner_info,
)

if TYPE_CHECKING:
    from ..problems.candidate import Candidate
    from ..problems.problem import Problem
    from ..verdict import Verdict

START_FAILURES_ALLOWED = 3


@dataclass
class PoolEvent:
    """What a slot did, for progress output and tests: ``slot-started``, ``started``,
    ``finished``, ``lost`` (slot died or hung; ``detail`` says how), ``requeued``, ``failed``."""

    kind: str
    slot: int
    pid: int | None = None
    gpu: str | None = None
    job: Job | None = None
    detail: str = ""


@dataclass
class _Call:
    """One ``run_many`` call: its results queue, and whether its caller went away."""

    problem: Problem
    options: RunOptions
    results: queue.Queue[tuple[Job, Verdict] | BaseException] = field(default_factory=queue.Queue)
    cancelled: bool = False


@dataclass
class _Work:
    job: Job
    call: _Call


class SlotLost(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SlotStartFailed(SlotLost):
    """The slot process never said it was ready: the candidate was not run."""


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as values for ``CUDA_VISIBLE_DEVICES``."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and listed.strip():
        return [s.strip() for s in listed.split(",") if s.strip()][:count]
    return [str(i) for i in range(count)]


def default_cpu_jobs() -> int:
    return max(1, min(8, os.cpu_count() or 1))


class _Slot:
    """One slot process and the thread that feeds it jobs from the pool's queue."""

    def __init__(self, pool: PoolRunner, index: int, device: str, gpu: str | None) -> None:
        self.pool = pool
        self.index = index
        self.device = device
        self.gpu = gpu
        self.tmp = pool.tmp / f"slot-{index}"
        self.log = pool.tmp / f"slot-{index}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.reply_fd: int | None = None
        self.buffer = b""
        self.start_failures = 0
        self.thread = threading.Thread(target=self.loop, name=f"pool-slot-{index}", daemon=True)

    @property
    def label(self) -> str:
        where = f"GPU {self.gpu}" if self.gpu is not None else "CPU"
        return f"pool slot {self.index} ({where})"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    # -- the process ------------------------------------------------------------------

    def start(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        if sandbox.isolation().mode == "none":
            sandbox.harden_parent()  # the workers' grandparent: as out of reach as the slot
        reply_r, reply_w = os.pipe()
        # the slot is its workers' parent: it holds no secret (this process redacts the
        # records it writes, see annotate)
        env = {k: v for k, v in os.environ.items() if not looks_secret(k)}
        paths = [str(harness_root()), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env["TMPDIR"] = str(self.tmp)
        env["CUDA_VISIBLE_DEVICES"] = self.gpu if self.gpu is not None else ""
        env["CTXKERNEL_POOL_SLOT"] = str(self.index)
        env["CTXKERNEL_POOL_SLOTS"] = str(len(self.pool.slots) or 1)
        cmd = [
            self.pool.python or sys.executable,
            "-m",
            "harness.runners.slot",
            "--fd-out",
            str(reply_w),
            "--parent",
            str(os.getpid()),
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                env=env,
                cwd=self.tmp,
                pass_fds=(reply_w,),
                start_new_session=True,
                close_fds=True,
            )
        os.close(reply_w)
        cleanup.track(self.proc.pid)
        self.reply_fd = reply_r
        self.buffer = b""
        try:
            ready = self.read(
                time.monotonic() + self.pool.startup_timeout_s,
                f"'ready' after {self.pool.startup_timeout_s:g} s",
            )
        except SlotLost as lost:
            self.start_failures += 1
            raise SlotStartFailed(f"{self.label} could not start: {lost.reason}") from None
        if ready.get("type") != "ready":
            self.kill()
            self.start_failures += 1
            raise SlotStartFailed(f"{self.label} sent {ready.get('type')!r} instead of 'ready'")
        self.start_failures = 0
        self.pool.emit(PoolEvent("slot-started", self.index, self.pid, self.gpu))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        """The slot's process group, and any worker it spawned (they run in their own
        sessions, found by their working directory under the slot's temp dir). Safe from
        another thread: the feeding thread then sees the slot's channel close."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            cleanup.untrack(self.proc.pid)
        kill_processes_under(self.tmp)

    def kill(self) -> None:
        """``terminate`` and release the channel and temp dir (the feeding thread only)."""
        self.terminate()
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        if self.reply_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.reply_fd)
            self.reply_fd = None
        cleanup.remove_tree(self.tmp)  # whatever modes its checks' workers left

    def send(self, doc: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(doc) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            raise SlotLost(self.death()) from None

    def read(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        """The next reply line; ``SlotLost`` when the slot died or the deadline passed."""
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if self.reply_fd is None:
                raise SlotLost(f"{self.label} was stopped")
            if left <= 0:
                self.kill()
                raise SlotLost(f"{self.label} hung: no {waiting_for} (killed)")
            ready, _, _ = select.select([self.reply_fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self.reply_fd, 1 << 16)
            if not chunk:
                reason = self.death()
                self.kill()
                raise SlotLost(reason)
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        doc: dict[str, Any] = json.loads(line)
        return doc

    def death(self) -> str:
        code = None
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.proc.wait(timeout=5)
        how = describe_exit(code).replace("worker exited", "exited").replace("worker is", "is")
        tail = self.log_tail()
        return f"{self.label} {how}" + (f"; its log ends: {tail}" if tail else "")

    def log_tail(self, limit: int = 300) -> str:
        read = read_tail(self.log, limit)  # its last bytes only, whatever its size
        data = read[0].decode(errors="replace").strip() if read else ""
        return " | ".join(data.splitlines()[-3:])

    # -- the feeding thread -----------------------------------------------------------

    def loop(self) -> None:
        while True:
            work = self.pool.queue.get()
            if work is None:
                return
            if work.call.cancelled:
                continue
            try:
                self.run_job(work)
            except BaseException as exc:  # never lose a job to a bug in this thread
                work.call.results.put(exc)

    def run_job(self, work: _Work) -> None:
        job, call = work.job, work.call
        try:
            if self.pool.closing:
                if not call.cancelled:
                    call.results.put(RunnerError("the pool was closed before this check ran"))
                return
            if not self.alive():
                self.kill()  # whatever the last process left
                self.start()
            assert self.pid is not None
            self.send(
                {
                    "type": "job",
                    "id": job.index,
                    "problem": str(call.problem.path.resolve()),
                    "candidate": str(job.candidate.path.resolve()),
                    "backend": job.candidate.backend if job.candidate.backend_declared else None,
                    "options": options_to_wire(call.options),
                }
            )
            timeout_s = self.pool.deadline_for(call.options)
            deadline = time.monotonic() + timeout_s
            while True:
                reply = self.read(deadline, f"verdict after {timeout_s:g} s")
                if reply.get("type") == "started":
                    self.pool.emit(PoolEvent("started", self.index, self.pid, self.gpu, job))
                    continue
                break
        except SlotLost as lost:
            if self.pool.closing:
                return
            self.pool.lost(work, self, lost.reason, isinstance(lost, SlotStartFailed))
            return
        info = runner_info("pool", job, slot=self.index, gpu=self.gpu, pid=self.pid)
        if reply.get("type") == "error":
            if reply.get("kind") == "usage":
                call.results.put(RunnerError(str(reply.get("message"))))
                return
            reason = f"harness error in {self.label}: {reply.get('message')}"
            verdict = failure_verdict(call.problem, job.candidate, call.options, reason, info)
            record_failure(verdict, job.candidate, call.options, None)
        else:
            from ..verdict import Verdict

            verdict = Verdict.from_json(reply["verdict"])
            verdict.candidate = str(job.candidate.path)  # as given, not the slot's absolute path
            verdict = annotate(verdict, info)
        self.pool.emit(PoolEvent("finished", self.index, self.pid, self.gpu, job))
        call.results.put((job, verdict))


class PoolRunner:
    """Slots pinned to GPUs (or CPU slots), fed from one queue; see the module docstring.

    ``jobs``: number of slots (default: one per visible GPU; on CPU, the core count up to
    8). ``gpus``: the ``CUDA_VISIBLE_DEVICES`` values to spread slots over (default: the
    visible GPUs). ``job_timeout_s``: a slot with no verdict after this long is killed
    (default: generous, from the options' own timeouts). ``on_event``: called from the
    slot threads with each ``PoolEvent``.
    """

    spec = "pool"

    def __init__(
        self,
        jobs: int | None = None,
        gpus: Sequence[str] | None = None,
        job_timeout_s: float | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        startup_timeout_s: float = 300.0,
        python: str | None = None,
        on_event: Callable[[PoolEvent], None] | None = None,
    ) -> None:
        if jobs is not None and jobs < 1:
            raise RunnerError("the pool needs at least one slot (--jobs >= 1)")
        self.jobs = jobs
        self.gpus = list(gpus) if gpus is not None else None
        self.job_timeout_s = job_timeout_s
        self.max_attempts = max(1, max_attempts)
        self.startup_timeout_s = startup_timeout_s
        self.python = python
        self.on_event = on_event
        self.queue: queue.Queue[_Work | None] = queue.Queue()
        self.slots: list[_Slot] = []
        self.device: str | None = None
        self.closing = False
        self._tmp: Path | None = None
        self._lock = threading.Lock()
        cleanup.install_signal_cleanup()

    @property
    def tmp(self) -> Path:
        if self._tmp is None:
            cleanup.sweep_once()
            self._tmp = cleanup.temp_root("ctxkernel-pool-")
        return self._tmp

    def __enter__(self) -> PoolRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def emit(self, event: PoolEvent) -> None:
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # the caller's hook must not lose a job
                self.on_event(event)

    def deadline_for(self, options: RunOptions) -> float:
        if self.job_timeout_s is not None:
            return self.job_timeout_s
        return default_deadline(options)

    def slot_plan(self, device: str) -> list[str | None]:
        """The GPU (``CUDA_VISIBLE_DEVICES`` value) of each slot; None for a CPU slot."""
        if device == "cpu":
            return [None] * (self.jobs or default_cpu_jobs())
        gpus = self.gpus if self.gpus is not None else visible_gpus()
        if not gpus:
            raise RunnerError("the pool was asked for CUDA but no GPU is visible here")
        return [gpus[i % len(gpus)] for i in range(self.jobs or len(gpus))]

    def _ensure_slots(self, device: str) -> None:
        with self._lock:
            if self.device == device and self.slots:
                return
            if self.slots:
                self._stop_slots()
            self.closing = False
            self.device = device
            self.slots = [
                _Slot(self, i, device, gpu) for i, gpu in enumerate(self.slot_plan(device))
            ]
            for slot in self.slots:
                slot.thread.start()

    def run(self, problem: Problem, candidate: Candidate, options: RunOptions) -> Verdict:
        return first_of(self, problem, candidate, options)

    def run_many(
        self, problem: Problem, candidates: Sequence[Candidate], options: RunOptions
    ) -> Iterator[tuple[Candidate, Verdict]]:
        if not candidates:
            return
        device = options.resolved_device()
        self._ensure_slots(device)
        if options.record and options.runs_dir is None:
            from ..paths import default_runs_dir

            options = replace(options, runs_dir=default_runs_dir())
        workers = max(options.concurrent_workers, len(self.slots))
        call = _Call(problem, replace(options, device=device, concurrent_workers=workers))
        for index, candidate in enumerate(candidates):
            self.queue.put(_Work(Job(index, candidate), call))
        remaining = len(candidates)
        try:
            while remaining:
                item = call.results.get()
                if isinstance(item, BaseException):
                    raise item
                job, verdict = item
                remaining -= 1
                yield job.candidate, verdict
        finally:
            call.cancelled = True

    def lost(self, work: _Work, slot: _Slot, reason: str, at_start: bool) -> None:
        """A slot died or hung under ``work``: re-queue it once, or fail it with the reason.
        A slot that could not start did not run the candidate: it is re-queued without
        using an attempt, until that slot has failed to start a few times in a row."""
        job, call = work.job, work.call
        cannot_start = slot.start_failures >= START_FAILURES_ALLOWED
        self.emit(PoolEvent("lost", slot.index, slot.pid, slot.gpu, job, reason))
        if call.cancelled:
            return
        if at_start and not cannot_start:
            self.queue.put(work)
            return
        job.lost.append(reason)
        if not cannot_start and job.attempt < self.max_attempts:
            job.attempt += 1
            self.emit(PoolEvent("requeued", slot.index, None, slot.gpu, job, reason))
            self.queue.put(work)
            return
        if cannot_start:
            slot.start_failures = 0  # try again for the next job
        info = runner_info("pool", job, slot=slot.index, gpu=slot.gpu)
        attempts = f" ({job.attempt} attempt{'s' if job.attempt > 1 else ''})"
        verdict = failure_verdict(
            call.problem, job.candidate, call.options, reason + attempts, info
        )
        logdir = self.tmp / "failed-logs"
        logdir.mkdir(exist_ok=True)
        with contextlib.suppress(OSError):
            shutil.copyfile(slot.log, logdir / "slot.stderr.log")
        record_failure(verdict, job.candidate, call.options, logdir)
        self.emit(PoolEvent("failed", slot.index, None, slot.gpu, job, reason))
        call.results.put((job, verdict))

    def _stop_slots(self) -> None:
        self.closing = True
        for _ in self.slots:
            self.queue.put(None)
        for slot in self.slots:
            slot.terminate()  # a busy feeding thread sees its slot's channel close
        for slot in self.slots:
            slot.thread.join(timeout=30)
            slot.kill()
        self.slots = []

    def close(self) -> None:
        """Stop every slot (and whatever workers they left), drop the temp dir."""
        with self._lock:
            if self.slots:
                self._stop_slots()
            if self._tmp is not None:
                cleanup.remove_root(self._tmp)
                self._tmp = None
