"""Runners for many candidates: where checks run, chosen by a spec string.

``get_runner(spec)`` parses a spec into a ``BatchRunner``; ``run_many(problem, candidates,
options, runner)`` yields ``(candidate, verdict)`` as each check finishes. Specs:

- ``local``: the ladder in this process on ``jobs`` threads (each check's candidate in its
  own worker process) — what a single ``check`` uses;
- ``pool``: one slot process per visible GPU with ``CUDA_VISIBLE_DEVICES`` pinned, or
  ``jobs`` CPU slots; a crashed or hung slot is replaced and its candidate re-queued;
- ``ssh://[user@]host[:port][?key=value&...]``: each candidate shipped to a host over the
  system ``ssh`` (keys ``known_hosts``, ``identity``, ``ssh_config``, ``python``, ``jobs``,
  ``gpus``, ``harness=ship|installed``, ``connect_timeout``; see ``ssh.py``);
- ``ray`` (a local Ray cluster, or the one ``RAY_ADDRESS`` names), ``ray://host:port``
  (Ray Client) or ``ray:HOST:PORT`` / ``ray:auto`` (a cluster's address): one Ray task per
  candidate, ``num_gpus=1`` on a GPU cluster (see ``ray.py``).

Whatever the runner, the ladder is ``LocalRunner`` on the machine that has the device, and
every verdict lands in this machine's run records. ``Batch`` (``batch.py``) adds a manifest
so an interrupted batch resumes without re-checking finished candidates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from .base import BatchRunner, RunnerError, ThreadedRunner, is_final, map_unordered

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ..problems.candidate import Candidate
    from ..problems.problem import Problem
    from ..runner import Runner, RunOptions
    from ..verdict import Verdict

__all__ = [
    "BatchRunner",
    "RunnerError",
    "ThreadedRunner",
    "as_batch_runner",
    "get_runner",
    "is_final",
    "map_unordered",
    "run_many",
]

SPEC_HELP = "local, pool, ssh://[user@]host[:port][?key=value...], ray, ray://host:port"


def get_runner(spec: str | None = None, jobs: int | None = None) -> BatchRunner:
    """A runner from its spec (default ``local``); ``jobs`` is the concurrency where it
    applies (threads for ``local``, slots for ``pool``, sessions per SSH host)."""
    spec = (spec or "local").strip()
    kind, _, rest = spec.partition(":")
    if spec == "local":
        return ThreadedRunner(jobs=jobs or 1, spec="local")
    if kind == "pool":
        return _pool(rest, jobs)
    if spec.startswith("ssh://"):
        from .ssh import SshRunner

        return SshRunner.from_spec(spec, jobs=jobs)
    if kind == "ray":
        from .ray import RayRunner

        return RayRunner.from_spec(spec)
    raise RunnerError(f"unknown runner {spec!r} (one of: {SPEC_HELP})")


def _pool(rest: str, jobs: int | None) -> BatchRunner:
    """``pool`` or ``pool:?gpus=0,1&jobs=4&timeout=600``."""
    from .pool import PoolRunner

    query = dict(parse_qsl(urlsplit(rest).query)) if rest else {}
    unknown = set(query) - {"gpus", "jobs", "timeout"}
    if unknown:
        raise RunnerError(f"pool: unknown option(s) {', '.join(sorted(unknown))}")
    try:
        slots = int(query["jobs"]) if "jobs" in query else jobs
        timeout = float(query["timeout"]) if "timeout" in query else None
    except ValueError as exc:
        raise RunnerError(f"pool: {exc}") from None
    gpus = [g for g in query["gpus"].split(",") if g] if "gpus" in query else None
    return PoolRunner(jobs=slots, gpus=gpus, job_timeout_s=timeout)


def as_batch_runner(runner: Runner | BatchRunner | None, jobs: int = 1) -> BatchRunner:
    if runner is None:
        return ThreadedRunner(jobs=jobs)
    if isinstance(runner, BatchRunner):
        return runner
    return ThreadedRunner(runner, jobs=jobs, spec=type(runner).__name__)


def run_many(
    problem: Problem,
    candidates: Sequence[Candidate],
    options: RunOptions,
    runner: Runner | BatchRunner | str | None = None,
    jobs: int = 1,
) -> Iterator[tuple[Candidate, Verdict]]:
    """Check every candidate; yield ``(candidate, verdict)`` as each finishes. A runner
    given as a spec string is created here and closed when the iterator ends."""
    if isinstance(runner, str):
        owned = get_runner(runner, jobs)
        try:
            yield from owned.run_many(problem, candidates, options)
        finally:
            owned.close()
        return
    yield from as_batch_runner(runner, jobs).run_many(problem, candidates, options)


def __getattr__(name: str) -> Any:
    lazy = {
        "PoolRunner": "pool",
        "PoolEvent": "pool",
        "SshRunner": "ssh",
        "RayRunner": "ray",
        "Batch": "batch",
        "run_batch": "batch",
    }
    module_name = lazy.get(name)
    if module_name is None:
        raise AttributeError(f"module 'harness.runners' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module_name}", __name__), name)
