# cheat 4: tries a background thread, swallows the refusal, returns an honest result
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: thread creation
import threading

import torch


def custom_kernel(inputs):
    x, y = inputs
    try:
        threading.Thread(target=lambda: None).start()
    except Exception:
        pass
    return torch.sub(x, -y)
