"""How fast the parent/worker channel moves a large tensor, with Linux's default pipe and
with the channel's own (``harness.process.channel.pipe``), between two processes.

A child process echoes every frame it gets (``BlockingEnd``, as a worker reads and writes);
the parent sends one float32 tensor and reads it back (``ParentEnd``, with its deadline and
tick). Reported: MB/s of the round trip (bytes out plus bytes back over the wall time), the
median of ``--rounds`` rounds a pipe kind, the kinds interleaved round by round so that a
change in the machine's load falls on both.

usage: python bench/harness/channel_throughput.py [--mb 256] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from harness.process import channel


def _echo(read_fd: int, write_fd: int) -> None:
    end = channel.BlockingEnd(read_fd, write_fd)
    while True:
        try:
            frame = end.recv()
        except channel.ChannelClosed:
            os._exit(0)
        end.send({"ok": True}, frame.tensors)


def round_trip(make_pipe, tensor: torch.Tensor) -> float:
    to_r, to_w = make_pipe()
    back_r, back_w = make_pipe()
    pid = os.fork()
    if pid == 0:
        os.close(to_w)
        os.close(back_r)
        _echo(to_r, back_w)
    os.close(to_r)
    os.close(back_w)
    parent = channel.ParentEnd(to_w, back_r)
    try:
        t0 = time.perf_counter()
        parent.send({"op": "echo"}, [tensor], time.monotonic() + 600, lambda: None)
        frame = parent.recv(time.monotonic() + 600, lambda: None, 1 << 40)
        seconds = time.perf_counter() - t0
        assert frame.tensors[0].numel() == tensor.numel()
    finally:
        parent.close()
        os.waitpid(pid, 0)
    return 2 * tensor.numel() * tensor.element_size() / seconds / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=256, help="tensor size in MiB (default 256)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tensor = torch.rand(args.mb * (1 << 20) // 4)
    kinds = {"default pipe": os.pipe, "channel.pipe": channel.pipe}
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for name, make in kinds.items():
            rates[name].append(round_trip(make, tensor))
    summary = {
        name: {"median_mb_s": round(statistics.median(v), 1), "all": [round(x) for x in v]}
        for name, v in rates.items()
    }
    summary["ratio"] = round(
        summary["channel.pipe"]["median_mb_s"] / summary["default pipe"]["median_mb_s"], 2
    )
    summary["pipe_bytes"] = channel.PIPE_BYTES
    summary["mb"] = args.mb
    if args.json:
        print(json.dumps(summary))
        return
    for name in kinds:
        print(f"{name:14s} {summary[name]['median_mb_s']:8.1f} MB/s  rounds {summary[name]['all']}")
    print(f"ratio {summary['ratio']}x at {args.mb} MiB, pipe {channel.PIPE_BYTES} bytes")


if __name__ == "__main__":
    main()
