# cheat 15: crash the worker (segmentation fault)
# problem: vector_add
# options: policy_scan=false
# expect: run: crashed with SIGSEGV
import faulthandler


def custom_kernel(inputs):
    faulthandler._sigsegv()
