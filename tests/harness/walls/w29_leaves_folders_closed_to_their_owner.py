# wall: leave data in its folder that its owner cannot remove: a filled folder closed
# (mode 000) with another closed one in it, one write-and-search only (0300), links out to
# the problem inside them; rmtree, listing nothing, left the check's temp folder for good
# (its marker gone, no sweep retried). The test looks for that folder after the check
# expect: run: left closed folders behind
import os


def _fill(path, mib):
    with open(path, "wb") as fh:
        for _ in range(mib):
            fh.write(b"\xab" * (1 << 20))


def custom_kernel(inputs):
    del inputs
    if not os.path.isdir("stash"):
        os.makedirs("stash/inner")
        _fill("stash/blob.bin", 4)
        _fill("stash/inner/blob.bin", 2)
        os.symlink("__PROBLEM_DIR__", "stash/inner/problem")
        os.symlink("__PROBLEM_DIR__/problem.py", "stash/problem.py")
        os.mkdir("hidden")
        _fill("hidden/blob.bin", 2)
        os.chmod("stash/inner", 0)
        os.chmod("stash", 0)
        os.chmod("hidden", 0o300)
    raise RuntimeError("left closed folders behind")
