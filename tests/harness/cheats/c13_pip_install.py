# cheat 13: pip install a package at run time
# problem: vector_add
# options: policy_scan=false
# expect: compile: subprocess
import subprocess
import sys

subprocess.run([sys.executable, "-m", "pip", "install", "fast-vector-add"], check=False)


def custom_kernel(inputs):
    return inputs[0]
