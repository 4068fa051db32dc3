# wall: write far more than the disk cap into a folder of its own closed to listing (mode
# 0300: write and search, no read), by name: the watchdog, unable to list it, counted none
# options: disk_cap_gib=0.02
# expect: run|correctness|anti-cheat: disk cap
import os
import time


def custom_kernel(inputs):
    x, y = inputs
    if not os.path.isdir("hidden"):
        os.mkdir("hidden")
        os.chmod("hidden", 0o300)
    with open(f"hidden/filler-{os.getpid()}.bin", "ab") as fh:
        for _ in range(64):
            fh.write(os.urandom(1 << 20))
            fh.flush()
    time.sleep(1.5)
    return x + y
