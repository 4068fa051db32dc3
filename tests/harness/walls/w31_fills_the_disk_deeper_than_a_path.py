# wall: write far more than the disk cap at the bottom of folders nested deeper than a
# path can name (24 names of 250 characters: past PATH_MAX): a watchdog walking by paths
# was refused the way down (ENAMETOOLONG) and counted none
# options: disk_cap_gib=0.02
# expect: run|correctness|anti-cheat: disk cap
import os
import time


def custom_kernel(inputs):
    x, y = inputs
    home = os.getcwd()
    try:
        for _ in range(24):
            os.makedirs("d" * 250, exist_ok=True)
            os.chdir("d" * 250)
        with open(f"filler-{os.getpid()}.bin", "ab") as fh:
            for _ in range(64):
                fh.write(os.urandom(1 << 20))
                fh.flush()
    finally:
        os.chdir(home)
    time.sleep(1.5)
    return x + y
