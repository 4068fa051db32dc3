"""Honest TileLang vector add: 128-bit loads on full tiles, a guarded tail.

One kernel for every length: ``n`` is a dynamic dimension (``T.dynamic``), so it is
compiled once, at import. Each block of 256 threads owns a tile of 1024 fp32 elements and
each thread 4 contiguous ones: a full tile (``base + TILE <= n``) is read and written with
``float4`` accesses, the last, partial tile element by element behind ``< n``. TileLang
allocates the output (``out_idx=[-1]``) and launches on torch's current stream.
"""

# backend: tilelang
import tilelang
import tilelang.language as T

THREADS = 256
VEC = 4  # 4 x fp32 = one 128-bit access per thread
TILE = THREADS * VEC


@tilelang.jit(out_idx=[-1])
def build_vector_add():
    n = T.dynamic("n")

    @T.prim_func
    def vector_add(
        x: T.Tensor((n,), T.float32),
        y: T.Tensor((n,), T.float32),
        out: T.Tensor((n,), T.float32),
    ):
        with T.Kernel(T.ceildiv(n, TILE), threads=THREADS) as bx:
            base = bx * TILE
            if base + TILE <= n:
                for i, j in T.Parallel(THREADS, VEC):
                    out[base + i * VEC + j] = x[base + i * VEC + j] + y[base + i * VEC + j]
            else:
                for i, j in T.Parallel(THREADS, VEC):
                    if base + i * VEC + j < n:
                        out[base + i * VEC + j] = x[base + i * VEC + j] + y[base + i * VEC + j]

    return vector_add


KERNEL = build_vector_add()


def custom_kernel(inputs):
    x, y = inputs
    return KERNEL(x, y)
