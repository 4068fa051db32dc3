// ck_trace.cuh -- intra-kernel section timing for CUDA C++ candidates (ctxkernel harness).
//
// One writer per warp (lane 0) or per CTA (thread 0) records "section entered" / "section
// left" events -- %clock64 cycles and %globaltimer nanoseconds -- into a buffer the harness
// allocates (Python: `buf = ck_trace.buffer(units, sections=[...])`) and reads back after
// the call. Compiled without CK_TRACE (every check but `--trace`) the macros are empty
// and the kernel is exactly the uninstrumented one.
//
//   __global__ void k(..., long long* trace) {
//       CK_TRACE_OPEN(trace, CK_TRACE_WARP);   // or CK_TRACE_CTA; once, at the top
//       CK_TRACE_BEGIN(0);  ... main loop ...  CK_TRACE_END(0);
//       CK_TRACE_BEGIN(1);  ... epilogue ...   CK_TRACE_END(1);
//   }
//
// Section ids index the `sections` list given to ck_trace.buffer(). A unit keeps at most
// `capacity` events (2 per section visit); later ones are counted and dropped. Timestamps
// mark when the writer *issued* the read of the clock: close a section after the work it
// times has completed (e.g. after __syncthreads() or a use of the loaded values).
//
// Buffer layout (int64 words), shared with harness/tracing/buffers.py:
//   header [8]: magic, nonce, units, capacity, 0, 0, 0, 0
//   unit u at 8 + u * (8 + 3 * capacity):
//     [8]: nonce, count, smid, cta, warp (-1: CTA-wide), globaltimer at open,
//          clock64 at open, threads per CTA
//     then `capacity` events of [3]: tag, clock64, globaltimer, where
//     tag = (nonce & 0x3fffffff) << 32 | section << 1 | is_end (the mark tells a written
//     slot from stale memory)
#pragma once

#define CK_TRACE_WARP 0
#define CK_TRACE_CTA 1
#define CK_TRACE_HEADER_WORDS 8
#define CK_TRACE_UNIT_WORDS 8
#define CK_TRACE_EVENT_WORDS 3

#ifdef CK_TRACE

struct ck_trace_t {
    long long* unit;  // this writer's unit header, or nullptr: not a writer
    long long cap;
    long long n;
    long long mark;
};

__device__ __forceinline__ unsigned long long ck_trace_globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned int ck_trace_smid() {
    unsigned int r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

__device__ __forceinline__ ck_trace_t ck_trace_open(long long* buf, int granularity) {
    ck_trace_t t;
    t.unit = nullptr;
    t.cap = 0;
    t.n = 0;
    t.mark = 0;
    if (buf == nullptr) return t;
    const unsigned int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned int threads = blockDim.x * blockDim.y * blockDim.z;
    const long long cta =
        (long long)blockIdx.x +
        (long long)gridDim.x * ((long long)blockIdx.y + (long long)gridDim.y * blockIdx.z);
    long long unit;
    long long warp;
    if (granularity == CK_TRACE_CTA) {
        if (tid != 0) return t;
        unit = cta;
        warp = -1;
    } else {
        if ((tid & 31u) != 0) return t;
        const long long warps = (threads + 31u) / 32u;
        warp = tid / 32u;
        unit = cta * warps + warp;
    }
    const long long units = buf[2];
    const long long cap = buf[3];
    if (unit >= units || cap <= 0) return t;
    long long* u = buf + CK_TRACE_HEADER_WORDS +
                   unit * (CK_TRACE_UNIT_WORDS + CK_TRACE_EVENT_WORDS * cap);
    const long long clk = clock64();
    const unsigned long long gt = ck_trace_globaltimer();
    const long long nonce = buf[1];
    u[0] = nonce;
    u[1] = 0;
    u[2] = (long long)ck_trace_smid();
    u[3] = cta;
    u[4] = warp;
    u[5] = (long long)gt;
    u[6] = clk;
    u[7] = threads;
    t.unit = u;
    t.cap = cap;
    t.mark = (nonce & 0x3fffffffLL) << 32;
    return t;
}

__device__ __forceinline__ void ck_trace_record(ck_trace_t& t, int section, int is_end) {
    const long long clk = clock64();
    if (t.unit == nullptr) return;
    if (t.n < t.cap) {
        long long* e = t.unit + CK_TRACE_UNIT_WORDS + CK_TRACE_EVENT_WORDS * t.n;
        e[0] = t.mark | ((long long)section << 1) | (is_end ? 1 : 0);
        e[1] = clk;
        e[2] = (long long)ck_trace_globaltimer();
    }
    t.n += 1;
    t.unit[1] = t.n;  // a plain store: the count needs no load and survives an early return
}

__device__ __forceinline__ void ck_trace_begin(ck_trace_t& t, int section) {
    ck_trace_record(t, section, 0);
}

__device__ __forceinline__ void ck_trace_end(ck_trace_t& t, int section) {
    ck_trace_record(t, section, 1);
}

#define CK_TRACE_OPEN(buf, granularity) \
    ck_trace_t ck_trace_state_ = ck_trace_open((long long*)(buf), (granularity))
#define CK_TRACE_BEGIN(section) ck_trace_begin(ck_trace_state_, (section))
#define CK_TRACE_END(section) ck_trace_end(ck_trace_state_, (section))
#define CK_TRACE_STATE ck_trace_state_

#else  // not tracing: nothing is emitted

struct ck_trace_t {};
__device__ __forceinline__ ck_trace_t ck_trace_open(long long*, int) { return ck_trace_t{}; }
__device__ __forceinline__ void ck_trace_begin(ck_trace_t&, int) {}
__device__ __forceinline__ void ck_trace_end(ck_trace_t&, int) {}

#define CK_TRACE_OPEN(buf, granularity) \
    ck_trace_t ck_trace_state_ {};      \
    (void)(buf)
#define CK_TRACE_BEGIN(section) ((void)0)
#define CK_TRACE_END(section) ((void)0)
#define CK_TRACE_STATE ck_trace_state_

#endif
