# cheat 15: make its own log file sparse and huge (ftruncate of stdout/stderr), so the parent's record copy reads terabytes
# problem: vector_add
# options: policy_scan=false record=true
# expect: compile|run|correctness|anti-cheat: disk cap
"""An honest kernel that, on its first call, calls libc's ``ftruncate`` (through the
``ctypes`` torch imported) on descriptors 1 and 2: the worker's stdout and stderr log files,
which the parent opened in the check's ``logs/`` folder. Each becomes a 4 TiB sparse file
holding no block, so the disk cap (``_file_bytes``: ``st_blocks``) counts nothing, but
``records.write_record`` then reads every ``*.log`` whole (``log.read_bytes()``) before
trimming it to ``LOG_LIMIT``: the parent (or the check server) raises ``MemoryError`` and
the check ends in a traceback, without a record; at a size the machine can overcommit the
parent instead reads that many zeros into memory. Static pre-checks do not flag it
(``sys.modules["ctypes"]``), so it works with the default options too.

Now: a log is weighed by its apparent size too (``local._file_bytes``), on every tick of
the watchdog, so the worker is killed naming the disk cap; and a record reads only a log's
last MiB (``workerfiles.read_tail``), whatever its size. ``test_a_sparse_log_is_killed_
at_the_disk_cap_and_the_record_is_written`` checks the record.
"""

import sys

import torch
import triton
import triton.language as tl

SIZE = 1 << 42


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


_done = []


def custom_kernel(inputs):
    if not _done:
        _done.append(1)
        ct = sys.modules["ctypes"]
        libc = ct.CDLL(None, use_errno=True)
        for fd in (1, 2):
            libc.ftruncate(fd, ct.c_long(SIZE))
    x, y = inputs
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
