# cheat 1: the forbidden op through the + operator, invisible to the static scan
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: forbidden library op aten::add
def custom_kernel(inputs):
    x, y = inputs
    return x + y
