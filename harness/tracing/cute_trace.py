"""``ck_trace.CuteTrace``: section timing inside a CuTeDSL kernel, into a ``ck_trace`` buffer.

Used inside a ``@cute.kernel``; the buffer's address comes in as a ``cutlass.Int64``
argument (``cutlass.Int64(buf.data_ptr())`` on the host)::

    tr = ck_trace.CuteTrace(trace_ptr)        # warp granularity; "cta" for one per CTA
    tr.begin(0)  ...  tr.end(0)               # section ids index the buffer's `sections`

Each call emits one inline-PTX block (see ``examples/python/CuTeDSL/dsl_tutorials/
inline_ptx.py`` in CUTLASS for the pattern): ``%clock64`` and ``%globaltimer`` reads and
predicated ``st.global`` stores, so no DSL control flow is needed and a non-writer lane
costs a few instructions. The event slot of each call site is fixed when the kernel is
traced (the n-th ``begin``/``end`` written in the source is event n), so a call site
inside a runtime loop overwrites its slot: time whole loops, not iterations. Call sites
in branches are fine: a slot never written lacks the buffer's mark and is skipped. Capacity is
read from the buffer at run time; slots past it are skipped. With tracing off
(``ck_trace.enabled()`` false when the kernel is compiled) nothing is emitted.

Layout: ``include/ck_trace.cuh`` (shared with the CUDA C++ helper and ``buffers.py``).
"""

from __future__ import annotations

from typing import Any

from . import ck_trace

_GRANULARITY = {"warp": ck_trace.WARP, "cta": ck_trace.CTA}

# $0 = cap (out; 0: not a writer), $1 = buffer address, $2 = unit, $3 = writer (0/1),
# $4 = cta, $5 = warp, $6 = threads per CTA
_OPEN = """{
 .reg .pred p;
 .reg .u64 units, nonce, base, stride, clk, gt, zero, sm64, thr64;
 .reg .u32 sm;
 mov.u64 $0, 0;
 setp.ne.u64 p, $1, 0;
 @p ld.global.u64 units, [$1+16];
 @p setp.lt.u64 p, $2, units;
 @p setp.ne.u32 p, $3, 0;
 @p ld.global.u64 $0, [$1+24];
 @p ld.global.u64 nonce, [$1+8];
 @!p mov.u64 $0, 0;
 mul.lo.u64 stride, $0, 24;
 add.u64 stride, stride, 64;
 mad.lo.u64 base, $2, stride, $1;
 add.u64 base, base, 64;
 mov.u64 clk, %clock64;
 mov.u64 gt, %globaltimer;
 mov.u32 sm, %smid;
 cvt.u64.u32 sm64, sm;
 cvt.u64.u32 thr64, $6;
 mov.u64 zero, 0;
 @p st.global.u64 [base], nonce;
 @p st.global.u64 [base+8], zero;
 @p st.global.u64 [base+16], sm64;
 @p st.global.u64 [base+24], $4;
 @p st.global.u64 [base+32], $5;
 @p st.global.u64 [base+40], gt;
 @p st.global.u64 [base+48], clk;
 @p st.global.u64 [base+56], thr64;
}"""

# $0 = mark (out): (nonce & 0x3fffffff) << 32, 0 without a buffer; $1 = buffer address
_MARK = """{
 .reg .pred p;
 .reg .u64 nonce;
 mov.u64 $0, 0;
 setp.ne.u64 p, $1, 0;
 @p ld.global.u64 nonce, [$1+8];
 @p and.b64 nonce, nonce, 0x3fffffff;
 @p shl.b64 $0, nonce, 32;
}"""

# $0 = buffer address, $1 = unit, $2 = cap (0: not a writer), $3 = event index, $4 = tag,
# $5 = mark
_RECORD = """{
 .reg .pred p, w;
 .reg .u64 clk, gt, stride, base, ev, next, tag;
 mov.u64 clk, %clock64;
 setp.ne.u64 w, $2, 0;
 setp.lt.u64 p, $3, $2;
 mul.lo.u64 stride, $2, 24;
 add.u64 stride, stride, 64;
 mad.lo.u64 base, $1, stride, $0;
 add.u64 base, base, 64;
 mul.lo.u64 ev, $3, 24;
 add.u64 ev, ev, base;
 add.u64 ev, ev, 64;
 @p mov.u64 gt, %globaltimer;
 or.b64 tag, $4, $5;
 @p st.global.u64 [ev], tag;
 @p st.global.u64 [ev+8], clk;
 @p st.global.u64 [ev+16], gt;
 add.u64 next, $3, 1;
 @w st.global.u64 [base+8], next;
}"""


