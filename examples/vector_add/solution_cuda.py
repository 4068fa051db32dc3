"""Honest CUDA C++ vector add through ``torch.utils.cpp_extension.load_inline``.

Each thread adds 4 contiguous floats with one 128-bit load per input and one 128-bit
store (``float4``) when the pointers are 16-byte aligned, and falls back to scalar
accesses for the tail (and for unaligned views). The kernel runs on PyTorch's current
stream. The extension is built once, on import (about a minute the first time).
"""

# backend: cuda_inline
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void add_vec4(const float4* __restrict__ x, const float4* __restrict__ y,
                         float4* __restrict__ out, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 a = x[i], b = y[i];
        out[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
}

__global__ void add_scalar(const float* __restrict__ x, const float* __restrict__ y,
                           float* __restrict__ out, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

torch::Tensor vector_add(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32, "fp32 only");
    TORCH_CHECK(x.numel() == y.numel(), "length mismatch");
    auto xc = x.contiguous();
    auto yc = y.contiguous();
    auto out = torch::empty_like(xc);
    long n = xc.numel();
    if (n == 0) return out;
    auto stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const float* px = xc.data_ptr<float>();
    const float* py = yc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    bool aligned = (reinterpret_cast<uintptr_t>(px) % 16 == 0) &&
                   (reinterpret_cast<uintptr_t>(py) % 16 == 0) &&
                   (reinterpret_cast<uintptr_t>(po) % 16 == 0);
    long done = 0;
    if (aligned) {
        long n4 = n / 4;
        if (n4 > 0) {
            long blocks = (n4 + threads - 1) / threads;
            add_vec4<<<blocks, threads, 0, stream>>>(
                reinterpret_cast<const float4*>(px), reinterpret_cast<const float4*>(py),
                reinterpret_cast<float4*>(po), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    if (done < n) {
        long rest = n - done;
        long blocks = (rest + threads - 1) / threads;
        add_scalar<<<blocks, threads, 0, stream>>>(px, py, po, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

CPP_SRC = "torch::Tensor vector_add(torch::Tensor x, torch::Tensor y);"

_ext = load_inline(
    name="ctxkernel_vector_add_ext",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["vector_add"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def custom_kernel(inputs):
    x, y = inputs
    return _ext.vector_add(x, y)
