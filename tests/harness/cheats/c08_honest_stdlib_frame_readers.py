# cheat 8: honest counterpart of c08_frame_walk_through_stdlib: standard-library code that reads frames for names only (namedtuple, a TypeVar, a functional Enum, a logging record with its caller, a formatted traceback, a stdlib module imported late) is not frame walking
# problem: vector_add
# options: policy_scan=false
# expect: none
import collections
import enum
import logging
import traceback
import typing

import torch
import triton
import triton.language as tl

Pair = collections.namedtuple("Pair", "x y")
T = typing.TypeVar("T")
Mode = enum.Enum("Mode", "plain fused")
_log = logging.getLogger("candidate")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def custom_kernel(inputs):
    import fractions  # noqa: F401  (a module body run by an import, maybe the first time)

    pair = Pair(*inputs)
    _log.warning("call with %d elements (%s)", pair.x.numel(), Mode.fused.name)
    try:
        raise ValueError("checked")
    except ValueError:
        note = traceback.format_exc()
    assert "checked" in note
    out = torch.empty_like(pair.x)
    n = pair.x.numel()
    add_kernel[(triton.cdiv(max(n, 1), 1024),)](pair.x, pair.y, out, n, BLOCK=1024)
    return out
