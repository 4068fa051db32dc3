# wall: a grandchild in a session of its own, then a hang: the check kills the worker on
# its timeout, and the grandchild (out of the worker's process group) must die with it
# options: timeout_s=6
# expect: run|anti-cheat: timed out | forbidden library op
import sys
import time


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    pid = libc.fork()
    if pid == 0:
        libc.setsid()
        if libc.fork() == 0:
            argv = (ct.c_char_p * 3)(b"sleep", b"27.1828", None)
            libc.execv(b"/bin/sleep", argv)
        libc._exit(0)
    libc.waitpid(pid, None, 0)
    time.sleep(120)
    return x + y
