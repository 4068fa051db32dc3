"""The prompt: what the model is told once, in the (cached) system prompt.

Sections: the task and its contract (``custom_kernel(inputs) -> output``), the problem
(reference source, shapes, dtypes, tolerance, FLOPs and bytes per benchmark shape,
forbidden ops), the device and its measured ceilings when known, a short primer for the
backend that points at the index rather than carrying the API (the index is the library;
the primer is the backend's own, ``harness/backends/<module>_primer.md``),
the rules (every version must pass correctness; no library passthrough; what counts as
done) and the way to work (look up, submit, read the ladder, fix, then optimise).

:class:`ProblemBrief` gathers the facts from the harness's ``Problem``; the same sections
become the instructions file an external agent reads (``ctxkernel context init``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SOURCE_LIMIT = 12_000  # characters of the reference file shown


def backend_primer(backend: str) -> str:
    """The backend's primer: the text of its ``harness/backends/<module>_primer.md``
    (the plain PyTorch one for a name the registry does not know)."""
    from harness import DEFAULT_BACKEND, get_backend

    try:
        return get_backend(backend).primer()
    except KeyError:
        return get_backend(DEFAULT_BACKEND).primer()


@dataclass
class ProblemBrief:
    """What the prompt says about a problem, gathered from the harness."""

    name: str
    path: str
    format: str
    description: str
    source_name: str
    source: str
    entry: str
    shapes: list[dict[str, Any]]
    bench_shapes: list[dict[str, Any]]
    inputs: list[str]
    output: str
    tolerance: dict[str, Any] | None
    sizes: list[dict[str, Any]] = field(default_factory=list)  # shape, flops, bytes
    forbidden: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def load_brief(problem_path: str | Path) -> ProblemBrief:
    """Load a problem with the harness and describe it (runs its generator once on CPU)."""
    from harness import detect_format, load_problem

    problem = load_problem(problem_path)
    _, target = detect_format(problem_path)
    source_file = target / "problem.py" if target.is_dir() else target
    if target.is_dir() and not source_file.is_file():
        source_file = target / "reference.py"
    try:
        source = source_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        source = ""
    if len(source) > SOURCE_LIMIT:
        source = source[:SOURCE_LIMIT] + "\n# [... cut ...]\n"
    inputs, output, tolerance = _describe_io(problem)
    sizes = []
    for shape in problem.bench_shapes or problem.shapes[-1:]:
        sizes.append({"shape": shape, "flops": _safe(problem.flops, shape),
                      "bytes": _safe(problem.bytes, shape)})  # fmt: skip
    return ProblemBrief(
        name=problem.name,
        path=str(problem.path),
        format=problem.format,
        description=problem.description,
        source_name=source_file.name,
        source=source,
        entry=problem.entry if problem.entry_kind == "function" else f"class {problem.entry}",
        shapes=problem.shapes,
        bench_shapes=problem.bench_shapes,
        inputs=inputs,
        output=output,
        tolerance=tolerance,
        sizes=sizes,
        forbidden=problem.forbidden,
    )


def _safe(fn: Any, shape: dict[str, Any]) -> float | None:
    try:
        value = fn(shape)
    except Exception:  # the problem's own formula may raise anything: no number then
        return None
    return float(value) if value is not None else None


def _describe_io(problem: Any) -> tuple[list[str], str, dict[str, Any] | None]:
    """Input and output tensors of the first shape, and the tolerance for the output."""
    try:
        shape = problem.shapes[0]
        inputs = problem.generate_input(problem.public_seed(0), shape, "cpu")
        out = problem.ref_output(inputs, shape)
    except Exception as exc:
        return [f"(could not build inputs: {exc})"], "unknown", None
    seq = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    described = [_tensor(v) for v in seq]
    first_out = out[0] if isinstance(out, (tuple, list)) and out else out
    tolerance = None
    dtype = getattr(first_out, "dtype", None)
    if dtype is not None:
        try:
            tolerance = problem.tolerance_for(dtype).as_dict()
        except Exception:  # the problem's own code may raise anything: none shown
            tolerance = None
    return described, _tensor(out), tolerance


def _tensor(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        return f"{dtype}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_tensor(v) for v in value) + ")"
    return type(value).__name__


@dataclass
class DeviceInfo:
    """Where candidates run; ``ceilings`` as the harness measured them, when it did."""

    device: str  # "cpu" | "cuda"
    label: str
    ceilings: dict[str, Any] = field(default_factory=dict)

    @property
    def has_timing(self) -> bool:
        return self.device != "cpu"


def device_info(device: str | None, backend: str) -> DeviceInfo:
    """The device the harness will use, its name, and any cached ceilings."""
    resolved = device
    name = ""
    if resolved is None or resolved == "cuda":
        try:
            import torch

            if torch.cuda.is_available():
                resolved = "cuda"
                name = torch.cuda.get_device_name(0)
            elif resolved is None:
                resolved = "cpu"
        except Exception:  # torch or its CUDA failing in any way: no GPU to name
            resolved = resolved or "cpu"
    assert resolved is not None
    if resolved == "cpu":
        from harness import get_backend

        try:
            label = get_backend(backend).device_label("cpu")
        except KeyError:
            label = "cpu"
    else:
        label = f"cuda ({name})" if name else "cuda"
    return DeviceInfo(resolved, label, harness_ceilings(resolved, name))


def harness_ceilings(device: str, gpu: str = "") -> dict[str, Any]:
    """The ceilings the harness measured and cached for this GPU model, if any.

    Read from the harness's cache file (``harness.perf.ceilings``) without measuring
    anything: the roofline rung measures them on first use, so a first run on a new
    machine learns them from its first benchmarked verdict instead.
    """
    if device == "cpu":
        return {}
    from harness import latest_ceilings

    entry = latest_ceilings(gpu)
    if entry is None:  # none measured on this machine yet: the verdicts will say
        return {}
    out = {"DRAM": f"{entry.dram_gbps:.0f} GB/s"}
    for precision, tflops in entry.tflops.items():
        out[f"dense {precision}"] = f"{float(tflops):.0f} TFLOP/s"
    if entry.l2_bytes:
        out["L2"] = f"{entry.l2_bytes >> 20} MiB"
    return out


def _fmt_number(value: float | None) -> str:
    if value is None:
        return "?"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} "


def problem_section(brief: ProblemBrief) -> str:
    lines = [f"## Problem: {brief.name}"]
    if brief.description:
        lines.append(brief.description)
    lines.append("")
    lines.append(f"Inputs (first shape): {', '.join(brief.inputs)}; output: {brief.output}.")
    lines.append("Checked shapes: " + "; ".join(_shape(s) for s in brief.shapes))
    if brief.bench_shapes:
        lines.append("Benchmark shapes (GPU): " + "; ".join(_shape(s) for s in brief.bench_shapes))
    for size in brief.sizes:
        flops, nbytes = size.get("flops"), size.get("bytes")
        if flops is None and nbytes is None:
            continue
        intensity = f", {flops / nbytes:.3g} FLOP/byte" if flops and nbytes else ""
        lines.append(
            f"Work at {_shape(size['shape'])}: {_fmt_number(flops)}FLOP, "
            f"{_fmt_number(nbytes)}B moved{intensity}"
        )
    if brief.tolerance:
        tol = brief.tolerance
        extra = "".join(
            f", {k}>={tol[k]}" for k in ("min_psnr", "min_cossim") if tol.get(k) is not None
        )
        lines.append(
            f"Tolerance ({tol.get('precision')}): |got-expected| <= {tol.get('atol')} + "
            f"{tol.get('rtol')}*|expected| on every element{extra}; NaN never passes."
        )
    if brief.forbidden:
        lines.append(
            "Forbidden (checked statically and at run time): " + ", ".join(brief.forbidden)
        )
    lines.append("")
    lines.append(
        f"The reference ({brief.source_name}); the harness computes expected outputs with it:"
    )
    lines.append("```python")
    lines.append(brief.source.rstrip())
    lines.append("```")
    return "\n".join(lines)


def _shape(shape: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items()) or "(none)"


def device_section(info: DeviceInfo) -> str:
    lines = [f"## Device: {info.label}"]
    if not info.has_timing:
        lines.append(
            "No GPU here: candidates run on CPU (Triton under its interpreter, about 1 ms per "
            "program instance), so there is no timing and no roofline. The goal on this "
            "machine is a correct kernel written the way it should run on a GPU."
        )
    elif info.ceilings:
        lines.append(
            "Measured ceilings: " + ", ".join(f"{k}={v}" for k, v in info.ceilings.items())
        )
    else:
        lines.append(
            "Measured ceilings (DRAM GB/s, tensor-core TFLOP/s) come with the first benchmarked "
            "verdict, together with the kernel's percent of roofline."
        )
    return "\n".join(lines)


def rules_section(target: float, has_timing: bool, entry: str) -> str:
    done = (
        f"Done means: the best correct version reaches {target:.0%} of the roofline "
        "(the verdict reports `% of roofline`)."
        if has_timing
        else "Done means: a correct version (no timing exists on this device)."
    )
    return f"""\
