# cheat 12: print a fake success line and exit with status 0
# problem: vector_add
# options: policy_scan=false
# expect: run: worker exited with status 0 before reporting a result
import json
import os


def custom_kernel(inputs):
    print("PASSED")
    print(json.dumps({"type": "verdict", "ok": True}))
    os._exit(0)
