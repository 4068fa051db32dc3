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

torch::Tensor add(torch::Tensor x, torch::Tensor y) {
    int opened = open_doors();
    TORCH_CHECK(opened == 0, "a door was open: ", opened);
    return x + y;
}
"""

_ext = load_inline("wall_host_escapes", cpp_sources=CPP_SRC, functions=["add"], verbose=False)


def custom_kernel(inputs):
    x, y = inputs
    return _ext.add(x, y)
