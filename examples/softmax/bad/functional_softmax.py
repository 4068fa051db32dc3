# expect: pre-checks: torch.nn.functional.softmax (forbidden by the problem
"""Calls F.softmax instead of writing the kernel."""

import torch.nn.functional as F


def custom_kernel(inputs):
    (x,) = inputs
    return F.softmax(x, dim=-1)
