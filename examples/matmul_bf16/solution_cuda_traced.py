"""Honest CUDA C++ bf16 matmul (``load_inline``) with ``ck_trace`` sections, for ``check --trace``.

A plain shared-memory tiled kernel: each CTA of 256 threads (8 warps) owns a 64x64 tile of
``out``, stages 64x32 of ``a`` and 32x64 of ``b`` per step as fp32 in shared memory, and
each thread accumulates a 4x4 block in fp32 registers; the result is rounded once to bf16.
No tensor cores: it is here to show the tracing helper, not to be fast.

Sections (warp granularity, one record stream per warp): ``mainloop`` (the whole K loop:
loads, barriers, FMAs) and ``epilogue`` (rounding and stores). The header comes from
``ck_trace.cuda_header()``: without ``--trace`` the ``CK_TRACE_*`` macros are empty and
``ck_trace.buffer`` returns an empty tensor, so the checked and timed kernel is the plain
one; the traced build gets its own extension name (``ck_trace.name``).
"""

# backend: cuda_inline
import ck_trace
from torch.utils.cpp_extension import load_inline

BM, BN, THREADS = 64, 64, 256
SECTIONS = ["mainloop", "epilogue"]

CUDA_SRC = (
    ck_trace.cuda_header()
    + r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>

#define BM 64
#define BN 64
#define BK 32
#define TM 4
#define TN 4

__global__ void __launch_bounds__(256)
matmul_bf16_tiled(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                  __nv_bfloat16* __restrict__ out, int M, int N, int K, long long* trace) {
    CK_TRACE_OPEN(trace, CK_TRACE_WARP);
    __shared__ float as[BK][BM + 1];  // a tile, transposed: as[k][m]
    __shared__ float bs[BK][BN + 1];
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    CK_TRACE_BEGIN(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += blockDim.x) {
            const int m = i / BK, k = i % BK;
            const int gm = row0 + m, gk = k0 + k;
            as[k][m] = (gm < M && gk < K) ? __bfloat162float(a[(long)gm * K + gk]) : 0.f;
        }
        for (int i = tid; i < BK * BN; i += blockDim.x) {
            const int k = i / BN, n = i % BN;
            const int gk = k0 + k, gn = col0 + n;
            bs[k][n] = (gk < K && gn < N) ? __bfloat162float(b[(long)gk * N + gn]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < BK; ++k) {
            float av[TM], bv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) av[i] = as[k][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) bv[j] = bs[k][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
    CK_TRACE_END(0);

    CK_TRACE_BEGIN(1);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gm = row0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int gn = col0 + tx * TN + j;
            if (gm < M && gn < N) out[(long)gm * N + gn] = __float2bfloat16(acc[i][j]);
        }
    }
    CK_TRACE_END(1);
}

torch::Tensor matmul_bf16(torch::Tensor a, torch::Tensor b, torch::Tensor trace) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kBFloat16,
                "bf16 only");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shape mismatch");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    const int M = ac.size(0), K = ac.size(1), N = bc.size(1);
    auto out = torch::empty({M, N}, ac.options());
    if (M == 0 || N == 0) return out;
    long long* tp = trace.numel() ? reinterpret_cast<long long*>(trace.data_ptr<int64_t>()) : nullptr;
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    matmul_bf16_tiled<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const __nv_bfloat16*>(ac.data_ptr<at::BFloat16>()),
        reinterpret_cast<const __nv_bfloat16*>(bc.data_ptr<at::BFloat16>()),
        reinterpret_cast<__nv_bfloat16*>(out.data_ptr<at::BFloat16>()), M, N, K, tp);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
)

CPP_SRC = "torch::Tensor matmul_bf16(torch::Tensor a, torch::Tensor b, torch::Tensor trace);"

_ext = load_inline(
    name=ck_trace.name("ctxkernel_matmul_bf16_traced"),
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["matmul_bf16"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def custom_kernel(inputs):
    a, b = inputs
    m, n = a.shape[0], b.shape[1]
    grid = ((n + BN - 1) // BN, (m + BM - 1) // BM)
    trace = ck_trace.buffer(
        ck_trace.warp_units(grid, THREADS), SECTIONS, capacity=8, device=a.device
    )
    return _ext.matmul_bf16(a, b, trace)
