# cheat 12: write a forged result frame straight onto the harness's channel
# problem: vector_add
# options: policy_scan=false
# expect: run: channel
import json
import os
import struct


def custom_kernel(inputs):
    head = json.dumps({"ok": True, "op": "call", "calls": [], "tensors": []}).encode()
    frame = struct.pack("<4sIQ", b"CKH1", len(head), 0) + head
    try:  # every descriptor this process holds, however high the parent's pipes are numbered
        fds = sorted(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd < 3:
            continue
        try:
            os.write(fd, frame + b"garbage")
        except OSError:
            pass
    return inputs[0]
