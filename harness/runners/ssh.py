"""The SSH runner: each candidate checked on a remote GPU host through the system ``ssh``.

Spec: ``ssh://[user@]host[:port][?key=value&...]`` with keys

- ``known_hosts=PATH``: the only known_hosts file to trust (default: ssh's own, i.e.
  ``~/.ssh/known_hosts`` and the system one); host keys are always verified
  (``StrictHostKeyChecking=yes``) and never added or updated;
- ``identity=PATH``: the private key (default: ssh's, or an ssh-agent); ``BatchMode=yes``
  means no password or passphrase is ever asked for, and no secret is on a command line;
- ``ssh_config=PATH``: an ssh config file instead of ``~/.ssh/config`` (``none``: no file);
- ``python=PY``: the host's interpreter (default ``python3``), e.g. a venv's python;
- ``harness=ship|installed``: ship this controller's harness with each job (default: the
  host only needs python with torch and triton, and runs exactly these rungs) or use the
  one installed on the host (``pip install ctxkernel`` there);
- ``jobs=N``: concurrent checks on the host; ``gpus=0,1``: pin each to one of these GPUs;
- ``connect_timeout=S``: seconds to wait for the connection (default 15).

One ``ssh`` session per candidate: the job bundle (``bundle.py``) goes in on stdin, a
POSIX ``sh`` script on the host unpacks it in a temp dir, runs
``python -m harness.runners.remote`` under ``timeout``, and streams ``result/`` back as a
tar on stdout; the record lands in this machine's runs dir. A preflight session first
checks the connection, the host key and the interpreter, so an unreachable host, a host
key mismatch or a host without the harness is one clear error before any candidate runs.
A connection lost mid-check re-queues the candidate once, then fails it with the reason.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ..runner import RunOptions
from .base import (
    DEFAULT_ATTEMPTS,
    Job,
    RunnerError,
    default_deadline,
    failure_verdict,
    first_of,
    map_unordered,
    record_failure,
    runner_info,
)
from .bundle import extract, import_result, pack_job

if TYPE_CHECKING:
    from ..problems.candidate import Candidate
    from ..problems.problem import Problem
    from ..verdict import Verdict

_KEYS = {
    "known_hosts",
    "identity",
    "ssh_config",
    "python",
    "harness",
    "jobs",
    "gpus",
    "connect_timeout",
}
_HOST = re.compile(r"^[A-Za-z0-9_.:%\[\]-]+$")
_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")

# exit statuses of the host-side script
NO_TMP, NO_UNPACK, NO_PYTHON, NO_IMPORT, NO_RESULT, NO_TOOL = 91, 92, 93, 94, 95, 96

_PREFLIGHT = r"""
PY=__PY__
for t in tar mktemp; do
  command -v "$t" >/dev/null 2>&1 || { echo "ctxkernel: no '$t' on this host" >&2; exit 96; }
