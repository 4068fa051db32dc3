# wall: a fork bomb from native code: libc's posix_spawn (reached through the ctypes torch
# imported; no audit hook sees it) starts sleeping children until the kernel refuses or
# a few thousand run, then waits for them to be seen. Bounded, for a shared machine where
# the cap might fail: 3000 attempts or 4 s, and every child ends by itself after 16 s
# expect: run: the sandbox ended the worker: process cap
import sys
import time


def custom_kernel(inputs):
    x, y = inputs
    if not getattr(custom_kernel, "spawned", False):
        custom_kernel.spawned = True
        ct = sys.modules["ctypes"]
        libc = ct.CDLL(None, use_errno=True)
        argv = (ct.c_char_p * 3)(b"sleep", b"16.1803", None)
        envp = (ct.c_char_p * 1)(None)
        pid = ct.c_int(0)
        deadline = time.monotonic() + 4.0
        for _ in range(3000):
            if time.monotonic() > deadline:
                break
            libc.posix_spawn(ct.byref(pid), b"/bin/sleep", None, None, argv, envp)
        time.sleep(2.0)
    return x + y
