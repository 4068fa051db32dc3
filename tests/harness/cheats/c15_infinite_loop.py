# cheat 15: hang
# problem: vector_add
# options: timeout_s=3
# expect: run: timed out after 3 s
def custom_kernel(inputs):
    while True:
        pass
