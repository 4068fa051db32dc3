# expect: pre-checks: uses torch.add (forbidden by the problem
"""Calls the library op the problem asks you to write."""

import torch


def custom_kernel(inputs):
    x, y = inputs
    return torch.add(x, y)
