"""Honest Triton bf16 matmul with Proton scopes around its main loop and epilogue.

The kernel of ``solution_triton_wgmma.py`` (128x128x64 tiles, 8 warps, 3 stages, grouped
tile order) with two sections marked by Triton's own profiler language:
``pl.enter_scope("mainloop")`` / ``pl.exit_scope("mainloop")`` around the K loop (outside
it: the pipeliner reorders the loop body) and ``with pl.scope("epilogue")`` around the
conversion and store. Outside a Proton instrumentation session the scopes emit nothing,
so ``check`` and ``--bench`` see the plain kernel; ``check --trace`` runs it under Proton
and reports each section's share, cycles and imbalance across CTAs and warps. Under the
Triton interpreter (CPU) the harness makes the scopes no-ops.
"""

import torch
import triton
import triton.language as tl
import triton.profiler.language as pl


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    pl.enter_scope("mainloop")
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(rm[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * stride_bk + rn[None, :] * stride_bn,
            mask=(ks[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        if UPCAST:
            acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
        else:
            acc += tl.dot(a, b)
    pl.exit_scope("mainloop")
    with pl.scope("epilogue"):
        tl.store(
            c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
            acc.to(tl.bfloat16),
            mask=(rm[:, None] < M) & (rn[None, :] < N),
        )


def custom_kernel(inputs):
    a, b = inputs
    m, k = a.shape
    _, n = b.shape
    c = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    BM, BN, BK = 128, 128, 64
    grid = (triton.cdiv(m, BM) * triton.cdiv(n, BN),)
    matmul_kernel[grid](
        a,
        b,
        c,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        BM=BM,
        BN=BN,
        BK=BK,
        GROUP_M=8,
        UPCAST=a.device.type == "cpu",
        num_warps=8,
        num_stages=3,
    )
    return c
