# wall: read the block device the run records live on, around every file permission
# (root's door where /dev is the machine's own; a device cgroup may refuse it first)
# expect: run: Permission denied | No such file | not a block device | Operation not permitted
import os


def custom_kernel(inputs):
    x, y = inputs
    dev = os.stat("__RUNS_DIR__").st_dev
    with open(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/uevent") as fh:
        names = [ln.split("=", 1)[1] for ln in fh.read().splitlines() if ln.startswith("DEVNAME=")]
    if not names:
        raise FileNotFoundError("No such file: not a block device")
    with open(f"/dev/{names[0]}", "rb") as disk:
        if len(disk.read(4096)) != 4096:
            raise RuntimeError("read nothing")
    return x + y
