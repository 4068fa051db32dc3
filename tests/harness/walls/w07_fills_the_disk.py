# wall: write far more than the disk cap into its own folder
# options: disk_cap_gib=0.02
# expect: run|correctness|anti-cheat: disk cap
import os
import time


def custom_kernel(inputs):
    x, y = inputs
    with open("filler.bin", "ab") as fh:
        for _ in range(64):
            fh.write(os.urandom(1 << 20))
            fh.flush()
    time.sleep(1.5)
    return x + y
