"""Environment variables: every ``CTXKERNEL_*`` variable declared once, and the one reader.

A declaration (``Var``) says a variable's name, the type of its value, its default, what it
means in plain words and which part of ctxkernel reads it. Code reads a variable through
its declaration, ``envvars.CTXKERNEL_WARM.get()``, or by name, ``envvars.get(name)``; a
name that is not declared here is a ``KeyError`` (a programming error, never a user's).
Nothing else in ``ctxkernel/`` or ``harness/`` reads ``os.environ`` for a ``CTXKERNEL_``
name (a test scans the source); code that builds a child process's environment writes the
declared names. ``ctxkernel env`` prints the declarations, ``docs/operations.md`` lists them.

How a value is read is the variable's own (kept as each call site read it before this
registry existed), one parser per kind of reading:

- a flag (bool, off by default) is on only when its value is exactly ``1``;
- a switch (bool, on by default) is off for ``0``, ``no``, ``off`` or ``false`` (any case,
  spaces around), on for anything else;
- text and paths: an empty value counts as unset; a path has ``~`` expanded;
- a whole number that is not one is an ``EnvError`` (a ``ValueError``: one line), except
  ``CTXKERNEL_INDEX_WORKERS``, where anything but digits means the default;
- seconds: a value that is not a positive number means the default;
- a choice: one of its words (any case, spaces around); another is an ``EnvError``.

Variables read only by the tests, the benchmarks or CI are declared too (their ``reader``
says so), so that this list is complete; those scripts read them with ``os.environ``.

Standard library only: the sandboxed worker imports it (the backends' dump switches).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")

KINDS = ("str", "int", "float", "bool", "path", "choice")
OFF = ("0", "no", "off", "false")  # what turns a switch off


class EnvError(ValueError):
    """A variable's value cannot be used: one line naming it, its value and what it takes."""


@dataclass(frozen=True)
class Var(Generic[T]):
    """One environment variable: its name, type, default, meaning and reader."""

    name: str
    kind: str  # one of KINDS: the type of the value, for people (``ctxkernel env``)
    default: T  # what ``get`` returns when the variable is unset (None: the reader decides)
    parse: Callable[[Var[T], str], T] = field(repr=False, compare=False)
    meaning: str
    reader: str  # which part reads it: "index", "search", "harness", "check server", "tests"
    choices: tuple[str, ...] = ()  # a choice's words

    def raw(self, env: Mapping[str, str] | None = None) -> str | None:
        """The value as set, unparsed (None when unset): for passing it on unchanged."""
        return (os.environ if env is None else env).get(self.name)

    def get(self, env: Mapping[str, str] | None = None) -> T:
        """The typed value from ``env`` (default: this process's environment)."""
        raw = self.raw(env)
        return self.default if raw is None else self.parse(self, raw)


VARS: dict[str, Var[Any]] = {}


def _declare(var: Var[T]) -> Var[T]:
    if var.name in VARS or not var.name.startswith("CTXKERNEL_") or var.kind not in KINDS:
        raise ValueError(f"bad declaration of {var.name}")
    VARS[var.name] = var
    return var


def declared(name: str) -> Var[Any]:
    """The declaration of ``name``; KeyError when there is none."""
    try:
        return VARS[name]
    except KeyError:
        raise KeyError(f"{name} is not declared in harness/envvars.py") from None


def get(name: str, env: Mapping[str, str] | None = None) -> Any:
    """The typed value of the declared variable ``name``; KeyError for an undeclared one."""
    return declared(name).get(env)


def shown_default(var: Var[Any]) -> str:
    """A default as it would be written in the environment ("unset" for none)."""
    if var.default is None:
        return "unset"
    if isinstance(var.default, bool):
        return "1" if var.default else "0"
    if isinstance(var.default, float) and var.default.is_integer():
        return str(int(var.default))
    return str(var.default)


# -- the parsers: one per way a value is read ----------------------------------------------


def _flag(var: Var[Any], raw: str) -> bool:
    return raw == "1"


def _switch(var: Var[Any], raw: str) -> bool:
    return raw.strip().lower() not in OFF


def _nonempty(var: Var[Any], raw: str) -> bool:
    return bool(raw)


def _text(var: Var[Any], raw: str) -> str | None:
    return raw or None


