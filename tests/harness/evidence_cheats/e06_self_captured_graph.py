# cheat e06 (GPU): a self-captured CUDA graph, replayed blind to the inputs
# problem: matmul_bf16_small
# options: policy_scan=false bench=true
# expect: correctness|anti-cheat|benchmark: outside atol | NaN/Inf | wrong result | back-to-back
# Captures a CUDA graph of its own (honest) matmul on the first call for
# each shape and replays it on every later call of that shape -- keyed on the shape only, so
# the replay reads the buffers of the call it was captured on, wherever this call's inputs
# are. Right while the harness rewrites inputs in place at the same addresses; wrong as soon
# as a call's inputs live elsewhere: a new trial's tensors, or the benchmark's rotating input
# sets (a working set that fits in L2 is timed from several, to rotate addresses). Each
# result is copied out by a small kernel, so every call still launches one and owns its output.
import torch
import triton
import triton.language as tl

_GRAPHS = {}  # shape -> (graph, its output)


@triton.jit
def mm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr,
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
        if UPCAST:  # noqa: SIM108  (the interpreter multiplies bf16 dot operands as raw integers)
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(
        c_ptr + rows[:, None] * s_cm + cols[None, :] * s_cn,
        acc.to(tl.bfloat16),
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _matmul(a, b, c):
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, 64), triton.cdiv(n, 64))
    mm_kernel[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=64, BN=64, BK=32, UPCAST=a.device.type != "cuda", num_warps=4,
    )  # fmt: skip


def custom_kernel(inputs):
    a, b = inputs
    m, n = a.shape[0], b.shape[1]
    key = (tuple(a.shape), tuple(b.shape))
    if a.device.type != "cuda":  # no graphs off a GPU: honest
        c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
        _matmul(a, b, c)
        return c
    if key not in _GRAPHS:
        c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
        _matmul(a, b, c)  # eager first: compiled and loaded before the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
            _matmul(a, b, static_out)  # bound to this call's a and b for good
        _GRAPHS[key] = (graph, static_out)
        return c
    graph, static_out = _GRAPHS[key]
    graph.replay()
    out = torch.empty_like(static_out)
    copy_kernel[(triton.cdiv(out.numel(), 1024),)](static_out, out, out.numel(), BLOCK=1024)
    return out
