# expect: pre-checks: does not parse
"""Does not parse."""

def custom_kernel(inputs)
    return inputs[0]
