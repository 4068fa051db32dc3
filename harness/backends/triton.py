"""The Triton backend: interpreter on CPU, launch counting, artefacts, Proton traces.

Launches are counted by wrapping ``JITFunction.run`` (compiled path) and
``InterpretedFunction.run`` (``TRITON_INTERPRET=1``); warm-up runs are not launches. The
autotuner ends in one of those, so it is counted too. Under ``torch.compile`` inductor
launches through its own ``CachingAutotuner.run`` (a user's ``@triton.jit`` kernel keeps
its name; the kernels inductor generates from PyTorch code, ``triton_poi_fused_*`` and
kin, are kept apart as ``generated``), and CUDA-graph replays of captured launches count
as launches. Compile time (``triton.compile``) is timed apart from run time; the autotuner's
benchmarking of the kernels is run time. With ``CTXKERNEL_RECORD_LAUNCHES=1``
(dumps) the same wrapper records each distinct launch's specialisation for ahead-of-time
compiles (``triton_aot.py``).

Artefacts: each version (one compiled specialisation) from the worker's Triton cache dir
(``<hash>/<kernel>.{ttir,ttgir,llir,ptx,cubin,json}``), or, with a target (``sm_90``),
compiled ahead of time from the recorded launches -- no GPU needed: on a CPU the dump
worker records launches under the interpreter without running them and a second worker,
interpreter off, compiles them. Triton's package ships ``cuobjdump``, ``nvdisasm`` and
``ptxas``, which the dumps use on any machine.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from .. import envvars
from .base import Backend, DumpPlan, File, LaunchCounter

KINDS = ("ttir", "ttgir", "llir", "ptx", "cubin", "json")
# names inductor gives the kernels it generates from PyTorch code
GENERATED = re.compile(r"^triton_(poi|red|per|tem|for|spl|mix|unk|fused)_")


class TritonBackend(Backend):
    name = "triton"
    label = "Triton"
    modules = ("triton",)
    # the interpreter runs a kernel in numpy on the host; its __call__ copies the arguments
    host_launcher = "triton.runtime.interpreter:GridExecutor.__call__"
    interpreter = "Triton interpreter"
    enforce_launches = True
    own_kernel_names = "launched"
    aot_without_gpu = True
    jit_decorators = ("triton.jit", "triton.autotune", "triton.heuristics")
    template_imports = (
        "triton",
        "triton.language",
        "triton.runtime.jit",
        "triton.runtime.interpreter",
    )
    jit_prefixes = ("triton.",)
    protected_names = ("triton.testing.do_bench", "triton.testing.do_bench_cudagraph")
    protected_modules = ("triton.testing", "triton.runtime.jit", "triton.runtime.interpreter")
    protected_classes = (
        ("triton.runtime.jit", "JITFunction"),
        ("triton.runtime.interpreter", "InterpretedFunction"),
        ("triton.runtime.autotuner", "Autotuner"),
    )
    snapshot_imports = ("triton.testing",)
    env_passthrough = (
        "TRITON_PTXAS_PATH",
        "TRITON_CUOBJDUMP_PATH",
        "TRITON_NVDISASM_PATH",
        "TRITON_LIBCUDA_PATH",
        "TRITON_DEFAULT_FP_FUSION",
    )
    trace_recorder = "proton"
    mma_hint = "Triton: BLOCK_M >= 64 with 4 warps, num_warps=8 tiles"
    # the autotuner's benchmarking runs the candidate's kernels: run time, not compile
    # time (a hanging kernel under @triton.autotune is still caught within --timeout);
    # each config's compile inside it is timed apart through triton.compiler.compile
    compile_hooks = ("triton.compiler:compile", "triton.compiler.compiler:compile")
    compile_hooks_complete = True

    def worker_env(self, device: str) -> dict[str, str]:
        env = {"TRITON_DEFAULT_FP_FUSION": os.environ.get("TRITON_DEFAULT_FP_FUSION", "1")}
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        return env

    def cache_env(self, home: Path) -> dict[str, str]:
        return {"TRITON_CACHE_DIR": str(home / ".triton-cache"), "TRITON_HOME": str(home)}

    def dump_env(self) -> dict[str, str]:
        return {"CTXKERNEL_RECORD_LAUNCHES": "1"}

    def prepare_trace(self, device: str, candidate_path: str) -> None:
        """Under the interpreter Proton's scope calls cannot run: make them no-ops for a
        candidate that uses them."""
        interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        if not interpreted or not _mentions(candidate_path, "profiler"):
            return
        try:
            from ..tracing.proton import neutralize_under_interpreter

            neutralize_under_interpreter()
        except Exception:  # a Triton without Proton: the candidate's scopes fail visibly
            pass

    def dump_plan(self, device: str, target: str | None) -> DumpPlan | None:
        if device == "cpu":
            if not target:
                return None
            # launches recorded under the interpreter are compiled where it is off
            return DumpPlan(
                {"CTXKERNEL_RECORD_ONLY": "1"},
                record_only=True,
                compile_env={"TRITON_INTERPRET": "0"},
            )
        return DumpPlan()

    def recorded_launches(self) -> list[dict[str, Any]]:
        from .triton_aot import launches_to_json

        return launches_to_json()

    def collect_artifacts(
        self, target: str | None, notes: list[str], launches: list[dict[str, Any]] | None
    ) -> list[File]:
        return _aot(target, notes, launches) if target else _cache(notes)

    def tool_dirs(self) -> list[Path]:
        spec = importlib.util.find_spec("triton")
        if spec is None or not spec.origin:
            return []
        return [Path(spec.origin).parent / "backends" / "nvidia" / "bin"]

    def prepare_worker(self, device: str) -> LaunchCounter | None:
        counter = LaunchCounter()
        try:
            import triton.runtime.jit as jit
        except ImportError:
            return None
        _wrap_run(jit.JITFunction, counter)
        try:
            import triton.runtime.interpreter as interpreter
        except ImportError:
            interpreter = None  # type: ignore[assignment]
        if interpreter is not None and hasattr(interpreter, "InterpretedFunction"):
            _wrap_run(interpreter.InterpretedFunction, counter)
        if device == "cpu" and os.environ.get("TRITON_INTERPRET") == "1" and not _WARM[0]:
            _warm_interpreter()
        from .triton_aot import RECORDED

        RECORDED.clear()  # the harness's own warm-up launch is no candidate kernel
        return counter

    def warm_template(self) -> None:
        """The interpreter's first launch, once for every CPU worker the template forks
        (a template for CPU workers is started with their ``TRITON_INTERPRET=1``); for GPU
        workers, the driver's C helpers built once (``_build_driver_seed``) and Triton's
        own GPU-free lookups made once (``warm_lookups``)."""
        if os.environ.get("TRITON_INTERPRET") == "1":
            _warm_interpreter()
            _WARM[0] = True
        elif os.path.exists("/dev/nvidiactl"):
            _SEED.update(_build_driver_seed())
            warm_lookups()

    def seed_worker(self) -> dict[str, int]:
        """Put the driver's C helpers the template built into this worker's own Triton
        cache: a copy of Triton's own build of its own source, so a fresh worker loads
        them instead of compiling them with the host compiler (0.25-0.4 s on an H200 host).
        The bytes are the template's (copy-on-write memory no worker can change), written
        to files only this worker sees."""
        root = os.environ.get("TRITON_CACHE_DIR")
        if not _SEED or not root:
            return {}
        written = 0
        for rel, data in _SEED.items():
            path = Path(root) / rel
            if path.exists():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written += 1
        return {"files": written, "bytes": sum(len(d) for d in _SEED.values())}

    def prepare_torch_compile(self, counter: LaunchCounter | None) -> None:
        if counter is None:
            return
        try:
            from torch._inductor.runtime import triton_heuristics
        except Exception:  # inductor failing to import means no torch.compile to count
            return
        cls = getattr(triton_heuristics, "CachingAutotuner", None)
        original = getattr(cls, "run", None) if cls is not None else None
        if original is None or getattr(original, "_ctxkernel_counted", False):
            return

        @functools.wraps(original)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            name = str(getattr(getattr(self, "fn", None), "__name__", "") or "")
            if GENERATED.match(name):
                counter.generated.add(name)
            else:
                counter.count += 1
                if name:
                    counter.names.add(name)
            return result

        run._ctxkernel_counted = True  # type: ignore[attr-defined]
        cls.run = run  # type: ignore[union-attr]

    def is_compile_error(self, exc: BaseException) -> bool:
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            module = type(current).__module__ or ""
            if module.startswith("triton.compiler") or type(current).__name__ in (
                "CompilationError",
                "CompileTimeAssertionFailure",
                "UnsupportedLanguageConstruct",
            ):
                return True
            current = current.__cause__ or current.__context__
        return False

    def environment(self) -> dict[str, object]:
        try:
            import triton
        except ImportError:
            return {"triton": None}
        return {
            "triton": triton.__version__,
            "triton_interpreter": os.environ.get("TRITON_INTERPRET") == "1",
        }


def _wrap_run(cls: Any, counter: LaunchCounter) -> None:
    original = cls.__dict__.get("run")
    if original is None or getattr(original, "_ctxkernel_counted", False):
        return
    record: Any = None
    if envvars.CTXKERNEL_RECORD_LAUNCHES.get():
        from .triton_aot import record_launch

        record = record_launch
    # a dump worker on a CPU machine records launches on large shapes without running them
    record_only = record is not None and envvars.CTXKERNEL_RECORD_ONLY.get()

    @functools.wraps(original)
    def run(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        if record is not None and not warmup:
            record(self, args, kwargs)
            if record_only:
                counter.count += 1
                return None
        counter.depth += 1
        try:
            result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            counter.depth -= 1
        if not warmup:
            counter.count += 1
            name = getattr(self, "__name__", None) or getattr(
                getattr(self, "fn", None), "__name__", ""
            )
            if name:
                counter.names.add(str(name))
        return result

    run._ctxkernel_counted = True  # type: ignore[attr-defined]
    cls.run = run


_WARM = [False]  # the interpreter's first launch already paid (in the worker template)
# the driver's C helpers as Triton's cache holds them: relative path -> bytes (template)
_SEED: dict[str, bytes] = {}
_SEED_TIMEOUT_S = 120.0


NVIDIA_TOOLS = ("ptxas", "ptxas_blackwell", "cuobjdump", "nvdisasm")


def warm_lookups() -> dict[str, float]:
    """Triton's process-wide, memoised lookups that need no GPU and read only Triton's own
    files, made once in the template so that no forked worker repeats them: the hash of
    Triton's sources and its 100+ MB library (``triton_key``, part of every kernel's cache
    key, so paid on a cache hit too: 0.45 s on a CPU VM) and each NVIDIA tool's version
    (``ptxas --version`` and the like, a subprocess each). Triton's own warm-up pool hands
    its workers ``triton_key`` the same way. Seconds per lookup; a missing one is skipped."""
    import time

    took: dict[str, float] = {}
    key = None
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):  # 3.2+, older
        try:
            key = importlib.import_module(module).triton_key
            break
        except Exception:  # not this Triton's layout, or Triton broken: a warm-up only
            continue
    if key is not None:
        t0 = time.perf_counter()
        try:
            key()
            took["triton_key"] = round(time.perf_counter() - t0, 4)
        except Exception:  # a warm-up only: the worker computes the key itself
            pass
    try:
        from triton import knobs

        nvidia = knobs.nvidia
    except Exception:  # a Triton before knobs: nothing to warm
        return took
    for tool in NVIDIA_TOOLS:
        t0 = time.perf_counter()
        try:
            getattr(nvidia, tool)  # NvidiaTool.from_path: ``<tool> --version``, memoised
            took[tool] = round(time.perf_counter() - t0, 4)
        except Exception:  # a tool missing or failing: the worker finds out itself
            continue
    return took


def _build_driver_seed() -> dict[str, bytes]:
    """Triton's driver helpers (``cuda_utils``), built by Triton itself in a forked child
    of the template with a cache folder of its own: the child loads the helpers (and with
    them ``libcuda``), the template never does -- it stays without CUDA. What the build
    left in that folder is read back (the cache's layout is Triton's, whatever its
    version: keys hash the source and the platform, not the folder). Empty on failure."""
    import shutil
    import tempfile
    import time

    folder = tempfile.mkdtemp(prefix="triton-seed-")
    try:
        pid = os.fork()
        if pid == 0:  # the child: build, then leave without running any cleanup
            code = 1
            try:
                os.environ["TRITON_CACHE_DIR"] = folder
                from triton.backends.nvidia.driver import CudaUtils

                CudaUtils()
                code = 0
            finally:
                os._exit(code)
        deadline = time.monotonic() + _SEED_TIMEOUT_S
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return {}
            time.sleep(0.01)
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            return {}
        seed = {}
        for path in Path(folder).rglob("*"):
            if path.is_file() and not path.name.startswith("tmp"):
                seed[str(path.relative_to(folder))] = path.read_bytes()
        return seed
    except OSError:
        return {}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _warm_interpreter() -> None:
    """The interpreter's first launch imports a lot; pay for it outside the candidate's time."""
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError:
        return
    import importlib.util
    import tempfile

    source = (
        "import triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef _ck_warm(x_ptr, n, B: tl.constexpr):\n"
        "    offs = tl.program_id(0) * B + tl.arange(0, B)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)\n"
    )
    del triton, tl
    with tempfile.TemporaryDirectory(prefix="ck-warm-") as tmp:
        path = os.path.join(tmp, "_ck_warm.py")
        with open(path, "w") as fh:
            fh.write(source)
        spec = importlib.util.spec_from_file_location("_ck_warm", path)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        x = torch.zeros(8)
        module._ck_warm[(1,)](x, 8, B=8)


def _mentions(path: str, word: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return word in fh.read()
    except OSError:
        return False


def _cache(notes: list[str]) -> list[File]:
    root = os.environ.get("TRITON_CACHE_DIR")
    if not root or not os.path.isdir(root):
        notes.append("no Triton cache dir in the worker")
        return []
    files: list[File] = []
    for version_dir in sorted(Path(root).iterdir()):
        if not version_dir.is_dir() or not any(version_dir.glob("*.cubin")):
            continue
        version = version_dir.name[:10]
        for path in sorted(version_dir.iterdir()):
            kind = path.suffix.lstrip(".")
            if kind not in KINDS or path.name.startswith("__grp__"):
                continue
            files.append(
                (
                    {"name": path.name, "kernel": path.stem, "version": version, "kind": kind},
                    path.read_bytes(),
                )
            )
    if not files:
        notes.append("no compiled Triton kernel in the worker's cache (nothing launched?)")
    return files


def _aot(target: str, notes: list[str], launches: list[dict[str, Any]] | None) -> list[File]:
    from .triton_aot import RECORDED, compile_launch, launches_from_json

    if launches is not None:
        specs, more = launches_from_json(launches)
        notes.extend(more)
    else:
        specs = list(RECORDED.values())
    if not specs:
        notes.append("no Triton launch was recorded, so nothing to compile ahead of time")
        return []
    files: list[File] = []
    for spec in specs:
        try:
            result = compile_launch(spec, target)
        except Exception as exc:
            notes.append(
                f"AOT compile of {spec.name} for {target} failed: {type(exc).__name__}: {exc}"[:600]
            )
            continue
        meta = result["metadata"]
        version = meta["version"]
        name = str(meta.get("name") or spec.name)
        for kind, value in result["asm"].items():
            if kind not in KINDS:
                continue
            data = value if isinstance(value, bytes) else str(value).encode()
            files.append(
                (
                    {"name": f"{name}.{kind}", "kernel": name, "version": version, "kind": kind},
                    data,
                )
            )
        files.append(
            (
                {"name": f"{name}.json", "kernel": name, "version": version, "kind": "json"},
                json.dumps(meta, default=str, indent=1).encode(),
            )
        )
    return files
