# honest (GPU): a pipelined bf16 Triton matmul on wgmma
# problem: matmul_bf16_small
# options: expect_isa=wgmma sanitize=true
# expect: none: passes every rung
# A pipelined bf16 Triton matmul -- a K loop of num_stages=3 (loads for the
# next tiles in flight while tl.dot runs on wgmma/HGMMA on sm_90), fp32 accumulation, one
# rounding to bf16 -- that must pass every evidence rung: sanitize clean, and the hot kernel
# executing wgmma (--expect-isa wgmma).
import torch
import triton
import triton.language as tl


@triton.jit
def mm_pipelined(
    a_ptr, b_ptr, c_ptr, M, N, K,
    s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
    UPCAST: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, num_stages=STAGES):
        kk = k0 + ks
        a = tl.load(
            a_ptr + rows[:, None] * s_am + kk[None, :] * s_ak,
            mask=(rows[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + kk[:, None] * s_bk + cols[None, :] * s_bn,
            mask=(kk[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        if UPCAST:  # noqa: SIM108  (the interpreter multiplies bf16 dot operands as raw integers)
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(
        c_ptr + rows[:, None] * s_cm + cols[None, :] * s_cn,
        acc.to(tl.bfloat16),
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


def custom_kernel(inputs):
    a, b = inputs
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    grid = (triton.cdiv(m, 64), triton.cdiv(n, 64))
    mm_pipelined[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=64, BN=64, BK=32, STAGES=3, UPCAST=a.device.type != "cuda", num_warps=4,
    )  # fmt: skip
    return c
