# wall: read another check's temp folder beside its own (the other candidate, its logs:
# what the run records will hold), found from its own working folder
# expect: run: Permission denied | No such file
import glob
import os


def custom_kernel(inputs):
    x, y = inputs
    own = os.path.dirname(os.getcwd())
    found = [
        p
        for p in glob.glob(os.path.join(os.path.dirname(own), "ctxkernel-check-*", "work", "*.py"))
        if not p.startswith(own + os.sep)
    ]
    if not found:
        raise FileNotFoundError("No such file: no other check is visible")
    for path in found:
        with open(path) as fh:
            if "the other candidate" in fh.read():
                return x + y
    raise RuntimeError("read something else")
