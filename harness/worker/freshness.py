"""Output freshness, in the worker: every call's output owns storage no earlier call handed out.

A timing loop that reads only the last output cannot tell a kernel that writes each result
into new storage from one that returns a view into one buffer it overwrites on every call
(earlier results silently change), or that hands back an earlier call's output again. So
the worker keeps what it handed out (``OutputHistory``, bounded in count and bytes):

- each output tensor's storage range, checked against every kept one: sharing storage with
  an earlier call's output, or with an earlier call's output tensor of the data, at any
  offset, through a view or ``as_strided``, is ``shares_earlier``;
- a snapshot of each output, compared again after every later call: an earlier output
  whose content changed is ``earlier_changed``. Past ``SNAPSHOT_WHOLE_BYTES`` the snapshot
  is a ``Fingerprint`` of the content instead of a copy (at an upstream KernelBench size a
  copy was one more output's size held on the GPU between calls).

GPU MODE data carries the output tensor (``generate_input`` returns the inputs and an
empty output the reference fills): ``fresh_slots`` gives the candidate a new, poisoned
one for every call (NaN for floats, all ones for integers), so a result must be written
each time and one call's output can never be the next one's. Storage PyTorch's CUDA graphs
recycle (``torch.compile(mode="reduce-overhead")`` replays into the same memory and marks
the older outputs as overwritten) is PyTorch's, not the candidate's: such an output is
dropped from the history, not reported. Imports nothing of the ladder.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import torch

from .calltensors import same_bytes

_Tensor = torch.Tensor
_type = type
MAX_KEPT = 32
MAX_KEPT_BYTES = 256 << 20
SNAPSHOT_WHOLE_BYTES = 256 << 20  # a larger output's snapshot is its ``Fingerprint``
FINGERPRINT_WORDS = 1 << 24  # words summed at a time (a chunk's int64 copy: 128 MiB)
_WORDS = ((8, torch.int64), (4, torch.int32), (2, torch.int16), (1, torch.uint8))


class Fingerprint:
    """Two sums over every word of a tensor's bytes, each word first mixed with this
    process's secret key (xor, multiply, xor-shift, multiply: a changed bit changes the
    whole mixed word), one sum weighted by the word's place, and the byte count. A change
    anywhere changes them but by chance (about 2^-64 a sum) or by a change crafted with the
    key; computed a chunk at a time on the tensor's own device, without a copy of the whole.
    Only what an earlier output still holds is judged by it (``earlier_changed``): a
    collision would hide a change to an output the parent already has."""

    def __init__(self, t: torch.Tensor) -> None:
        self.nbytes = t.numel() * t.element_size()
        self.sums = self.of(t)

    @staticmethod
    def of(t: torch.Tensor) -> tuple[int, int]:
        data = t.detach().contiguous().reshape(-1).view(torch.uint8)
        dtype = next(d for width, d in _WORDS if data.numel() % width == 0)
        try:
            words = data.view(dtype)
        except RuntimeError:  # a view whose offset is not a multiple of the word
            words = data.clone().view(dtype)
        device = words.device
        plain = torch.zeros((), dtype=torch.int64, device=device)
        placed = torch.zeros((), dtype=torch.int64, device=device)
        # places 1.. of one chunk, made once: word start + i weighs start + 1 + i, so a
        # chunk's weighted sum is its own (places 1..) plus start times its plain sum
        # (all mod 2^64)
        place = torch.arange(1, min(words.numel(), FINGERPRINT_WORDS) + 1, dtype=torch.int64,
                             device=device)  # fmt: skip
        for start in range(0, words.numel(), FINGERPRINT_WORDS):
            mixed = (words[start : start + FINGERPRINT_WORDS].to(torch.int64) ^ _KEY) * _MIX1
            mixed = (mixed ^ (mixed >> 31)) * _MIX2
            total = mixed.sum()
            plain += total
            placed += (mixed * place[: mixed.numel()]).sum() + total * start
        return int(plain), int(placed)

    def matches(self, t: torch.Tensor) -> bool:
        return t.numel() * t.element_size() == self.nbytes and self.of(t) == self.sums


_KEY = secrets.randbits(62)
_MIX1 = 0x5851F42D4C957F2D  # odd 64-bit multipliers (as signed int64 below where needed)
_MIX2 = 0x14057B7EF767814F


def storage_range(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return (storage.data_ptr(), storage.data_ptr() + storage.nbytes())


def poison(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` with what no computation writes by chance."""
    with torch.no_grad():
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.fill_(True)
        else:
            t.fill_(-1 if t.dtype.is_signed else 255)
    return t


