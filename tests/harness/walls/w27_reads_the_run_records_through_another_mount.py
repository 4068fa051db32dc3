# wall: reads the run records through another mount of the same files (a volume mounted
# twice, a home bound under /srv): every mount point it sees, with every tail of the
# records' path, tried as another way to the same folder
# expect: run: Permission denied | No such file
import os

RUNS = "__RUNS_DIR__"


def _other_ways():
    parts = RUNS.strip("/").split("/")
    tails = ["/".join(parts[i:]) for i in range(len(parts) + 1)]
    with open("/proc/self/mountinfo") as fh:
        points = {line.split()[4].replace("\\040", " ") for line in fh}
    for point in sorted(points):
        if point.startswith(("/proc", "/sys")):
            continue
        for tail in tails:
            path = os.path.normpath(os.path.join(point, tail, "steer.md"))
            if path != os.path.join(RUNS, "steer.md") and os.path.lexists(path):
                yield path


def custom_kernel(inputs):
    x, y = inputs
    refused = None
    for path in _other_ways():
        try:
            with open(path) as fh:
                if "engineer" in fh.read():
                    return x + y
        except PermissionError as exc:
            refused = exc
    if refused is not None:
        raise refused
    raise FileNotFoundError("No such file: no other way to the run records")
