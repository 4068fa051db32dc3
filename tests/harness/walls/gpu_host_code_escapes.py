"""A CUDA C++ candidate whose host code (built by load_inline, beyond every Python guard)
tries the doors: write into the paths given at build time, connect to 127.0.0.1, read its
parent's environment. Each attempt that succeeds is counted; a correct add is returned
only when every door was shut, so the check passes exactly when the walls held.
The test fills __TARGETS__ (a C string array) before the check."""

# backend: cuda_inline
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static int open_doors() {
    const char* targets[] = {__TARGETS__, nullptr};
    int open_count = 0;
    for (int i = 0; targets[i]; i++) {
        int fd = open(targets[i], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) { open_count++; close(fd); unlink(targets[i]); }
    }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0) {
        sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons(22);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(s, (sockaddr*)&a, sizeof a) == 0) open_count++;
        close(s);
    }
    char path[64]; snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
    int fd = open(path, O_RDONLY);
    if (fd >= 0) { char b[8]; if (read(fd, b, sizeof b) > 0) open_count++; close(fd); }
    return open_count;
}

torch::Tensor wall_add(torch::Tensor x, torch::Tensor y);  // in CUDA_SRC

torch::Tensor doors_then_add(torch::Tensor x, torch::Tensor y) {
    int opened = open_doors();
    TORCH_CHECK(opened == 0, "a door was open: ", opened);
    return wall_add(x, y);
}
"""

# the add itself a CUDA kernel of its own (no torch op: the problem forbids torch's add)
CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_kernel(const float* x, const float* y, float* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

torch::Tensor wall_add(torch::Tensor x, torch::Tensor y) {
    auto xc = x.contiguous();
    auto yc = y.contiguous();
    auto out = torch::empty_like(xc);
    long n = xc.numel();
    if (n == 0) return out;
    auto stream = at::cuda::getCurrentCUDAStream();
    add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
        xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    "wall_host_escapes",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["doors_then_add"],
    verbose=False,
)


def custom_kernel(inputs):
    x, y = inputs
    return _ext.doors_then_add(x, y)
