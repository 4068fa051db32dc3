# cheat 15: hold memory the watchdog does not count (files in the private tmpfs mounts, written with libc)
# problem: vector_add
# options: policy_scan=false memory_cap_bytes=1073741824
# expect: run: exceeded the memory cap | Permission denied
"""An honest kernel that, on its first call, writes ``MIB`` MiB into a file in each of
``/tmp``, ``/var/tmp`` and ``/dev/shm`` through libc's ``open``/``write`` (the ``ctypes``
torch imported: past the audit hook) and unlinks nothing. In a namespace mode those are
the worker's private tmpfs mounts: their pages are charged to no process's ``VmRSS``;
the watchdog (``memwatch.MemoryWatch``) adds the pages used in them (``statvfs`` through
``/proc/<pid>/root``). In ``none`` mode landlock refuses the files (``Permission
denied``): the shared folders are not the worker's.
"""

import sys

import torch
import triton
import triton.language as tl

MIB = 900
FOLDERS = (b"/tmp", b"/var/tmp", b"/dev/shm")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


_held = []


def _fill():
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    chunk = b"\x01" * (1 << 20)
    for folder in FOLDERS:
        fd = libc.open(folder + b"/ctxkernel-cheat-hold.bin", 0o1 | 0o100 | 0o1000, 0o600)
        if fd < 0:
            raise PermissionError(ct.get_errno(), "Permission denied: " + folder.decode())
        for _ in range(MIB):
            if libc.write(fd, chunk, len(chunk)) != len(chunk):
                break
        _held.append(fd)


def custom_kernel(inputs):
    if not _held:
        _fill()
    x, y = inputs
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
