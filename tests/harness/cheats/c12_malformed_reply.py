# cheat 12: a reply the parent cannot read as a finding: the goodbye's handler replaced (OPS["bye"]: integrity [5]), else a frame of that shape written onto the channel during the call; the kernel is right, so only the parent's reading of the reply can fail it (it used to crash the parent: no verdict)
# problem: vector_add
# options: policy_scan=false
# expect: run|anti-cheat: malformed reply
import json
import os
import struct
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


_BAD = {"ok": True, "op": "call", "calls": [], "integrity": [5]}
_table = getattr(getattr(sys, "mod" + "ules")["harness" + ".worker" + ".serve"], "O" + "PS")
try:
    _table["bye"] = lambda w, req, t: ({"ok": True, "op": "bye", "integrity": [5]}, [])
    _ROUTE = "table"
except TypeError:  # a read-only table: the frame goes onto the channel itself
    _ROUTE = "channel"


def _write_frame():
    head = json.dumps({**_BAD, "tensors": []}).encode()
    frame = struct.pack("<4sIQ", b"CKH1", len(head), 0) + head
    try:
        fds = sorted(int(name) for name in os.listdir(os.path.join("/", "pr" + "oc", "self", "fd")))
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd >= 3:
            try:
                getattr(os, "wr" + "ite")(fd, frame)
            except OSError:
                pass


def custom_kernel(inputs):
    x, y = inputs
    if _ROUTE == "channel":
        _write_frame()
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(max(n, 1), 1024),)](x, y, out, n, BLOCK=1024)
    return out
