# cheat 4: return an empty output and fill it from a timer signal after returning
# problem: vector_add
# options: policy_scan=false
# expect: run: output changed after custom_kernel returned
import signal

import torch

_PENDING = []


def _finish(signum, frame):
    while _PENDING:
        out, x, y = _PENDING.pop()
        out.copy_(torch.sub(x, -y))


def custom_kernel(inputs):
    x, y = inputs
    out = torch.zeros_like(x)
    _PENDING.append((out, x, y))
    signal.signal(signal.SIGALRM, _finish)
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    return out
