# wall: nest folders deeper than Python's recursion limit (2000 levels): the cleanup's
# rmtree recursed once a level, raised RecursionError out of the check (a traceback, no
# verdict) and left the temp folder behind
# options: disk_cap_gib=0.02
# expect: run|correctness|anti-cheat: disk cap
import os
import time


def custom_kernel(inputs):
    x, y = inputs
    home = os.getcwd()
    try:
        for _ in range(2000):
            os.makedirs("n", exist_ok=True)
            os.chdir("n")
    finally:
        os.chdir(home)
    time.sleep(1.5)
    return x + y
