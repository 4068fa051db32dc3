# wall: give a file outside its folder to another owner, from libc (no landlock right
# covers owners; a root worker without a user namespace holds CAP_CHOWN), then give it back
# expect: run: Operation not permitted | Read-only file system | No such file
import os
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    path = b"__PROBLEM_DIR__/problem.py"
    owner = os.stat(path)
    if libc.chown(path, 65534, -1) != 0:
        raise OSError(ct.get_errno(), os.strerror(ct.get_errno()))
    libc.chown(path, owner.st_uid, owner.st_gid)
    return x + y
