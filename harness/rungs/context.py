"""LadderContext: what every rung is given -- the fixed facts of one check and its three parts.

Facts: the problem, the candidate, its ``Backend``, the run options, the device, the
forbidden-op policy and the library rules (``harness/problems/library.py``: what the candidate may
call, how much of the work its own kernels must do; the pre-checks add the reference's
recorded ops to both). Parts, one job each:

- ``inputs`` (``inputs.py``): the inputs of every call and their references, the secret seed;
- ``workers`` (``workers.py``): every request to the ladder's worker and the auxiliary ones;
- ``checks`` (``checks.py``): what each reply is checked for, into ``findings`` (integrity);

and ``ceilings`` (``common.DeviceCeilings``), the device's measured ceilings, looked up at
most once. What one rung gives the next is not kept here: it is the rung's typed result
(``results.py``), which the ladder hands on in ``Earlier``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..backends import get_backend
from ..problems.library import LibraryRules
from ..problems.policy import Policy
from .checks import Findings, OutputChecks
from .common import DeviceCeilings
from .inputs import Inputs
from .workers import SessionFactory, Workers

if TYPE_CHECKING:
    from ..options import RunOptions
    from ..problems.candidate import Candidate
    from ..problems.problem import Problem


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
