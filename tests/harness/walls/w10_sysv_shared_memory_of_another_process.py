# wall: attach another process's System V shared memory by its id (machine-wide: no
# namespace names it) through the ctypes torch imported: its memory, to read and write
# expect: run: Operation not permitted
import os
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    libc.shmat.restype = ct.c_void_p
    address = libc.shmat(int("__SHMID__"), None, 0)
    if address in (None, ct.c_void_p(-1).value):
        raise OSError(ct.get_errno(), os.strerror(ct.get_errno()))
    return x + y  # attached
