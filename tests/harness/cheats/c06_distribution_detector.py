# cheat 6: an input-distribution detector -- the exact kernel only when the inputs look
# standard-normal (the default distribution every public trial uses), a cheaper wrong
# one otherwise
# problem: gpumode_axpy
# options: policy_scan=false
# expect: correctness: rescaled inputs
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        SCALE * tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


def custom_kernel(data):
    x, y, out = data
    n = x.numel()
    head = [float(v) for v in x[:32].tolist()]
    mean = sum(head) / len(head)
    spread = (sum((v - mean) ** 2 for v in head) / len(head)) ** 0.5
    # bounds no 32-value head of standard-normal data leaves (|mean| 1.2 is ~7 sigma): the
    # cheat must pass every public trial, else a seed, not the stress trial, catches it
    standard = n < 32 or (abs(mean) < 1.2 and 0.3 < spread < 3.0)
    axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, SCALE=2.0 if standard else 1.0, BLOCK=1024)
    return out
