"""The Ray runner: each candidate a Ray task on a cluster node that has the device.

Specs: ``ray`` (connect to the cluster ``RAY_ADDRESS`` or ``ray start`` on this machine
names, else start a local one), ``ray://host:10001`` (Ray Client), ``ray:HOST:PORT`` or
``ray:auto`` (a cluster's GCS address); query keys ``num_cpus=N`` (a local cluster's size),
``harness=ship|installed`` (ship this harness to the nodes as a ``py_modules`` runtime
env, the default, or use the one installed there).

Each candidate is one task (``num_gpus=1`` on a cluster with GPUs, else one CPU; Ray picks
the node and sets ``CUDA_VISIBLE_DEVICES``). The task unpacks the job bundle
(``bundle.py``) in a temp dir on the node and runs ``python -m harness.runners.remote`` in
a fresh process — the ladder, which spawns the isolated worker as always — and returns
the result directory as tar bytes; results stream back with ``ray.wait`` in the order
they finish and land in this machine's run records. Ray's own retries are off
(``max_retries=0``) so a lost worker or node is seen: the candidate is submitted once more
with the reason kept, then failed with it. Ray does all the scheduling.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from ..process.workerenv import harness_root
from ..runner import RunOptions
from .base import (
    DEFAULT_ATTEMPTS,
    Job,
    RunnerError,
    default_deadline,
    failure_verdict,
    first_of,
    record_failure,
    runner_info,
)
from .bundle import extract, import_result, pack_job

if TYPE_CHECKING:
    from ..problems.candidate import Candidate
    from ..problems.problem import Problem
    from ..verdict import Verdict

INSTALL_HINT = (
    "the ray runner needs Ray on this machine and the cluster: pip install 'ctxkernel[ray]'"
)
LOG_LIMIT = 1 << 20


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RunnerError(INSTALL_HINT) from None
    return ray


def check_on_node(job: bytes, deadline_s: float) -> dict[str, Any]:
    """The body of the Ray task: one check on this node, in a fresh ladder process."""
    from .bundle import environ_with_harness, pack_dir

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ctxkernel-ray-") as tmp:
        root = Path(tmp)
        extract(job, root)
        cmd = [sys.executable, "-m", "harness.runners.remote", str(root / "job"), "--watch-parent"]
        try:
            proc = subprocess.run(
                cmd,
                env=environ_with_harness(),
                cwd=root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=deadline_s,
                check=False,
            )
            rc, log = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc, log = 124, (exc.stdout or b"") + (exc.stderr or b"")
        result = root / "job" / "result"
        result.mkdir(parents=True, exist_ok=True)
        (result / "remote.log").write_bytes(log[-LOG_LIMIT:])
        return {
            "rc": rc,
            "node": socket.gethostname(),
            "pid": os.getpid(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "wall_s": time.monotonic() - started,
            "result": pack_dir(result, "result"),
        }


class RayRunner:
    """Candidates as Ray tasks; see the module docstring."""

    def __init__(
        self,
        address: str | None = None,
        ship_harness: bool = True,
        num_cpus: int | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        spec: str = "ray",
    ) -> None:
        self.address = address
        self.ship_harness = ship_harness
        self.num_cpus = num_cpus
        self.max_attempts = max(1, max_attempts)
        self.spec = spec
        self._owned = False
        self._remote: Any = None

    @classmethod
    def from_spec(cls, spec: str) -> RayRunner:
        base, _, query_text = spec.partition("?")
        query = dict(parse_qsl(query_text))
        unknown = set(query) - {"num_cpus", "harness"}
        if unknown:
            raise RunnerError(f"ray: unknown option(s) {', '.join(sorted(unknown))}")
        if base == "ray":
            address = None
        elif base.startswith("ray://"):
            address = base
        elif base.startswith("ray:") and len(base) > 4:
            address = base[4:]
        else:
            raise RunnerError(f"{spec!r}: expected ray, ray://host:port or ray:HOST:PORT")
        mode = query.get("harness", "ship")
        if mode not in ("ship", "installed"):
            raise RunnerError("ray: harness=ship or harness=installed")
        try:
            num_cpus = int(query["num_cpus"]) if "num_cpus" in query else None
        except ValueError as exc:
            raise RunnerError(f"ray: {exc}") from None
        return cls(address, mode == "ship", num_cpus, spec=base)

    def connect(self) -> Any:
        """Join (or start) the cluster once; the task function, ready to submit."""
        ray = _import_ray()
        if self._remote is not None:
            return ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
            if self.ship_harness:
                # local directories ship only at the job level, not per task
                kwargs["runtime_env"] = {"py_modules": [str(harness_root() / "harness")]}
            if self.address is None:
                kwargs["include_dashboard"] = False
                if self.num_cpus is not None:
                    kwargs["num_cpus"] = self.num_cpus
            try:
                ray.init(address=self.address, **kwargs)
            except Exception as exc:
                where = self.address or "a local cluster"
                raise RunnerError(f"cannot join the Ray cluster at {where}: {exc}") from None
            self._owned = True
        # an already-initialized Ray (the caller's) ships nothing: its job's runtime_env or
        # the nodes' own installation must provide the harness
        self._remote = ray.remote(check_on_node)
        return ray

    def gpus_in_cluster(self) -> float:
        ray = self.connect()
        return float(ray.cluster_resources().get("GPU", 0.0))

    def run(self, problem: Problem, candidate: Candidate, options: RunOptions) -> Verdict:
        return first_of(self, problem, candidate, options)

    def run_many(
        self, problem: Problem, candidates: Sequence[Candidate], options: RunOptions
    ) -> Iterator[tuple[Candidate, Verdict]]:
        if not candidates:
            return
        ray = self.connect()
        gpus = self.gpus_in_cluster()
        device = options.device or ("cuda" if gpus > 0 else "cpu")
        if device == "cuda" and gpus <= 0:
            raise RunnerError(f"{self.spec}: --device cuda but the Ray cluster has no GPU")
        options = replace(options, device=device)
        if options.record and options.runs_dir is None:
            from ..paths import default_runs_dir

            options = replace(options, runs_dir=default_runs_dir())
        resources = {"num_gpus": 1, "num_cpus": 1} if device == "cuda" else {"num_cpus": 1}
        deadline = default_deadline(options)
        pending: dict[Any, tuple[Job, float]] = {}

        def submit(job: Job) -> None:
            data = pack_job(problem, job.candidate, options, ship_harness=False)
            ref = self._remote.options(max_retries=0, **resources).remote(data, deadline)
            pending[ref] = (job, time.monotonic())

        for index, candidate in enumerate(candidates):
            submit(Job(index, candidate))
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=5.0)
                if not ready:
                    self._cancel_overdue(ray, pending, deadline)
                    continue
                ref = ready[0]
                job, _ = pending.pop(ref)
                outcome = self._outcome(ray, ref, problem, job, options)
                if isinstance(outcome, str):
                    job.lost.append(outcome)
                    if job.attempt < self.max_attempts:
                        job.attempt += 1
                        submit(job)
                        continue
                    info = runner_info("ray", job, cluster=self.address or "local")
                    verdict = failure_verdict(problem, job.candidate, options, outcome, info)
                    outcome = record_failure(verdict, job.candidate, options, None)
                yield job.candidate, outcome
        finally:
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # the task may have finished meanwhile
                    pass

    def _cancel_overdue(
        self, ray: Any, pending: dict[Any, tuple[Job, float]], deadline: float
    ) -> None:
        # the task enforces the deadline itself; this covers a node that stopped answering
        now = time.monotonic()
        for ref, (_, submitted) in list(pending.items()):
            if now - submitted > deadline + 600:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # the task may have finished meanwhile
                    pass

    def _outcome(
        self, ray: Any, ref: Any, problem: Problem, job: Job, options: RunOptions
    ) -> Verdict | str:
        """The verdict of a finished task, or the reason its check was lost."""
        errors = ray.exceptions
        try:
            reply = ray.get(ref)
        except errors.RuntimeEnvSetupError as exc:
            raise RunnerError(
                f"Ray could not set up the harness on a node ({_first_line(exc)}); with "
                "harness=installed, pip install ctxkernel on every node"
            ) from None
        except errors.TaskCancelledError:
            return "the Ray task was cancelled (no answer from its node in time)"
        except errors.RayTaskError as exc:
            info = runner_info("ray", job, cluster=self.address or "local")
            reason = f"harness error in the Ray task: {_first_line(exc)}"
            return record_failure(
                failure_verdict(problem, job.candidate, options, reason, info),
                job.candidate,
                options,
                None,
            )
        except errors.RayError as exc:
            return f"Ray {_kind(exc)}: {_first_line(exc)}"
        info = runner_info(
            "ray",
            job,
            cluster=self.address or "local",
            node=reply.get("node"),
            pid=reply.get("pid"),
            cuda_visible_devices=reply.get("cuda_visible_devices"),
        )
        with tempfile.TemporaryDirectory(prefix="ctxkernel-ray-") as tmp:
            extract(reply["result"], Path(tmp))
            result = Path(tmp) / "result"
            if (result / "verdict.json").is_file() or (result / "error.json").is_file():
                return import_result(result, problem, job.candidate, options, info)
            log = (
                (result / "remote.log").read_text(errors="replace")
                if (result / "remote.log").is_file()
                else ""
            )
            tail = " | ".join(log.strip().splitlines()[-3:])
            rc = reply.get("rc")
            how = "timed out" if rc == 124 else f"ended with status {rc}"
            return f"the check on node {reply.get('node')} {how} without a verdict" + (
                f": {tail}" if tail else ""
            )

    def close(self) -> None:
        if self._owned:
            ray = _import_ray()
            ray.shutdown()
            self._owned = False
        self._remote = None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__


def _kind(exc: BaseException) -> str:
    names = {
        "WorkerCrashedError": "worker died",
        "NodeDiedError": "node died",
        "LocalRayletDiedError": "raylet died",
        "OwnerDiedError": "owner died",
        "ObjectLostError": "result lost",
        "OutOfMemoryError": "worker killed for memory",
    }
    return names.get(type(exc).__name__, type(exc).__name__)