done
command -v "$PY" >/dev/null 2>&1 || { echo "ctxkernel: no '$PY' on this host" >&2; exit 93; }
err=$("$PY" -c "import __MODULES__" 2>&1 >/dev/null) || { printf '%s\n' "$err" | tail -n 3 >&2; exit 94; }
"$PY" -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.device_count())"
"""

_JOB = r"""
PY=__PY__
d=$(mktemp -d "${TMPDIR:-/tmp}/ctxkernel-job.XXXXXXXX") || exit 91
trap 'rm -rf "$d"' EXIT
trap 'exit 129' HUP INT TERM
cd "$d" || exit 91
tar xf - || exit 92
if [ -d lib ]; then PYTHONPATH="$d/lib${PYTHONPATH:+:$PYTHONPATH}"; export PYTHONPATH; fi
__GPU__
T=""
if command -v timeout >/dev/null 2>&1; then T="timeout -k 10 __DEADLINE__"; fi
$T "$PY" -m harness.runners.remote "$d/job" >"$d/job/remote.log" 2>&1
rc=$?
mkdir -p "$d/job/result"
tail -c 1000000 "$d/job/remote.log" >"$d/job/result/remote.log" 2>/dev/null
tar cf - -C "$d/job" result || exit 95
exit $rc
"""


@dataclass
class SshTarget:
    """Where and how to connect, parsed from an ``ssh://`` spec."""

    host: str
    user: str | None = None
    port: int | None = None
    known_hosts: Path | None = None
    identity: Path | None = None
    ssh_config: str | None = None
    python: str = "python3"
    ship_harness: bool = True
    jobs: int = 1
    gpus: list[str] | None = None
    connect_timeout: int = 15

    @classmethod
    def parse(cls, spec: str) -> SshTarget:
        url = urlsplit(spec)
        if url.scheme != "ssh" or not url.hostname:
            raise RunnerError(f"{spec!r}: expected ssh://[user@]host[:port][?key=value...]")
        if url.password is not None:
            raise RunnerError("ssh: no password in the spec; use a key (identity=PATH or an agent)")
        try:
            port = url.port
        except ValueError:
            raise RunnerError(f"{spec!r}: the port is not a number") from None
        host = url.hostname
        user = unquote(url.username) if url.username else None
        if not _HOST.match(host) or host.startswith("-"):
            raise RunnerError(f"{spec!r}: {host!r} is not a host name")
        if user is not None and not _USER.match(user):
            raise RunnerError(f"{spec!r}: {user!r} is not a user name")
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        unknown = sorted(set(query) - _KEYS)
        if unknown:
            raise RunnerError(
                f"ssh: unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
            )
        target = cls(host=host, user=user, port=port)
        if query.get("known_hosts"):
            target.known_hosts = Path(query["known_hosts"]).expanduser()
            if not target.known_hosts.is_file():
                raise RunnerError(f"ssh: known_hosts file not found: {target.known_hosts}")
        if query.get("identity"):
            target.identity = Path(query["identity"]).expanduser()
            if not target.identity.is_file():
                raise RunnerError(f"ssh: identity file not found: {target.identity}")
        if query.get("ssh_config"):
            target.ssh_config = query["ssh_config"]
        if query.get("python"):
            target.python = query["python"]
        mode = query.get("harness", "ship")
        if mode not in ("ship", "installed"):
            raise RunnerError("ssh: harness=ship or harness=installed")
        target.ship_harness = mode == "ship"
        try:
            target.jobs = max(1, int(query.get("jobs", "1")))
            target.connect_timeout = max(1, int(query.get("connect_timeout", "15")))
        except ValueError as exc:
            raise RunnerError(f"ssh: {exc}") from None
        if query.get("gpus"):
            target.gpus = [g for g in query["gpus"].split(",") if g]
        return target

    @property
    def label(self) -> str:
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.host}" + (f":{self.port}" if self.port else "")

    @property
    def known_hosts_label(self) -> str:
        return (
            str(self.known_hosts) if self.known_hosts else "your known_hosts (~/.ssh/known_hosts)"
        )

    def ssh_command(self, remote: str) -> list[str]:
        ssh = shutil.which("ssh")
        if ssh is None:
            raise RunnerError("the ssh runner needs the OpenSSH client (`ssh`) on this machine")
        args = [ssh]
        if self.ssh_config:
            args += ["-F", "/dev/null" if self.ssh_config == "none" else self.ssh_config]
        args += [
            "-T",
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "UpdateHostKeys=no",
            "-o", f"ConnectTimeout={self.connect_timeout}",
            "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4",
        ]  # fmt: skip
        if self.known_hosts:
            args += [
                "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "GlobalKnownHostsFile=/dev/null",
            ]  # fmt: skip
        if self.identity:
            args += ["-i", str(self.identity), "-o", "IdentitiesOnly=yes"]
        if self.port:
            args += ["-p", str(self.port)]
        if self.user:
            args += ["-l", self.user]
        return [*args, self.host, "sh -c " + shlex.quote(remote)]

    def connection_error(self, stderr: str) -> RunnerError:
        """What a failed connection (ssh exit status 255) means, in one line."""
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        last = lines[-1] if lines else "no message"
        if (
            "IDENTIFICATION HAS CHANGED" in stderr
            or "has changed and you have requested strict" in stderr
        ):
            return RunnerError(
                f"host key of {self.label} does NOT match the one in {self.known_hosts_label}: "
                "refusing to connect (possible man-in-the-middle; if the host was reinstalled, "
                "verify its new key and replace the old line)"
            )
        if "Host key verification failed" in stderr or "No ED25519 host key is known" in stderr:
            port = f"-p {self.port} " if self.port else ""
            return RunnerError(
                f"host key of {self.label} is not in {self.known_hosts_label}: verify the host's "
                f"fingerprint, then add it (ssh-keyscan {port}{self.host} >> known_hosts); "
                "unknown host keys are never accepted"
            )
        if "Permission denied" in stderr or "Too many authentication failures" in stderr:
            return RunnerError(
                f"{self.label} refused the login: {last} (give a key with identity=PATH or load "
                "it in ssh-agent; no password is ever asked for)"
            )
        for marker in (
            "Connection refused",
            "Could not resolve",
            "No route to host",
            "Network is unreachable",
            "timed out",
            "Connection closed",
            "Connection reset",
            "kex_exchange_identification",
        ):
            if marker in stderr:
                return RunnerError(f"cannot reach {self.label}: {last}")
        return RunnerError(f"ssh to {self.label} failed: {last}")

    def setup_error(self, rc: int, stderr: str) -> RunnerError | None:
        """What a failed host-side script means; None for a status it does not set."""
        text = " ".join(stderr.strip().splitlines()[-3:])
        if rc == NO_PYTHON or rc == 127:
            return RunnerError(
                f"{self.label} has no {self.python!r}: {text or 'not found'} (name the host's "
                "interpreter with ?python=/path/to/venv/bin/python)"
            )
        if rc == NO_IMPORT:
            lines = [line.strip() for line in stderr.splitlines() if line.strip()]
            text = lines[-1] if lines else ""
            need = (
                "torch (and triton)" if self.ship_harness else "the harness (pip install ctxkernel)"
            )
            return RunnerError(
                f"{self.label} lacks the harness: {self.python} cannot import {need}: "
                f"{text or 'import failed'}. Prepare the host as docs/operations.md's 'Preparing an "
                "SSH host' says, or point ?python= at an interpreter that has it"
            )
        if rc == NO_TOOL:
            return RunnerError(f"{self.label}: {text} (the host needs a POSIX sh, tar and mktemp)")
        if rc in (NO_TMP, NO_UNPACK):
            return RunnerError(f"{self.label} could not unpack the job: {text}")
        return None


