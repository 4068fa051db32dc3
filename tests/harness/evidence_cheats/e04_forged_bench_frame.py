# cheat e04 (GPU): a forged benchmark frame on the worker's result channel
# problem: vector_add
# options: policy_scan=false bench=true
# expect: benchmark: does not answer the request
# An honest vector add that, once it is being benchmarked (the large bench
# shape, a few calls in), writes one well-formed benchmark reply -- a plausible, too good
# median, kept calls, no escape, no findings -- onto the worker's result pipe. The parent
# reads it as the reply to its request; the real reply, sent when the timed loop ends, is
# then read as the answer to the next request (the re-check of kept outputs), and so it is
# never seen for what it is. The benchmark rung refuses a reply that does not carry the
# request's nonce (a secret of the parent's the candidate never sees).
import fcntl
import json
import os
import stat
import struct

import torch
import triton
import triton.language as tl

_STATE = {"big_calls": 0, "forged": False}
BIG = 1 << 24  # far above every checked shape of vector_add; its BENCH_SHAPES is 2**28


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def forged_frame(n: int, runs: int = 40) -> bytes:
    """A benchmark reply in the channel's framing: magic, header length, payload length,
    JSON header (no tensors). Its median claims 4.6 TB/s for 12 bytes an element."""
    ms = 12.0 * n / 4.6e12 * 1e3
    times = [ms * (1.0 + 0.001 * (i % 5)) for i in range(runs)]
    report = {
        "events_ms": times,
        "device_ms": [t + 0.004 for t in times],
        "host_ms": [t + 0.03 for t in times],
        "indices": list(range(20, 20 + runs)),
        "calibration": {"dev_gap_ms": 0.004, "wall_gap_ms": 0.03},
        "stop": "converged",
        "warmup_calls": 12,
        "l2": "flush",
        "mode": "events",
        "kept": [21, 27, 33],
        "floor": {"min_runs": 10},
        "uncovered": {"dropped": 0, "counted": 0},
        "persisting_l2": {"before": {}, "after": {"persisting_l2_bytes": 0}},
        "clocks": {},
    }
    header = {
        "ok": True,
        "op": "bench",
        "subject": "candidate",
        "report": report,
        "escape": {"escaped": False},
        "outputs": [{"dtype": "float32", "shape": [n]}],
        "input_bytes": 8 * n,
        "output_bytes": 4 * n,
        "integrity": [],
        "tensors": [],
    }
    head = json.dumps(header).encode()
    return struct.pack("<4sIQ", b"CKH1", len(head), 0) + head


def _result_pipes():
    """Every write-only pipe this process holds: the worker's end of the result channel."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd < 3:
            continue
        try:
            mode = os.fstat(fd).st_mode
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if stat.S_ISFIFO(mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            found.append(fd)
    return found


def custom_kernel(inputs):
    x, y = inputs
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    if n >= BIG:
        _STATE["big_calls"] += 1
        if _STATE["big_calls"] == 8 and not _STATE["forged"]:
            _STATE["forged"] = True
            frame = forged_frame(n)
            for fd in _result_pipes():
                try:
                    os.write(fd, frame)
                except OSError:
                    pass
    return out
