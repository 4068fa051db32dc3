"""The worker process around a ``Worker`` (``serve.py``): how it starts, serves and ends.

Started as ``python -m harness.worker --fd-in R --fd-out W --workdir DIR --device D`` by a
runner (``main``), in its own process group, with its own temp dir as cwd and a scrubbed
environment, or forked from a warm template (``zygote.py``); both serve the parent through
``run``: no core dumps, a memory cap on a CPU worker, the CUDA context made before the
first request and bind and listen refused once it is up (``start_cuda``), then the serve
loop until ``bye`` or EOF. ``exit_now`` ends the process without the interpreter's
teardown. ``--self-walls`` landlocks the process first (under a
profiler); ``--oneshot REQUEST.json`` loads and calls once inside an NVTX range, for a
profiler wrapping this process (``oneshot``).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import resource
import sys
import traceback
from typing import Any

import torch

from ..process import channel, seccomp
from . import benchworker
from .serve import Worker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.worker")
    parser.add_argument("--fd-in", type=int, default=-1)
    parser.add_argument("--fd-out", type=int, default=-1)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--mem-cap", type=int, default=0, help="RLIMIT_AS in bytes (CPU only)")
    parser.add_argument("--oneshot", default=None, help="REQUEST.json: load, call once, exit")
    parser.add_argument(
        "--self-walls", default=None, help="JSON: landlock this process first (under a profiler)"
    )
    args = parser.parse_args(argv)
    if args.self_walls:
        from ..process import sandbox

        sandbox.apply_self_walls(args.self_walls)  # raises: no worker without its walls
    if args.oneshot:
        return oneshot(
            args.oneshot, os.path.realpath(args.workdir), args.device, bool(args.self_walls)
        )
    exit_now(
        run(args.fd_in, args.fd_out, os.path.realpath(args.workdir), args.device, args.mem_cap)
    )
    return 0  # not reached


def run(fd_in: int, fd_out: int, workdir: str, device: str, mem_cap: int) -> int:
    """Serve the parent on the channel until ``bye`` or EOF; the exit status. A spawned
    worker (``main``) and one forked from a warm template (``zygote.py``) both run this."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if mem_cap and device == "cpu":
        resource.setrlimit(resource.RLIMIT_AS, (mem_cap, mem_cap))
    faulthandler.enable(file=sys.stderr, all_threads=False)
    if device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # CPU checks run small grids; spare the other cores
    # the context now, before the first request: a worker opened ahead of its use (the
    # benchmark's, while the ladder's runs) has it ready when asked
    start_cuda(device)
    end = channel.BlockingEnd(fd_in, fd_out)
    worker = Worker(end, workdir, device)
    try:
        return worker.serve()
    except channel.ChannelClosed:
        return 0
    except BaseException:
        detail = traceback.format_exc()
        sys.stderr.write(detail)
        try:
            end.send({"ok": False, "harness_error": detail[-4000:]})
        except OSError:
            pass
        return 3


def start_cuda(device: str) -> None:
    """The CUDA context (on a GPU), then bind and listen refused: the CUDA driver serves a
    socket of its own while it starts, so the sandbox's filter left the two calls to this
    line (``serving_later``); the candidate, imported after it, may serve none. A CUDA
    failure is written out and reported by ``load``."""
    if device == "cuda":
        try:
            torch.cuda.init()
            torch.cuda.set_device(0)
        except Exception as exc:  # load() reports it to the parent
            sys.stderr.write(f"CUDA initialisation failed: {exc}\n")
    seccomp.refuse_serving()


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown (torch's takes most of a second):
    the parent has every reply it needs; only the logs are flushed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # best effort: a closed stream must not stop the exit
            pass
    os._exit(code)


def oneshot(request_path: str, workdir: str, device: str, profiled: bool = False) -> int:
    """For a profiler wrapping this process (``ncu``): load, warm up outside the NVTX
    range, then call inside ``ctxkernel_candidate`` -- so only the candidate's kernels of
    those calls are profiled. Writes ``REQUEST.json.result``; never times anything."""
    with open(request_path) as fh:
        req = json.load(fh)
    result: dict[str, Any] = {"ok": False}
    if not profiled:  # a profiler's filter leaves sockets alone: its parts talk over them
        start_cuda(device)
    worker = Worker(None, workdir, device)  # type: ignore[arg-type]
    try:
        reply, _ = worker.load(req["load"])
        if not reply.get("ok"):
            result["error"] = reply.get("error")
        else:
            problem = worker.problem
            shape = dict(req.get("shape") or {})
            inputs = problem.generate_input(int(req.get("seed", 1)), shape, device)
            entry = worker.get_entry(None, [])
            call = benchworker._guarded_call(worker, entry)
            gpu = device == "cuda"
            for _ in range(int(req.get("warmup", 2))):
                call(inputs)
            if gpu:
                torch.cuda.synchronize()
            for _ in range(int(req.get("calls", 1))):
                if gpu:
                    torch.cuda.nvtx.range_push(str(req.get("nvtx", "ctxkernel_candidate")))
                call(inputs)
                if gpu:
                    torch.cuda.synchronize()
                    torch.cuda.nvtx.range_pop()
            result = {"ok": True, "integrity": worker.integrity()}
    except BaseException:
        result["error"] = {"message": traceback.format_exc()[-4000:]}
    with open(request_path + ".result", "w") as fh:
        json.dump(result, fh, default=str)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
