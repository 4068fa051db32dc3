# wall: make a file of the user's outside its folder writable by every user of the machine,
# from libc (no landlock right covers modes; an owner needs no capability), then change it
# back
# expect: run: mode unchanged | Operation not permitted | Read-only file system | No such file
import os
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    path = b"__PROBLEM_DIR__/problem.py"
    mode = os.stat(path).st_mode & 0o7777
    if libc.chmod(path, mode | 0o002) != 0:
        raise OSError(ct.get_errno(), os.strerror(ct.get_errno()))
    if os.stat(path).st_mode & 0o7777 == mode:  # skipped: success that changed nothing
        raise PermissionError("mode unchanged: chmod returned and nothing moved")
    libc.chmod(path, mode)
    return x + y
