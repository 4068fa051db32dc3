# wall: fill its folder with empty files (no block each, but an inode and a directory
# slot: the file system runs out of them long before the disk cap counts a byte)
# options: disk_cap_gib=0.02
# expect: run|correctness|anti-cheat: disk cap
import os
import time


def custom_kernel(inputs):
    x, y = inputs
    os.makedirs("many", exist_ok=True)
    for i in range(20000):
        os.close(os.open(f"many/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
    time.sleep(1.5)
    return x + y
