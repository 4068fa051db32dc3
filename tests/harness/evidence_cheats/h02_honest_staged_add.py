# honest (GPU): the staged add of e01/e02, written right, through NVRTC
# problem: vector_add
# options: backend=torch sanitize=true
# expect: none: passes every rung
# The staged vector add of e01/e02 written right -- every shared-memory slot
# written before the barrier and read after it -- through the same NVRTC route, so a clean
# sanitize rung for it shows the route itself raises no finding.
import torch

SOURCE = r"""
extern "C" __global__ void staged_add_ok(const float* x, const float* y, float* out, int n) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    int i = blockIdx.x * 256 + t;
    tile[t] = (i < n) ? x[i] : 0.0f;
    __syncthreads();  // every slot written before any is read
    int j = t ^ 32;  // another warp's slot, read after the barrier
    int k = blockIdx.x * 256 + j;
    if (k < n) out[k] = tile[j] + y[k];
}
"""

_KERNEL = []


def _kernel():
    if not _KERNEL:
        _KERNEL.append(
            torch.cuda._compile_kernel(kernel_source=SOURCE, kernel_name="staged_add_ok")
        )
    return _KERNEL[0]


def custom_kernel(inputs):
    x, y = inputs
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _kernel()(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=[x, y, out, n])
    return out
