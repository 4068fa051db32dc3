"""The worker's serve loop: ``Worker`` imports one candidate and runs it on inputs the
parent sends.

The process around it (``python -m harness.worker``, or a fork of a warm template: its
limits, its run until ``bye``, its exit) is ``lifecycle.py``; a call's tensors (inputs
placed in the layout asked, outputs encoded) are ``calltensors.py``. Protocol (one reply
per request, strictly in order):

- ``load``: install backend hooks, take the identity snapshot, install the guards, say
  ``stage: import`` (an interim frame: the worker's own start-up is over, the candidate's
  import and its time limit begin), import the candidate (guards on). Reply:
  environment, integrity findings, or the import error.
- ``call``: build the inputs (new tensors, or new content written into the previous
  tensors in place without bumping identity), poison the allocator, run the entry point
  ``repeat`` times with guards and the op recorder on, snapshot each output, synchronise,
  wait, compare again, serialise the outputs and the inputs as they are after the call.
- ``bye``: final integrity findings, then exit 0.
- ``bench``, ``bench_sample``, ``identity``, ``ceilings``, ``artifacts``: see
  ``benchworker.py`` (timing on inputs generated here from seeds, samples of timed
  outputs for the parent to re-check, device ceilings, compiled artefacts); ``trace``:
  ``tracing/collect.py``. These handlers are given the worker as a ``WorkerState``
  (``state.py``), and an exception in one is answered as the harness's error.

``OPS`` is the one table of requests (op name -> handler), read-only; an op not in it is
answered with an error and the worker serves on. The serve loop binds the table, ``answer``
and the identity snapshot's check before the first request (before any candidate code
runs): a candidate that rebinds them through ``sys.modules``, or patches a method a handler
reads as it answers (``Worker.integrity``), changes nothing the loop calls, and the loop
adds what the snapshot sees changed to every reply that carries findings, whatever the
handler put there. A request that carries a ``nonce`` gets it back in
its reply (the benchmark's requests do): a frame the candidate writes onto the channel
itself, mid-request, cannot carry it.

A ``load`` may name the problem (``problem: {path}``): it is loaded before the candidate,
for ``generate_input`` only (its module is dropped from ``sys.modules``), so benchmarks
generate their inputs on the device. ``subject: "reference"`` makes a harness-only
worker whose entry point is the problem's reference (timed for speedups);
``subject: "harness"`` one with no entry point (ceilings). ``lifecycle.oneshot`` loads
and calls once inside an NVTX range, for a profiler wrapping this process.

Candidate stdout/stderr go to log files the parent opened; results travel only on the
channel. The worker never sees seeds or reference outputs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import json
import os
import signal
import sys
import time
import traceback
import types
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ..backends import DEFAULT_BACKEND, LaunchCounter, get_backend
from ..problems.library import is_compute, op_stem
from ..problems.library_share import kernel_profiler as _kernel_profiler
from ..problems.library_share import kernel_records
from ..process import channel
from . import benchworker, calltensors, jitclock, timing, torchstate
from .compiled import forbidden_compiled
from .compiled import prepare as prepare_torch_compile
from .freshness import OutputHistory, fresh_slots
from .guards import OpRecorder, install_audit_guard
from .snapshots import IdentitySnapshot, ProcessState, settle, snapshot_harness_modules
from .state import WorkerState

_Tensor = torch.Tensor  # captured before any candidate code runs
_type = type
_isinstance = isinstance
CACHE_KEPT_BYTES = 1 << 28  # the worker's cached, unused GPU memory kept between requests
_DEVICE_FAULTS = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "CUDA error",
)


class Worker:
    def __init__(self, end: channel.BlockingEnd, workdir: str, device: str) -> None:
        self.end = end
        self.workdir = workdir
        self.device = device
        self.entry: Any = None
        self.entry_kind = "function"
        self.models: dict[str, Any] = {}
        self.counter: LaunchCounter | None = None
        self.recorder: OpRecorder | None = None
        self.dispatch_state: torchstate.DispatchState | None = None
        self.ledger: torchstate.OpLedger | None = None
        self.snapshot: IdentitySnapshot | None = None
        self.guard: Any = None
        self.process_state: ProcessState | None = None
        self.forbidden_aten: set[str] = set()
        self.forbidden_functions: set[str] = set()
        self.settle_s = 0.05
        self.backend_name = DEFAULT_BACKEND
        self.last_inputs: Any = None
        self.last_sources: dict[int, torch.Tensor] = {}
        self.last_leaves: list[torch.Tensor] = []
        self.reported_patches: set[str] = set()
        # the identity snapshot's check, bound before the candidate is imported, and what it
        # saw right after candidate code returned (a patch put back later is still named)
        self.patch_check: Callable[[], list[str]] = list
        self.patches_seen: set[str] = set()
        self.dead = False
        self.subject = "candidate"
        self.problem: Any = None
        self.compile_reference = False
        self.library_operands: tuple[int, int] | None = None
        self.bench: timing.Bench | None = None
        self.kept: dict[int, Any] = {}
        self.bench_findings: set[str] = set()
        self.os_threads = 0
        self.history = OutputHistory()  # every output handed out (harness/worker/freshness.py)
        self.torch_compile = False
        self.forbidden_stems: set[str] = set()

    # -- protocol ----------------------------------------------------------------------

    def serve(self) -> int:
        """Answer requests until ``bye`` or the channel closes; 4 when a request left the
        device context unusable (e.g. an illegal access)."""
        # bound now, before any candidate code runs: what the loop calls and checks with
        # stays the harness's whatever candidate code rebinds in these modules later
        reply_to, ops, patches = answer, OPS, _with_patches
        changed = IdentitySnapshot.changed
        recv, send = self.end.recv, self.end.send
        gpu = self.device == "cuda"
        reserved, allocated = torch.cuda.memory_reserved, torch.cuda.memory_allocated
        empty_cache, to_host = torch.cuda.empty_cache, _Tensor.cpu
        while True:
            try:
                frame = recv()
            except channel.ChannelClosed:
                return 0
            header = frame.header
            op = header.get("op")
            reply, out = reply_to(self, header, frame.tensors, ops)
            if self.snapshot is not None:  # also what a call saw that was put back since
                seen = self.patches_seen
                seen.update(changed(self.snapshot))
                reply = patches(reply, op, sorted(seen), self.reported_patches)
            if gpu and not self.dead:
                # what the call freed goes back to the card before the parent hears of it:
                # the parent goes on at once (the next reference, the comparisons), and at
                # an upstream size the worker's cached blocks, given back only after the
                # reply, were most of an 80 GB card when the parent ran out (RESULTS.md)
                out = [to_host(t) for t in out]
                if reserved() - allocated() > CACHE_KEPT_BYTES:
                    with contextlib.suppress(RuntimeError):
                        empty_cache()
            send(reply, out)
            if op == "bye":
                return 0
            if self.dead:
                return 4
            del reply, out, frame  # not held while the parent works (host copies of a size)

    # -- load --------------------------------------------------------------------------

    def load(self, req: dict[str, Any]) -> tuple[dict[str, Any], list[torch.Tensor]]:
        self.backend_name = str(req.get("backend", DEFAULT_BACKEND))
        self.entry_kind = str(req.get("entry_kind", "function"))
        self.settle_s = float(req.get("settle_s", 0.05))
        forbidden = req.get("forbidden", {})
        self.forbidden_aten = set(forbidden.get("aten", []))
        self.forbidden_functions = set(forbidden.get("functions", []))
        backend = get_backend(self.backend_name)
        if self.device == "cuda":
            torch.cuda.init()
            torch.cuda.set_device(0)
        self.subject = str(req.get("subject", "candidate"))
        self.compile_reference = bool(req.get("compile_reference"))
        self.library_operands = _operands(req.get("library_operands"))
        problem_error = self.load_problem(req.get("problem"))
        if self.subject != "candidate" or problem_error:
            return {
                "ok": problem_error is None,
                "op": "load",
                "env": self.environment({}),
                "import_s": 0.0,
                "error": problem_error,
                "integrity": [],
            }, []
        self.counter = backend.prepare_worker(self.device)
        end = self.end
        jitclock.install(
            (lambda frame: end.send({"op": "interim", **frame})) if end is not None else None
        )
        jitclock.wrap_hooks(backend.compile_hooks)
        self.forbidden_stems = {op_stem(op) for op in self.forbidden_aten} | {
            op_stem(f) for f in self.forbidden_functions
        }
        self.torch_compile = bool(req.get("torch_compile"))
        if self.torch_compile:  # before the snapshot and the guards (harness/worker/compiled.py)
            try:
                prepare_torch_compile(backend, self.counter, self.device)
            except Exception:  # dynamo or inductor failing to load: torch.compile's hooks stay off
                self.torch_compile = False
        # filelock (torch and triton import it lazily) adds a process-wide audit hook at
        # import: imported before the guard, it is the harness's, not the candidate's
        try:
            import filelock  # noqa: F401
        except Exception:  # filelock missing or broken: no audit hook of its own to pre-empt
            pass
        for name in req.get("snapshot_imports") or []:
            try:  # another backend the candidate mentions: what it could patch is snapshotted
                importlib.import_module(str(name))
            except ImportError:
                pass
        from ..tracing import install_candidate_api  # trace rung: `import ck_trace`

        install_candidate_api()
        backend.prepare_trace(self.device, os.path.join(self.workdir, str(req["candidate"])))
        counter = self.counter
        self.recorder = OpRecorder(
            launching=lambda: counter is not None and counter.depth > 0,
            host_launcher=backend.host_launcher,
        )
        self.recorder.warm_up()
        # on a CPU, torch's own op records too (``torchstate.OpLedger``): a second book
        self.ledger = torchstate.OpLedger(is_compute) if self.device == "cpu" else None
        if self.ledger is not None:
            self.ledger.warm_up()
        # the switches that turn the recorder off report candidate use once the guard is
        # up (its handle is kept in this closure, not where candidate code could reach it)
        guard_of: list[Any] = []
        torchstate.watch_switches(
            lambda: bool(guard_of) and guard_of[0].is_active(),
            lambda kind, message: guard_of[0].record(kind, message) if guard_of else None,
        )
        env = self.environment(backend.environment())
        extra = [*snapshot_harness_modules(), "__main__"]
        self.snapshot = IdentitySnapshot.take(extra_modules=[m for m in extra if m in sys.modules])
        self.patch_check = functools.partial(IdentitySnapshot.changed, self.snapshot)
        self.dispatch_state = torchstate.DispatchState.take()
        self.guard = install_audit_guard(self.workdir)
        guard_of.append(self.guard)
        self.process_state = ProcessState.take(self.guard.owned_threads)
        self.os_threads = _os_threads()
        sys.dont_write_bytecode = True
        sys.path.insert(0, self.workdir)

        path = os.path.join(self.workdir, str(req["candidate"]))
        module_name = str(req.get("module", "candidate"))
        if self.end is not None:  # the parent's clock for the candidate's import starts now
            self.end.send({"op": "load", "stage": "import"})
        t0 = time.perf_counter()
        error = None
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            self.guard.activate()
            try:
                spec.loader.exec_module(module)
            finally:
                self.guard.deactivate()
                self.patches_seen.update(self.patch_check())
            entry_name = str(req.get("entry", "custom_kernel"))
            self.entry = getattr(module, entry_name, None)
            if self.entry is None:
                raise AttributeError(f"the candidate defines no {entry_name}")
        except BaseException as exc:  # SystemExit at import is a failure, not an exit
            if self.guard is not None:
                self.guard.deactivate()
            error = self.describe_error(exc, "import", backend)
        reply = {
            "ok": error is None,
            "op": "load",
            "env": env,
            "import_s": time.perf_counter() - t0,
            "error": error,
            "integrity": self.integrity(),
        }
        return reply, []

    def load_problem(self, spec: Any) -> dict[str, Any] | None:
        """Load the problem (for ``generate_input``; the reference only in a reference
        worker) before any candidate code, then drop its modules from ``sys.modules``."""
        if not spec:
            return None
        from ..problems.problem import load_problem

        before = set(sys.modules)
        try:
            self.problem = load_problem(str(spec["path"]))
        except Exception as exc:
            return {
                "phase": "problem",
                "type": type(exc).__name__,
                "message": f"loading the problem in the worker failed: {exc}"[:4000],
                "frames": [],
                "compile_error": False,
                "exit": False,
            }
        if self.subject == "candidate":
            for name in set(sys.modules) - before:
                if name.startswith("_ctxkernel_"):
                    sys.modules.pop(name, None)
        return None

    def environment(self, backend_env: dict[str, object]) -> dict[str, object]:
        env: dict[str, object] = {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "device": self.device,
            "pid": os.getpid(),
        }
        env.update(backend_env)
        if self.device == "cuda":
            props = torch.cuda.get_device_properties(0)
            env["gpu"] = props.name
            env["capability"] = f"{props.major}.{props.minor}"
            env["cuda"] = torch.version.cuda
            env["driver"] = _driver_version()
        return env

    # -- call --------------------------------------------------------------------------

    def get_entry(self, init: dict[str, Any] | None, tensors: list[torch.Tensor]) -> Any:
        if self.entry_kind != "model":
            return self.entry
        init = init or {"seed": 0, "args": {"tuple": []}}
        key = json.dumps(init, sort_keys=True)
        model = self.models.get(key)
        if model is None:
            args = channel.unpack_tree(init["args"], [t.to(self.device) for t in tensors])
            torch.manual_seed(int(init.get("seed", 0)))
            assert self.guard is not None
            self.guard.activate()
            try:
                model = self.entry(*args)
                model = model.to(self.device)
            finally:
                self.guard.deactivate()
            self.models = {key: model}
        return model

    def build_inputs(self, req: dict[str, Any], tensors: list[torch.Tensor]) -> Any:
        # each input leaf's source: the tensor the channel delivered, which the call never
        # sees (inputs are placed as copies), for the reply's check of what the call wrote
        metas = channel.tree_leaves(req["inputs"])
        self.last_sources = {}
        if req.get("in_place") and self.last_inputs is not None:
            calltensors.rewrite_in_place(req["inputs"], self.last_leaves, tensors)
            inputs = self.last_inputs
        else:
            inputs = calltensors.place_inputs(req["inputs"], tensors, self.device)
            self.last_inputs = inputs
            self.last_leaves = [t for t in calltensors.leaves(inputs) if _isinstance(t, _Tensor)]
        if len(metas) == len(self.last_leaves):
            self.last_sources = {
                id(leaf): tensors[int(meta["t"])]
                for leaf, meta in zip(self.last_leaves, metas, strict=True)
            }
        return inputs

    def input_unchanged(self, leaf: torch.Tensor) -> bool:
        """Whether an input leaf still holds the bytes it was sent (then the reply leaves it
        out: an upstream-sized input is not sent back after every call)."""
        source = self.last_sources.get(id(leaf))
        return source is not None and calltensors.unchanged_since_sent(leaf, source)

    def call(
        self, req: dict[str, Any], tensors: list[torch.Tensor]
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        backend = get_backend(self.backend_name)
        out_tensors: list[torch.Tensor] = []
        calls: list[dict[str, Any]] = []
        error = None
        try:
            inputs = self.build_inputs(req, tensors)
            n_inputs = len(channel.tree_leaves(req["inputs"]))
            entry = self.get_entry(req.get("init"), tensors[n_inputs:])
        except BaseException as exc:
            return {
                "ok": False,
                "op": "call",
                "error": self.describe_error(exc, "init", backend),
                "calls": [],
                "integrity": self.integrity(),
            }, []
        input_ranges = [calltensors.storage_range(t) for t in self.last_leaves]
        repeat = max(1, int(req.get("repeat", 1)))
        # burst: back to back like a timing loop (no poison, no settle in between); each
        # output is snapshotted as it returns and compared again once the burst is over
        burst = bool(req.get("burst")) and repeat > 1
        slots = {int(i) for i in req.get("slots") or []}
        first_call = self.history.calls + 1
        pending: list[tuple[dict[str, Any], Any, list[torch.Tensor], list[torch.Tensor]]] = []
        assert self.recorder is not None and self.guard is not None
        profile = bool(req.get("kernels")) and self.device == "cuda"
        profiler: Any = None
        for index in range(repeat):
            if not burst or index == 0:
                calltensors.poison([int(s) for s in req.get("poison", [])], self.device)
            args = inputs
            if slots:  # the data's output tensors: new and poisoned for every call
                args, made = fresh_slots(inputs, slots)
                call_no = self.history.next_call()
                for t in made:
                    self.history.add(call_no, t, None)
            else:
                call_no = self.history.next_call()
            if self.counter is not None:
                self.counter.reset()
            self.recorder.reset()
            if profile:  # only the candidate's own call: the harness's fills stay out
                torch.cuda.synchronize()
                profiler = _kernel_profiler()
                if profiler is not None:
                    profiler.__enter__()
            t0 = time.perf_counter()
            result: Any = None
            try:
                with torch.no_grad(), self.recorder, self.ledger or contextlib.nullcontext():
                    self.guard.activate()
                    try:
                        result = entry(*args) if self.entry_kind == "model" else entry(args)
                    finally:
                        self.guard.deactivate()
                        self.patches_seen.update(self.patch_check())
            except BaseException as exc:
                error = self.describe_error(exc, "call", backend)
                if self.device == "cuda" and any(w in str(exc) for w in _DEVICE_FAULTS):
                    self.dead = True
                break
            finally:
                if profiler is not None:
                    try:
                        torch.cuda.synchronize()
                    finally:
                        profiler.__exit__(None, None, None)
            elapsed = time.perf_counter() - t0
            leaves = [leaf for leaf in calltensors.leaves(result) if _type(leaf) is _Tensor]
            before = [leaf.detach().clone() for leaf in leaves]
            record = self.call_record(elapsed, call_no)
            pending.append((record, result, leaves, before))
            if not burst:
                error = self.settle_safely(pending, out_tensors, input_ranges, calls, False)
                if error is not None:
                    break
            del result, leaves, before, args
        if pending and error is None:
            error = self.settle_safely(pending, out_tensors, input_ranges, calls, burst)
        if calls and not self.dead:
            calls[-1]["earlier_changed"] = self.history.changed(first_call)
            calls[-1]["input_elements"] = sum(
                t.numel() for i, t in enumerate(self.last_leaves) if i not in slots
            )
            if profiler is not None:
                calls[-1]["kernels"] = kernel_records(profiler)
                calls[-1]["own_kernels"] = sorted(self.counter.names) if self.counter else []
                calls[-1]["generated_kernels"] = (
                    sorted(self.counter.generated) if self.counter else []
                )
        after_tree = None
        if not self.dead:
            after_tree = channel.pack_tree(
                self.last_inputs,
                out_tensors,
                describe=calltensors.describe_tensor,
                unchanged=self.input_unchanged,
            )
        # the delivered copies are not held past the reply (an upstream-sized input's
        # second copy would sit in the worker between calls)
        self.last_sources = {}
        reply = {
            "ok": error is None,
            "op": "call",
            "seq": req.get("seq"),
            "calls": calls,
            "error": error,
            "inputs_after": after_tree,
            "integrity": self.integrity(),
        }
        return reply, out_tensors

    def async_pending(self) -> bool:
        """Whether anything could still change an output after the call returned: an
        armed interval timer, a changed signal handler, a thread more than at load. When
        nothing is, the settle wait is skipped (the device was synchronised already)."""
        for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
            if signal.getitimer(timer) != (0.0, 0.0):
                return True
        state = self.process_state
        if state is None or _os_threads() > self.os_threads:
            return True
        return bool(state.differences())

    def call_record(self, elapsed: float, call_no: int) -> dict[str, Any]:
        """What the recorder and the launch counter saw in one call."""
        assert self.recorder is not None
        recorder = self.recorder
        seconds = {op: s for op, s in recorder.seconds.items() if is_compute(op)}
        record: dict[str, Any] = {
            "call_no": call_no,
            "elapsed_s": elapsed,
            "launches": None if self.counter is None else self.counter.count,
            "forbidden": sorted(
                {op for op in recorder.aten if op in self.forbidden_aten}
                | {"fn:" + f for f in recorder.functions if f in self.forbidden_functions}
            ),
            "aten": dict(recorder.aten.most_common(24)),
            "aten_s": dict(sorted(seconds.items(), key=lambda kv: -kv[1])[:16]),
            "aten_elements": {op: n for op, n in recorder.elements.items() if is_compute(op)},
            "host_elements": dict(recorder.host),
        }
        ledger = self.ledger
        if ledger is not None:  # what torch's own records saw that the modes did not
            if ledger.stopped and self.guard is not None:
                self.guard.record(
                    "recorder_off", "candidate code stopped torch's op records during a call"
                )
            given = record["aten_elements"]
            for op, n in ledger.elements.items():
                given[op] = max(int(given.get(op, 0)), n)
            hidden = {op for op in ledger.calls if op in self.forbidden_aten}
            record["forbidden"] = sorted(set(record["forbidden"]) | hidden)
        if self.torch_compile:
            record["compiled_forbidden"] = forbidden_compiled(self.forbidden_stems)
        return record

    def settle_safely(self, *args: Any) -> dict[str, Any] | None:
        """``settle_and_encode``; a device error surfacing at the synchronisation (an
        illegal memory access, a trap in the kernel) is the candidate's, and ends the worker."""
        try:
            self.settle_and_encode(*args)
        except RuntimeError as exc:
            if self.device != "cuda":
                raise
            self.dead = True
            return {
                "phase": "sync",
                "type": type(exc).__name__,
                "message": str(exc).strip()[:4000],
                "frames": [],
                "compile_error": False,
                "exit": False,
            }
        return None

    def settle_and_encode(
        self,
        pending: list[tuple[dict[str, Any], Any, list[torch.Tensor], list[torch.Tensor]]],
        out_tensors: list[torch.Tensor],
        input_ranges: list[tuple[int, int]],
        calls: list[dict[str, Any]],
        snapshot: bool,
    ) -> None:
        """Synchronise, wait, compare each output with its snapshot at return, encode it.

        ``snapshot``: send the state at return (a timing loop reads that) instead of the
        state after the wait."""
        if self.device == "cuda":
            torch.cuda.synchronize()
        waited = self.settle_s if self.async_pending() else 0.0
        settle(waited)
        if self.device == "cuda":
            torch.cuda.synchronize()
        for record, result, leaves, before in pending:
            record["settle_s"] = waited  # the wait for late changes (0: nothing could make one)
            record["changed_after_return"] = [
                i
                for i, (b, leaf) in enumerate(zip(before, leaves, strict=True))
                if not calltensors.same_bytes(b, leaf)
            ]
            call_no = int(record.get("call_no") or 0)
            shared = {id(leaf): self.history.shares_earlier(leaf, call_no) for leaf in leaves}
            for leaf, b in zip(leaves, before, strict=True):
                self.history.add(call_no, leaf, b)
            if snapshot:
                swap = {id(leaf): b for leaf, b in zip(leaves, before, strict=True)}
                shared.update(
                    {id(b): shared[id(leaf)] for leaf, b in zip(leaves, before, strict=True)}
                )
                result = calltensors.replace_leaves(result, swap)
            record["output"] = calltensors.encode_output(result, out_tensors, input_ranges, shared)
            calls.append(record)
        pending.clear()

    # -- findings ----------------------------------------------------------------------

    def integrity(self) -> list[dict[str, str]]:
        # a change the identity snapshot sees is added by the serve loop (``_with_patches``)
        found: list[dict[str, str]] = []
        if self.guard is not None:
            found.extend(v.as_dict() for v in self.guard.take_violations())
        if self.process_state is not None:
            for message in self.process_state.differences():
                found.append({"kind": "background", "message": message})
            self.process_state.restore()
        if self.dispatch_state is not None:
            for message in self.dispatch_state.differences():
                found.append({"kind": "torch_dispatch", "message": message})
        return found

    def describe_error(self, exc: BaseException, phase: str, backend: Any) -> dict[str, Any]:
        chain: list[BaseException] = []
        current: BaseException | None = exc
        while current is not None and current not in chain and len(chain) < 5:
            chain.append(current)
            current = current.__cause__ or current.__context__
        frames = []
        for item in chain:  # outermost first, the root cause (most relevant) last
            for f in traceback.extract_tb(item.__traceback__)[-40:]:
                frames.append(
                    {
                        "file": f.filename,
                        "line": f.lineno,
                        "name": f.name,
                        "code": (f.line or "").strip(),
                    }
                )
        message = "".join(traceback.format_exception_only(_type(exc), exc)).strip()
        root = chain[-1]
        root_message = "".join(traceback.format_exception_only(_type(root), root)).strip()
        return {
            "phase": phase,
            "type": _type(exc).__name__,
            "message": message[:4000],
            "root": root_message[:4000] if root is not exc else None,
            "frames": frames[-60:],
            "compile_error": bool(backend.is_compile_error(exc)),
            "exit": _isinstance(exc, (SystemExit, KeyboardInterrupt)),
        }


