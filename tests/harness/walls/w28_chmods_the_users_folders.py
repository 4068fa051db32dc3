# wall: change the modes of the user's folders and files outside its folder, to modes
# seccomp once let through (owner-readable, not world-writable): the run records made
# r-x (a later check of this user cannot write its record), the problem's folder too, the
# problem file opened to every user; from libc (no landlock right covers modes; an owner
# needs no capability), then change them back
# expect: run: mode unchanged | Operation not permitted | Read-only file system | No such file
import os
import sys

TARGETS = [
    (b"__RUNS_DIR__", 0o555),
    (b"__PROBLEM_DIR__", 0o555),
    (b"__PROBLEM_DIR__/problem.py", 0o644),
]


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    refused = []
    for path, mode in TARGETS:
        before = os.stat(path).st_mode & 0o7777
        wanted = mode if mode != before else mode & ~0o004
        if libc.chmod(path, wanted) != 0:
            refused.append(ct.get_errno())
        elif os.stat(path).st_mode & 0o7777 != before:
            libc.chmod(path, before)
            return x + y  # set back: the door was open
    if refused:
        raise OSError(refused[0], os.strerror(refused[0]))
    raise PermissionError("mode unchanged: every chmod returned and nothing moved")
