"""OutputChecks: what the parent checks about each call's reply, and the findings it keeps.

After every call: forbidden library ops the worker's recorder saw (the problem's
``FORBIDDEN`` and the reference's own compute ops, ``harness/problems/library.py``; also ops inside
graphs ``torch.compile`` built), launches of the declared backend (none is a finding for a
backend that ``enforce_launches``), output changes after return, an earlier call's output
changed by a later one, inputs modified (byte for byte against the pristine copy; the
data's output tensors, GPU MODE's, are the candidate's to fill), and the worker's guard
findings -- all kept, in order, by ``Findings`` (the ``integrity`` list of the verdict; any
of them fails the anti-cheat rung). For one output against its reference: type, shape,
exact dtype (unless the problem's own ``check_implementation`` judges it), device, dense
layout, memory shared with an input or with an earlier call's output or output tensor.
For a failed call: the candidate's own frames with their source lines.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..problems.library import library_message
from ..process import channel
from .inputs import flatten

if TYPE_CHECKING:
    from ..backends import Backend
    from ..problems.candidate import Candidate
    from ..problems.policy import Policy
    from ..process.session import WorkerGone
    from .inputs import Inputs, TrialInputs

BACKGROUND = (
    "output changed after custom_kernel returned (work left on a side stream / background thread)"
)
RECYCLED = (
    "the output of an earlier call changed while later calls ran: outputs must own their "
    "storage (a buffer reused across calls)"
)


class Findings:
    """Integrity findings of the whole check, each message once, in the order seen."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def note(self, items: list[dict[str, str]]) -> None:
        for item in items:
            message = str(item.get("message", "")).strip()
            if message and message not in self.messages:
                self.messages.append(message)

    def explain(self, reason: str) -> str:
        """Prefix a failure reason with what the integrity checks saw, if anything."""
        if not self.messages:
            return reason
        seen = "; ".join(self.messages[:2])
        return f"{reason} [while: {seen}]"

    def __bool__(self) -> bool:
        return bool(self.messages)


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


@dataclass
class OutputLeaf:
    """One leaf of a decoded output tree: a tensor (with its metadata), a subclass, or other."""

    kind: str  # "tensor" | "subclass" | "other"
    meta: dict[str, Any]
    tensor: torch.Tensor | None = None


class OutputChecks:
    def __init__(
        self,
        candidate: Candidate,
        backend: Backend,
        policy: Policy,
        findings: Findings,
        inputs: Inputs | None = None,
    ) -> None:
        self.candidate = candidate
        self.backend = backend
        self.policy = policy
        self.findings = findings
        self.inputs = inputs
        self.judged_dtype = False  # the problem's own check judges dtype (GPU MODE)

    # -- every call ----------------------------------------------------------------------

    def inspect(self, record: CallRecord) -> None:
        """What every call is checked for, noted as findings."""
        for call in record.calls:
            self._call(call, record)
        self.findings.note([{"kind": "inputs", "message": m} for m in self.modified_inputs(record)])

    def _call(self, call: dict[str, Any], record: CallRecord) -> None:
        what = f"{self.candidate.entry} ({record.inputs.label})"
        for op in call.get("forbidden") or []:
            name = op[3:] if op.startswith("fn:") else op
            if op in self.policy.recorded:
                message = library_message(op)
            else:
                origin = self.policy.explain(op)
                message = f"called forbidden library op {name} at run time (FORBIDDEN: {origin})"
            self.findings.note([{"kind": "forbidden", "message": message}])
        for op in call.get("compiled_forbidden") or []:
            message = (
                f"torch.compile built a graph that computes {op}, which the reference computes: "
                "a custom kernel must do this work (compiled PyTorch is still the library)"
            )
            self.findings.note([{"kind": "forbidden", "message": message}])
        if call.get("earlier_changed"):
            self.findings.note([{"kind": "recycled", "message": RECYCLED}])
        # an empty input (the size-0 edge trial) has no work: returning early is honest
        if (
            self.backend.enforce_launches
            and call.get("launches") == 0
            and record.inputs.kind != "size0"
        ):
            message = (
                f"declared backend {self.candidate.backend} but no {self.backend.label} kernel "
                f"was launched in a call to {what}"
            )
            self.findings.note([{"kind": "backend", "message": message}])
        if call.get("changed_after_return"):
            self.findings.note([{"kind": "background", "message": BACKGROUND}])

    def modified_inputs(self, record: CallRecord) -> list[str]:
        if record.inputs_after is None:
            return []
        after = [
            t
            for t in flatten(record.inputs_after)
            if isinstance(t, (torch.Tensor, channel.Unchanged))
        ]
        slots = set(self.inputs.slots) if self.inputs is not None else set()
        out = []
        for index, (before, now) in enumerate(zip(record.inputs.leaves, after, strict=False)):
            if index in slots:
                continue  # an output tensor of the data: the candidate's to fill
            if isinstance(now, channel.Unchanged):
                continue  # the worker found the bytes it was sent (and sent none back)
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

    # -- one output ----------------------------------------------------------------------

    def structure_problems(self, output: Any, reference: Any) -> list[str]:
        """Type, shape, dtype, device, layout and aliasing of an output against the reference
        (the dtype only where the problem's own check does not judge it)."""
        got = flatten(output)
        want = flatten(reference)
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
            if meta.get("dtype") != expected_dtype and not self.judged_dtype:
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
            earlier = meta.get("shares_earlier") or []
            if earlier:
                problems.append(
                    f"{label} shares storage with the output of an earlier call (a recycled "
                    "buffer: each call must return storage of its own)"
                )
            if leaf.tensor is None:
                problems.append(f"{label} could not be transferred")
        return problems

    def late_changes(self, record: CallRecord, index: int = 0) -> list[str]:
        """The output was still changing after the call returned."""
        if index < len(record.calls) and record.calls[index].get("changed_after_return"):
            return [BACKGROUND]
        return []

    # -- failures ------------------------------------------------------------------------

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
        return {**error, "candidate_frames": mine}

    def gone_details(self, gone: WorkerGone) -> dict[str, Any]:
        """Frames faulthandler printed for the candidate file before a crash."""
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


def in_kernel(error: dict[str, Any], jit_ranges: list[tuple[int, int]]) -> bool:
    """Whether a located error's candidate frames fall inside kernel code (the static
    scan's ``jit_ranges``): an error there is the kernel's, not the host code's."""
    frames = error.get("candidate_frames") or []
    return any(lo <= f["line"] <= hi for f in frames for lo, hi in jit_ranges)
