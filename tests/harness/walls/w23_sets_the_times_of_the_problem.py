# wall: set the user's problem file's times back a day (a staleness check keyed on its
# mtime would take an edited file for the one it saw), by every route libc and the kernel
# offer: utime, utimes, futimesat, utimensat by path, futimens through a file opened only
# for reading (no landlock right covers times; an owner needs no capability)
# expect: run: times unchanged | Read-only file system | No such file
import os
import platform
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    path = b"__PROBLEM_DIR__/problem.py"
    before = os.stat(path)
    back = int(before.st_mtime) - 86400
    pair = (ct.c_long * 4)(back, 0, back, 0)  # timeval[2] or timespec[2]
    utimbuf = (ct.c_long * 2)(back, back)
    fd = os.open(path, os.O_RDONLY)
    calls = [
        lambda: libc.utime(path, utimbuf),
        lambda: libc.utimes(path, pair),
        lambda: libc.futimesat(-100, path, pair),
        lambda: libc.utimensat(-100, path, pair, 0),
        lambda: libc.futimens(fd, pair),
    ]
    numbers = {"x86_64": (132, 235, 261, 280), "aarch64": (88,)}.get(platform.machine(), ())
    for nr in numbers:  # the raw calls, whatever libc routes its functions through
        args = {132: (path, utimbuf), 235: (path, pair), 261: (-100, path, pair)}.get(
            nr, (-100, path, pair, 0)
        )
        calls.append(lambda nr=nr, args=args: libc.syscall(nr, *args))
    refused = []
    for call in calls:
        if call() != 0:
            refused.append(ct.get_errno())
        elif os.stat(path).st_mtime_ns != before.st_mtime_ns:
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
            return x + y  # set back: the door was open
    if refused:
        raise OSError(refused[0], os.strerror(refused[0]))
    raise PermissionError("times unchanged: every call returned and nothing moved")
