# wall: libc through the ctypes torch already imported (no `import ctypes` to scan for)
# expect: run: Read-only file system | Permission denied | does not exist | No such file
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    fd = libc.open(b"__HOME__/.ctxkernel-wall-test", 0o101, 0o600)  # O_WRONLY | O_CREAT
    if fd < 0:
        import os

        raise OSError(ct.get_errno(), os.strerror(ct.get_errno()))
    libc.close(fd)
    return x + y
