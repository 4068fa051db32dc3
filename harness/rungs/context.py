"""LadderContext: what every rung is given -- the fixed facts of one check and its three parts.

Facts: the problem, the candidate, its ``Backend``, the run options, the device, the
forbidden-op policy and the library rules (``harness/problems/library.py``: what the candidate may
call, how much of the work its own kernels must do; the pre-checks add the reference's
recorded ops to both). Parts, one job each:

- ``inputs`` (``inputs.py``): the inputs of every call and their references, the secret seed;
- ``workers`` (``workers.py``): every request to the ladder's worker and the auxiliary ones;
- ``checks`` (``checks.py``): what each reply is checked for, into ``findings`` (integrity);

and ``ceilings`` (``DeviceCeilings``), the device's measured DRAM bandwidth and tensor-core
throughput, from the cache (keyed by the GPU's identity, read in the parent) or measured
once in the harness-only worker. What one rung gives the next is not kept here: it is the rung's typed result
(``results.py``), which the ladder hands on in ``Earlier``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ..backends import get_backend
from ..perf.ceilings import Ceilings, cache_key, from_measurement, load_cached, store
from ..perf.livechecks import LiveCheck
from ..problems.library import LibraryRules
from ..problems.policy import Policy
from ..process.session import WorkerGone
from .checks import Findings, OutputChecks
from .inputs import Inputs
from .workers import SessionFactory, Workers

if TYPE_CHECKING:
    from ..options import RunOptions
    from ..problems.candidate import Candidate
    from ..problems.problem import Problem


class DeviceCeilings:
    """This GPU's ceilings (``ceilings.py``), looked up or measured once per check."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self._found: Ceilings | None = None
        self.source = ""

    def _identity(self) -> dict[str, Any] | None:
        """The GPU's identity (the cache key): read here, in the parent, which holds the
        same GPU as its workers (its references run there; a pool slot pins both to one);
        asked of the harness-only worker only where the parent has no GPU. Never of a
        candidate's worker: what it reported could be forged."""
        if torch.cuda.is_available():
            from ..perf.ceilings import device_identity

            try:
                return device_identity()
            except Exception:  # the parent's CUDA failed: the worker's reading
                pass
        try:
            session, reply = self.workers.aux("reference")
        except WorkerGone:
            return None
        if reply.get("error"):
            return None
        try:
            answer = session.request({"op": "identity"}, [], 60.0, 1 << 20).header
        except WorkerGone:
            return None
        return answer.get("identity") if answer.get("ok") else None

    def cached(self) -> Ceilings | None:
        """The ceilings if known (this check or the cache file); never measures."""
        if self._found is not None:
            return self._found
        identity = self._identity()
        if identity is None:
            return None
        found = load_cached(cache_key(identity))
        if found is not None:
            self._found, self.source = found, "cached"
        return found

    def get(self) -> tuple[Ceilings | None, str]:
        """Cached ceilings, else measured now in the harness-only worker (a few seconds);
        with where they came from, or why there are none."""
        found = self.cached()
        if found is not None:
            return found, self.source
        try:
            session, reply = self.workers.aux("reference")
            if reply.get("error"):
                return None, "the harness worker could not start"
            answer = session.request({"op": "ceilings"}, [], 600.0, 1 << 20).header
        except WorkerGone as gone:
            return None, f"measuring the ceilings failed: {gone.reason}"
        if not answer.get("ok"):
            return None, f"measuring the ceilings failed: {str(answer.get('harness_error'))[-300:]}"
        ceilings = from_measurement(answer["result"])
        try:
            store(ceilings)
        except OSError:
            pass
        self._found, self.source = ceilings, "measured now"
        return ceilings, self.source


class LadderContext:
    def __init__(
        self,
        problem: Problem,
        candidate: Candidate,
        options: RunOptions,
        device: str,
        open_session: SessionFactory,
        oneshot: Callable[..., dict[str, Any]] | None = None,
    ) -> None:
        self.problem = problem
        self.candidate = candidate
        # this check's registration among the user's live checks (``perf/livechecks.py``),
        # set by the runner while the ladder runs; None: the others are not known
        self.live: LiveCheck | None = None
        self.options = options
        self.device = device
        self.backend = get_backend(candidate.backend)
        self.policy = Policy.from_entries(problem.forbidden)
        self.library = LibraryRules.of(problem, options, candidate)
        self.findings = Findings()
        self.inputs = Inputs(problem, options, device)
        self.checks = OutputChecks(candidate, self.backend, self.policy, self.findings, self.inputs)
        self.checks.judged_dtype = problem.check is not None
        self.workers = Workers(
            problem,
            candidate,
            self.backend,
            self.policy,
            options,
            open_session,
            self.inputs,
            self.checks,
            self.findings,
            oneshot,
        )
        self.ceilings = DeviceCeilings(self.workers)

    def learn_reference(self) -> None:
        """Run the reference once (``Inputs.study``): its compute ops join the forbidden
        ops (unless allowed, or a plain PyTorch candidate was asked for), and the data's
        output tensors become known."""
        facts = self.inputs.study()
        self.library = self.library.with_reference(facts.ops)
        self.policy.add_recorded(self.library.forbidden_reference_ops(), self.library.allowed)

    def close(self) -> None:
        """End every worker this check opened."""
        self.workers.close()
