"""``Backend``: everything the harness knows about one kernel language, in one class.

A backend module (``harness/backends/<name>.py``) subclasses ``Backend`` and overrides what
differs; the registry (``harness/backends/__init__.py``) lists one instance of each, and
every choice list (the CLI's ``--backend``, the agent's prompt sections) reads it. What a
backend declares:

- who it is: ``name`` (what ``--backend`` and ``# backend:`` take), ``label`` (how people
  call it), ``modules`` (the imports that mark a candidate as written for it), detection;
- what it needs: ``requires_gpu``, ``interpreter`` (what runs its kernels on a CPU),
  ``worker_env`` (set at spawn), ``cache_env`` (its cache folders, inside the worker's
  temp dir), ``env_passthrough`` (parent variables the scrubbed environment keeps),
  ``min_compile_timeout_s``;
- how it is held to account: ``prepare_worker`` (hooks installed before the candidate is
  imported; returns the launch counter, which also keeps the names of the kernels it saw
  launched: the candidate's own kernels when the library share is measured),
  ``enforce_launches``, ``is_compile_error``, the static scan's ``jit_decorators`` (kernel
  bodies are exempt from forbidden-op rules), the guards' allowances and protected names,
  ``prepare_torch_compile`` (counting the kernels ``torch.compile`` runs for it);
- how long it compiles: ``compile_hooks`` (its compile entry points, timed apart from run
  time, ``harness/worker/jitclock.py``) and ``compile_hooks_complete`` (whether they cover every
  way it compiles inside a call; if not, the first call keeps a long timeout on a GPU);
- what it leaves behind: ``dump_plan`` (whether and how the dumps rung gets artefacts),
  ``dump_env``, ``collect_artifacts`` (in the worker), ``mma_hint``, ``tool_dirs``;
- how it is traced: ``trace_recorder`` and ``prepare_trace``;
- what the agent is told: ``primer()`` and ``trace_primer()``, read from
  ``<module>_primer.md`` beside the module (the part after a ``## Tracing`` line is the
  trace primer).

The worker imports this module: nothing here imports torch or a kernel DSL at module level.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# an artefact: its metadata (name, kernel, version, kind) and its bytes
File = tuple[dict[str, Any], bytes]
TRACING_HEADING = "## Tracing"


@dataclass
class LaunchCounter:
    """Kernel launches seen since the last reset (``None`` total: counting unsupported),
    and the names of every kernel launched in this worker (``generated``: kernels
    ``torch.compile`` generated from PyTorch code, not counted as the candidate's)."""

    count: int = 0
    names: set[str] = field(default_factory=set)
    generated: set[str] = field(default_factory=set)
    depth: int = (
        0  # launches running now (a backend that tracks it): the host reads inside are its own
    )

    def reset(self) -> None:
        self.count = 0


@dataclass(frozen=True)
class DumpPlan:
    """How the dumps rung gets a backend's artefacts on this device.

    ``worker_env``: the environment of the worker that calls the candidate once;
    ``record_only``: that call records launches without running them (so the dump shape
    may be a large benchmark shape); ``compile_env``: when set, the recorded launches are
    compiled ahead of time in a second worker with this environment."""

    worker_env: dict[str, str] = field(default_factory=dict)
    record_only: bool = False
    compile_env: dict[str, str] | None = None


def parse_target(target: str) -> tuple[str, int]:
    """``sm_90`` / ``sm_90a`` / ``90`` / ``cuda:90`` -> ("cuda", 90)."""
    match = re.fullmatch(r"(?:cuda:)?(?:sm_?)?(\d+)a?", target.strip().lower())
    if not match:
        raise ValueError(f"unknown target {target!r} (expected e.g. sm_90)")
    return "cuda", int(match.group(1))


class Backend:
    """Base class: a backend that compiles nothing and needs nothing."""

    name = "base"
    label = "base"
    modules: tuple[str, ...] = ()  # top-level imports that mark a candidate as this backend's
    requires_gpu = False  # its kernels cannot run on a CPU at all
    interpreter: str | None = None  # what runs its kernels on a CPU, for labels
    compiles_kernels = True  # False: no artefacts, nothing to trace (plain PyTorch)
    aot_without_gpu = False  # --target compiles its kernels ahead of time on a CPU machine
    enforce_launches = False  # a call that launched nothing of this backend fails
    min_compile_timeout_s = 0.0  # the load request (imports, builds) gets at least this long
    # how the library share (harness/problems/library_share.py) knows this backend's own kernels on a
    # GPU: "launched" (the launch counter keeps their names), "defined" (names the source
    # defines: __global__ functions), "" (not known well enough: reported, not judged)
    own_kernel_names = ""
    compile_hooks: tuple[str, ...] = ()  # "module:attr.path" compile entry points (jitclock)
    compile_hooks_complete = False  # they cover every compile inside a call
    # static scan: decorators (resolved dotted names) whose functions are kernel code
    jit_decorators: tuple[str, ...] = ()
    jit_prefixes: tuple[str, ...] = ()  # ... and every decorator under these prefixes
    # guards: callables, modules and classes candidate code must not replace; frames of
    # the backend's own compiler that may swap a function's __code__; extra programs
    protected_names: tuple[str, ...] = ()
    protected_modules: tuple[str, ...] = ()
    protected_classes: tuple[tuple[str, str], ...] = ()
    code_rewriters: tuple[str, ...] = ()
    # the function that runs a launch on the host ("module:qualname": an interpreter's):
    # the tensors its module's own code reads to the host inside it, with no other code
    # between, are the kernel's arguments, not host compute (guards.OpRecorder)
    host_launcher = ""
    allowed_programs: frozenset[str] = frozenset()
    # modules imported before the guards go on when a candidate of another backend
    # mentions this one (so what it could patch is in the identity snapshot)
    snapshot_imports: tuple[str, ...] = ()
    env_passthrough: tuple[str, ...] = ()  # parent environment variables the worker keeps
    # what a warm worker template (harness/worker/zygote.py) imports for this backend's workers:
    # modules that neither initialise CUDA nor read a worker's own folders when imported
    template_imports: tuple[str, ...] = ()
    trace_recorder: str | None = None  # "proton" | "ck_trace": how the trace rung instruments
    mma_hint = ""  # how to get warpgroup MMA in this backend, for the dumps' findings

    # -- identity ----------------------------------------------------------------------

    def detect(self, imports: set[str], source: str) -> bool:
        return any(
            name == module or name.startswith(module + ".")
            for name in imports
            for module in self.modules
        )

    def device_label(self, device: str) -> str:
        """``cpu (Triton interpreter)``, ``cpu``, ``cuda``."""
        if device == "cpu" and self.interpreter:
            return f"cpu ({self.interpreter})"
        return device

    def interpreted_on(self, device: str) -> bool:
        return device == "cpu" and self.interpreter is not None

    # -- the worker's environment ---------------------------------------------------

    def worker_env(self, device: str) -> dict[str, str]:
        """Environment variables the worker process needs (set by the parent at spawn)."""
        return {}

    def cache_env(self, home: Path) -> dict[str, str]:
        """The backend's cache folders, inside the worker's ``home`` (every worker gets
        every backend's: a candidate may use another backend's compiler)."""
        return {}

    def dump_env(self) -> dict[str, str]:
        """What makes the backend keep its artefacts (a dumping worker's environment)."""
        return {}

    def prepare_worker(self, device: str) -> LaunchCounter | None:
        """Runs in the worker before the candidate is imported; returns a launch counter."""
        return None

    def warm_template(self) -> None:
        """Runs once in a worker template (``harness/worker/zygote.py``) before it forks any
        worker: harness-only warm-ups every worker would otherwise repeat. No CUDA, no
        candidate code, nothing that reads a worker's own environment or folders."""

    def seed_worker(self) -> dict[str, int]:
        """Runs in a worker forked from a template, its environment the worker's, before
        it serves: puts what ``warm_template`` prepared for every worker into the worker's
        own folders. Returns what it did, for the worker's log; never raises."""
        return {}

    def prepare_torch_compile(self, counter: LaunchCounter | None) -> None:
        """Runs in the worker, after ``torch._inductor`` is imported, for a candidate that
        uses ``torch.compile``: count the kernels inductor launches for this backend."""

    def prepare_trace(self, device: str, candidate_path: str) -> None:
        """Runs in the worker before the candidate is imported (trace support); never raises."""

    def is_compile_error(self, exc: BaseException) -> bool:
        return False

    def environment(self) -> dict[str, object]:
        """Versions and modes to report (runs in the worker)."""
        return {}

    # -- artefacts ---------------------------------------------------------------------

    def dump_plan(self, device: str, target: str | None) -> DumpPlan | None:
        """How the dumps rung gets artefacts on ``device``; None when it cannot (the rung
        says why: no kernel of its own, or no ahead-of-time compile without a GPU)."""
        if not self.compiles_kernels or device == "cpu":
            return None
        return DumpPlan()

    def recorded_launches(self) -> list[dict[str, Any]]:
        """Launches recorded in this worker, as JSON, for an ahead-of-time compile elsewhere."""
        return []

    def collect_artifacts(
        self, target: str | None, notes: list[str], launches: list[dict[str, Any]] | None
    ) -> list[File]:
        """Compiled artefacts this worker holds (runs in the worker)."""
        notes.append(f"backend {self.name} compiles nothing of its own: no artefacts")
        return []

    def tool_dirs(self) -> list[Path]:
        """Folders of CUDA binary tools (cuobjdump, nvdisasm, ptxas) the backend's package ships."""
        return []

    # -- what the agent is told --------------------------------------------------------

    def primer_path(self) -> Path:
        module = sys.modules[type(self).__module__]
        return Path(str(module.__file__)).with_name(f"{Path(str(module.__file__)).stem}_primer.md")

    def _primer_parts(self) -> tuple[str, str]:
        try:
            text = self.primer_path().read_text(encoding="utf-8")
        except OSError:
            return "", ""
        head, _, tracing = text.partition(TRACING_HEADING)
        return head.strip(), tracing.strip()

    def primer(self) -> str:
        """The prompt's section on writing a kernel in this backend."""
        return self._primer_parts()[0]

    def trace_primer(self) -> str:
        """How to mark kernel sections for the trace rung ("" without a recorder)."""
        return self._primer_parts()[1] if self.trace_recorder else ""
