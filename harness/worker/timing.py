"""Timing: how the worker times one callable on a GPU, with every number an expert would check.

Imported by the worker before the candidate, so the timers, events and synchronise it
captured below are the originals and a monkeypatch of them shows in the identity
snapshot. The protocol (``bench``), per timed call:

1. fresh inputs from a seed (``make_inputs(i)``), copied into persistent input sets used
   in turn (stable addresses like ``do_bench``; several sets when one fits in L2), all
   outside the timed window;
2. L2 flush (``zero_`` of a buffer >= 2x L2, as ``triton.testing.do_bench``; skipped with
   ``l2="hot"``) and a spin kernel sized to the call's measured host time (guards,
   Python, launch), queued *before* the start event, so the GPU is still busy when the
   launch arrives and the events time the kernel, not the launch path;
3. ``start`` event, the call, and a query of ``start``: reached already when the call
   returned, the GPU may have waited for the launch, so the call is not counted and the
   lead is doubled (up to ``MAX_LEAD_S``; at the cap the calls count, and say so);
   ``end`` event on the current stream, a full device
   synchronise (all streams), then ``end_dev``: ``end_dev - end`` is work that escaped
   the timed stream (side streams), ``host - event`` the wall-clock cross-check; both are
   compared with the same sequence around a harness kernel (the calibration; the host
   time less any lead added after it, by the witness or the doubling);
4. a keyed bottom-K sample of the outputs is kept (cloned, after the synchronise) for the
   parent to verify after the fact.

Before the timed loop a few calls are made under the GPU's kernel records (``witness.py``):
the second timer, and a check of the lead (a launch the GPU waited for lengthens it).
Stop when the median's 95% CI is within ``rel_ci`` or the wall budget is spent
(``benchstats.StopRule``; the budget scales with the first timed calls' wall time), never
before ``MIN_TIMED_SAMPLES`` counted calls (the report's ``floor`` says when the budget ran
out first). The persisting-L2 limit is set to 0 before timing and read
back after. NVML (SM clock, power, throttle reasons) is sampled with every measurement.
``mode="graph"`` times replays of a CUDA graph of the call instead.
"""

from __future__ import annotations

import ctypes
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..perf.benchstats import MIN_TIMED_SAMPLES, StopRule, quantile
from . import witness
from .calltensors import leaves

# captured before any candidate code runs
_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
_elapsed_time = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_query = torch.cuda.Event.query
_event_synchronize = torch.cuda.Event.synchronize
_Tensor = torch.Tensor
_isinstance = isinstance
_CUDAGraph = getattr(torch.cuda, "CUDAGraph", None)

FLUSH_MIN_BYTES = 256 << 20  # triton.testing.do_bench's cache buffer
SPIN_S = 50e-6  # hot-L2 mode: GPU busy ahead of the launch
MAX_LEAD_S = witness.MAX_LEAD_S  # the longest lead, whoever lengthens it (witness or run)
CUDA_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
KEEP_MAX = 32

THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}


