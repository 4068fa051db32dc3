# wall: tag and strip extended attributes of the user's files (the problem it is checked
# against) through libc: no landlock right covers them, so without a mount namespace only
# the seccomp filter stands in the way
# expect: run: Operation not permitted | Read-only file system
import os
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    path = b"__PROBLEM_DIR__/problem.py"
    for name, call in (
        ("setxattr", lambda: libc.setxattr(path, b"user.ctxkernel-wall", b"1", 1, 0)),
        ("lsetxattr", lambda: libc.lsetxattr(path, b"user.ctxkernel-wall", b"1", 1, 0)),
        ("removexattr", lambda: libc.removexattr(path, b"user.ctxkernel-wall")),
    ):
        if call() != 0:
            code = ct.get_errno()
            if code not in (61, 95):  # ENODATA, ENOTSUP: not refused, only absent
                raise OSError(code, f"{name}: {os.strerror(code)}")
    return x + y
