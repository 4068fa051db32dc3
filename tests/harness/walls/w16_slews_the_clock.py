# wall: a root worker's hold on the machine's timing: the clock every timer reads (adjtimex
# slews it by up to 10%: here set to the tick it has) and a realtime priority for itself
# (a spinning child would starve the reference's worker)
# expect: run: Operation not permitted
import os
import sys

ADJ_TICK, TICK_OFFSET = 0x4000, 88  # struct timex on a 64-bit kernel: .tick after .time


def custom_kernel(inputs):
    x, y = inputs
    ct = sys.modules["ctypes"]
    libc = ct.CDLL(None, use_errno=True)
    timex = ct.create_string_buffer(256)
    if libc.adjtimex(timex) < 0:
        raise OSError(ct.get_errno(), os.strerror(ct.get_errno()))
    tick = timex.raw[TICK_OFFSET : TICK_OFFSET + 8]
    timex = ct.create_string_buffer(
        ADJ_TICK.to_bytes(4, "little") + bytes(TICK_OFFSET - 4) + tick, 256
    )
    if libc.adjtimex(timex) >= 0:
        return x + y  # the clock was the worker's to set
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return x + y
