"""LadderContext: what the rungs share, and the parent's side of every call.

The parent generates inputs (public seed mixed with a secret one), keeps a pristine copy,
sends the inputs to the worker, and only after the output came back computes the
reference (TF32 off) on a copy of the pristine inputs: the reference never exists in the
candidate's process, and not even in this one while the candidate runs. Each reply is
checked here: output type/shape/dtype/device/layout/aliasing, inputs unchanged, forbidden
ops, launches of the declared backend, output changes after return, and the worker's
guard findings (``integrity``).

Benchmarks, dumps and profiles (issue 5) use *auxiliary* workers (``aux(role)``), opened
after the ladder's own worker is finished: ``bench`` and ``dump`` load the candidate again
(compiles come from the worker's on-disk caches), ``reference`` is a harness-only worker
whose entry point is the problem's reference (timed for speedups; also measures the
device ceilings). ``performance`` collects what the verdict reports at the top level.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import channel
from ..backends import get_backend, snapshot_imports
from ..candidate import Candidate
from ..errors import ProblemError
from ..policy import Policy
from ..problem import Problem
from ..runner import RunOptions, WorkerGone, WorkerSession

BACKGROUND = (
    "output changed after custom_kernel returned (work left on a side stream / background thread)"
)
REFERENCE_PRECISION_FLAGS = "tf32 off: cuda.matmul.allow_tf32=False, cudnn.allow_tf32=False, float32_matmul_precision=highest"


def mix_seed(public: int, trial: int, secret: int) -> int:
    digest = hashlib.sha256(f"{public}:{trial}:{secret}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def shape_label(shape: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items()) or "default"


@dataclass
class TrialInputs:
    shape_index: int
    shape: dict[str, Any]
    trial: int
    seed: int
    pristine: Any  # on the target device, never handed to anyone
    leaves: list[torch.Tensor]  # pristine tensor leaves, in order

    @property
    def label(self) -> str:
        return f"shape {shape_label(self.shape)}, trial {self.trial + 1}"


@dataclass
class OutputLeaf:
    kind: str  # "tensor" | "subclass" | "other"
    meta: dict[str, Any]
    tensor: torch.Tensor | None = None


@dataclass
class CallRecord:
    """One request's outcome: per repeat an output tree of ``OutputLeaf``."""

    inputs: TrialInputs
    outputs: list[Any] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    inputs_after: Any = None
    error: dict[str, Any] | None = None
    gone: WorkerGone | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None or self.gone is not None


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


def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flatten(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in flatten(v)]
    return [value]