Reply = tuple[dict[str, Any], list[torch.Tensor]]
Handler = Callable[[Worker, dict[str, Any], list[torch.Tensor]], Reply]


def _caught(
    op: str, handler: Callable[[WorkerState, dict[str, Any], list[torch.Tensor]], Reply]
) -> Handler:
    """A request beside ``load`` and ``call``: an exception in it is the harness's error,
    answered, and the worker serves on."""

    def run(worker: Worker, req: dict[str, Any], tensors: list[torch.Tensor]) -> Reply:
        try:
            return handler(worker, req, tensors)
        except Exception:
            return {"ok": False, "op": op, "harness_error": traceback.format_exc()[-4000:]}, []

    return run


def _trace(worker: WorkerState, req: dict[str, Any], tensors: list[torch.Tensor]) -> Reply:
    from ..tracing.collect import handle_trace  # only a trace worker pays for it

    return handle_trace(worker, req, tensors)


def _bye(worker: Worker, req: dict[str, Any], tensors: list[torch.Tensor]) -> Reply:
    return {"ok": True, "op": "bye", "integrity": worker.integrity()}, []


# Every request the worker answers, by ``op``; any other op is answered with an error.
# Read-only: candidate code reaches this module through ``sys.modules``.
OPS: Mapping[str, Handler] = types.MappingProxyType(
    {
        "load": lambda worker, req, tensors: worker.load(req),
        "call": Worker.call,
        "bench": _caught("bench", benchworker.handle_bench),
        "bench_sample": _caught("bench_sample", benchworker.handle_sample),
        "identity": _caught(
            "identity", lambda w, req, _: (benchworker.handle_identity(w, req), [])
        ),
        "ceilings": _caught(
            "ceilings", lambda w, req, _: (benchworker.handle_ceilings(w, req), [])
        ),
        "artifacts": _caught("artifacts", lambda w, req, _: benchworker.handle_artifacts(w, req)),
        "trace": _caught("trace", _trace),  # trace rung
        "bye": _bye,
    }
)