## Rules
- Every version is a complete Python module defining `{entry}(inputs) -> output`: the
  inputs are the tuple `generate_input` returns, on the harness's device; return a new
  tensor of the reference's shape and dtype on the same device.
- Every version must pass correctness on every checked shape and several secret seeds;
  a fast wrong kernel counts for nothing.
- No library passthrough: do not call the forbidden ops, the reference, or a library
  routine that does the work; write the kernel in the declared backend.
- No caching of outputs between calls, no specialising to the visible shapes or seeds,
  no threads, subprocesses, files, network or environment tricks; the harness checks.
- {done}"""


def workflow_section(check_how: str, iterations: str) -> str:
    return f"""\
## How to work
1. Look things up in the index before writing: `list_corpora` for the corpus names,
   `docs` for one name, `search` for a question, `grep` for an exact pattern, `read` to
   see more lines of a hit. Cite ids (`corpus:path:start-end`) when you rely on them.
2. {check_how}
   The answer is the harness's rung ladder (pre-checks, compile, run, correctness,
   anti-cheat, then benchmark and roofline on a GPU) with metrics and the first failure
   trimmed to what matters.
3. Fix the first failing rung, resubmit; once correct, optimise and resubmit. Each
   submission is a version; {iterations}
4. Keep notes short: one line of what changed per version."""


def system_prompt(
    brief: ProblemBrief,
    backend: str,
    info: DeviceInfo,
    target: float,
    *,
    max_iters: int | None = None,
    samples: int = 1,
) -> str:
    """The system prompt of the built-in loop."""
    primer = backend_primer(backend)
    iterations = (
        f"you have at most {max_iters} rounds"
        + (f" of {samples} independent samples each" if samples > 1 else "")
        + "; the best correct version is the result."
        if max_iters
        else "the best correct version is the result."
    )
    parts = [
        f"You write a fast, correct GPU kernel in {backend} for the problem below. A "
        "verification harness is the ground truth: you submit full candidate sources with "
        "the check_kernel tool and it answers with a verdict. A local index of CUTLASS/"
        "CuTeDSL, Triton and PTX references is your library.",
        problem_section(brief),
        device_section(info),
        f"## Backend: {backend}\n{primer}" + tracing_section(backend, info),
        rules_section(target, info.has_timing, brief.entry),
        workflow_section(
            'Submit with check_kernel {"source": <the whole module>, "notes": <one line>}.',
            iterations,
        )
        + "\n"
        + ENGINEER_RULE,
    ]
    return "\n\n".join(parts)


# A kernel engineer may steer a run (ctxkernel/agent/steer.py): their notes reach the
# model marked with this line, and the system prompt says what the mark means.
ENGINEER_MARK = "[Engineer's note]"
ENGINEER_RULE = (
    f"5. A user turn may carry text starting with {ENGINEER_MARK}: those are the words of "
    "the kernel engineer steering this run, who knows this GPU. Follow their guidance "
    "ahead of your own plan (the rules above still hold) and say in your next notes "
    "what you changed because of it."
)


def engineer_note(text: str) -> str:
    """The engineer's words as the model reads them."""
    return f"{ENGINEER_MARK} {text.strip()}"


