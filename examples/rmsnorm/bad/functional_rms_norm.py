# expect: pre-checks: rms_norm
"""Calls the library RMSNorm."""

import torch


def custom_kernel(inputs):
    x, weight = inputs
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps=1e-6)
