# cheat 12: raise SystemExit from the call
# problem: vector_add
# options: policy_scan=false
# expect: run: tried to end the worker
def custom_kernel(inputs):
    raise SystemExit(0)