def tracing_section(backend: str, info: DeviceInfo) -> str:
    """How to mark kernel sections for the trace rung; only where it can run (a GPU)."""
    if not info.has_timing:
        return ""
    from harness import trace_primer, traceable

    try:
        if not traceable(backend):
            return ""
    except KeyError:
        return ""
    return (
        "\n\n### Where the time goes\n"
        + trace_primer(backend)
        + '\nAsk for it with check_kernel show: ["trace"].'
    )


def first_message(backend: str) -> str:
    return (
        f"Write the first {backend} version of the kernel and submit it with check_kernel. "
        "Look up what you are unsure of in the index first (a few calls, not many)."
    )


def instructions_markdown(
    brief: ProblemBrief, backend: str, info: DeviceInfo, target: float, problem_arg: str
) -> str:
    """The instructions file (CLAUDE.md / AGENTS.md) for an external agent over MCP."""
    primer = backend_primer(backend)
    check_how = (
        "Write the candidate to `solution.py`, then call the `check_kernel` tool of the "
        f'`ctxkernel` MCP server with {{"source": <the file\'s whole text>, "notes": '
        "<one line>}} (the server was started with this problem; pass "
        f'`"problem": "{problem_arg}"` to be explicit). From a shell: '
        f"`ctxkernel check {problem_arg} solution.py --feedback`."
    )
    return "\n\n".join(
        [
            f"# Kernel task: {brief.name} in {backend}",
            "You write a fast, correct GPU kernel for the problem below. The `ctxkernel` MCP "
            "server (registered in `.mcp.json`) gives you the tools: `search`, `grep`, "
            "`docs`, `read`, `list_corpora` over a local index of CUTLASS/CuTeDSL, Triton "
            "and PTX references, and `check_kernel`, the verification harness. The harness "
            "is the ground truth; every check is kept as a version under "
            "`runs/agent/` (`ctxkernel runs`, `ctxkernel runs show last`).",
            problem_section(brief),
            device_section(info),
            f"## Backend: {backend}\n{primer}" + tracing_section(backend, info),
            rules_section(target, info.has_timing, brief.entry),
            workflow_section(check_how, "keep the best correct one in `solution.py`."),
            "## The loop\nFirst version -> compile -> correctness -> optimisation, as the "
            "ladder says. Stop when the best correct version reaches the target (above), or "
            "when several versions in a row bring no improvement; say which version is best "
            "and why.",
        ]
    )