def bench_seed(key: int, index: int) -> int:
    """Seed of timed call ``index``; the parent derives the same one to re-check it."""
    digest = hashlib.sha256(f"bench:{key}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def keep_priority(key: int, index: int) -> int:
    """Bottom-K sampling priority: the kept calls are unpredictable without the key."""
    digest = hashlib.sha256(f"keep:{key}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def tensor_bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in leaves(value) if _isinstance(t, _Tensor))


# -- device state ---------------------------------------------------------------------------


class Nvml:
    """SM clock, power and throttle reasons of the GPU torch uses; inert without pynvml."""

    def __init__(self) -> None:
        self.handle: Any = None
        self.nvml: Any = None
        self.error: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = self._handle(pynvml)
        except Exception as exc:  # pynvml missing, or no driver
            self.error = f"{type(exc).__name__}: {exc}"[:200]

    @staticmethod
    def _handle(pynvml: Any) -> Any:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            for candidate in (text, "GPU-" + text):
                try:
                    return pynvml.nvmlDeviceGetHandleByUUID(candidate)
                except Exception:  # NVML's errors vary by driver: the next form, then the index
                    continue
        return pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())

    def sample(self) -> dict[str, Any]:
        if self.handle is None:
            return {}
        n, h = self.nvml, self.handle
        out: dict[str, Any] = {}
        for key, fn in (
            ("sm_clock_mhz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            ("mem_clock_mhz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            ("power_w", lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0),
            ("temp_c", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
        ):
            try:
                out[key] = fn()
            except Exception:  # a board that does not report this: left out
                continue
        mask = None
        for name in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            getter = getattr(n, name, None)
            if getter is None:
                continue
            try:
                mask = int(getter(h))
                break
            except Exception:  # a driver without this query: the older name next
                continue
        if mask is not None:
            out["throttle_mask"] = mask
            out["throttle"] = throttle_names(mask)
        return out

    def static(self) -> dict[str, Any]:
        """Max clocks and the power limit: what the ceilings cache is keyed on."""
        if self.handle is None:
            return {}
        n, h = self.nvml, self.handle
        out: dict[str, Any] = {}
        for key, fn in (
            ("max_sm_clock_mhz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
            ("max_mem_clock_mhz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)),
            ("power_limit_w", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
        ):
            try:
                out[key] = fn()
            except Exception:  # a board that does not report this: left out
                continue
        return out


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


class ClockLog:
    """NVML samples taken with the measurements: min/median/max SM clock, max power."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.samples: list[dict[str, Any]] = []

    def take(self) -> None:
        sample = self.nvml.sample()
        if sample:
            self.samples.append(sample)

    def summary(self) -> dict[str, Any]:
        if not self.samples:
            return {"nvml": self.nvml.error or "unavailable"}
        clocks = sorted(s["sm_clock_mhz"] for s in self.samples if "sm_clock_mhz" in s)
        power = [s["power_w"] for s in self.samples if "power_w" in s]
        reasons: set[str] = set()
        for s in self.samples:
            reasons.update(r for r in s.get("throttle", []) if r != "gpu_idle")
        out: dict[str, Any] = {"samples": len(self.samples)}
        if clocks:
            out["sm_clock_mhz"] = {
                "min": clocks[0],
                "median": quantile(clocks, 0.5),
                "max": clocks[-1],
            }
        if power:
            out["power_w_max"] = max(power)
        temps = [s["temp_c"] for s in self.samples if "temp_c" in s]
        if temps:
            out["temp_c_max"] = max(temps)
        out["throttle"] = sorted(reasons)
        return out


def _cudart() -> Any:
    """The CUDA runtime library torch loaded (found in /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1] if line.strip() else ""
                if "libcudart.so" in path:
                    return ctypes.CDLL(path)
    except OSError:
        pass
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def persisting_l2_limit(set_zero: bool) -> dict[str, Any]:
    """Read (and optionally zero) cudaLimitPersistingL2CacheSize; reset persisting lines."""
    lib = _cudart()
    if lib is None:
        return {"persisting_l2": "unknown (libcudart not found)"}
    out: dict[str, Any] = {}
    try:
        if set_zero:
            rc = lib.cudaDeviceSetLimit(ctypes.c_int(CUDA_LIMIT_PERSISTING_L2), ctypes.c_size_t(0))
            out["set_rc"] = int(rc)
            reset = getattr(lib, "cudaCtxResetPersistingL2Cache", None)
            if reset is not None:
                out["reset_rc"] = int(reset())
        value = ctypes.c_size_t(0)
        rc = lib.cudaDeviceGetLimit(ctypes.byref(value), ctypes.c_int(CUDA_LIMIT_PERSISTING_L2))
        out["persisting_l2_bytes"] = int(value.value) if rc == 0 else None
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def l2_bytes() -> int:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or 0) or (50 << 20)


# -- the protocol ---------------------------------------------------------------------------


@dataclass
class BenchConfig:
    rule: StopRule = field(default_factory=StopRule)
    l2: str = "flush"  # "flush" | "hot"
    mode: str = "events"  # "events" | "graph"
    warmup_s: float = 0.25
    warmup_min: int = 5
    keep_key: int = 0
    keep_bytes: int = 2 << 30
    calibrate: int = 12
    witness: int = witness.CALLS  # calls timed by the kernel records first (0: no witness)

    @classmethod
    def from_header(cls, header: dict[str, Any]) -> BenchConfig:
        return cls(
            rule=StopRule.from_dict(header.get("rule") or {}),
            l2=str(header.get("l2", "flush")),
            mode=str(header.get("mode", "events")),
            warmup_s=float(header.get("warmup_s", 0.25)),
            warmup_min=int(header.get("warmup_min", 5)),
            keep_key=int(header.get("keep_key", 0)),
            keep_bytes=int(header.get("keep_bytes", 2 << 30)),
            calibrate=int(header.get("calibrate", 12)),
            witness=int(header.get("witness", witness.CALLS)),
        )


class _Kept:
    """Bottom-K sample of (priority, index, cloned output) under a byte budget."""

    def __init__(self, key: int, budget: int) -> None:
        self.key = key
        self.budget = budget
        self.items: dict[int, tuple[int, Any]] = {}
        self.capacity: int | None = None

    def offer(self, index: int, output: Any) -> None:
        if self.capacity is None:
            size = max(1, tensor_bytes(output))
            self.capacity = max(1, min(KEEP_MAX, self.budget // size))
        priority = keep_priority(self.key, index)
        if len(self.items) >= self.capacity:
            worst = max(self.items, key=lambda i: self.items[i][0])
            if self.items[worst][0] <= priority:
                return
            del self.items[worst]
        self.items[index] = (priority, _clone_tree(output))

    def outputs(self) -> dict[int, Any]:
        return {i: v for i, (_, v) in self.items.items()}


def slotted(make_inputs: Callable[[int], Any], sets: int) -> Callable[[int], Any]:
    """Fresh content every call, written into ``sets`` persistent input sets used in turn
    (stable addresses, as ``do_bench`` has; several sets when one fits in L2): the copy
    happens outside the timed window; a set whose structure changes is replaced."""
    slots: list[Any] = []
    turn = [0]

    def make(index: int) -> Any:
        fresh = make_inputs(index)
        if len(slots) < sets:
            slots.append(fresh)
            return fresh
        slot = turn[0] % sets
        turn[0] += 1
        target = slots[slot]
        dst = [t for t in leaves(target) if _isinstance(t, _Tensor)]
        src = [t for t in leaves(fresh) if _isinstance(t, _Tensor)]
        same = len(dst) == len(src) and all(
            d.shape == s.shape and d.dtype == s.dtype and d.device == s.device
            for d, s in zip(dst, src, strict=True)
        )
        if not same:
            slots[slot] = fresh
            return fresh
        with torch.no_grad():
            for d, s in zip(dst, src, strict=True):
                d.copy_(s)
        return target

    return make


def _clone_tree(value: Any) -> Any:
    if _isinstance(value, _Tensor):
        return value.detach().clone()
    if _isinstance(value, tuple):
        return tuple(_clone_tree(v) for v in value)
    if _isinstance(value, list):
        return [_clone_tree(v) for v in value]
    if _isinstance(value, dict):
        return {k: _clone_tree(v) for k, v in value.items()}
    return value


class Bench:
    """One timing session on the current device (one per worker; the flush buffer lives on).
    ``device``, ``l2`` and ``flush_bytes`` exist for tests on a simulated clock."""

    def __init__(
        self, device: str = "cuda", l2: int | None = None, flush_bytes: int | None = None
    ) -> None:
        self.l2 = l2 if l2 is not None else l2_bytes()
        size = flush_bytes if flush_bytes is not None else max(FLUSH_MIN_BYTES, 2 * self.l2)
        self.flush_buffer = torch.empty(size // 4, dtype=torch.int32, device=device)
        self.scratch = torch.zeros(1024, dtype=torch.float32, device=device)
        self.nvml = Nvml()
        self.sm_hz = 1.98e9
        self.flush_s = 0.0
        self.lead_s = SPIN_S
        self.device = device

    def set_lead(self, l2: str, host_call_s: float) -> None:
        """How long the GPU must stay busy ahead of a call so the launch is queued before
        the start event is reached: 1.5x the call's host time (guards, Python, launch)
        plus 30 us, at most 2 ms; ``run`` doubles it when a call's launch was not covered
        (``_covered``). The flush is not counted as lead: on an H200 (bench/timing_probe.py)
        the flush alone left the GPU waiting 6-150 us for the vector adds' launches, and
        even 1.5x the host call was short in 2 passes of 18 (a 44 us wait, events 6 %
        above the kernel records), while 0.5 ms of spin was covered in every pass."""
        if self.device != "cuda":
            self.lead_s = 0.0
            return
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _record(start)
        self.flush_buffer.zero_()
        _record(end)
        _synchronize()
        self.flush_s = _elapsed_time(start, end) * 1e-3
        clock = self.nvml.sample().get("sm_clock_mhz")
        if clock:
            self.sm_hz = float(clock) * 1e6
        self.lead_s = min(2e-3, 1.5 * host_call_s + 30e-6)
        if l2 != "flush":
            self.lead_s = max(self.lead_s, SPIN_S)

    def _busy_ahead(self, l2: str) -> None:
        if l2 == "flush":
            self.flush_buffer.zero_()
        if self.lead_s > 0 and self.device == "cuda":
            torch.cuda._sleep(int(self.lead_s * self.sm_hz))

    def _harness_kernel(self, _: Any) -> Any:
        return self.scratch.add_(1.0)

    def _covered(self, start: Any) -> bool:
        """Whether the GPU had not reached ``start`` yet when the call returned: then every
        launch of the call was queued behind the lead, and the events time the kernels."""
        return self.device != "cuda" or not _query(start)

    def _one(
        self, fn: Callable[[Any], Any], inputs: Any, l2: str
    ) -> tuple[float, float, float, Any, bool]:
        """(event ms, device-inclusive ms, host ms, output, launch covered) of one timed
        call."""
        start, end, end_dev = (
            _Event(enable_timing=True),
            _Event(enable_timing=True),
            _Event(enable_timing=True),
        )
        t0 = _perf_counter()
        self._busy_ahead(l2)
        _record(start)
        out = fn(inputs)
        covered = self._covered(start)
        _record(end)
        _synchronize()
        t1 = _perf_counter()
        _record(end_dev)
        _event_synchronize(end_dev)
        return (
            _elapsed_time(start, end),
            _elapsed_time(start, end_dev),
            (t1 - t0) * 1e3,
            out,
            covered,
        )

    def calibrate(self, l2: str, n: int) -> dict[str, float]:
        """The gaps of the protocol itself, around a harness kernel."""
        dev_gap, wall_gap = [], []
        for _ in range(max(3, n)):
            ev, dev, host, _, _ = self._one(self._harness_kernel, None, l2)
            dev_gap.append(dev - ev)
            wall_gap.append(host - ev)
        return {
            "dev_gap_ms": quantile(sorted(dev_gap), 0.5),
            "wall_gap_ms": quantile(sorted(wall_gap), 0.5),
        }

    def run(
        self,
        fn: Callable[[Any], Any],
        make_inputs: Callable[[int], Any],
        config: BenchConfig,
        input_sets: int = 1,
        warm_fn: Callable[[Any], Any] | None = None,
    ) -> tuple[dict[str, Any], dict[int, Any]]:
        """Warm up (with ``warm_fn`` when given: e.g. the call under the op recorder),
        calibrate, time until converged; returns (report, kept outputs)."""
        rule = config.rule
        l2_state = {"before": persisting_l2_limit(set_zero=True)}
        clocks = ClockLog(self.nvml)
        make_inputs = slotted(make_inputs, max(1, input_sets))
        _synchronize()
        # warm-up: JIT compiles, autotuning, allocator growth, clocks; fresh inputs every
        # call; the first calls under ``warm_fn``, the last ones plain to time the host path
        warm = 0
        host_s: list[float] = []
        t_warm = _perf_counter()
        index = 0
        while warm < config.warmup_min or _perf_counter() - t_warm < config.warmup_s:
            inputs = make_inputs(index)
            _synchronize()
            plain = warm_fn is None or warm >= 2
            t_call = _perf_counter()
            out = (fn if plain else warm_fn)(inputs)  # type: ignore[misc]
            if plain:
                host_s.append(_perf_counter() - t_call)
            _synchronize()
            del out, inputs
            warm += 1
            index += 1
            if warm >= 1000:
                break
        warmup_s = _perf_counter() - t_warm
        host_call_s = quantile(sorted(host_s), 0.5) if host_s else 0.0
        self.set_lead(config.l2, host_call_s)
        t_setup = _perf_counter()
        calibration = self.calibrate(config.l2, config.calibrate)
        lead_calibrated_s = self.lead_s  # a longer lead later lengthens each call's wall time

        graph_note = None
        runner = fn
        make = make_inputs
        if config.mode == "graph":
            captured = self._capture(fn, make_inputs, index)
            index += 1
            if isinstance(captured, str):
                graph_note = captured
            else:
                runner, make = captured

        seen = None
        t_witness = _perf_counter()
        if config.witness > 0 and self.device == "cuda":
            seen, index = self._witness(runner, make, index, config)
        witness_s = _perf_counter() - t_witness
        setup_s = _perf_counter() - t_setup - witness_s  # calibration, graph capture
        kept = _Kept(config.keep_key, config.keep_bytes)
        events: list[float] = []
        device: list[float] = []
        host: list[float] = []
        seeds_used: list[int] = []
        clocks.take()
        started = _perf_counter()
        stop = None
        loop_walls: list[float] = []
        lead_start_s = self.lead_s
        uncovered = {"dropped": 0, "counted": 0}
        floor: dict[str, Any] = {"min_runs": MIN_TIMED_SAMPLES}
        while stop is None:
            t_iter = _perf_counter()
            inputs = make(index)
            _synchronize()  # generation done: only the flush is ahead of the call
            ev, dev, wall, out, covered = self._one(runner, inputs, config.l2)
            if not covered:
                if self.lead_s < MAX_LEAD_S:  # the GPU may have waited: a longer lead, again
                    self.lead_s = min(MAX_LEAD_S, 2 * self.lead_s + 20e-6)
                    uncovered["dropped"] += 1
                    del out, inputs
                    index += 1
                    continue
                uncovered["counted"] += 1
            events.append(ev)
            device.append(dev)
            host.append(wall - (self.lead_s - lead_calibrated_s) * 1e3)  # as calibrated
            kept.offer(index, out)
            seeds_used.append(index)
            del out
            index += 1
            loop_walls.append(_perf_counter() - t_iter)
            if len(loop_walls) == StopRule.SCALE_AFTER:  # the wall budget scales with the call
                rule = rule.scaled(quantile(sorted(loop_walls), 0.5))
            elapsed = _perf_counter() - started
            if "budget_spent_at" not in floor and rule.short_of_floor(len(events), elapsed):
                floor["budget_spent_at"] = len(events)  # timed on to the floor all the same
            stop = rule.done(events, elapsed)
            if len(events) % 25 == 0:
                clocks.take()
        clocks.take()
        timed_s = _perf_counter() - started
        l2_state["after"] = persisting_l2_limit(set_zero=False)
        report = {
            "events_ms": events,
            "device_ms": device,
            "host_ms": host,
            "indices": seeds_used,
            "calibration": calibration,
            "stop": stop,
            "warmup_calls": warm,
            "warmup_s": warmup_s,
            "setup_s": setup_s,
            "witness_s": witness_s,
            "timed_s": timed_s,
            "l2": config.l2,
            "l2_bytes": self.l2,
            "flush_bytes": self.flush_buffer.numel() * 4 if config.l2 == "flush" else 0,
            "input_sets": max(1, input_sets),
            "host_call_ms": host_call_s * 1e3,
            "flush_ms": self.flush_s * 1e3,
            "lead_ms": self.lead_s * 1e3,
            "lead_start_ms": lead_start_s * 1e3,
            "uncovered": uncovered,
            "mode": "graph" if graph_note is None and config.mode == "graph" else "events",
            "graph_note": graph_note,
            "persisting_l2": l2_state,
            "clocks": clocks.summary(),
            "kept": sorted(kept.outputs()),
            "rule": rule.as_dict(),
            "floor": floor,
        }
        if seen is not None:
            report["witness"] = witness.compare(seen, quantile(sorted(events), 0.5))
        return report, kept.outputs()

    def _witness(
        self, fn: Callable[[Any], Any], make: Callable[[int], Any], index: int, config: BenchConfig
    ) -> tuple[dict[str, Any], int]:
        """The kernel records of a few calls (``witness.py``); lengthens the lead when they
        show the GPU waiting for the launch. Returns (the witness's report, next index)."""

        def busy() -> float:
            self._busy_ahead(config.l2)
            return self.lead_s

        try:
            seen, index = witness.observe(busy, fn, make, index, config.witness)
        except Exception as exc:  # the witness never stops the benchmark
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}, index + config.witness
        longer = witness.lead_for(seen, self.lead_s)
        if longer is not None:
            seen["lead_raised_ms"] = (longer - self.lead_s) * 1e3
            self.lead_s = longer
        return seen, index

    def _capture(
        self, fn: Callable[[Any], Any], make_inputs: Callable[[int], Any], index: int
    ) -> tuple[Callable[[Any], Any], Callable[[int], Any]] | str:
        """A CUDA graph of ``fn(static_inputs)``: (replay, make_inputs that copies fresh
        content into the captured buffers), or why capture failed (then plain calls)."""
        if _CUDAGraph is None:
            return "torch has no CUDAGraph; timed plain calls"
        static_inputs = make_inputs(index)
        static_leaves = [t for t in leaves(static_inputs) if _isinstance(t, _Tensor)]
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                fn(static_inputs)  # warm on a side stream, as torch's graph docs ask
            torch.cuda.current_stream().wait_stream(side)
            _synchronize()
            graph = _CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = fn(static_inputs)
            _synchronize()
        except Exception as exc:
            _synchronize()
            return (
                f"graph capture failed ({type(exc).__name__}: {str(exc)[:160]}); timed plain calls"
            )

        def replay(_: Any) -> Any:
            graph.replay()
            return static_out

        def make(i: int) -> Any:
            fresh = [t for t in leaves(make_inputs(i)) if _isinstance(t, _Tensor)]
            for dst, src in zip(static_leaves, fresh, strict=True):
                dst.copy_(src)
            return static_inputs

        return replay, make


def escape_findings(report: dict[str, Any]) -> dict[str, Any]:
    """Compare the call's gaps with the calibration's: work that escaped the timed stream."""
    ev = sorted(report.get("events_ms") or [])
    dev_gaps = sorted(
        d - e
        for d, e in zip(report.get("device_ms") or [], report.get("events_ms") or [], strict=False)
    )
    wall_gaps = sorted(
        h - e
        for h, e in zip(report.get("host_ms") or [], report.get("events_ms") or [], strict=False)
    )
    if not ev:
        return {"escaped": False}
    cal = report.get("calibration") or {}
    median_ev = quantile(ev, 0.5)
    excess_dev = quantile(dev_gaps, 0.5) - float(cal.get("dev_gap_ms", 0.0))
    excess_wall = quantile(wall_gaps, 0.5) - float(cal.get("wall_gap_ms", 0.0))
    # generous: another process's kernels (time-slicing) or a noisy host must not look
    # like an escape; work worth hiding is a large part of the call
    dev_limit = max(0.05, 0.25 * median_ev)
    wall_limit = max(0.10, 0.50 * median_ev)
    escaped = excess_dev > dev_limit or excess_wall > wall_limit
    inclusive = [d - float(cal.get("dev_gap_ms", 0.0)) for d in report.get("device_ms") or []]
    return {
        "escaped": bool(escaped),
        "excess_device_ms": excess_dev,
        "excess_wall_ms": excess_wall,
        "device_limit_ms": dev_limit,
        "wall_limit_ms": wall_limit,
        "inclusive_ms": inclusive,
    }


__all__ = [
    "Bench",
    "BenchConfig",
    "ClockLog",
    "Nvml",
    "bench_seed",
    "escape_findings",
    "keep_priority",
    "persisting_l2_limit",
    "throttle_names",
]
