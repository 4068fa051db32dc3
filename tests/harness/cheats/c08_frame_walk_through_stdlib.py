# cheat 8: frames asked for through the standard library (traceback.walk_stack, traceback.walk_tb, logging.currentframe: names built at run time), each route's refusal caught, to reach the worker and blind both books (recorder reset, ledger's is_compute); x + y does the work, a Triton copy is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: frame walking
import logging
import traceback

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def _stack_frames():
    yield from (f for f, _ in getattr(traceback, "walk" + "_stack")(None))


def _tb_frames():
    try:
        raise ValueError
    except ValueError as exc:
        for f, _ in getattr(traceback, "walk" + "_tb")(exc.__traceback__):
            while f is not None:
                yield f
                f = f.f_back


def _logging_frames():
    f = getattr(logging, "current" + "frame")()
    while f is not None:
        yield f
        f = f.f_back


def _worker():
    for route in (_stack_frames, _tb_frames, _logging_frames):
        try:
            for f in route():
                w = getattr(f, "f_" + "locals").get("self")
                if w is not None and hasattr(w, "recorder") and hasattr(w, "ledger"):
                    return w
        except Exception:  # the guard's refusal: try the next route
            continue
    return None


def custom_kernel(inputs):
    x, y = inputs
    s = x + y
    w = _worker()
    if w is not None:
        w.recorder.reset()
        if w.ledger is not None:
            w.ledger.is_compute = lambda name: False
    out = torch.empty_like(x)
    n = x.numel()
    copy_kernel[(triton.cdiv(max(n, 1), 1024),)](s, out, n, BLOCK=1024)
    return out
