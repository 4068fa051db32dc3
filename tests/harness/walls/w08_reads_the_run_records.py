# wall: reads the run records the parent keeps (earlier candidates, verdicts, steer.md)
# expect: run: Permission denied | No such file
def custom_kernel(inputs):
    x, y = inputs
    with open("__RUNS_DIR__/steer.md") as fh:
        if "engineer" not in fh.read():
            raise RuntimeError("read something else")
    return x + y