# the requests during which candidate code runs (or that end the worker): their replies
# carry integrity findings
_FINDING_OPS = frozenset({"load", "call", "bench", "trace", "bye"})


def _with_patches(
    reply: dict[str, Any],
    op: Any,
    changed: list[str],
    reported: set[str],
    finding_ops: frozenset[str] = _FINDING_OPS,
) -> dict[str, Any]:
    """``reply`` with each change the identity snapshot saw that no reply has named yet
    (``reported``: also what the harness changed itself, Proton's hooks)."""
    fresh = [name for name in changed if name not in reported]
    if not fresh or (op not in finding_ops and "integrity" not in reply):
        return reply
    given = reply.get("integrity")
    found = list(given) if isinstance(given, list) else []
    for name in fresh:
        reported.add(name)
        found.append({"kind": "patched", "message": f"candidate code replaced {name}"})
    return {**reply, "integrity": found}


def answer(
    worker: Worker,
    header: dict[str, Any],
    tensors: list[torch.Tensor],
    ops: Mapping[str, Handler] = OPS,
) -> Reply:
    """The reply to one request as the serve loop sends it: its handler's (an op not in
    ``ops`` is answered with an error), with the request's nonce when it had one -- the
    parent's proof that this frame answers that request. The candidate runs while a request
    is served but is never handed the request, so a frame it writes onto the channel itself
    cannot carry the nonce."""
    op = header.get("op")
    handler = ops.get(op) if isinstance(op, str) else None
    if handler is None:
        reply: dict[str, Any] = {
            "ok": False,
            "op": str(op),
            "harness_error": f"unknown request {op!r}",
        }
        out: list[torch.Tensor] = []
    else:
        reply, out = handler(worker, header, tensors)
    nonce = header.get("nonce")
    return (reply if nonce is None else {**reply, "nonce": nonce}), out


def _os_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1 << 30  # unknown: always settle


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # pynvml missing or no driver: /proc's version file is read next
        pass
    try:
        with open("/proc/driver/nvidia/version") as fh:
            first = fh.readline()
        for token in first.split():
            if token.count(".") >= 1 and token.replace(".", "").isdigit():
                return token
    except OSError:
        pass
    return None


def _operands(value: Any) -> tuple[int, int] | None:
    """A load request's ``library_operands``: two leaf indices, or None."""
    if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
        return (value[0], value[1])
    return None