class LadderContext:
    def __init__(
        self,
        problem: Problem,
        candidate: Candidate,
        options: RunOptions,
        device: str,
        open_session: Callable[[], WorkerSession],
    ) -> None:
        self.problem = problem
        self.candidate = candidate
        self.options = options
        self.device = device
        self._open_session = open_session
        self._session: WorkerSession | None = None
        self.secret = (
            options.secret
            if options.secret is not None
            else int.from_bytes(os.urandom(8), "little")
        )
        self.policy = Policy.from_entries(problem.forbidden)
        self.backend = get_backend(candidate.backend)
        self.shapes = [dict(s) for s in (options.shapes if options.shapes else problem.shapes)]
        self.jit_ranges: list[tuple[int, int]] = []
        self.environment: dict[str, Any] = {}
        self.integrity: list[str] = []
        self.first: CallRecord | None = None
        self.seeds_used: list[dict[str, Any]] = []
        self.output_bytes: dict[int, list[int]] = {}
        self.oneshot: Callable[..., dict[str, Any]] | None = None  # set by runners that can
        self.aux_sessions: dict[str, WorkerSession] = {}
        self.aux_replies: dict[str, dict[str, Any]] = {}
        self.aux_called: set[str] = set()
        self.performance: dict[str, Any] = {}
        self.bench_results: list[dict[str, Any]] = []
        self.ceilings_cache: Any = None
        self.calls_made = 0
        self.closed: dict[str, Any] | None = None
        self.logs: dict[str, Any] = {}
        self._seq = 0

    # -- worker lifecycle ------------------------------------------------------------

    @property
    def session(self) -> WorkerSession:
        if self._session is None:
            self._session = self._open_session()
            self.logs = dict(self._session.logs)
        return self._session

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
        header = self.load_header()
        reply = self.session.request(header, [], self.compile_timeout_s, 1 << 24)
        self.environment.update(reply.header.get("env") or {})
        self.note_integrity(reply.header.get("integrity") or [])
        return reply.header

    def close(self) -> None:
        """End every worker (the ladder's and the auxiliary ones)."""
        self.finish()
        for role in list(self.aux_sessions):
            self.close_aux(role)

    def finish(self) -> None:
        """End the ladder's worker politely now (collects its last findings)."""
        if self._session is not None and self.closed is None:
            self.closed = self._session.close()
            self.note_integrity(self.closed.get("integrity") or [])

    def aux(
        self, role: str, env: dict[str, str] | None = None
    ) -> tuple[WorkerSession, dict[str, Any]]:
        """An auxiliary worker, loaded: ``bench``/``dump``/``aot`` (the candidate),
        ``reference`` (harness-only, the reference as entry point); ``env`` overrides the
        worker's environment (``aot``: the Triton interpreter off). Raises ``WorkerGone``."""
        if role in self.aux_sessions:
            return self.aux_sessions[role], self.aux_replies[role]
        try:
            session = self._open_session(tag=role, env=env)  # type: ignore[call-arg]
        except TypeError:
            session = self._open_session()
        self.aux_sessions[role] = session
        subject = "reference" if role.startswith("reference") else "candidate"
        header = self.load_header(subject=subject, with_problem=True)
        if subject == "reference":
            header["compile_reference"] = role == "reference_compiled"
        reply = session.request(header, [], self.compile_timeout_s, 1 << 24)
        self.aux_replies[role] = reply.header
        if subject == "candidate":
            self.note_integrity(reply.header.get("integrity") or [])
        return session, reply.header

    def close_aux(self, role: str) -> list[str]:
        """Close one auxiliary worker; returns the integrity findings of its goodbye."""
        session = self.aux_sessions.pop(role, None)
        if session is None:
            return []
        final = session.close()
        found = [str(i.get("message", "")) for i in final.get("integrity") or []]
        if not role.startswith("reference"):
            self.note_integrity(final.get("integrity") or [])
        return [f for f in found if f]

    # -- inputs and references -------------------------------------------------------

    def make_inputs(
        self, shape_index: int, trial: int, shape: dict[str, Any] | None = None
    ) -> TrialInputs:
        """Fresh inputs for ``shapes[shape_index]`` (or ``shape``, e.g. a bench shape)."""
        shape = shape if shape is not None else self.shapes[shape_index]
        public = self.problem.public_seed(shape_index)
        seed = mix_seed(public, trial, self.secret)
        pristine = self.problem.generate_input(seed, shape, self.device)
        leaves = [t for t in flatten(pristine) if isinstance(t, torch.Tensor)]
        floats = [t for t in leaves if t.is_floating_point() and t.numel() > 1]
        if floats and all(not bool(t.any()) for t in floats):
            raise ProblemError(
                f"{self.problem.name}: generate_input({shape_label(shape)}) returned all-zero inputs; a check needs non-trivial values"
            )
        self.seeds_used.append({"shape": shape_label(shape), "trial": trial, "public": public})
        return TrialInputs(shape_index, shape, trial, seed, pristine, leaves)

    def reference(self, inputs: TrialInputs) -> Any:
        """The reference output, computed now (after the candidate returned) on a copy."""
        copy = _clone(inputs.pristine)
        with reference_precision(), torch.no_grad():
            return self.problem.ref_output(copy, inputs.shape)

    def init_for(self, inputs: TrialInputs) -> tuple[dict[str, Any] | None, list[torch.Tensor]]:
        if self.problem.init is None:
            return None, []
        seed, args = self.problem.init(inputs.shape)
        tensors: list[torch.Tensor] = []
        tree = channel.pack_tree(tuple(args), tensors)
        return {"seed": seed, "args": tree}, tensors

    # -- calls ---------------------------------------------------------------------------

    def call(
        self,
        inputs: TrialInputs,
        in_place: bool = False,
        repeat: int = 1,
        burst: bool = False,
        timeout_s: float | None = None,
        session: WorkerSession | None = None,
    ) -> CallRecord:
        record = CallRecord(inputs)
        tensors: list[torch.Tensor] = []
        tree = channel.pack_tree(
            inputs.pristine, tensors, describe=lambda t: {"stride": list(t.stride())}
        )
        init, init_tensors = self.init_for(inputs)
        input_bytes = sum(t.numel() * t.element_size() for t in tensors)
        # Poison the allocator with NaN-filled blocks the size of what the output will be
        # (known after the first reference of a shape; the inputs' sizes before that).
        guess = [2 * input_bytes + (1 << 20)] + [t.numel() * t.element_size() for t in tensors]
        poison = self.output_bytes.get(inputs.shape_index) or guess
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
        }
        max_reply = 64 * (input_bytes + sum(poison)) * max(1, repeat) + (64 << 20)
        timeout = timeout_s if timeout_s is not None else self.options.timeout_s * max(1, repeat)
        try:
            reply = (session or self.session).request(
                header, [*tensors, *init_tensors], timeout, max_reply
            )
        except WorkerGone as gone:
            record.gone = gone
            return record
        self.calls_made += repeat
        head = reply.header
        self.note_integrity(head.get("integrity") or [])
        record.error = head.get("error")
        if record.error:
            record.error = self.locate_error(record.error)
        try:
            for call in head.get("calls") or []:
                record.calls.append(call)
                record.outputs.append(_decode_output(call.get("output"), reply.tensors))
            after = head.get("inputs_after")
            record.inputs_after = (
                channel.unpack_tree(after, reply.tensors) if after is not None else None
            )
        except channel.ChannelError as exc:
            record.gone = WorkerGone(f"malformed reply from the worker: {exc}")
            return record
        for index, call in enumerate(record.calls):
            self._call_integrity(call, index, inputs)
        self.note_integrity(
            [{"kind": "inputs", "message": m} for m in self.modified_inputs(record)]
        )
        return record

    def _call_integrity(self, call: dict[str, Any], index: int, inputs: TrialInputs) -> None:
        what = f"{self.candidate.entry} ({inputs.label})"
        for op in call.get("forbidden") or []:
            name = op[3:] if op.startswith("fn:") else op
            origin = self.policy.explain(op)
            self.note_integrity(
                [
                    {
                        "kind": "forbidden",
                        "message": f"called forbidden library op {name} at run time (FORBIDDEN: {origin})",
                    }
                ]
            )
        launches = call.get("launches")
        if self.backend.enforce_launches and launches == 0:
            self.note_integrity(
                [
                    {
                        "kind": "backend",
                        "message": f"declared backend {self.candidate.backend} but no {self.backend.label} kernel was launched in a call to {what}",
                    }
                ]
            )
        if call.get("changed_after_return"):
            self.note_integrity([{"kind": "background", "message": BACKGROUND}])

    def note_integrity(self, items: list[dict[str, str]]) -> None:
        for item in items:
            message = str(item.get("message", "")).strip()
            if message and message not in self.integrity:
                self.integrity.append(message)

    def explain(self, reason: str) -> str:
        """Prefix a failure reason with what the integrity checks saw, if anything."""
        if not self.integrity:
            return reason
        seen = "; ".join(self.integrity[:2])
        return f"{reason} [while: {seen}]"

    def locate_error(self, error: dict[str, Any]) -> dict[str, Any]:
        """Keep the candidate's own frames, with the source line, for the feedback."""
        lines = self.candidate.source.splitlines()
        mine = []
        for frame in error.get("frames") or []:
            if os.path.basename(str(frame.get("file", ""))) == self.candidate.filename:
                line = int(frame.get("line") or 0)
                code = lines[line - 1].strip() if 0 < line <= len(lines) else frame.get("code", "")
                mine.append(
                    {
                        "file": self.candidate.path.name,
                        "line": line,
                        "name": frame.get("name"),
                        "code": code,
                    }
                )
        error = dict(error)
        error["candidate_frames"] = mine
        error["in_kernel"] = any(lo <= f["line"] <= hi for f in mine for lo, hi in self.jit_ranges)
        return error

    def gone_details(self, gone: WorkerGone) -> dict[str, Any]:
        """Frames faulthandler printed for the candidate file before a crash."""
        import re

        lines = self.candidate.source.splitlines()
        frames = []
        for match in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', gone.detail or ""):
            if os.path.basename(match.group(1)) == self.candidate.filename:
                line = int(match.group(2))
                code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
                frames.append(
                    {
                        "file": self.candidate.path.name,
                        "line": line,
                        "name": match.group(3),
                        "code": code,
                    }
                )
        return {
            "error": {"message": gone.reason, "candidate_frames": frames[-3:]},
            "stderr_tail": (gone.detail or "")[-1500:],
        }

    # -- checks of one output ------------------------------------------------------------

    def structure_problems(self, output: Any, reference: Any) -> list[str]:
        """Type, shape, dtype, device, layout and aliasing of an output against the reference."""
        got = flatten(output)
        want = flatten(reference)
        want_tensors = [w for w in want if isinstance(w, torch.Tensor)]
        if len(got) != len(want):
            return [f"returned {len(got)} value(s), the reference returns {len(want)}"]
        problems = []
        for index, (leaf, ref) in enumerate(zip(got, want, strict=True)):
            label = f"output #{index}" if len(want) > 1 else "the output"
            if not isinstance(ref, torch.Tensor):
                continue
            if not isinstance(leaf, OutputLeaf) or leaf.kind == "other":
                kind = (
                    leaf.meta.get("type") if isinstance(leaf, OutputLeaf) else type(leaf).__name__
                )
                problems.append(f"{label} is a {kind}, not a torch.Tensor")
                continue
            if leaf.kind == "subclass":
                problems.append(
                    f"{label} is a torch.Tensor subclass ({leaf.meta.get('type')}), not a plain torch.Tensor"
                )
                continue
            meta = leaf.meta
            if list(meta.get("shape", [])) != list(ref.shape):
                problems.append(
                    f"{label} has shape {list(meta.get('shape', []))}, expected {list(ref.shape)}"
                )
                continue
            expected_dtype = channel.DTYPE_NAMES.get(ref.dtype, str(ref.dtype))
            if meta.get("dtype") != expected_dtype:
                problems.append(f"{label} has dtype {meta.get('dtype')}, expected {expected_dtype}")
                continue
            device = str(meta.get("device", ""))
            if device.split(":")[0] != ref.device.type:
                problems.append(f"{label} is on {device}, expected {ref.device.type}")
            if not meta.get("dense", False):
                problems.append(
                    f"{label} is not a dense non-overlapping tensor (strides {meta.get('stride')})"
                )
            for alias in meta.get("aliases") or []:
                problems.append(
                    f"{label} shares memory with input #{alias} (it is a view of an input)"
                )
            if leaf.tensor is None:
                problems.append(f"{label} could not be transferred")
        del want_tensors
        return problems

    def late_changes(self, record: CallRecord, index: int = 0) -> list[str]:
        """The output was still changing after the call returned."""
        if index < len(record.calls) and record.calls[index].get("changed_after_return"):
            return [BACKGROUND]
        return []

    def modified_inputs(self, record: CallRecord) -> list[str]:
        if record.inputs_after is None:
            return []
        after = [t for t in flatten(record.inputs_after) if isinstance(t, torch.Tensor)]
        out = []
        for index, (before, now) in enumerate(zip(record.inputs.leaves, after, strict=False)):
            if tuple(before.shape) != tuple(now.shape) or before.dtype != now.dtype:
                out.append(
                    f"{self.candidate.entry} changed the shape or dtype of its input #{index}"
                )
                continue
            a = before.detach().to("cpu").contiguous().reshape(-1)
            b = now.contiguous().reshape(-1)
            if a.numel() and not torch.equal(a.view(torch.uint8), b.view(torch.uint8)):
                changed = int(
                    (
                        a.view(torch.uint8).reshape(a.numel(), -1)
                        != b.view(torch.uint8).reshape(b.numel(), -1)
                    )
                    .any(dim=1)
                    .sum()
                )
                out.append(
                    f"{self.candidate.entry} modified its input #{index} ({changed} of {a.numel()} elements changed)"
                )
        return out

    def remember_output_sizes(self, inputs: TrialInputs, reference: Any) -> None:
        sizes = [
            t.numel() * t.element_size() for t in flatten(reference) if isinstance(t, torch.Tensor)
        ]
        if sizes:
            self.output_bytes[inputs.shape_index] = [sum(sizes) * 2, *sizes]


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


class reference_precision:
    """Context manager: full fp32 for the reference (TF32 off), restored afterwards."""

    def __enter__(self) -> None:
        self.saved = (
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision(),
        )
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

    def __exit__(self, *exc: Any) -> None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, precision = (
            self.saved
        )
        torch.set_float32_matmul_precision(precision)
