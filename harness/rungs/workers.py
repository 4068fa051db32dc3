"""Workers: the parent's side of every call into a candidate's (or the reference's) worker.

The ladder's own worker is opened on first use and loaded with the candidate; ``call``
packs the inputs (with the allocator poison sizes and a model's init arguments), waits for
the reply within its timeout, decodes the outputs into ``OutputLeaf`` trees and hands the
record to ``OutputChecks.inspect`` -- so no call escapes the integrity checks. Benchmarks,
dumps, profiles and traces use *auxiliary* workers (``aux(role)``), opened after the
ladder's own worker is finished (the benchmark's is started ahead, ``open_ahead``, while the
ladder's still runs, and loaded when first asked): ``bench`` and ``dump`` load the candidate
again (compiles come from the worker's on-disk caches), ``reference`` is a harness-only
worker whose entry point is the problem's reference (timed for speedups; also measures the
device ceilings).
``oneshot`` (when the runner can) runs a worker once under a wrapper such as ncu.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..backends import snapshot_imports
from ..process import channel
from ..process.session import WorkerGone, WorkerSession
from ..worker.compiled import mentions_torch_compile
from .checks import CallRecord, Findings, OutputChecks, OutputLeaf

if TYPE_CHECKING:
    from ..backends import Backend
    from ..options import RunOptions
    from ..problems.candidate import Candidate
    from ..problems.policy import Policy
    from ..problems.problem import Problem
    from .inputs import Inputs, TrialInputs


def _decode_output(node: Any, tensors: list[torch.Tensor]) -> Any:
    if not isinstance(node, dict):
        return OutputLeaf("other", {"type": "?"})
    if "tuple" in node:
        return tuple(_decode_output(v, tensors) for v in node["tuple"])
    if "list" in node:
        return [_decode_output(v, tensors) for v in node["list"]]
    if "dict" in node:
        return {str(k): _decode_output(v, tensors) for k, v in node["dict"]}
    if "subclass" in node:
        return OutputLeaf("subclass", {"type": str(node["subclass"])})
    if "other" in node:
        return OutputLeaf("other", {"type": str(node["other"]), "value": node.get("v")})
    tensor = None
    if node.get("t") is not None:
        index = int(node["t"])
        if not 0 <= index < len(tensors):
            raise channel.ChannelError("output references a missing tensor")
        tensor = tensors[index]
    return OutputLeaf("tensor", dict(node), tensor)


SessionFactory = Callable[..., WorkerSession]  # (tag="", env=None) -> WorkerSession


# the slowest the channel is taken to move data (a loaded 2-core machine moved about
# 300 MB/s through a call's round trip): a call that moves more than this many bytes gets
# a second more for each (the reason of a timeout names both parts)
TRANSFER_BYTES_PER_S = 100e6
# the parent's cached, unused GPU memory it keeps across a call (more goes back to the card
# first); below this a small problem's calls skip the free and the re-allocation after it
CACHE_KEPT_BYTES = 1 << 28


class Workers:
    """The ladder's worker and the auxiliary ones, and every request sent to them."""

    def __init__(
        self,
        problem: Problem,
        candidate: Candidate,
        backend: Backend,
        policy: Policy,
        options: RunOptions,
        open_session: SessionFactory,
        inputs: Inputs,
        checks: OutputChecks,
        findings: Findings,
        oneshot: Callable[..., dict[str, Any]] | None = None,
    ) -> None:
        self.problem = problem
        self.candidate = candidate
        self.backend = backend
        self.policy = policy
        self.options = options
        self._open_session = open_session
        self.inputs = inputs
        self.checks = checks
        self.findings = findings
        self.oneshot = oneshot  # set by runners that can wrap a worker (a profiler)
        self._session: WorkerSession | None = None
        self._aux: dict[str, WorkerSession] = {}
        self._ahead: dict[str, WorkerSession] = {}  # started, not yet loaded (``open_ahead``)
        self._aux_replies: dict[str, dict[str, Any]] = {}
        self.environment: dict[str, Any] = {}
        self.logs: dict[str, Any] = {}
        self.calls_made = 0
        # seconds of the calls' requests and of the worker's waits for late changes in them
        self.call_seconds = {"requests": 0.0, "settle": 0.0}
        self.closed: dict[str, Any] | None = None
        self._seq = 0

    # -- the ladder's worker -----------------------------------------------------------

    @property
    def session(self) -> WorkerSession:
        if self._session is None:
            self._session = self._open_session()
            self._remember_logs(self._session)
        return self._session

    def _remember_logs(self, session: WorkerSession) -> None:
        if not self.logs:
            self.logs = dict(getattr(session, "logs", None) or {})

    def load_header(self, subject: str = "candidate", with_problem: bool = False) -> dict[str, Any]:
        header: dict[str, Any] = {
            "op": "load",
            "candidate": self.candidate.filename,
            "module": self.candidate.module_name,
            "entry": self.candidate.entry,
            "entry_kind": self.candidate.entry_kind,
            "backend": self.candidate.backend,
            "forbidden": self.policy.runtime(),
            "settle_s": self.options.settle_s,
            "snapshot_imports": snapshot_imports(self.candidate.source, self.candidate.backend),
            "torch_compile": mentions_torch_compile(self.candidate.source),
        }
        if subject != "candidate":
            header["subject"] = subject
        if with_problem or subject != "candidate":
            header["problem"] = {"path": str(Path(self.problem.path).resolve())}
        return header

    @property
    def compile_timeout_s(self) -> float:
        return max(self.options.import_timeout_s(), self.backend.min_compile_timeout_s)

    def load(self) -> dict[str, Any]:
        """Load the candidate into the ladder's worker; the reply's header."""
        reply = self.session.request(self.load_header(), [], self.compile_timeout_s, 1 << 24)
        self.environment.update(reply.header.get("env") or {})
        self.findings.note(reply.header.get("integrity") or [])
        return reply.header

    def finish(self) -> None:
        """End the ladder's worker politely now (collects its last findings)."""
        if self._session is not None and self.closed is None:
            self.closed = self._session.close()
            self.findings.note(self.closed.get("integrity") or [])

    def close(self) -> None:
        """End every worker (the ladder's, the auxiliary ones and any started ahead),
        each even when ending one before it raised."""
        try:
            self.finish()
        finally:
            try:
                for role in list(self._aux):
                    self.close_aux(role)
            finally:
                while self._ahead:
                    _, session = self._ahead.popitem()
                    kill = getattr(session, "kill", None)
                    if kill is not None:  # it never ran candidate code: nothing to collect
                        kill()
                    session.close()

    # -- calls -------------------------------------------------------------------------

    def call(
        self,
        inputs: TrialInputs,
        in_place: bool = False,
        repeat: int = 1,
        burst: bool = False,
        timeout_s: float | None = None,
        session: WorkerSession | None = None,
        kernels: bool = False,
    ) -> CallRecord:
        """Call the entry point ``repeat`` times on ``inputs``; the checks see the reply.
        ``kernels``: record the kernels the calls ran (a GPU's profiler, ``library_share``)."""
        record = CallRecord(inputs)
        tensors: list[torch.Tensor] = []
        tree = channel.pack_tree(
            inputs.pristine, tensors, describe=lambda t: {"stride": list(t.stride())}
        )
        init, init_tensors = self._init_for(inputs)
        input_bytes = sum(t.numel() * t.element_size() for t in tensors)
        poison = self.inputs.poison_sizes(
            inputs, input_bytes, [t.numel() * t.element_size() for t in tensors]
        )
        self._seq += 1
        header = {
            "op": "call",
            "seq": self._seq,
            "inputs": tree,
            "in_place": in_place,
            "repeat": repeat,
            "init": init,
            "poison": poison,
            "burst": burst,
            "slots": list(self.inputs.slots),
            "kernels": kernels,
        }
        max_reply = 64 * (input_bytes + sum(poison)) * max(1, repeat) + (64 << 20)
        timeout = timeout_s if timeout_s is not None else self.options.timeout_s * max(1, repeat)
        # moving the data is not the candidate's time: the inputs go out, the outputs come
        # back, and the inputs again where the call wrote them (counted as if it did: an
        # upstream KernelBench L2Norm's 8.6 GB input alone outlasted a 30 s budget)
        moved = (2 * input_bytes + sum(poison)) * max(1, repeat)
        transfer_s = math.ceil(moved / TRANSFER_BYTES_PER_S) if moved >= TRANSFER_BYTES_PER_S else 0
        if (
            self.inputs.device != "cpu"
            and torch.cuda.is_initialized()
            and torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > CACHE_KEPT_BYTES
        ):
            # what this process freed (the signal check's inputs, the last reference) goes
            # back to the GPU before the worker allocates: at an upstream size the parent's
            # cached blocks were most of the card (bench/RESULTS.md, 2026-12-05 21:24)
            torch.cuda.empty_cache()
        started = time.perf_counter()
        try:
            reply = (session or self.session).request(
                header, [*tensors, *init_tensors], timeout + transfer_s, max_reply
            )
        except WorkerGone as gone:
            if transfer_s:  # the reason names the candidate's time and the data's apart
                gone.reason = gone.reason.replace(
                    f"timed out after {timeout + transfer_s:g} s",
                    f"timed out after {timeout:g} s (+{transfer_s} s to move "
                    f"{moved / 1e9:.1f} GB through the channel)",
                )
            record.gone = gone
            return record
        finally:
            self.call_seconds["requests"] += time.perf_counter() - started
        self.calls_made += repeat
        head = reply.header
        self.findings.note(head.get("integrity") or [])
        error = head.get("error")
        record.error = self.checks.locate_error(error) if error else None
        try:
            for call in head.get("calls") or []:
                record.calls.append(call)
                try:  # the worker's word, for the accounting only
                    self.call_seconds["settle"] += float(call.get("settle_s") or 0.0)
                except (TypeError, ValueError):
                    pass
                record.outputs.append(_decode_output(call.get("output"), reply.tensors))
            after = head.get("inputs_after")
            record.inputs_after = (
                channel.unpack_tree(after, reply.tensors) if after is not None else None
            )
        except channel.ChannelError as exc:
            record.gone = WorkerGone(f"malformed reply from the worker: {exc}")
            return record
        self.checks.inspect(record)
        return record

    def _init_for(self, inputs: TrialInputs) -> tuple[dict[str, Any] | None, list[torch.Tensor]]:
        """A model's constructor arguments (KernelBench ``get_init_inputs``) for a shape."""
        if self.problem.init is None:
            return None, []
        seed, args = self.problem.init(inputs.shape)
        tensors: list[torch.Tensor] = []
        tree = channel.pack_tree(tuple(args), tensors)
        return {"seed": seed, "args": tree}, tensors

    # -- auxiliary workers -------------------------------------------------------------

    def aux(
        self,
        role: str,
        env: dict[str, str] | None = None,
        library_operands: tuple[int, int] | None = None,
    ) -> tuple[WorkerSession, dict[str, Any]]:
        """An auxiliary worker, loaded: ``bench``/``dump``/``aot`` (the candidate),
        ``reference`` (harness-only, the reference as entry point; ``reference_compiled``
        its ``torch.compile``; ``reference_library`` ``torch.matmul`` of the input leaves
        ``library_operands``); ``env`` overrides the worker's environment. Raises
        ``WorkerGone``."""
        if role in self._aux:
            return self._aux[role], self._aux_replies[role]
        session = self._ahead.pop(role, None) if env is None else None
        if session is None:
            try:
                session = self._open_session(tag=role, env=env)
            except TypeError:  # a runner whose sessions take no tag
                session = self._open_session()
        self._aux[role] = session
        self._remember_logs(session)
        subject = "reference" if role.startswith("reference") else "candidate"
        header = self.load_header(subject=subject, with_problem=True)
        if subject == "reference":
            header["compile_reference"] = role == "reference_compiled"
            if role == "reference_library" and library_operands is not None:
                header["library_operands"] = list(library_operands)
        reply = session.request(header, [], self.compile_timeout_s, 1 << 24)
        self._aux_replies[role] = reply.header
        if subject == "candidate":
            self.findings.note(reply.header.get("integrity") or [])
        return session, reply.header

    def open_ahead(self, role: str) -> None:
        """Start the auxiliary worker ``role`` now and load it when ``aux(role)`` asks: a
        fresh process's start-up (on a GPU its CUDA context, 0.3 s) overlaps the rungs
        before its use. It is the same fresh worker ``aux`` would open, started earlier; one
        that cannot start is left to ``aux``, which opens it again and reports why."""
        if role in self._aux or role in self._ahead:
            return
        try:
            self._ahead[role] = self._open_session(tag=role)
        except Exception:  # left to aux, which opens it again and reports why
            return

    def is_open(self, role: str) -> bool:
        return role in self._aux

    def candidate_sessions(self) -> list[WorkerSession]:
        """Every open worker that has run candidate code: the ladder's own until it is
        finished, and the auxiliary ones loaded with the candidate (the benchmark's)."""
        found = [self._session] if self._session is not None and self.closed is None else []
        return found + [s for role, s in self._aux.items() if not role.startswith("reference")]

    def close_aux(self, role: str) -> list[str]:
        """Close one auxiliary worker; returns the integrity findings of its goodbye."""
        session = self._aux.pop(role, None)
        self._aux_replies.pop(role, None)
        if session is None:
            return []
        final = session.close()
        found = [str(i.get("message", "")) for i in final.get("integrity") or []]
        if not role.startswith("reference"):
            self.findings.note(final.get("integrity") or [])
        return [f for f in found if f]
