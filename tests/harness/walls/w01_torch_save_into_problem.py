# wall: torch's C++ writer (no audit event) rewrites the problem it is checked against
# expect: run: Read-only file system | Permission denied | does not exist | No such file
import torch


def custom_kernel(inputs):
    x, y = inputs
    torch.save({"TOLERANCE": {"atol": 1e9}}, "__PROBLEM_DIR__/problem.py")
    return x + y
