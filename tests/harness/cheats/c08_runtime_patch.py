# cheat 8: monkeypatch timers and validators through sys.modules and setattr
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: candidate code replaced time.perf_counter
import sys

import torch

sys.modules["torch"].allclose = lambda *args, **kwargs: True
sys.modules["time"].perf_counter = lambda: 0.0


def custom_kernel(inputs):
    x, y = inputs
    return torch.sub(x, -y)
