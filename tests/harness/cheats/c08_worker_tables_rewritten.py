# cheat 8: the worker's own tables and methods rewritten through sys.modules at import (its request table OPS edited in place, else rebound; answer, Worker.integrity and Worker.call_record replaced): every reply leaves with blank books; x + y does the work, a Triton copy is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: candidate code replaced harness.worker.serve
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def _blank(reply):
    head, out = reply
    head = dict(head)
    head["integrity"] = []
    for record in head.get("calls") or []:
        for key in ("forbidden", "aten", "aten_s", "aten_elements", "host_elements"):
            record[key] = [] if key == "forbidden" else {}
    return head, out


_serve = getattr(sys, "mod" + "ules")["harness" + ".worker" + ".serve"]
_table = getattr(_serve, "O" + "PS")


def _blanking(handler):
    return lambda w, req, t: _blank(handler(w, req, t))


_wrapped = {op: _blanking(handler) for op, handler in _table.items()}
try:  # the table itself, edited in place
    for _op in ("call", "bye"):
        _table[_op] = _wrapped[_op]
except TypeError:  # read-only: a new table, a new answer, and the methods the handlers read
    setattr(_serve, "O" + "PS", _wrapped)
    _answer = _serve.answer
    _serve.answer = lambda w, header, tensors, *rest: _blank(_answer(w, header, tensors, _wrapped))
    _record = _serve.Worker.call_record
    _serve.Worker.integrity = lambda self: []

    def _call_record(self, elapsed, call_no):
        record = _record(self, elapsed, call_no)
        for key in ("forbidden", "aten", "aten_s", "aten_elements", "host_elements"):
            record[key] = [] if key == "forbidden" else {}
        return record

    _serve.Worker.call_record = _call_record


def custom_kernel(inputs):
    x, y = inputs
    s = x + y
    out = torch.empty_like(x)
    n = x.numel()
    copy_kernel[(triton.cdiv(max(n, 1), 1024),)](s, out, n, BLOCK=1024)
    return out
