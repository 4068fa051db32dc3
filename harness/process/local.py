"""``LocalSession``: a worker as a child process of this one, and ``run_oneshot``.

``LocalSession`` spawns ``python -m harness.worker`` (or forks it from the warm template,
``templates.py``) through the sandbox (``sandbox.py``: a PID namespace of its own where
the machine allows one, and ``PR_SET_PDEATHSIG`` so it dies with its check) in its own
process group, its own temp dir as cwd, a scrubbed environment (no secrets, no
``CTXKERNEL_*``, every backend's caches inside the temp dir), a wall-clock timeout per
request, a memory cap (RLIMIT_AS set by the worker on CPU; an RSS watchdog here, since
RLIMIT_AS breaks CUDA), and turns a hang, a crash or an early exit into a ``WorkerGone``
with a reason ("crashed with SIGSEGV", "timed out after 20 s", "worker exited with status
0 before reporting a result").

The load request has two limits: the worker's own start-up (interpreter, torch, CUDA
context: ``startup_timeout_s``) ends when the worker says it is about to import the
candidate, and from there the candidate's import has the request's timeout (``--timeout``,
or a backend's floor for builds that need minutes). Within any request, time the worker
reports compiling (interim ``compile`` frames, ``harness/worker/jitclock.py``) pauses the run
budget, up to a compile budget per worker (``first_call_timeout_s``, twice over).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..options import RunOptions, memory_cap_for
from ..worker.jitclock import CompileClock
from . import channel, cleanup, memwatch, sandbox, templates, workertree
from .session import Reply, WorkerGone, malformed
from .workerenv import scrubbed_env
from .workerfiles import read_worker_file, remove_entry, write_fresh

if TYPE_CHECKING:
    import torch

__all__ = ["LocalSession", "describe_exit", "run_oneshot"]

# ``python -m harness.worker``, but for its path: ``-m`` puts the working directory -- the
# worker's own folder, where an earlier worker of the same candidate may have left a
# ``harness`` package, or a module named as one a reference imports -- first on
# ``sys.path``. The worker puts its folder there itself, right before the candidate.
WORKER_MAIN = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "import runpy; runpy.run_module('harness.worker', run_name='__main__', alter_sys=True)"
)


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "worker is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"crashed with {name}"
    return f"worker exited with status {returncode} before reporting a result"


class LocalSession:
    """A worker process on this machine, spoken to over two pipes: forked from this
    process's warm template (``templates.py``) when it can be, else spawned."""

    def __init__(
        self,
        workdir: Path,
        logdir: Path,
        device: str,
        options: RunOptions,
        env_extra: dict[str, str],
        tag: str = "",
        keep_paths: Sequence[str | Path] = (),
        backend: str = "",
    ) -> None:
        self.workdir = workdir
        self.logdir = logdir
        self.device = device
        cap = memory_cap_for(device, options)
        self.memory_cap = cap
        self.disk_cap = int(options.disk_cap_gib * (1 << 30))
        self._disk_checked = float("-inf")
        self._folder_bytes = 0
        self.memory: memwatch.MemoryWatch | None = None
        self._capped: WorkerGone | None = None  # the cap it was killed for, if any
        self._corrupted: WorkerGone | None = None  # the channel's corruption, if it was
        self._gone: WorkerGone | None = None
        self.startup_timeout_s = options.startup_timeout_s
        self.compile_clock = CompileClock(2 * options.first_call_timeout_s)
        self.isolation = sandbox.isolation()
        if self.isolation.mode == "none":
            sandbox.harden_parent()
        name = f"worker-{tag}" if tag else "worker"
        self.stdout_path = logdir / f"{name}.stdout.log"
        self.stderr_path = logdir / f"{name}.stderr.log"
        python = options.python or sys.executable
        env = scrubbed_env(workdir, env_extra)
        needs = sandbox.worker_paths(workdir, *keep_paths)
        keep = needs if self.isolation.private_tmp else None
        self.walls: dict[str, Any] = {
            "writable": str(workdir),
            "hidden": sandbox.parent_folders([workdir, *keep_paths]),
            "on": list(self.isolation.walls),
            # where landlock hides the parent's folders (no mount namespace, or a cover
            # refused): what it grants by name in a folder too wide to grant whole (a
            # crowded /tmp, a home of many thousand entries)
            "needs": needs,
            # the worker refuses bind and listen itself once CUDA is up (its driver serves
            # a socket of its own while it starts): lifecycle.run, seccomp.refuse_serving
            "serving_later": True,
        }
        self.started_by = "spawned"
        self.warm_note = ""
        to_worker_r, to_worker_w = channel.pipe()
        from_worker_r, from_worker_w = channel.pipe()
        self.proc: Any = None
        self.worker_pid: int | None = None
        template = None
        if options.warm and not templates.needs_fresh_interpreter(env_extra):
            try:
                template = templates.template_for(python, env_extra, backend)
            except (OSError, templates.TemplateError) as exc:
                self.warm_note = f"no warm template: {exc}"
        if template is not None:
            try:
                self.proc = template.fork(
                    workdir,
                    env,
                    self.stdout_path,
                    self.stderr_path,
                    device,
                    cap if device == "cpu" else 0,
                    self.isolation.mode,
                    keep,
                    (to_worker_r, from_worker_w),
                    self.startup_timeout_s,
                    self.walls,
                )
                self.started_by = "template"
            except templates.TemplateError as exc:
                self.warm_note = f"the warm template could not fork a worker: {exc}"
                to_worker_r, to_worker_w = _renew(to_worker_w)
                from_worker_w, from_worker_r = _renew(from_worker_r, reader=False)
        if self.proc is not None:
            cleanup.track(self.proc.pid)
            self.worker_pid = self.proc.read_pid(self.startup_timeout_s)
        else:
            self.worker_pid = self._spawn(
                python, env, keep, (to_worker_r, from_worker_w), workdir, device, cap
            )
        if self.worker_pid is None:
            self.kill()
            self._gone = WorkerGone(
                f"the sandbox could not start the worker ({self._launch_failure()})",
                self.stderr_tail(),
                self.proc.returncode,
            )
        self.end = channel.ParentEnd(to_worker_w, from_worker_r)
        self.started = time.monotonic()

    def _launch_failure(self) -> str:
        """Why the launcher gave up, in its own words where it said (``ctxkernel sandbox:``
        on the worker's stderr, or the warm template's status pipe), else how it ended."""
        said = getattr(self.proc, "launch_error", "")
        if not said:
            lines = [ln for ln in self.stderr_tail().splitlines() if "ctxkernel sandbox:" in ln]
            said = lines[-1].split("ctxkernel sandbox:", 1)[1].strip() if lines else ""
        how = describe_exit(self.proc.returncode)
        return f"{said}; {how}" if said else how

    def _spawn(
        self,
        python: str,
        env: dict[str, str],
        keep: list[str] | None,
        fds: tuple[int, int],
        workdir: Path,
        device: str,
        cap: int,
    ) -> int | None:
        """``python -m harness.worker`` through the sandbox's launcher; the worker's PID."""
        to_worker_r, from_worker_w = fds
        pid_r, pid_w = os.pipe()
        cmd = [
            python,
            "-c",
            WORKER_MAIN,
            "--fd-in",
            str(to_worker_r),
            "--fd-out",
            str(from_worker_w),
            "--workdir",
            str(workdir),
            "--device",
            device,
            "--mem-cap",
            str(cap if device == "cpu" else 0),
        ]
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                sandbox.command(
                    self.isolation.mode,
                    cmd,
                    pid_w,
                    python=python,
                    keep_paths=keep,
                    writable=self.walls["writable"],
                    hidden=self.walls["hidden"],
                    walls_on=self.walls["on"],
                    needs=self.walls["needs"],
                    serving_later=True,
                ),
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                pass_fds=(to_worker_r, from_worker_w, pid_w),
                start_new_session=True,
                close_fds=True,
            )
        cleanup.track(self.proc.pid)
        for fd in (to_worker_r, from_worker_w, pid_w):
            os.close(fd)
        # the PID whose memory the watchdog reads (in a namespace: not the launcher's)
        return sandbox.read_pid(pid_r, self.startup_timeout_s)

    @property
    def logs(self) -> dict[str, Path]:
        return {"stdout": self.stdout_path, "stderr": self.stderr_path}

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _tick(self) -> None:
        if self.proc.poll() is not None:
            raise channel.ChannelClosed("worker exited")
        now = time.monotonic()
        # its output too: the logs are files of ours it writes to without limit, and may
        # make any size without a block (``ftruncate``): weighed on every tick (a stat each)
        logs = sum(_file_bytes(p) for p in (self.stdout_path, self.stderr_path))
        if now - self._disk_checked >= DISK_CHECK_EVERY_S:
            self._disk_checked = now
            try:  # a folder it closed to its owner is opened up again, or it is ended
                self._folder_bytes = workertree.weigh(self.workdir, self.disk_cap)
            except workertree.Unweighable as closed:
                self._over_cap(
                    f"left a folder in its temp folder that the disk cap cannot weigh "
                    f"({closed}; --disk-cap); killed"
                )
        used = self._folder_bytes + logs
        if used > self.disk_cap:
            self._over_cap(
                "wrote more than the disk cap into its temp folder and output "
                f"({used / 2**30:.2f} GiB > {self.disk_cap / 2**30:.2f} GiB, --disk-cap); killed"
            )
        if self.memory is None:
            self.memory = memwatch.MemoryWatch(
                self.worker_pid or self.proc.pid, self.isolation.private_tmp
            )
        rss = self.memory.resident()
        if rss is None:
            return
        shared = self.memory.shared()  # a memfd, a tmpfs file: memory no VmRSS shows
        if rss + shared > self.memory_cap:
            held = f"{rss / 2**30:.1f} GiB resident"
            if shared:
                held += f" + {shared / 2**30:.1f} GiB shared memory (memfd, tmpfs)"
            self._over_cap(
                f"exceeded the memory cap ({held} > {self.memory_cap / 2**30:.1f} GiB); killed"
            )

    def _over_cap(self, reason: str) -> NoReturn:
        self.kill()
        self._capped = WorkerGone(reason, self.stderr_tail(), self.proc.returncode)
        raise self._capped

    def request(
        self,
        header: dict[str, Any],
        tensors: Sequence[torch.Tensor],
        timeout_s: float,
        max_reply_bytes: int,
    ) -> Reply:
        if self._gone is not None:
            raise self._gone
        # a load first waits for the worker's own start-up, then gives the candidate's
        # import ``timeout_s`` from the moment the worker says it begins
        loading = header.get("op") == "load"
        limit = max(self.startup_timeout_s, timeout_s) if loading else timeout_s
        deadline = time.monotonic() + limit
        starting = loading
        clock = self.compile_clock
        try:
            # the caps are weighed before each request too: the channel ticks only while
            # it waits, and a quick call (a warm worker) may never wait
            self._tick()
            self.end.send(header, tensors, deadline, self._tick)
            while True:  # interim frames: the import begins, a compile starts or ends
                frame = self.end.recv(deadline, self._tick, max_reply_bytes)
                wrong = malformed(frame.header)
                if wrong is not None:
                    raise channel.ChannelError(f"malformed reply from the worker: {wrong}")
                stage = frame.header.get("stage")
                if stage == "import" and loading:
                    starting = False
                    deadline = time.monotonic() + timeout_s
                elif stage == "compile":
                    deadline = clock.on_frame(frame.header, deadline)
                else:
                    break
        except channel.ChannelTimeout:
            self.kill()
            if starting and limit > timeout_s:
                reason = f"the worker did not start within {limit:g} s (killed)"
            elif clock.compiling:
                reason = f"compiling took longer than {clock.budget_s:g} s (killed)"
            else:
                reason = f"timed out after {timeout_s:g} s (killed)"
            self._gone = WorkerGone(reason, self.stderr_tail())
            raise self._gone from None
        except WorkerGone as gone:
            self._gone = gone
            raise
        except channel.ChannelClosed:
            returncode = self._wait_exit()
            reason = describe_exit(returncode)
            if returncode == sandbox.LAUNCH_FAILED:  # the sandbox's words, when it said why
                said = self._launch_failure()
                if said.startswith("process cap:"):  # it started, and was ended for forking
                    reason = f"the sandbox ended the worker: {said}"
                elif said != reason:
                    reason = f"the sandbox could not start the worker ({said})"
            self._gone = WorkerGone(reason, self.stderr_tail(), returncode)
            raise self._gone from None
        except channel.ChannelError as exc:
            self.kill()
            self._gone = WorkerGone(f"the result channel was corrupted: {exc}", self.stderr_tail())
            self._corrupted = self._gone
            raise self._gone from None
        if self.end.pending():
            self.kill()
            self._gone = WorkerGone(
                "unexpected extra data on the result channel (something besides the harness wrote to it)",
                self.stderr_tail(),
            )
            raise self._gone
        return Reply(frame.header, frame.tensors)

    def _wait_exit(self) -> int | None:
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def kill(self) -> None:
        kill_worker_first(self.proc, self.worker_pid)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self.worker_pid is not None and self.worker_pid != self.proc.pid:
            # the launcher is gone; wait for the worker too, so its memory (a GPU's
            # included) is free when the next worker starts
            _wait_gone(self.worker_pid, 5.0)

    def close(self) -> dict[str, Any]:
        """Say goodbye, collect the last findings, and make sure nothing is left running."""
        final: dict[str, Any] = {"integrity": []}
        if self._gone is None and self.proc.poll() is None:
            try:
                reply = self.request({"op": "bye"}, [], timeout_s=10.0, max_reply_bytes=1 << 20)
                final["integrity"] = list(reply.header.get("integrity") or [])
            except WorkerGone as gone:
                if gone is self._capped:  # past a cap since its last request: say so
                    final["integrity"] = [{"kind": "cap", "message": gone.reason}]
                elif gone is self._corrupted:  # a forged or malformed goodbye: say so
                    final["integrity"] = [{"kind": "channel", "message": gone.reason}]
        try:  # the worker exits right after its goodbye (no interpreter teardown)
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self.kill()  # the process group: anything the candidate left behind goes too
        cleanup.untrack(self.proc.pid)
        self.end.close()
        if isinstance(self.proc, templates.ForkedProcess):
            self.proc.close()
        final["returncode"] = self.proc.returncode
        final["wall_s"] = time.monotonic() - self.started
        return final

    def stderr_tail(self, limit: int = 4000) -> str:
        try:  # its last bytes only: the log is as long as the worker made it
            with open(self.stderr_path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - limit))
                data = fh.read(limit)
        except OSError:
            return ""
        return data.decode(errors="replace")


