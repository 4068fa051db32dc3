# wall: talk to another check server of the same user through its socket, from libc
# (the Python-level guard sees socket.connect; libc's connect is the kernel's to refuse)
# expect: run: Operation not permitted | No such file
import os
import struct
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    fd = libc.socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM
    if fd < 0:
        raise OSError(ct.get_errno(), os.strerror(ct.get_errno()))
    path = b"__SOCKET__"
    address = struct.pack("H", 1) + path + b"\0" * (108 - len(path))
    if libc.connect(fd, address, len(address)) != 0:
        raise OSError(ct.get_errno(), os.strerror(ct.get_errno()))
    return x + y
