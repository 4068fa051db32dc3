# wall: write far more than the disk cap to its stdout (a log file of the parent's, not
# in its folder), then wait for the watchdog
# options: disk_cap_gib=0.02
# expect: run|correctness|anti-cheat: disk cap
import os
import time


def custom_kernel(inputs):
    x, y = inputs
    block = b"x" * (1 << 20)
    for _ in range(64):
        os.write(1, block)
    time.sleep(1.5)
    return x + y