def kill_worker_first(proc: Any, worker_pid: int | None, settle_s: float = 5.0) -> None:
    """SIGKILL the worker alone, then give its launcher ``settle_s`` to end: the launcher
    is what ends the rest of the worker's tree (the namespace's init in a namespace mode;
    in ``none`` mode it is the subreaper that kills every descendant, ``setsid`` ones out
    of its process group included), which it cannot do once it is killed itself. The
    caller then kills the launcher's process group, whatever is left of it."""
    if proc.poll() is not None or not worker_pid or worker_pid == proc.pid:
        return
    try:  # a descriptor first, then the check that it is the launcher's child: no PID reuse
        pidfd = os.pidfd_open(worker_pid)
    except OSError:
        return
    try:
        if _parent_pid(worker_pid) != proc.pid:
            return
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        return
    finally:
        os.close(pidfd)
    try:
        proc.wait(timeout=settle_s)
    except subprocess.TimeoutExpired:
        pass


def _parent_pid(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        return int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def _renew(kept: int, reader: bool = True) -> tuple[int, int]:
    """A fresh pipe for the end handed to a template that failed (it closed ours); the
    other end ``kept`` is closed. Returns (the worker's end, ours)."""
    os.close(kept)
    r, w = os.pipe()
    return (r, w) if reader else (w, r)


def _wait_gone(pid: int, timeout_s: float) -> bool:
    """Whether ``pid`` (not our child) exited, or became a zombie, within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rsplit(")", 1)[-1].split()[:1] in (["Z"], ["X"]):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


DISK_CHECK_EVERY_S = 0.5  # how often the watchdog weighs a worker's temp folder


def _file_bytes(path: Path) -> int:
    """A log's weight: its blocks, or its apparent size where that is more (a file made
    sparse, ``ftruncate``d to terabytes of holes, is still read by whoever reads it)."""
    try:
        st = os.stat(path)
    except OSError:
        return 0
    return max(st.st_blocks * 512, st.st_size)


def run_oneshot(
    workdir: Path,
    logdir: Path,
    device: str,
    options: RunOptions,
    env_extra: dict[str, str],
    request: dict[str, Any],
    wrapper: Sequence[str],
    timeout_s: float,
    tag: str = "oneshot",
    keep_paths: Sequence[str | Path] = (),
) -> dict[str, Any]:
    """Run ``python -m harness.worker --oneshot`` under ``wrapper`` (e.g. ncu), in the
    candidate's temp dir with the worker's scrubbed environment; a separate process from
    every timing worker. Returns the exit status, the log paths and the worker's result."""
    import json

    # the worker writes its result beside the request: in its own (writable) folder, where
    # an earlier worker of the same candidate may have left a link or a FIFO under either name
    request_path = workdir / f".{tag}.request.json"
    result_path = Path(str(request_path) + ".result")
    remove_entry(result_path)
    write_fresh(request_path, json.dumps(request))
    out_path, err_path = logdir / f"{tag}.stdout.log", logdir / f"{tag}.stderr.log"
    # the wrapper (a profiler) runs inside the walls: its report goes to a folder of its
    # own beside the worker's ({tooldir} in its arguments), which the tool may write and
    # the worker it wraps may not -- a candidate cannot forge or blank the report
    tooldir = workdir.parent / f".{tag}.tool"
    if wrapper:
        remove_entry(tooldir)
        tooldir.mkdir(mode=0o700)
    wrapper = [
        arg.replace("{tooldir}", str(tooldir)).replace("{workdir}", str(workdir)) for arg in wrapper
    ]
    cmd = [
        *wrapper,
        options.python or sys.executable,
        "-c",
        WORKER_MAIN,
        "--workdir",
        str(workdir),
        "--device",
        device,
        "--oneshot",
        str(request_path),
    ]
    timed_out = False
    isolation = sandbox.isolation()
    hidden = sandbox.parent_folders([workdir, *keep_paths])
    needs = sandbox.worker_paths(
        workdir, *keep_paths, *_tool_dirs(wrapper), *([tooldir] if wrapper else [])
    )
    if wrapper:  # the profiler's layer leaves /proc writable: the target walls itself
        spec = sandbox.self_walls_spec(isolation.profiler_mode(), str(workdir), hidden, needs)
        cmd += ["--self-walls", spec]
    # under a profiler the worker keeps CAP_SYS_ADMIN (the driver's counters need it), so
    # it could unmount its /proc: this process is made non-dumpable first
    mode = isolation.profiler_mode() if wrapper else isolation.mode
    keep_admin = bool(wrapper) and mode == "pidns"
    if mode == "none" or keep_admin:
        sandbox.harden_parent()
    pid_r, pid_w = os.pipe()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            sandbox.command(
                mode,
                cmd,
                pid_w,
                keep_admin=keep_admin,
                keep_paths=needs if isolation.private_tmp and mode != "none" else None,
                writable=str(workdir),
                hidden=hidden,
                profiler=bool(wrapper),
                tool_dir=str(tooldir) if wrapper else None,
                walls_on=isolation.walls,
                needs=needs,
                serving_later=True,  # oneshot refuses them once CUDA is up, unprofiled
            ),
            cwd=workdir,
            env=scrubbed_env(workdir, env_extra),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            pass_fds=(pid_w,),
            start_new_session=True,
        )
        os.close(pid_w)
        cleanup.track(proc.pid)
        worker_pid = sandbox.read_pid(pid_r, options.startup_timeout_s)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_worker_first(proc, worker_pid)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait(timeout=10)
        cleanup.untrack(proc.pid)
    data = read_worker_file(result_path, 64 << 20)  # the worker wrote it
    try:
        result = json.loads(data) if data is not None else None
    except ValueError:
        result = None
    return {
        "returncode": proc.returncode,
        "timed_out": timed_out,
        "stdout": out_path,
        "stderr": err_path,
        "result": result,
        "workdir": str(workdir),
        "tooldir": str(tooldir),
    }


def _tool_dirs(wrapper: Sequence[str]) -> list[str]:
    """The folder of the profiler that wraps a one-shot worker: it runs inside the walls,
    so it must be visible there (a private /tmp would hide one installed under it)."""
    if not wrapper:
        return []
    found = shutil.which(wrapper[0])
    return [os.path.dirname(os.path.realpath(found))] if found else []
