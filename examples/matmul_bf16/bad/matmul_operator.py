# expect: pre-checks: uses the @ operator
"""Hands the work to the library through the @ operator."""


def custom_kernel(inputs):
    a, b = inputs
    return a @ b
