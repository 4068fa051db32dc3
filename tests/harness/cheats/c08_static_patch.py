# cheat 8: monkeypatch the validator at import time
# problem: vector_add
# expect: pre-checks: monkeypatching
import torch

torch.allclose = lambda *args, **kwargs: True


def custom_kernel(inputs):
    x, y = inputs
    return torch.sub(x, -y)
