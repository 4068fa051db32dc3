# cheat 15: read arbitrary memory with ctypes (the brief's segfault, refused by the guard)
# problem: vector_add
# options: policy_scan=false
# expect: run: raw memory access (ctypes.string_at)
import ctypes


def custom_kernel(inputs):
    ctypes.string_at(0)
    return inputs[0]