class CuteTrace:
    """Section timing for one CuTeDSL kernel; construct it once, at the top of the kernel."""

    def __init__(self, ptr: Any, granularity: str = "warp") -> None:
        if granularity not in _GRANULARITY:
            raise ValueError(f"granularity must be 'warp' or 'cta', not {granularity!r}")
        self.on = ck_trace.enabled()
        self.granularity = granularity
        self._next = [0]  # shared by the copies the DSL makes across branches and loops
        if not self.on:
            return
        import cutlass
        import cutlass.cute as cute

        tx, ty, tz = cute.arch.thread_idx()
        bx, by, bz = cute.arch.block_dim()
        cx, cy, cz = cute.arch.block_idx()
        gx, gy, _ = cute.arch.grid_dim()
        tid = tx + bx * (ty + by * tz)
        cta = cutlass.Int64(cx) + cutlass.Int64(gx) * (
            cutlass.Int64(cy) + cutlass.Int64(gy) * cutlass.Int64(cz)
        )
        if granularity == "cta":
            unit = cta
            warp = cutlass.Int64(-1)
            writer = tid == 0
        else:
            warps = (bx * by * bz + 31) // 32
            warp = cutlass.Int64(tid // 32)
            unit = cta * cutlass.Int64(warps) + warp
            writer = tid % 32 == 0
        self.ptr = cutlass.Int64(ptr)
        self.unit = unit
        threads = cutlass.Int32(bx * by * bz)
        self.cap = _asm_i64(_OPEN, [self.ptr, unit, cutlass.Int32(writer), cta, warp, threads])
        self.mark = _asm_i64(_MARK, [self.ptr])

    @property
    def events(self) -> int:
        """Event slots handed out so far (call sites traced)."""
        return self._next[0]

    # The DSL carries values through a runtime `if` or loop only if it can split them into
    # IR values and rebuild them: the dynamic fields go through, the slot counter is shared.
    def __extract_mlir_values__(self) -> list[Any]:
        if not self.on:
            return []
        return [v.ir_value() for v in (self.ptr, self.unit, self.cap, self.mark)]

    def __new_from_mlir_values__(self, values: list[Any]) -> CuteTrace:
        new = CuteTrace.__new__(CuteTrace)
        new.on, new.granularity, new._next = self.on, self.granularity, self._next
        if self.on:
            import cutlass

            new.ptr, new.unit, new.cap, new.mark = (cutlass.Int64(v) for v in values)
        return new

    def begin(self, section: int) -> None:
        self._record(section, 0)

    def end(self, section: int) -> None:
        self._record(section, 1)

    def _record(self, section: int, is_end: int) -> None:
        if not self.on:
            return
        import cutlass

        tag = cutlass.Int64(int(section) * 2 + is_end)
        index = cutlass.Int64(self._next[0])
        self._next[0] += 1
        _asm_void(_RECORD, [self.ptr, self.unit, self.cap, index, tag, self.mark])


def _values(args: list[Any]) -> list[Any]:
    return [a.ir_value() for a in args]


def _asm_i64(asm: str, args: list[Any]) -> Any:
    import cutlass
    from cutlass._mlir.dialects import llvm
    from cutlass.cutlass_dsl import T

    constraints = "=l," + ",".join("r" if _is_i32(a) else "l" for a in args)
    return cutlass.Int64(
        llvm.inline_asm(
            T.i64(),
            _values(args),
            asm,
            constraints,
            has_side_effects=True,
            is_align_stack=False,
            asm_dialect=llvm.AsmDialect.AD_ATT,
        )
    )


def _asm_void(asm: str, args: list[Any]) -> None:
    from cutlass._mlir.dialects import llvm

    constraints = ",".join("r" if _is_i32(a) else "l" for a in args)
    llvm.inline_asm(
        None,
        _values(args),
        asm,
        constraints,
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


def _is_i32(value: Any) -> bool:
    import cutlass

    return isinstance(value, cutlass.Int32)


ck_trace.CuteTrace = CuteTrace  # type: ignore[attr-defined]  # what candidates call
