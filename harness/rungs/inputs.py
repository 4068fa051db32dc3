"""Inputs: the inputs of every call and the references they are checked against (the parent's side).

The parent generates inputs (the problem's public seed per shape mixed with a secret one),
keeps a pristine copy, and only after the output came back computes the reference (TF32
off) on a copy of the pristine inputs: the reference never exists in the candidate's
process, and not even in this one while the candidate runs. ``Inputs`` also remembers how
big a shape's outputs are (the worker poisons its allocator with NaN-filled blocks of that
size), which seeds were used, and derives the seeds and random streams the performance
rungs use (benchmark keys, profile and trace inputs) from the same secret.

Before any candidate call, ``study`` also runs the signal check (``harness/problems/signalcheck.py``)
on every public shape: where a trivial answer (zeros, ones, an input, a constant) passes
the problem's tolerance, ``tightened`` judges that shape by a relative criterion; where
one passes even that on every shape, the problem is refused.

What the public calls cost on this device (``note_cost``, measured by the correctness
rung, the Triton interpreter included) caps the unseen shapes' work (``unseen_shapes``)
and sets each unseen or stress call's time budget (``budget``): a kernel as fast per
element there as on the public shapes never times out.

With ``--calibrate`` (or ``CALIBRATE = True``) each shape's tolerance is measured from the
reference against its float64 self on secret-seeded inputs (``calibrated``, cached per
shape: ``harness/problems/calibrate.py``) and never looser than declared.

The stress trials (``STRESS``: rescaled and mixed-scale inputs) are made in ``stress.py``,
the edge-input trials a problem asks for (``EDGE_INPUTS``) in ``edges.py``; both from an
``Inputs``, its secret and its reference (``perturbed_reference``: how precisely the
inputs define the output, which the signal check and the mixed-scale slack use).
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ..errors import ProblemError
from ..metrics import CHUNK_ELEMENTS
from ..options import RunOptions
from ..perf import baselines
from ..problems.calibrate import Calibrator
from ..problems.library import record_reference
from ..problems.precision import reference_precision
from ..problems.problem import Problem
from ..problems.problemspec import EDGE_CLASSES, Tolerance
from ..problems.signalcheck import Finding, declared_exemption, probe, refusal, relative
from ..problems.unseen import shape_size, size_links

STUDY_TRIAL = 2000  # the throwaway input the reference is studied on (distinct seeds)
UNSEEN_TRIAL = 3000  # seeds of the unseen-shape trials
# (4000 and 4500: the stress trials, ``stress.py``; 7000 on: the edge trials, ``edges.py``)
SIGNAL_TRIAL = 5000  # the signal check's inputs (and +1: "another input")
CALIBRATE_TRIAL = 6000  # the calibration's inputs (``calibrate.py``: +0 .. +15)
# an unseen call is projected (from the public calls' cost) to take at most this share of
# --timeout; its budget is BUDGET_FACTOR x its projection, never under --timeout nor
# over BUDGET_CAP x --timeout
UNSEEN_TIME_SHARE = 0.5
BUDGET_FACTOR = 4.0
BUDGET_CAP = 4.0
SHARE_MAX_SIZE = 1 << 24  # product of a shape's sizes the library-share call may use
SHARE_MAX_BYTES = 1 << 28  # and its inputs' bytes (a "size" key may stand for size x size)


def mix_seed(public: int, trial: int, secret: int) -> int:
    digest = hashlib.sha256(f"{public}:{trial}:{secret}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def shape_label(shape: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items()) or "default"


def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flatten(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in flatten(v)]
    return [value]


def clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(clone(v) for v in value)
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    return value


@dataclass
class TrialInputs:
    shape_index: int
    shape: dict[str, Any]
    trial: int
    seed: int
    pristine: Any  # on the target device, never handed to anyone
    leaves: list[torch.Tensor]  # pristine tensor leaves, in order
    # "public" | "unseen" (a derived shape) | "stress" (rescaled inputs) | "mixed" (scales
    # far apart inside one tensor) | an edge-input class (``EDGE_CLASSES``, ``edges.py``)
    kind: str = "public"
    detail: str = ""  # an edge trial's: what was done to which input
    plain_rms: float | None = None  # a stress trial's: its reference's RMS before the rescale

    @property
    def label(self) -> str:
        if self.kind in EDGE_CLASSES:
            return f"{self.detail}; shape {shape_label(self.shape)}, seed {self.seed}"
        if self.kind == "unseen":
            return "an unseen shape"
        if self.kind == "stress":
            return "rescaled inputs"
        if self.kind == "mixed":
            return "mixed-scale inputs"
        return f"shape {shape_label(self.shape)}, trial {self.trial + 1}"


@dataclass(frozen=True)
class ReferenceFacts:
    """What running the reference once showed (``Inputs.study``)."""

    ops: dict[str, int]  # compute ops it ran, by call count
    slots: tuple[int, ...]  # tensor leaves of the data it never reads: outputs to fill
    dtypes: dict[str, list[str]] = field(default_factory=dict)  # each op's tensors' dtypes
    input_dtypes: tuple[str, ...] = ()  # the floating dtypes of the inputs it was given
    # the two input leaves whose matmul has the output's shape (``baselines.gemm_operands``)
    gemm_operands: tuple[int, int] | None = None


def _tensor_bytes(value: Any) -> list[bytes]:
    out = []
    for leaf in flatten(value):
        if isinstance(leaf, torch.Tensor):
            t = leaf.detach().to("cpu").contiguous().reshape(-1)
            out.append(bytes(t.view(torch.uint8).numpy()) if t.numel() else b"")
        else:
            out.append(repr(leaf).encode())
    return out


def _scribble(t: torch.Tensor) -> None:
    """Fill a tensor with values no computation would produce from it."""
    with torch.no_grad():
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.logical_not_()
        else:
            t.fill_(77)


class Inputs:
    """The shapes checked, the secret seed, fresh inputs per trial and their references."""

    def __init__(self, problem: Problem, options: RunOptions, device: str) -> None:
        self.problem = problem
        self.options = options
        self.device = device
        self.secret = (
            options.secret
            if options.secret is not None
            else int.from_bytes(os.urandom(8), "little")
        )
        self.shapes = [
            dict(s) for s in (options.shapes if options.shapes else problem.shapes_for(device))
        ]
        self.seeds_used: list[dict[str, Any]] = []
        self._output_bytes: dict[int, list[int]] = {}
        self._facts: ReferenceFacts | None = None
        self._unseen: list[dict[str, Any]] | None = None
        self._weighed: dict[str, int] = {}  # ``_input_bytes``, by the shape's repr
        self._costs: dict[int, list[float]] = {}  # seconds of each public call, by shape
        self._fixed: set[str] | None = None  # sizes that follow others (``_work``)
        self._budgets: list[float] = []  # seconds given to each call never seen (``budget``)
        # the signal check: trivial answers that pass, per public shape (``study``) and
        # per call of a shape never seen (``tightened``)
        self.signal: dict[int, list[Finding]] = {}
        self._judged: dict[tuple[str, int, int], list[Finding]] = {}
        self.exempt = options.signal_exempt or declared_exemption(problem)
        # --calibrate / CALIBRATE: tolerances from the reference's error against float64
        self.calibrator = (
            Calibrator(
                problem,
                lambda shape, k: (
                    self.make(0, CALIBRATE_TRIAL + k, shape=shape, record=False).pristine
                ),
            )
            if options.calibrate or problem.calibrate
            else None
        )

    def make(
        self,
        shape_index: int,
        trial: int,
        shape: dict[str, Any] | None = None,
        record: bool = True,
        kind: str = "public",
    ) -> TrialInputs:
        """Fresh inputs for ``shapes[shape_index]`` (or ``shape``, e.g. a bench shape)."""
        shape = shape if shape is not None else self.shapes[shape_index]
        public = self.problem.public_seed(shape_index)
        seed = mix_seed(public, trial, self.secret)
        pristine = self.problem.generate_input(seed, shape, self.device)
        leaves = [t for t in flatten(pristine) if isinstance(t, torch.Tensor)]
        slots = set(self._facts.slots) if self._facts is not None else set()
        floats = [
            t
            for i, t in enumerate(leaves)
            if t.is_floating_point() and t.numel() > 1 and i not in slots
        ]
        if floats and all(not bool(t.any()) for t in floats):
            raise ProblemError(
                f"{self.problem.name}: generate_input({shape_label(shape)}) returned all-zero inputs; a check needs non-trivial values"
            )
        if record:
            self.seeds_used.append({"shape": shape_label(shape), "trial": trial, "public": public})
        return TrialInputs(shape_index, shape, trial, seed, pristine, leaves, kind)

    # -- what the reference is (studied once, before any candidate call) -----------------

    def study(self) -> ReferenceFacts:
        """The reference's compute ops and the data's output tensors (see the docstring)."""
        if self._facts is not None:
            return self._facts
        # the study's inputs and output are gone before the signal check makes its own: at
        # an upstream size each is gigabytes
        self._facts = self._study_run()
        self.check_signal()
        return self._facts

    def _study_run(self) -> ReferenceFacts:
        inputs = self.make(0, STUDY_TRIAL, record=False)
        shape = inputs.shape

        def run(data: Any) -> Any:
            with reference_precision(), torch.no_grad():
                return self.problem.ref_output(data, shape)

        recorded = record_reference(lambda: run(clone(inputs.pristine)))
        slots: tuple[int, ...] = ()
        if self.problem.provides_outputs:
            slots = self._find_slots(inputs, recorded.output, run)
        leaves = flatten(inputs.pristine)
        floating = {
            str(leaf.dtype)
            for leaf in leaves
            if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()
        }
        outputs = [t for t in flatten(recorded.output) if isinstance(t, torch.Tensor)]
        operands = baselines.gemm_operands(
            [
                (str(leaf.dtype), tuple(leaf.shape)) if isinstance(leaf, torch.Tensor) else None
                for leaf in leaves
            ],
            tuple(outputs[0].shape) if len(outputs) == 1 else None,
        )
        return ReferenceFacts(
            dict(recorded.ops), slots, recorded.dtypes, tuple(sorted(floating)), operands
        )

    # -- the signal check (harness/problems/signalcheck.py) ----------------------------------------

    def check_signal(self) -> None:
        """Try the trivial answers on every public shape; raise ``ProblemError`` when one
        passes even the relative criterion on all of them (unless exempt)."""
        if self.exempt:
            return
        found: list[Finding] = []
        for index, shape in enumerate(self.shapes):
            # another input's reference only: its inputs go before the probe makes answers
            twin = self.reference(self.make(index, SIGNAL_TRIAL + 1, record=False))
            made = self.make(index, SIGNAL_TRIAL, record=False)
            self.signal[index] = probe(
                self.problem,
                shape_label(shape),
                made.pristine,
                self.reference(made),
                twin,
                self.slots,
                clone,
                perturbed=functools.partial(
                    self.perturbed_reference, made.pristine, made.shape, SIGNAL_TRIAL
                ),
            )
            found += self.signal[index]
        reason = refusal(self.problem.name, found, len(self.shapes))
        if reason:
            raise ProblemError(reason)

    def tightened(
        self, inputs: TrialInputs, output: int, reference: Any, tolerance: Tolerance
    ) -> tuple[Tolerance, Finding] | None:
        """The relative criterion (and why) for output tensor ``output`` of this call,
        when a trivial answer passes ``tolerance`` there; None when it does not (or the
        problem is exempt, or the inputs are the mixed-scale ones, judged per element, or
        an edge trial's empty or non-finite ones, where no trivial answer means anything)."""
        if self.exempt or inputs.kind in ("mixed", "size0", "nonfinite"):
            return None
        index = inputs.shape_index
        if (
            inputs.kind == "public"
            and 0 <= index < len(self.shapes)
            and inputs.shape == self.shapes[index]
        ):
            findings = self.signal.get(index, [])
        else:
            key = (inputs.kind, inputs.shape_index, inputs.trial)
            if key not in self._judged:
                scale = tolerance.atol / max(
                    self.problem.tolerance_for(_first_dtype(reference)).atol, 1e-300
                )
                self._judged[key] = probe(
                    self.problem,
                    inputs.label,
                    inputs.pristine,
                    reference,
                    None,
                    self.slots,
                    clone,
                    scale=scale if inputs.kind == "stress" else 1.0,
                    perturbed=lambda: self.perturbed_reference(
                        inputs.pristine, inputs.shape, SIGNAL_TRIAL
                    ),
                )
            findings = self._judged[key]
        finding = next((f for f in findings if f.output == output), None)
        if finding is None or finding.noise:  # not defined that finely: nothing to tighten
            return None
        leaves = [t for t in flatten(reference) if isinstance(t, torch.Tensor)]
        return relative(tolerance, leaves[output]), finding

    def signal_summary(self) -> tuple[str, list[dict[str, Any]]]:
        """The verdict's word on the signal check: a note naming the public shapes judged
        by the relative criterion (empty when none), and every finding."""
        if self.exempt:
            return f"signal check exempted: {self.exempt}", []
        public = [f for index in sorted(self.signal) for f in self.signal[index]]
        seen = [f for findings in self._judged.values() for f in findings]
        details = [f.as_dict() for f in public + seen]
        tight = [f for f in public if not f.noise and set(f.passed) - set(f.still)]
        if not tight:
            return "", details
        words = "; ".join(f.describe() for f in tight[:3])
        more = f" (+{len(tight) - 3} more)" if len(tight) > 3 else ""
        return (
            "judged relative to the output's scale where a trivial answer passes the "
            f"problem's tolerance: {words}{more}",
            details,
        )

    # -- calibrated tolerances (harness/problems/calibrate.py) ---------------------------

    @property
    def calibrating(self) -> bool:
        return self.calibrator is not None

    def calibrated(self, inputs: TrialInputs, output: int, declared: Tolerance) -> Tolerance:
        """Output tensor ``output``'s tolerance on this call's shape: measured (once per
        shape) and never looser than ``declared``; ``declared`` when not calibrating."""
        if self.calibrator is None:
            return declared
        return self.calibrator.tolerance(inputs.shape, shape_label(inputs.shape), output, declared)

    def calibration_summary(self) -> tuple[str, list[dict[str, Any]]]:
        """The verdict's note on calibration (a skip, if any) and what was measured."""
        return self.calibrator.summary() if self.calibrator is not None else ("", [])

    @property
    def slots(self) -> tuple[int, ...]:
        return self._facts.slots if self._facts is not None else ()

    def _find_slots(self, inputs: TrialInputs, baseline: Any, run: Any) -> tuple[int, ...]:
        """Tensor leaves the reference never reads: garbage in one leaves its output as is."""
        expected = _tensor_bytes(baseline)
        if _tensor_bytes(run(clone(inputs.pristine))) != expected:
            return ()  # a reference that does not repeat itself tells nothing here
        found = []
        for index in range(len(inputs.leaves)):
            copy = clone(inputs.pristine)
            leaf = [t for t in flatten(copy) if isinstance(t, torch.Tensor)][index]
            if leaf.numel() == 0:
                continue
            _scribble(leaf)
            try:
                same = _tensor_bytes(run(copy)) == expected
            except Exception:  # the reference may raise anything on garbage: that leaf is read
                same = False
            if same:
                found.append(index)
        return tuple(found) if len(found) < len(inputs.leaves) else ()

    # -- shapes and inputs the candidate never saw ---------------------------------------

    def unseen_shapes(self) -> list[dict[str, Any]]:
        """Two shapes derived from the checked ones with the secret (``harness/unseen.py``);
        none when switched off."""
        if self._unseen is not None:
            return self._unseen
        self._unseen = []
        if not self.options.unseen:
            return self._unseen
        from ..problems.unseen import unseen_shapes

        derived = replace(self.problem, shapes=[dict(s) for s in self.shapes])
        try:
            self._unseen = unseen_shapes(
                derived, self.secret, device=self.device, max_work=self.max_work()
            )
        except ProblemError:
            raise
        except Exception:  # the problem's own code may raise anything: no unseen shapes then
            self._unseen = []
        self._unseen += self._beyond_checked(unseen_shapes)
        return self._unseen

    def _beyond_checked(self, derive: Any) -> list[dict[str, Any]]:
        """On a GPU, one more unseen shape between the checked sizes and the benchmark
        sizes that are not huge (``SHARE_MAX_SIZE``, ``SHARE_MAX_BYTES`` of inputs): a
        kernel exact below some size that only the benchmarks reach (a gate at 10^6
        elements) is caught by the check."""
        if self.device == "cpu" or self.options.bench_shapes or self.options.shapes:
            return []
        top = max(shape_size(s) for s in self.shapes)
        bench = [
            s
            for s in self.problem.bench_shapes
            if top < shape_size(s) <= SHARE_MAX_SIZE
            and set(s) == set(self.shapes[0])
            and self._input_bytes(s) <= SHARE_MAX_BYTES
        ]
        if not bench:
            return []
        for public in (bench, [*self.shapes, *bench]):
            try:
                found = derive(
                    replace(self.problem, shapes=[dict(s) for s in public]),
                    self.secret ^ 0x5EED,
                    count=1,
                    device=self.device,
                )
            except Exception:  # the problem's own code may raise anything: the next set is tried
                continue
            found = [
                s
                for s in found
                if shape_size(s) > top
                and s not in (self._unseen or [])
                and self._input_bytes(s) <= SHARE_MAX_BYTES  # a "size" key may be size x size
            ]
            if found:
                return found[:1]
        return []

    def held_sizes(self) -> dict[str, str]:
        """Sizes of the checked shapes that the unseen shapes keep as given because how
        they relate to the others cannot be seen (``unseen.size_links``), and why."""
        if not self.options.unseen:
            return {}
        try:
            return dict(size_links(self.problem, self.shapes).held)
        except Exception:  # a problem whose sizes cannot be read: nothing held to report
            return {}

    # -- what the public calls cost here: the unseen shapes' cap and every budget ------

    def note_cost(self, inputs: TrialInputs, seconds: float) -> None:
        """The wall time of one public call (measured in this process, the worker's round
        trip and the Triton interpreter included)."""
        if inputs.kind == "public" and inputs.shape_index >= 0:
            self._costs.setdefault(inputs.shape_index, []).append(seconds)

    def _work(self, shape: dict[str, Any]) -> float:
        """A shape's work as ``unseen.py`` counts it: sizes that follow others are not more."""
        if self._fixed is None:
            try:
                self._fixed = size_links(self.problem, self.shapes).fixed
            except Exception:  # sizes that cannot be read: every size counts
                self._fixed = set()
        return shape_size({k: v for k, v in shape.items() if k not in self._fixed})

    def cost_model(self) -> tuple[float, float] | None:
        """(seconds a call costs whatever its size, seconds per unit of work) from the
        public calls: the smallest shape's slowest call, and the steepest rate above it;
        None before any call was measured."""
        points = [
            (self._work(self.shapes[i]), max(times)) for i, times in self._costs.items() if times
        ]
        if not points:
            return None
        base = min(t for _, t in points)
        rate = max([(t - base) / w for w, t in points if w > 0] or [0.0])
        return base, rate

    def projected(self, shape: dict[str, Any]) -> float | None:
        """Seconds a call on ``shape`` should take here, from the public calls."""
        model = self.cost_model()
        if model is None:
            return None
        base, rate = model
        work = self._work(shape)
        if not work:
            return max(max(t) for t in self._costs.values())
        return base + rate * work

    def max_work(self) -> float | None:
        """The most work an unseen shape may hold: the largest public shape's, halved
        until the call is projected to take at most ``UNSEEN_TIME_SHARE`` of --timeout
        (halved, not solved for, so that the same secret keeps giving the same shapes
        unless the device is slow for the public shapes themselves)."""
        model = self.cost_model()
        if model is None:
            return None
        base, rate = model
        work = max(self._work(s) for s in self.shapes)
        limit = UNSEEN_TIME_SHARE * self.options.timeout_s
        # halving helps only while the work, not the call's fixed cost, is what is slow
        while work > 1 and base + rate * work > limit and rate * work > base:
            work /= 2
        return work

    def budget(self, inputs: TrialInputs) -> tuple[float, str]:
        """Seconds a call on inputs never seen may take, and what the verdict says if it
        times out: ``BUDGET_FACTOR`` x its projection from the public calls, never under
        --timeout (nor over ``BUDGET_CAP`` x it)."""
        timeout = self.options.timeout_s
        projected = self.projected(inputs.shape)
        if projected is None:
            return timeout, ""
        slowest = max(max(t) for t in self._costs.values())
        seconds = min(BUDGET_CAP * timeout, max(timeout, BUDGET_FACTOR * projected))
        self._budgets.append(round(seconds, 3))
        note = (
            f"the public shapes took at most {slowest:.2g} s a call here, and this call had "
            f"{seconds:.3g} s ({BUDGET_FACTOR:g}x what they project for its size, at least "
            "--timeout)"
        )
        return seconds, note

    def cost_summary(self) -> dict[str, Any]:
        """For the verdict's details: what the public calls took here, the unseen shapes'
        work cap and the budgets the calls never seen were given."""
        if not self._costs:
            return {}
        return {
            "slowest_public_call_s": round(max(max(t) for t in self._costs.values()), 3),
            "unseen_max_work": self.max_work(),
            "budgets_s": list(self._budgets),
        }

    def make_unseen(self, index: int) -> TrialInputs:
        shape = self.unseen_shapes()[index]
        inputs = self.make(0, UNSEEN_TRIAL + index, shape=shape, record=False, kind="unseen")
        inputs.shape_index = -1 - index  # never a public shape's poison sizes
        return inputs

    def share_shape(self) -> dict[str, Any] | None:
        """Where a GPU measures the library share: the largest benchmark shape that is not
        huge (``SHARE_MAX_SIZE``, ``SHARE_MAX_BYTES`` of inputs), since at the tiny checked
        sizes every kernel is a ~2 us launch and a small epilogue would look like a third
        of the work; None: the largest checked shape. Problems whose default shapes are
        fitted to the device (KernelBench) use those."""
        if self.problem.device_shapes is not None:
            return None
        largest = shape_size(self.shapes[self.largest_shape_index()])
        fits = [s for s in self.bench_shapes() if largest < shape_size(s) <= SHARE_MAX_SIZE]
        for shape in sorted(fits, key=shape_size, reverse=True):
            # the product of the sizes is not the elements (GPU MODE's {"size": n} is an
            # n x n matrix): what the inputs weigh decides, since they and the outputs
            # cross the worker's pipe (a 16384 x 16384 add moved 1.5 GB there, 11 s)
            if self._input_bytes(shape) <= SHARE_MAX_BYTES:
                return dict(shape)
        return None

    def _input_bytes(self, shape: dict[str, Any]) -> int:
        """The bytes of the tensors ``generate_input`` makes for ``shape`` (0 if it fails:
        the call that uses the shape reports that); generated once per shape and check."""
        key = repr(sorted(shape.items()))  # a size may be a list
        if key not in self._weighed:
            try:
                made = self.problem.generate_input(0, shape, self.device)
            except Exception:  # the call that uses the shape reports the failure
                made = ()
            self._weighed[key] = sum(
                t.numel() * t.element_size() for t in flatten(made) if isinstance(t, torch.Tensor)
            )
        return self._weighed[key]

    def largest_shape_index(self) -> int:
        return max(range(len(self.shapes)), key=lambda i: shape_size(self.shapes[i]))

    def perturbed_reference(self, pristine: Any, shape: dict[str, Any], salt: int) -> Any:
        """The reference on a copy of ``pristine`` whose float input elements (not output
        tensors) each moved by the input dtype's ``rtol`` (at least 4 ulp), a random sign
        each: how precisely the inputs define the output."""
        moved = clone(pristine)
        rng = torch.Generator().manual_seed(mix_seed(salt, 1, self.secret))
        leaves = [t for t in flatten(moved) if isinstance(t, torch.Tensor)]
        slots = set(self.slots)
        with torch.no_grad():
            for i, leaf in enumerate(leaves):
                if i in slots or not leaf.is_floating_point() or leaf.numel() == 0:
                    continue
                step = max(
                    self.problem.tolerance_for(leaf.dtype).rtol, 4 * torch.finfo(leaf.dtype).eps
                )
                _move_by_signs(leaf, step, rng)
        with reference_precision(), torch.no_grad():
            return self.problem.ref_output(moved, shape)

    def reference(self, inputs: TrialInputs) -> Any:
        """The reference output, computed now (after the candidate returned) on a copy."""
        copy = clone(inputs.pristine)
        with reference_precision(), torch.no_grad():
            return self.problem.ref_output(copy, inputs.shape)

    def remember_output_sizes(self, inputs: TrialInputs, reference: Any) -> None:
        sizes = [
            t.numel() * t.element_size() for t in flatten(reference) if isinstance(t, torch.Tensor)
        ]
        if sizes:
            self._output_bytes[inputs.shape_index] = [sum(sizes) * 2, *sizes]

    def output_bytes(self, shape_index: int) -> int | None:
        """The bytes of the reference's outputs on this shape (None: no reference made yet)."""
        known = self._output_bytes.get(shape_index)
        return known[0] // 2 if known else None

    def poison_sizes(self, inputs: TrialInputs, input_bytes: int, sizes: list[int]) -> list[int]:
        """NaN-filled blocks the worker allocates before a call: the size of what the
        output will be (known after the first reference of a shape; the inputs' before)."""
        return self._output_bytes.get(inputs.shape_index) or [2 * input_bytes + (1 << 20), *sizes]

    def bench_shapes(self) -> list[dict[str, Any]]:
        """What the performance rungs time: ``--bench-shapes``, the problem's BENCH_SHAPES,
        else the last checked shape."""
        if self.options.bench_shapes:
            return [dict(s) for s in self.options.bench_shapes]
        if self.problem.bench_shapes:
            return [dict(s) for s in self.problem.bench_shapes]
        return [dict(self.shapes[-1])]

    def seed(self, salt: int) -> int:
        """A secret-derived seed for inputs generated in a worker (profile, trace)."""
        return mix_seed(self.problem.public_seed(0), salt, self.secret)

    def rng(self, label: str) -> random.Random:
        """A secret-derived random stream (benchmark keys, which timed outputs to check)."""
        return random.Random(f"{self.secret}:{label}")

    def seeds(self) -> dict[str, Any]:
        """The public seeds and the secret, for the verdict (and, after the check, the
        unseen shapes it derived)."""
        out: dict[str, Any] = {
            "public": [self.problem.public_seed(i) for i in range(len(self.shapes))],
            "secret": self.secret,
            "shapes": [shape_label(s) for s in self.shapes],
        }
        if self._unseen:
            out["unseen_shapes"] = [shape_label(s) for s in self._unseen]
        return out


def _first_dtype(reference: Any) -> torch.dtype:
    leaves = [t for t in flatten(reference) if isinstance(t, torch.Tensor)]
    return leaves[0].dtype if leaves else torch.float32


def _move_by_signs(leaf: torch.Tensor, step: float, rng: torch.Generator) -> None:
    """``leaf *= 1 ± step``, a random sign per element, in place, ``CHUNK_ELEMENTS`` at a
    time: signs as bytes drawn where the leaf lives (by a generator of that device seeded
    from ``rng``), one chunk at once. An upstream-sized input's int64 signs were twice its
    float32 size, on the GPU too; drawn on the CPU a chunk at a time they took 37 s of a
    6.4 GB input's check."""
    flat = leaf.view(-1) if leaf.is_contiguous() else None
    if flat is None:  # a strided leaf: its own contiguous copy, moved, written back
        moved = leaf.contiguous()
        _move_by_signs(moved, step, rng)
        leaf.copy_(moved)
        return
    draw = rng
    if leaf.device.type != "cpu":
        seed = int(torch.randint(0, 1 << 62, (1,), generator=rng))
        draw = torch.Generator(device=leaf.device).manual_seed(seed)
    for start in range(0, flat.numel(), CHUNK_ELEMENTS):
        part = flat[start : start + CHUNK_ELEMENTS]
        signs = torch.randint(
            0, 2, (part.numel(),), generator=draw, dtype=torch.int8, device=leaf.device
        )
        factor = signs.to(leaf.dtype).mul_(2).sub_(1).mul_(step).add_(1)
        part.mul_(factor)
