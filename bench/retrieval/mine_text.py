"""Wording for mined evaluation queries: runtime values for format fields, error
renderings as a user sees them, and a deterministic paraphrase table.

Used by ``bench/retrieval/mine_queries.py``. Every choice goes through a ``random.Random`` that the
caller seeds from the run's seed and the query's source site, so a run is reproducible.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Sequence

# --- plausible runtime values for f-string / format fields -------------------------------

CUTLASS_DTYPES = ("Float16", "BFloat16", "Float32", "Float8E4M3FN", "Int8", "TFloat32")
TRITON_DTYPES = ("fp16", "bf16", "fp32", "int32", "fp8e4nv", "int8")
TYPE_REPRS = ("<class 'int'>", "<class 'tuple'>", "<class 'float'>", "<class 'torch.Tensor'>")
TYPE_NAMES = ("int", "tuple", "Tensor", "float", "NoneType", "list")
IDENTS = ("my_kernel", "acc", "a_ptr", "tile_k", "gemm_kernel", "x_ptr", "smem_buf")
INTS = ("3", "16", "32", "64", "128", "256", "512")
DIMS = ("4096", "1024", "300", "8192", "2048")
SHAPES = ("(128, 64)", "(256, 128)", "(64, 64, 32)", "(128, 128, 64)", "(2, 1)")
ARCHS = ("sm_90a", "sm_80", "sm_100a", "sm_120a")
LAYOUTS = ("(128,64):(64,1)", "((8,16),4):((16,1),128)", "(64,32):(1,64)")


def field_value(expr: str, corpus: str, rng: random.Random, conversion: int = -1) -> str:
    """A value a user would see in place of ``{expr}`` (the field's source text)."""
    e = expr.strip()
    low = e.lower()
    idents = re.findall(r"[a-z_][a-z0-9_]*", re.sub(r"\[[^\]]*\]", "", low))
    last = idents[-1] if idents else ""
    dtypes = CUTLASS_DTYPES if corpus == "cutlass" else TRITON_DTYPES
    if low.startswith("type(") and low.endswith(")"):
        value = rng.choice(TYPE_REPRS)
    elif low.endswith("__name__") or low.endswith("__class__"):
        value = rng.choice(TYPE_NAMES)
    elif e.endswith("]") or low.startswith("len(") or re.search(r"(^|_)[mnkl]$", last):
        value = rng.choice(INTS if not re.search(r"(^|_)[mnkl]$", last) else DIMS[:2] + INTS[3:])
    elif "dtype" in low or last in ("ty", "scalar_ty") or last.endswith(("_ty", "type")):
        value = rng.choice(dtypes)
    elif "major" in last:
        value = rng.choice(("K", "MN"))
    elif last.startswith(("use_", "is_", "has_", "enable")) or last.endswith("_enabled"):
        value = rng.choice(("True", "False"))
    elif "layout" in last:
        value = rng.choice(LAYOUTS)
    elif "stride" in last:
        value = rng.choice(("(64, 1)", "(1, 128)"))
    elif "arch" in low or last in ("sm", "target", "capability"):
        value = rng.choice(ARCHS)
    elif any(w in last for w in ("size", "num", "count", "width", "bits")):
        value = rng.choice(INTS)
    elif any(w in last for w in ("shape", "tiler", "tile", "cluster")):
        value = rng.choice(SHAPES)
    elif last in ("i", "j") or any(
        w in last for w in ("bytes", "cols", "stage", "rank", "dim", "axis", "idx")
    ):
        value = rng.choice(INTS[:4])
    elif last in ("order",):
        value = "(1, 0)"
    elif last in ("mode",):
        value = rng.choice(("tile", "im2col"))
    elif last in ("kind",):
        value = rng.choice(("f16", "tf32", "mxf8f6f4"))
    elif any(w in last for w in ("valid", "choices", "supported", "allowed")):
        value = "[" + ", ".join(rng.sample(dtypes, 3)) + "]"
    elif last in ("path", "file", "filename"):
        value = "kernel.py"
    elif last in ("e", "err", "exc", "error"):
        value = rng.choice(("CUDA_ERROR_INVALID_VALUE", "invalid argument"))
    elif any(
        w in last for w in ("name", "op", "kernel", "func", "method", "field", "label", "key")
    ):
        value = rng.choice(IDENTS)
    else:
        value = rng.choice(INTS)
    if (
        conversion == ord("r")
        and value[:1] not in "(<[0123456789"
        and value not in ("True", "False")
    ):
        value = repr(value)
    return value


# --- an error as the user sees it ----------------------------------------------------------

DSL_INTERNAL = "The compiler hit an internal DSL problem while compiling your code."
KERNEL_LINES = ("out = _inner(x, y, BLOCK)", "acc = _step(acc, a, b)", "y = fn(x)")


def render_error(
    exc: str, message: str, corpus: str, path: str, rng: random.Random, is_assert: bool
) -> str:
    """``TypeError: ...``, ``DSLRuntimeError: ...``, a Triton ``CompilationError`` around
    the message when the raise runs while a kernel compiles, or nvcc's static_assert line."""
    if exc == "static_assert":
        line = rng.randint(40, 400)
        style = rng.random()
        if style < 0.5:
            return f'error: static assertion failed with "{message}"'
        return f'kernel.cu({line}): error: static assertion failed with "{message}"'
    short = exc.rsplit(".", 1)[-1]
    compiling = corpus == "triton" and (
        path.startswith("python/triton/language/")
        or path.startswith("python/triton/experimental/gluon/language/")
    )
    r = rng.random()
    if compiling and r < 0.55:
        line, col = rng.randint(5, 60), rng.choice((4, 8, 12, 16))
        if r < 0.3:
            return f"triton.compiler.errors.CompilationError: at {line}:{col}: {short}({message!r})"
        if r < 0.45:
            return f"CompilationError: at {line}:{col}: {message}"
        code = rng.choice(KERNEL_LINES)
        return f"CompilationError: at {line}:{col}: {code} {message}"
    if short.startswith("DSL") and corpus == "cutlass":
        if short == "DSLRuntimeError" and r < 0.35:
            return f"DSLRuntimeError: error[INTERNAL]: {DSL_INTERNAL} error: {message}"
        if r < 0.5:
            return f"cutlass.base_dsl.common.{short}: error: {message}"
        return f"{short}: {message}"
    return f"{short}: {message}"


# --- paraphrase ----------------------------------------------------------------------------

# (pattern, replacements): a match is replaced by one of the replacements, chosen by the rng.
SYNONYMS: list[tuple[str, tuple[str, ...]]] = [
    (r"\bmatrix multiplication\b", ("GEMM", "matmul")),
    (r"\bmatrix multiply\b", ("GEMM", "matmul")),
    (r"\bgeneral matrix multiply\b", ("GEMM",)),
    (r"\bNVIDIA\s+", ("",)),
    (r"\bBlackwell SM100 architecture\b", ("Blackwell (sm100)", "SM100 Blackwell")),
    (r"\bHopper SM90 architecture\b", ("Hopper (sm90)", "SM90")),
    (r"\bAmpere SM80 architecture\b", ("Ampere (sm80)", "SM80")),
    (r"\b(Blackwell|Hopper|Ampere|Ada) architecture\b", (r"\1", r"\1 GPUs")),
    (
        r"\busing CUTE DSL\b|\busing CuTe DSL\b|\busing the CuTe DSL\b",
        ("in CuTeDSL", "with the CuTe DSL"),
    ),
    (r"\bTensor Memory Accelerator \(TMA\)", ("TMA",)),
    (r"\bTensor Memory Accelerator\b", ("TMA",)),
    (r"\bglobal memory\b", ("gmem", "global mem", "device memory")),
    (r"\bshared memory\b", ("smem", "shared mem")),
    (r"\btensor memory\b", ("TMEM",)),
    (r"\butiliz(?:e|es|ing)\b", ("use",)),
    (r"\bdemonstrat(?:es|e|ing)\b", ("shows", "illustrates")),
    (r"\bimplementation of\b", ("impl of", "version of")),
    (r"\bimplements\b", ("does", "computes")),
    (r"\bInitiates\b|\binitiates\b", ("starts", "kicks off")),
    (r"\bPerforms\b|\bperforms\b", ("does", "carries out")),
    (r"\basynchronous\b", ("async",)),
    (r"\bsynchroniz(?:e|es|ation)\b", ("sync",)),
    (r"\befficient(?:ly)?\b", ("fast",)),
    (r"\boperations?\b", ("op",)),
    (r"\binstructions?\b", ("instr",)),
    (r"\bspecified\b", ("given",)),
    (r"\bthread block\b|\bthreadblock\b", ("CTA",)),
    (r"\bsupport for\b", ("support of",)),
    (r"\bdata types?\b", ("dtypes",)),
    (r"\bfloating[- ]point\b", ("float",)),
    (r"\bcorresponding\b", ("matching",)),
    (r"\bmultiple\b", ("several", "many")),
    (r"\bin order to\b", ("to",)),
    (r"\bwhich\b", ("that",)),
    (r"\busing Triton\b", ("in Triton", "with Triton")),
    (r"\bwith the CuTe DSL\b", ("in CuTeDSL", "with CuTe DSL")),
    (r"\bhigh-performance\b", ("fast", "high-perf")),
    (r"\bpredefined, read-only\s+", ("",)),
]

_MARKUP = [
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # markdown link -> its text
    (re.compile(r"[`*]+"), ""),
    (re.compile(r":(?:class|func|meth|code|ref):"), ""),
    (re.compile(r"^\s*(?:\d+\.)+\d*\s*"), ""),  # leading section number
    (re.compile(r"\s+"), " "),
]


def strip_markup(text: str) -> str:
    for pat, rep in _MARKUP:
        text = pat.sub(rep, text)
    return text.strip()


def first_sentence(text: str) -> str:
    text = strip_markup(text)
    text = re.sub(
        r"(?<=[a-z0-9)])\s+(?=This (?:example|kernel|file|tutorial|sample)\b)", ". ", text
    )
    m = re.search(r"(?<=[a-z0-9)\]])[.!?](?=\s+[A-Z(`\-*•]|\s*$)|:\s*$|\s+-\s+[A-Z]", text)
    return (text[: m.start()] if m else text).strip(" .:")


def apply_synonyms(text: str, rng: random.Random) -> str:
    for pattern, choices in SYNONYMS:
        rx = re.compile(pattern)
        if rx.search(text):
            text = rx.sub(rng.choice(choices), text)
    return re.sub(r"\s+", " ", text).strip()


def plain_identifier(name: str) -> str:
    """``make_tiled_copy`` -> ``make tiled copy``; ``CopyBulkTensorTileG2SOp`` -> ``copy
    bulk tensor tile g2s op``."""
    name = name.replace("_", " ")
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return re.sub(r"\s+", " ", name).lower().strip()


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def verbatim_share(query: str, source: str) -> float:
    """Longest run of words the query shares with the source text, over the query's length."""
    q, s = words(query), words(source)
    if not q:
        return 1.0
    m = difflib.SequenceMatcher(None, q, s, autojunk=False).find_longest_match(0, len(q), 0, len(s))
    return m.size / len(q)


def content_words(text: str) -> set[str]:
    stop = {
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "to",
        "for",
        "with",
        "and",
        "is",
        "how",
        "do",
        "i",
        "what",
        "does",
        "example",
        "ptx",
        "show",
        "me",
        "find",
        "there",
    }
    return {w for w in words(text) if w not in stop}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def near_duplicate(query: str, others: Sequence[set[str]], threshold: float = 0.8) -> bool:
    mine = content_words(query)
    return any(jaccard(mine, o) >= threshold for o in others)


DANGLING = {"in", "for", "with", "of", "the", "a", "an", "and", "using", "to", "on", "by", "or"}


def shorten(text: str, max_words: int) -> str:
    """Cut a long description at a clause boundary, else at ``max_words``; never end on
    a preposition or article."""
    ws = text.split()
    if len(ws) > max_words:
        cut = " ".join(ws[:max_words])
        for sep in (", with ", " with support", ", ", " and "):
            i = cut.rfind(sep)
            if i > len(cut) // 2:
                cut = cut[:i]
                break
        ws = cut.split()
    while ws and ws[-1].lower().strip(",;:") in DANGLING:
        ws.pop()
    return " ".join(ws)


PROPER = {
    "Blackwell",
    "Hopper",
    "Ampere",
    "Ada",
    "Volta",
    "Turing",
    "Triton",
    "Gluon",
    "PyTorch",
    "GeForce",
    "Geforce",
    "NVIDIA",
    "JAX",
    "Python",
    "Tri",
    "Dao",
}


def soft_lower(text: str) -> str:
    """Lower-case Capitalised words of a title; keep acronyms, mixed case, one-letter
    names and product names (``CTA``, ``mbarrier``, ``A``, ``Blackwell``)."""
    out = []
    for w in text.split():
        core = w.strip("(),:;.")
        keep = len(core) <= 1 or not core[1:].islower() or core in PROPER
        out.append(w if keep else w.lower())
    return " ".join(out)


def lower_first(text: str) -> str:
    """Lower-case the first letter unless the first word is an acronym (``CTA``, ``TMA``)."""
    if len(text) > 1 and text[1].isupper():
        return text
    return text[:1].lower() + text[1:]


def tidy_core(text: str, rng: random.Random) -> str:
    """A description cut down to what a request names: no URLs, no 'example' words, no
    leading article, parentheticals dropped half the time."""
    text = re.sub(r"\(?https?://\S+\)?", "", text)
    text = re.sub(r"^[Ee]xamples?\s+(?:of|for|on|showing|demonstrating)\s+", "", text)
    text = re.sub(r"\s[Ee]xamples?\s+(for|on|of|with)\b", r" \1", text)
    text = re.sub(r"\b[Ee]xamples?\b\s*:?", "", text)
    if rng.random() < 0.5:
        text = re.sub(r"\s*\([^)]*\)", "", text)
    text = re.sub(r"^\s*(?:a|an|the)\s+", "", text, flags=re.I)
    text = re.sub(r"\s+([,.;:])", r"\1", text)
    return re.sub(r"\s+", " ", text).strip(" ,;:-.")