def fresh_slots(
    value: Any, slots: set[int], counter: list[int] | None = None
) -> tuple[Any, list[torch.Tensor]]:
    """``value`` with its tensor leaves number ``slots`` (in tree order) replaced by new
    poisoned tensors of the same shape, strides, dtype and device; and those tensors."""
    counter = counter if counter is not None else [0]
    made: list[torch.Tensor] = []

    def walk(v: Any) -> Any:
        if _type(v) is _Tensor:
            index = counter[0]
            counter[0] += 1
            if index not in slots:
                return v
            t = poison(
                torch.empty_strided(
                    tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device=v.device
                )
            )
            made.append(t)
            return t
        if isinstance(v, tuple):
            return tuple(walk(x) for x in v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return walk(value), made


def _recycled_by_torch(t: torch.Tensor) -> bool:
    """Whether PyTorch's CUDA graphs marked this output overwritten by a later replay."""
    try:
        t.untyped_storage().data_ptr()
        return False
    except RuntimeError as exc:
        text = str(exc)
        return "CUDAGraph" in text or "overwritten" in text


@dataclass
class _Kept:
    call: int
    lo: int
    hi: int
    tensor: torch.Tensor
    snapshot: torch.Tensor | Fingerprint | None  # None: a data output tensor (nothing to compare)

    def snapshot_bytes(self) -> int:
        return self.snapshot.nbytes if isinstance(self.snapshot, _Tensor) else 0


class OutputHistory:
    """What this worker handed out, newest last."""

    def __init__(self) -> None:
        self.kept: list[_Kept] = []
        self.calls = 0

    def next_call(self) -> int:
        self.calls += 1
        return self.calls

    def shares_earlier(self, t: torch.Tensor, call: int) -> list[int]:
        """Earlier calls whose outputs (or data output tensors) share storage with ``t``."""
        if t.numel() == 0:
            return []
        lo, hi = storage_range(t)
        found = []
        for kept in self.kept:
            if kept.call == call or not (lo < kept.hi and kept.lo < hi):
                continue
            if kept.tensor.device != t.device or _recycled_by_torch(kept.tensor):
                continue
            found.append(kept.call)
        return sorted(set(found))

    def add(self, call: int, t: torch.Tensor, snapshot: torch.Tensor | None) -> None:
        if t.numel() == 0:
            return
        lo, hi = storage_range(t)
        held: torch.Tensor | Fingerprint | None = snapshot
        if snapshot is not None and snapshot.nbytes > SNAPSHOT_WHOLE_BYTES:
            held = Fingerprint(snapshot)
        self.kept.append(_Kept(call, lo, hi, t, held))
        total = 0
        keep: list[_Kept] = []
        for kept in reversed(self.kept):
            size = kept.hi - kept.lo + kept.snapshot_bytes()
            if len(keep) >= MAX_KEPT or (keep and total + size > MAX_KEPT_BYTES):
                break
            total += size
            keep.append(kept)
        self.kept = list(reversed(keep))

    def changed(self, before_call: int) -> list[int]:
        """Calls before ``before_call`` whose output no longer holds what it returned."""
        out = []
        still: list[_Kept] = []
        for kept in self.kept:
            if kept.snapshot is None or kept.call >= before_call:
                still.append(kept)
                continue
            if _recycled_by_torch(kept.tensor):
                continue  # PyTorch's CUDA graphs reuse it: not the candidate's doing
            snapshot = kept.snapshot
            if isinstance(snapshot, Fingerprint):
                same = snapshot.matches(kept.tensor)
            else:
                same = same_bytes(snapshot, kept.tensor)
            if not same:
                out.append(kept.call)
                continue  # reported once
            still.append(kept)
        self.kept = still
        return out


__all__ = ["Fingerprint", "OutputHistory", "fresh_slots", "poison", "storage_range"]
