# cheat e01 (GPU): an uninitialised shared-memory read, right by luck
# problem: vector_add
# options: policy_scan=false backend=torch sanitize=true
# expect: sanitize: racecheck
# Reads a neighbour warp's shared-memory slot before the barrier that makes
# it written -- uninitialised (or a previous block's) shared memory -- and is right by luck:
# the value changes the sum only when it is above 1e30, which no tested input and no stale
# value from these inputs is. The deterministic trials pass; compute-sanitizer's racecheck
# sees the read race the other warp's write (initcheck sees global memory only).
import torch

# CUDA C++ compiled at run time with NVRTC (torch.cuda._compile_kernel): well under a
# second, where a load_inline extension costs ~50 s in every worker the sanitizer starts.
SOURCE = r"""
extern "C" __global__ void staged_add(const float* x, const float* y, float* out, int n) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    int i = blockIdx.x * 256 + t;
    tile[t] = (i < n) ? x[i] : 0.0f;
    // the bug: a look-ahead 32 slots on (the next warp's) with no __syncthreads() before it
    float ahead = tile[(t + 32) & 255];
    __syncthreads();
    float v = tile[t] + ((i < n) ? y[i] : 0.0f);
    if (ahead > 1.0e30f) v += ahead;  // never taken for these inputs: right by luck
    if (i < n) out[i] = v;
}
"""

_KERNEL = []


def _kernel():
    if not _KERNEL:
        _KERNEL.append(torch.cuda._compile_kernel(kernel_source=SOURCE, kernel_name="staged_add"))
    return _KERNEL[0]


def custom_kernel(inputs):
    x, y = inputs
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _kernel()(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=[x, y, out, n])
    return out
