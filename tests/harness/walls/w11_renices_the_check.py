# wall: reach the check's own process by PID (visible without a PID namespace) and change
# its limits, priority and CPUs -- a reference timed in a sibling worker could be slowed
# the same way. Each is set to what it already is: the door is what is tried.
# expect: run: Operation not permitted | No such process
import errno
import os
import resource


def custom_kernel(inputs):
    x, y = inputs
    launcher = os.getppid()
    if launcher == 0:  # a PID namespace: nothing outside it has a PID here
        raise ProcessLookupError(errno.ESRCH, "No such process: the check is not visible")
    with open(f"/proc/{launcher}/stat") as fh:
        check = int(fh.read().rsplit(")", 1)[1].split()[1])
    failures = []
    attempts = (
        lambda: resource.prlimit(
            check, resource.RLIMIT_CORE, resource.prlimit(check, resource.RLIMIT_CORE)
        ),
        lambda: os.setpriority(os.PRIO_PROCESS, check, os.getpriority(os.PRIO_PROCESS, check)),
        lambda: os.sched_setaffinity(check, os.sched_getaffinity(check)),
    )
    for attempt in attempts:
        try:
            attempt()
            return x + y  # one door was open
        except OSError as exc:
            failures.append(exc)
    raise failures[0]
