"""A library passthrough for KernelBench level1/19_ReLU: must fail (the reference's op)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
