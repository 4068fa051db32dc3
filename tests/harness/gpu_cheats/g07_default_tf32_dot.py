# cheat 7 (GPU): an fp32 matmul with Triton's default tl.dot precision (TF32 on tensor cores)
# problem: matmul_fp32
# expect: correctness: elements outside atol=1e-05
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None] * K + ks[None, :],
            mask=(rm[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + rn[None, :],
            mask=(ks[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def custom_kernel(inputs):
    a, b = inputs
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=torch.float32)
    matmul_kernel[(triton.cdiv(m, 32), triton.cdiv(n, 32))](a, b, c, m, n, k, BM=32, BN=32, BK=32)
    return c
