# cheat e03 (GPU): an unused tensor-core path, a SIMT path taken at run time
# problem: matmul_bf16_small
# options: expect_isa=wgmma
# expect: isa: executed no wgmma
# A bf16 matmul whose kernel holds a tensor-core path (tl.dot: HGMMA in the
# static SASS on sm_90) behind a run-time flag that is always 0, so every call runs the SIMT
# path (fp32 multiply-adds of broadcast tiles). Correct, and the dumps show HGMMA; only the
# executed-instruction evidence tells: --expect-isa wgmma fails at the isa rung.
import torch
import triton
import triton.language as tl


@triton.jit
def mm_either_path(
    a_ptr, b_ptr, c_ptr, M, N, K,
    s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
    use_tensor_cores,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
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
        if use_tensor_cores != 0:  # compiled, never taken
            acc = tl.dot(a, b, acc)
        else:  # taken: SIMT multiply-adds in fp32
            acc += tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)
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
    grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
    mm_either_path[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        0,
        BM=32, BN=32, BK=16, num_warps=8,
    )  # fmt: skip
    return c
