"""The tracing primer: how an agent instruments its kernel for the ``trace`` rung, per backend.

``TRACE_PRIMER[backend]`` is text for a system prompt or a backend primer (the agent's
prompt module decides where it goes); ``trace_primer(backend)`` adds the common part.
Keep each under ~25 lines: agents read all of it every round.
"""

from __future__ import annotations

COMMON = """\
Intra-kernel tracing (`check --trace`): mark the sections of your kernel and the harness
reports each one's share of the kernel time, its cycles per warp/CTA (mean/p50/p95) and
its imbalance across CTAs and warps, e.g. "mainloop 71% with 3.1x imbalance across CTAs,
epilogue 22%". The instrumented build runs in a separate worker and is never the one
checked or timed; elsewhere the markers cost nothing. Time a whole loop as one section,
not each iteration. A clock read marks when it was issued, so end a section after its
work completed (after a barrier or a use of the loaded data)."""

TRITON = """\
Triton: use Triton's Proton scopes inside the @triton.jit function:
    import triton.profiler.language as pl
    pl.enter_scope("mainloop")
    for k in range(0, K, BK): ...
    pl.exit_scope("mainloop")
    with pl.scope("epilogue"):
        tl.store(...)
Scope names are compile-time strings; enter/exit must pair up in the same block. Do not put
scopes inside a loop (the pipeliner reorders its body). Nothing else is needed: the
harness starts Proton's instrumentation mode (one record stream per warp)."""

CUDA = """\
CUDA C++ (load_inline): `import ck_trace`, prepend its header and take a buffer pointer:
    SRC = ck_trace.cuda_header() + r'''
    __global__ void k(..., long long* trace) {
        CK_TRACE_OPEN(trace, CK_TRACE_WARP);   // or CK_TRACE_CTA; first statement
        CK_TRACE_BEGIN(0); /* main loop */ CK_TRACE_END(0);
        CK_TRACE_BEGIN(1); /* epilogue  */ CK_TRACE_END(1);
    }'''
    ext = load_inline(name=ck_trace.name("my_ext"), cuda_sources=SRC, ...)
    # per call, before the launch:
    buf = ck_trace.buffer(ck_trace.warp_units(grid, threads), ["mainloop", "epilogue"],
                          capacity=8, device=x.device)     # cta_units(grid) for CK_TRACE_CTA
    # C++: long long* tp = buf.numel() ? (long long*)buf.data_ptr<int64_t>() : nullptr;
Section ids index the names list; capacity = events per warp (2 per section visit).
Without --trace the macros are empty and buffer() returns an empty tensor. In device
functions pass `ck_trace_t& t = CK_TRACE_STATE` and call ck_trace_begin(t, id)."""

CUTEDSL = """\
CuTeDSL: `import ck_trace`; give the kernel the buffer address as a cutlass.Int64:
    @cute.kernel
    def k(..., trace_ptr: cutlass.Int64):
        tr = ck_trace.CuteTrace(trace_ptr)     # "cta" as 2nd argument: one record per CTA
        tr.begin(0); ...main loop...; tr.end(0)
        tr.begin(1); ...epilogue...;  tr.end(1)
    buf = ck_trace.buffer(ck_trace.warp_units(grid, threads), ["mainloop", "epilogue"],
                          device=x.device)
    compiled(..., cutlass.Int64(buf.data_ptr()))   # 0 when not tracing: nothing is written
Each begin/end call site is one event slot fixed at compile time: a call site inside a
runtime loop keeps only its last visit. Compile after importing ck_trace (tracing is
decided when the kernel is traced) and cache the compiled kernel as usual."""

TRACE_PRIMER: dict[str, str] = {
    "triton": TRITON,
    "cuda_inline": CUDA,
    "cutedsl": CUTEDSL,
}


def trace_primer(backend: str) -> str:
    """The common paragraph plus the backend's; only the common one for a backend with
    no instrumentation (PyTorch)."""
    specific = TRACE_PRIMER.get(backend)
    return COMMON + ("\n\n" + specific if specific else "")
