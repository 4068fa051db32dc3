# wall: take a Unix socket name another program of the user expects to own -- an abstract
# one (without a network namespace the machine's names) or a path in its own folder --
# and listen on it, so that program's clients talk to the candidate; through libc
# expect: run: Operation not permitted
import os
import struct
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    refused = []
    for name in (b"\0ctxkernel-check-server-wall", os.path.join(os.getcwd(), "srv").encode()):
        address = struct.pack("H", 1) + name  # sockaddr_un: AF_UNIX, the name
        fd = libc.socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM
        if fd < 0:
            refused.append(ct.get_errno())
            continue
        if libc.bind(fd, address, len(address)) == 0 and libc.listen(fd, 8) == 0:
            return x + y  # serving under that name
        refused.append(ct.get_errno())
        os.close(fd)
    raise OSError(refused[0], os.strerror(refused[0]))
