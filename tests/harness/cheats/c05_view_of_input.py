# cheat 5: write the result into an input and return it (a view of an input)
# problem: vector_add
# options: policy_scan=false
# expect: run: shares memory with input #0


def custom_kernel(inputs):
    x, y = inputs
    x.sub_(-y)
    return x