def _text_or_default(var: Var[Any], raw: str) -> str:
    return raw or str(var.default)


def _path(var: Var[Any], raw: str) -> Path | None:
    return Path(raw).expanduser() if raw else None


def _whole(var: Var[Any], raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise EnvError(f"{var.name}={raw!r}: expected a whole number") from None


def _count(var: Var[Any], raw: str) -> int | None:
    return max(1, int(raw)) if raw.isdigit() else var.default


def _seconds(var: Var[Any], raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        return float(var.default)
    return value if value > 0 else float(var.default)


def _choice(var: Var[Any], raw: str) -> str:
    wanted = raw.strip().lower() or str(var.default)
    if wanted not in var.choices:
        raise EnvError(f"{var.name}={wanted!r}: expected one of {', '.join(var.choices)}")
    return wanted


# -- where things live ---------------------------------------------------------------------

CTXKERNEL_HOME: Var[Path | None] = _declare(
    Var(
        "CTXKERNEL_HOME", "path", None, _path,
        "one folder for everything: indexes/, runs/, cache/ and the config dir "
        "(config.toml, corpora/); unset: the checkout, else the XDG folders",
        "paths (every part)",
    )
)  # fmt: skip
CTXKERNEL_INDEX_DIR: Var[Path | None] = _declare(
    Var(
        "CTXKERNEL_INDEX_DIR", "path", None, _path,
        "the local index's folder (as --index-dir; before config.toml's index_dir)",
        "index, search",
    )
)  # fmt: skip
CTXKERNEL_RUNS: Var[Path | None] = _declare(
    Var(
        "CTXKERNEL_RUNS", "path", None, _path,
        "where check and agent run records go; unset: runs/ under the home",
        "harness, agent",
    )
)  # fmt: skip
CTXKERNEL_CHROMA_URL: Var[str | None] = _declare(
    Var(
        "CTXKERNEL_CHROMA_URL", "str", None, _text,
        "a chromadb server (http://HOST:PORT) used instead of the local store (as --chroma-url)",
        "index, search",
    )
)  # fmt: skip

# -- retrieval: embedders, models, indexing ------------------------------------------------

CTXKERNEL_EMBED: Var[str | None] = _declare(
    Var(
        "CTXKERNEL_EMBED", "str", None, _text,
        "the embedder an index run uses: static, minilm or a local model folder (as --embed; "
        "before config.toml's embed)",
        "index",
    )
)  # fmt: skip
CTXKERNEL_EMBED_MODEL: Var[str | None] = _declare(
    Var(
        "CTXKERNEL_EMBED_MODEL", "str", None, _text,
        "the sentence-transformers model (a local folder) to embed with; unset: the bundled "
        "all-MiniLM-L6-v2",
        "index, search",
    )
)  # fmt: skip
CTXKERNEL_EMBED_DEVICE: Var[str | None] = _declare(
    Var(
        "CTXKERNEL_EMBED_DEVICE", "str", None, _text,
        "where the transformer embedder runs (cpu, cuda, cuda:1); unset: CUDA when torch has it",
        "index, search",
    )
)  # fmt: skip
CTXKERNEL_EMBED_MAX_TOKENS: Var[int] = _declare(
    Var(
        "CTXKERNEL_EMBED_MAX_TOKENS", "int", 128, _whole,
        "tokens of each text the transformer embedder reads (part of its key)",
        "index, search",
    )
)  # fmt: skip
CTXKERNEL_EMBED_TEXT: Var[str] = _declare(
    Var(
        "CTXKERNEL_EMBED_TEXT", "str", "compact", _text_or_default,
        "what the dense side embeds of a chunk: compact (a short summary) or full (its whole "
        "text, the benchmarks' baseline)",
        "index, search",
    )
)  # fmt: skip
CTXKERNEL_EMBEDDERS_DIR: Var[Path | None] = _declare(
    Var(
        "CTXKERNEL_EMBEDDERS_DIR", "path", None, _path,
        "where built static embedders are kept; unset: embedders/ in the cache dir",
        "index, search",
    )
)  # fmt: skip
CTXKERNEL_STATIC_RECIPE: Var[str] = _declare(
    Var(
        "CTXKERNEL_STATIC_RECIPE", "str", "default", _text_or_default,
        "the static embedder's recipe: default, fast or tiny (as --recipe)",
        "index, search",
    )
)  # fmt: skip
CTXKERNEL_ALLOW_DOWNLOAD: Var[bool] = _declare(
    Var(
        "CTXKERNEL_ALLOW_DOWNLOAD", "bool", False, _flag,
        "1 lets a model named by its hub id be downloaded; otherwise models load offline",
        "index, search",
    )
)  # fmt: skip
CTXKERNEL_RERANK_MODEL: Var[str | None] = _declare(
    Var(
        "CTXKERNEL_RERANK_MODEL", "str", None, _text,
        "the local cross-encoder folder that --rerank uses (as --rerank-model)",
        "search",
    )
)  # fmt: skip
CTXKERNEL_INDEX_WORKERS: Var[int | None] = _declare(
    Var(
        "CTXKERNEL_INDEX_WORKERS", "int", None, _count,
        "processes that chunk files in an index run (at least 1); unset or not digits: "
        "the CPUs, at most 4",
        "index",
    )
)  # fmt: skip
CTXKERNEL_GIT_STALL_S: Var[float] = _declare(
    Var(
        "CTXKERNEL_GIT_STALL_S", "float", 60.0, _seconds,
        "seconds a git fetch may show no progress before it is killed",
        "index (git sources)",
    )
)  # fmt: skip
CTXKERNEL_MODEL: Var[str | None] = _declare(
    Var(
        "CTXKERNEL_MODEL", "str", None, _text,
        "the Claude model id the agent uses (as --model)",
        "agent",
    )
)  # fmt: skip

# -- the harness -----------------------------------------------------------------------------

CTXKERNEL_ISOLATION: Var[str] = _declare(
    Var(
        "CTXKERNEL_ISOLATION", "choice", "auto", _choice,
        "the workers' sandbox mode: auto (the strongest the machine allows), userns, pidns "
        "or none; another word is a usage error",
        "harness (sandbox)",
        choices=("auto", "userns", "pidns", "none"),
    )
)  # fmt: skip
CTXKERNEL_WARM: Var[bool] = _declare(
    Var(
        "CTXKERNEL_WARM", "bool", True, _switch,
        "0 starts every worker fresh instead of forking a warm template (and no check server)",
        "harness, check server",
    )
)  # fmt: skip
CTXKERNEL_CHECK_SERVER: Var[bool] = _declare(
    Var(
        "CTXKERNEL_CHECK_SERVER", "bool", True, _switch,
        "0 runs a one-shot check in its own process instead of the warm check server",
        "check server",
    )
)  # fmt: skip
CTXKERNEL_CHECK_SERVER_IDLE: Var[float] = _declare(
    Var(
        "CTXKERNEL_CHECK_SERVER_IDLE", "float", 600.0, _seconds,
        "seconds a check server waits for a check before it exits",
        "check server",
    )
)  # fmt: skip
CTXKERNEL_REF_CACHE: Var[bool] = _declare(
    Var(
        "CTXKERNEL_REF_CACHE", "bool", True, _switch,
        "0 times the reference in every check instead of reusing its cached time",
        "harness (benchmark)",
    )
)  # fmt: skip
CTXKERNEL_WORKER: Var[bool] = _declare(
    Var(
        "CTXKERNEL_WORKER", "bool", False, _flag,
        "1 in a candidate's worker (the harness sets it): a check from there never uses "
        "the check server",
        "check server",
    )
)  # fmt: skip
CTXKERNEL_TRACE: Var[bool] = _declare(
    Var(
        "CTXKERNEL_TRACE", "bool", False, _flag,
        "1 in the trace rung's worker (the harness sets it): ck_trace buffers record",
        "worker (tracing)",
    )
)  # fmt: skip
CTXKERNEL_DUMP: Var[bool] = _declare(
    Var(
        "CTXKERNEL_DUMP", "bool", False, _flag,
        "1 in a dump worker (the harness sets it): CuTeDSL keeps its MLIR, PTX and cubin",
        "worker (CuTeDSL)",
    )
)  # fmt: skip
CTXKERNEL_KEEP_NVCC: Var[bool] = _declare(
    Var(
        "CTXKERNEL_KEEP_NVCC", "bool", False, _flag,
        "1 in a dump worker (the harness sets it): load_inline builds keep nvcc's files",
        "worker (CUDA C++)",
    )
)  # fmt: skip
CTXKERNEL_RECORD_LAUNCHES: Var[bool] = _declare(
    Var(
        "CTXKERNEL_RECORD_LAUNCHES", "bool", False, _flag,
        "1 in a dump worker (the harness sets it): Triton launches are recorded for the dump",
        "worker (Triton)",
    )
)  # fmt: skip
CTXKERNEL_RECORD_ONLY: Var[bool] = _declare(
    Var(
        "CTXKERNEL_RECORD_ONLY", "bool", False, _flag,
        "1 in a CPU dump worker (the harness sets it): recorded Triton launches are not run",
        "worker (Triton)",
    )
)  # fmt: skip
CTXKERNEL_POOL_SLOT: Var[int | None] = _declare(
    Var(
        "CTXKERNEL_POOL_SLOT", "int", None, _whole,
        "which slot of the per-GPU pool a slot process is (the pool sets it; it names the "
        "process, nothing reads it)",
        "runners (pool)",
    )
)  # fmt: skip
CTXKERNEL_POOL_SLOTS: Var[int | None] = _declare(
    Var(
        "CTXKERNEL_POOL_SLOTS", "int", None, _whole,
        "how many slots the pool runs at once (the pool sets it): a slot process gives torch "
        "its share of the CPUs, all of them divided by this, unless OMP_NUM_THREADS is set",
        "runners (pool)",
    )
)  # fmt: skip

# -- tests, benchmarks and CI only (they read these with os.environ) ----------------------

CTXKERNEL_TEST_EMBEDDERS_DIR: Var[Path | None] = _declare(
    Var(
        "CTXKERNEL_TEST_EMBEDDERS_DIR", "path", None, _path,
        "keeps the tests' tiny static embedder across test sessions; unset: a temp folder "
        "per session",
        "tests",
    )
)  # fmt: skip
CTXKERNEL_TEST_JOBS: Var[int] = _declare(
    Var(
        "CTXKERNEL_TEST_JOBS", "int", 2, _whole,
        "checks the harness tests' shared verdict pool runs at once",
        "tests",
    )
)  # fmt: skip
CTXKERNEL_FORCE_NO_GPU: Var[bool] = _declare(
    Var(
        "CTXKERNEL_FORCE_NO_GPU", "bool", False, _nonempty,
        "any value: the gpu tests skip as if there were no CUDA device",
        "tests",
    )
)  # fmt: skip
CTXKERNEL_FUZZ_EXAMPLES: Var[int | None] = _declare(
    Var(
        "CTXKERNEL_FUZZ_EXAMPLES", "int", None, _whole,
        "examples per fuzz test (the tools' tests run twice as many); unset: 15 for the "
        "CLI's, 12 for the tools'",
        "tests (fuzz)",
    )
)  # fmt: skip
CTXKERNEL_FUZZ_LOG: Var[Path | None] = _declare(
    Var(
        "CTXKERNEL_FUZZ_LOG", "path", None, _path,
        "a file the CLI fuzz test appends every command it ran to",
        "tests (fuzz)",
    )
)  # fmt: skip
CTXKERNEL_KERNELBENCH_MIRROR: Var[Path | None] = _declare(
    Var(
        "CTXKERNEL_KERNELBENCH_MIRROR", "path", None, _path,
        "a KernelBench checkout or git folder; the test of its problems skips without it",
        "tests",
    )
)  # fmt: skip
CTXKERNEL_PLANTED: Var[str | None] = _declare(
    Var(
        "CTXKERNEL_PLANTED", "str", None, _text,
        "set by a planted cheat in its worker, to find whether the next worker inherits it",
        "tests (cheats)",
    )
)  # fmt: skip
CTXKERNEL_CI_USER: Var[str] = _declare(
    Var(
        "CTXKERNEL_CI_USER", "str", "ckci", _text_or_default,
        "the unprivileged user .ci/as-unprivileged.sh creates and runs the tests as",
        "CI",
    )
)  # fmt: skip


__all__ = ["KINDS", "OFF", "VARS", "EnvError", "Var", "declared", "get", "shown_default"]
