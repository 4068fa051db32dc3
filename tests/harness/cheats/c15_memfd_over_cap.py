# cheat 15: hold memory the watchdog does not count (a memfd filled with write(): shmem, no RSS)
# problem: vector_add
# options: policy_scan=false memory_cap_bytes=1073741824
# expect: run: exceeded the memory cap
"""An honest kernel that, on its first call, fills a ``memfd`` with ``GIB`` GiB through
``os.write`` and keeps it open for the rest of the check. The pages are shmem charged to
no process's ``VmRSS`` (nor ``RssShmem``: never mapped), and the memory watchdog
(``local._rss_bytes``, before) reads ``VmRSS`` of the worker alone: with a 1 GiB cap the worker
holds 3 GiB and is not killed (observed: VmRSS 254 MiB, the machine's shared memory up
3 GiB). With the default cap (80 % of the machine over the workers at once) the same
route exhausts the machine's memory: the OOM killer then picks among the parent, the check
server and other checks. The private ``/tmp``, ``/var/tmp`` and ``/dev/shm`` tmpfs of a
namespace worker (written with libc, past the audit hook) are the same kind of memory.

Now: the watchdog (``memwatch.MemoryWatch``) adds the memfds and unlinked tmpfs files open
in the worker's tree, and the pages used in its private tmpfs mounts, to its ``VmRSS``.
"""

import os

import torch
import triton
import triton.language as tl

GIB = 3


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


_held = []


def custom_kernel(inputs):
    if not _held:
        fd = os.memfd_create("hold")
        chunk = b"\x01" * (64 << 20)
        for _ in range(GIB * 16):
            os.write(fd, chunk)
        _held.append(fd)
    x, y = inputs
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
