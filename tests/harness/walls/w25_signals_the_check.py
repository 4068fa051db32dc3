# wall: signal the check's own process by PID (visible without a PID namespace; landlock
# scopes signals only from its ABI 6, Linux 6.12, so on an older kernel only the seccomp
# filter stands in the way): kill, tgkill, sigqueue and a pidfd, through libc. Signal 0:
# the door is what is tried, never the harm
# expect: run: Operation not permitted | No such process
import errno
import os
import platform
import sys


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    launcher = os.getppid()
    if launcher == 0:  # a PID namespace: nothing outside it has a PID here
        raise ProcessLookupError(errno.ESRCH, "No such process: the check is not visible")
    with open(f"/proc/{launcher}/stat") as fh:
        check = int(fh.read().rsplit(")", 1)[1].split()[1])
    numbers = {"x86_64": (234, 129, 434, 424), "aarch64": (131, 138, 434, 424)}
    tgkill, sigqueue, pidfd_open, pidfd_send = numbers[platform.machine()]
    info = (ct.c_int * 32)(0, 0, -1)  # siginfo: si_code SI_QUEUE, as sigqueue() sends
    refused = []
    for target in (check, launcher):
        calls = [
            (libc.kill, (target, 0)),
            (libc.syscall, (tgkill, target, target, 0)),
            (libc.syscall, (sigqueue, target, 0, info)),
        ]
        for call, args in calls:
            if call(*args) == 0:
                return x + y  # it may signal the check
            refused.append(ct.get_errno())
        pidfd = libc.syscall(pidfd_open, target, 0)
        if pidfd < 0:
            refused.append(ct.get_errno())
        elif libc.syscall(pidfd_send, pidfd, 0, None, 0) == 0:
            return x + y
        else:
            refused.append(ct.get_errno())
    raise OSError(refused[0], os.strerror(refused[0]))
