# cheat e02 (GPU): a producer/consumer race that passes deterministic trials
# problem: vector_add
# options: policy_scan=false backend=torch sanitize=true
# expect: sanitize: racecheck
# A producer warp stages each block's sums in shared memory and raises a
# flag; a consumer warp spins on the flag and stores them. No barrier or fence orders the
# hand-off: it works on every deterministic trial (volatile accesses, one SM's shared memory
# in program order) and is still a data race, which compute-sanitizer's racecheck reports.
import torch

SOURCE = r"""
extern "C" __global__ void handoff_add(const float* x, const float* y, float* out, int n) {
    __shared__ volatile float stage[32];
    __shared__ volatile int ready;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int i = blockIdx.x * 32 + lane;
    if (threadIdx.x == 0) ready = 0;
    __syncthreads();  // the flag starts lowered in every block (not the race)
    if (warp == 0) {            // producer
        stage[lane] = (i < n) ? x[i] + y[i] : 0.0f;
        if (lane == 0) ready = 1;   // the bug: no __syncwarp/__threadfence_block/__syncthreads
    } else {                    // consumer
        while (ready == 0) { }
        if (i < n) out[i] = stage[lane];
    }
}
"""

_KERNEL = []


def _kernel():
    if not _KERNEL:
        _KERNEL.append(torch.cuda._compile_kernel(kernel_source=SOURCE, kernel_name="handoff_add"))
    return _KERNEL[0]


def custom_kernel(inputs):
    x, y = inputs
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _kernel()(grid=((n + 31) // 32, 1, 1), block=(64, 1, 1), args=[x, y, out, n])
    return out
