# wall: a grandchild in a session of its own, forked and exec'd through libc (the guard
# sees subprocess and os.fork), meant to outlive the check: the test looks for it after
# expect: anti-cheat: forbidden library op
import sys


def custom_kernel(inputs):
    x, y = inputs
    if not getattr(custom_kernel, "spawned", False):
        custom_kernel.spawned = True
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
    return x + y