class SshRunner:
    """Checks candidates on one SSH host; ``jobs`` sessions at a time."""

    def __init__(self, target: SshTarget, max_attempts: int = DEFAULT_ATTEMPTS) -> None:
        self.target = target
        self.max_attempts = max(1, max_attempts)
        self.spec = f"ssh://{target.label}"
        self.host_info: dict[str, Any] | None = None

    @classmethod
    def from_spec(cls, spec: str, jobs: int | None = None) -> SshRunner:
        target = SshTarget.parse(spec)
        if jobs is not None and "jobs=" not in spec:
            target.jobs = max(1, jobs)
        return cls(target)

    def _ssh(
        self, script: str, data: bytes, timeout_s: float
    ) -> subprocess.CompletedProcess[bytes]:
        cmd = self.target.ssh_command(script)
        return subprocess.run(
            cmd,
            input=data,
            capture_output=True,
            timeout=timeout_s,
            env=os.environ.copy(),
            check=False,
        )

    def preflight(self) -> dict[str, Any]:
        """Connect once: the host key, the login, the interpreter and what it can import."""
        if self.host_info is not None:
            return self.host_info
        modules = "torch" if self.target.ship_harness else "torch, harness.runners.remote"
        script = _PREFLIGHT.replace("__PY__", shlex.quote(self.target.python)).replace(
            "__MODULES__", modules
        )
        timeout = self.target.connect_timeout + 120
        try:
            proc = self._ssh(script, b"", timeout)
        except subprocess.TimeoutExpired:
            raise RunnerError(f"{self.target.label} did not answer within {timeout} s") from None
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode == 255:
            raise self.target.connection_error(stderr)
        problem = self.target.setup_error(proc.returncode, stderr)
        if problem is not None:
            raise problem
        if proc.returncode != 0:
            raise RunnerError(
                f"{self.target.label}: the preflight check failed: {stderr.strip()[-300:]}"
            )
        fields = proc.stdout.decode(errors="replace").split()
        self.host_info = {
            "python": fields[0] if fields else None,
            "torch": fields[1] if len(fields) > 1 else None,
            "gpus": int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else None,
        }
        return self.host_info

    def run(self, problem: Problem, candidate: Candidate, options: RunOptions) -> Verdict:
        return first_of(self, problem, candidate, options)

    def run_many(
        self, problem: Problem, candidates: Sequence[Candidate], options: RunOptions
    ) -> Iterator[tuple[Candidate, Verdict]]:
        if not candidates:
            return
        self.preflight()
        if options.record and options.runs_dir is None:
            from ..paths import default_runs_dir

            options = replace(options, runs_dir=default_runs_dir())
        gpus: queue.Queue[str | None] = queue.Queue()
        for i in range(self.target.jobs):
            gpus.put(self.target.gpus[i % len(self.target.gpus)] if self.target.gpus else None)
        index = {id(c): i for i, c in enumerate(candidates)}

        def one(candidate: Candidate) -> Verdict:
            gpu = gpus.get()
            try:
                return self._check(problem, Job(index[id(candidate)], candidate), options, gpu)
            finally:
                gpus.put(gpu)

        yield from map_unordered(one, candidates, self.target.jobs)

    def _check(self, problem: Problem, job: Job, options: RunOptions, gpu: str | None) -> Verdict:
        deadline = default_deadline(options)
        data = pack_job(problem, job.candidate, options, ship_harness=self.target.ship_harness)
        pin = f"CUDA_VISIBLE_DEVICES={shlex.quote(gpu)}; export CUDA_VISIBLE_DEVICES" if gpu else ""
        script = (
            _JOB.replace("__PY__", shlex.quote(self.target.python))
            .replace("__GPU__", pin)
            .replace("__DEADLINE__", str(int(deadline)))
        )
        while True:
            info = runner_info(
                "ssh",
                job,
                host=self.target.label,
                gpu=gpu,
                **{"host_" + k: v for k, v in (self.host_info or {}).items()},
            )
            outcome, stderr = self._attempt(script, data, deadline, problem, job, options, info)
            if isinstance(outcome, str):
                reason = outcome
                job.lost.append(reason)
                if job.attempt < self.max_attempts:
                    job.attempt += 1
                    continue
                info = runner_info("ssh", job, host=self.target.label, gpu=gpu)
                verdict = failure_verdict(problem, job.candidate, options, reason, info)
                with tempfile.TemporaryDirectory(prefix="ctxkernel-ssh-") as tmp:
                    (Path(tmp) / "ssh.stderr.log").write_text(stderr)
                    return record_failure(verdict, job.candidate, options, Path(tmp))
            return outcome

    def _attempt(
        self,
        script: str,
        data: bytes,
        deadline: float,
        problem: Problem,
        job: Job,
        options: RunOptions,
        info: dict[str, Any],
    ) -> tuple[Verdict | str, str]:
        """One try: the verdict, or the reason the check was lost (and ssh's stderr)."""
        try:
            proc = self._ssh(script, data, deadline + self.target.connect_timeout + 60)
        except subprocess.TimeoutExpired:
            return f"no verdict from {self.target.label} after {deadline:g} s (ssh killed)", ""
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode == 255:
            error = self.target.connection_error(stderr)
            if "host key" in str(error) or "refused the login" in str(error):
                raise error
            return f"connection to {self.target.label} lost: {error}", stderr
        problem_error = self.target.setup_error(proc.returncode, stderr)
        if problem_error is not None:
            raise problem_error
        if not proc.stdout:
            return (
                f"{self.target.label} returned no result (status {proc.returncode}): "
                f"{stderr.strip()[-300:] or 'no message'}",
                stderr,
            )
        with tempfile.TemporaryDirectory(prefix="ctxkernel-ssh-") as tmp:
            try:
                extract(proc.stdout, Path(tmp))
            except Exception as exc:
                return f"unreadable result from {self.target.label}: {exc}", stderr
            result = Path(tmp) / "result"
            if not (result / "verdict.json").is_file() and not (result / "error.json").is_file():
                log = (
                    (result / "remote.log").read_text(errors="replace")
                    if (result / "remote.log").is_file()
                    else ""
                )
                how = (
                    "timed out"
                    if proc.returncode in (124, 137)
                    else f"ended with status {proc.returncode}"
                )
                tail = " | ".join(log.strip().splitlines()[-3:])
                return f"the check on {self.target.label} {how} without a verdict" + (
                    f": {tail}" if tail else ""
                ), log
            return import_result(result, problem, job.candidate, options, info), stderr

    def close(self) -> None:
        pass
