"""A pasted error finds its raise site in every form people paste it: bare, with runtime
values, inside a whole traceback, behind MLIR / nvcc / ptxas locations with notes, wrapped
by a terminal, cut off, or inside the asker's own sentence. The forms are the renderers of
``bench/retrieval/error_forms.py`` (one set of renderers for the test and the benchmark), drawn by
hypothesis over a small corpus the test writes and indexes."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxkernel import Workspace, errortext, raises

from .conftest import Repo, define_corpus

REPO = Path(__file__).resolve().parents[2]


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "error_forms", REPO / "bench" / "retrieval" / "error_forms.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ef = _load_bench()

# Raise sites in the shapes the real corpora hold; each message shares words with a
# decoy that does not raise it (a docstring, a log line, another check).
ERRORS_PY = '''\
"""Checks of the tile language front end."""


def check_dot(lhs, rhs, min_dot_size):
    """Dot needs every dimension of both inputs to be large enough."""
    assert lhs.shape[-1] >= min_dot_size, (
        f"All values in both first input shape ({lhs.shape}) and second input shape "
        f"({rhs.shape}) must be >= {min_dot_size}!"
    )
    return lhs


def check_layout(src, dst):
    if src.layout != dst.layout:
        raise ValueError(f"Layout mismatch in broadcast: {src.layout} vs {dst.layout}")
    return dst


def check_stages(num_stages, smem_bytes, limit):
    if smem_bytes > limit:
        raise RuntimeError(
            "out of resource: shared memory, Required: %d, Hardware limit: %d. "
            "Reducing block sizes or `num_stages` may help." % (smem_bytes, limit)
        )
    return num_stages


def check_scalar(value):
    if value is None:
        raise TypeError("cannot convert " + repr(value) + " of type " + str(type(value)) + " to tensor")
    return value


def check_constexpr_loop(name):
    raise AssertionError(f"cannot reassign constexpr {name} in the loop")
'''

DECOY_PY = '''\
"""Helpers that talk about layouts, shared memory and tensors without raising."""


def describe_broadcast(src, dst):
    """A layout mismatch in a broadcast is reported by check_layout; this only prints
    both layouts so a user can compare them."""
    print("broadcast layouts", src.layout, dst.layout)


def shared_memory_budget(limit):
    """The hardware limit on shared memory per block, in bytes, and the required bytes
    of a kernel: reduce block sizes or stages when required exceeds the limit."""
    return limit


def to_tensor(value):
    """Convert a Python scalar to a tensor of its type."""
    return value
'''

TILE_HPP = """\
#pragma once
namespace tile {

template <class A, class B>
void check_divisible() {
  static_assert(A::value % B::value == 0 || B::value % A::value == 0, "Static shape_div failure");
}

inline void check_mode(int mode) {
  if (mode > 2) {
    throw std::runtime_error("Unsupported copy mode for this architecture");
  }
}

}  // namespace tile
"""

SITES = {
    "check_dot": "src/lang/errors.py",
    "check_layout": "src/lang/errors.py",
    "check_stages": "src/lang/errors.py",
    "check_scalar": "src/lang/errors.py",
    "check_constexpr_loop": "src/lang/errors.py",
    "static_assert": "include/tile.hpp",
    "throw": "include/tile.hpp",
}


def _indexed(home: Path, upstream: Repo, files: dict[str, str]) -> Workspace:
    """The files committed to the upstream repo and indexed as corpus ``demo``."""
    for path, text in files.items():
        upstream.write(path, text)
    upstream.commit("files")
    define_corpus(home, "demo", str(upstream.path))
    ws = Workspace()
    ws.index("demo")
    return ws


@pytest.fixture
def error_ws(isolated_home: Path, upstream: Repo) -> Workspace:
    return _indexed(
        isolated_home,
        upstream,
        {
            "src/lang/errors.py": ERRORS_PY,
            "src/lang/decoys.py": DECOY_PY,
            "include/tile.hpp": TILE_HPP,
        },
    )


def _sites(ws: Workspace) -> list[Any]:
    cache = ws.store.synced_cache("demo")
    found = [s for s in ef.corpus_sites(cache, "demo") if s.path in SITES.values()]
    assert len(found) == len(SITES), [s.statement for s in found]
    return found


def test_every_pasted_form_of_every_message_finds_its_raise_site_first(error_ws: Workspace) -> None:
    sites = _sites(error_ws)
    cache = error_ws.store.synced_cache("demo")
    held = ef.holders(cache)

    @settings(
        max_examples=60,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        index=st.integers(0, len(sites) - 1),
        form=st.sampled_from(sorted(ef.FORMS)),
        seed=st.integers(0, 2**16),
    )
    def check(index: int, form: str, seed: int) -> None:
        site = sites[index]
        rng = random.Random(seed)
        message = ef.render_message(site.statement, rng)
        pasted = ef.FORMS[form](site, message, rng)
        literal = tuple(p for p in site.pattern if p != raises.WILD)
        hits = error_ws.search(pasted, corpora=["demo"], k=10).hits
        rank = ef.found_rank(hits, site, held.get(literal, {site.path}))
        assert rank == 1, (form, pasted, [h.id for h in hits[:3]])

    check()


@pytest.mark.parametrize(
    ("pasted", "message"),
    [
        # a whole traceback: the last exception, not the frames or the user's code
        (
            "Traceback (most recent call last):\n"
            '  File "/home/jansel/triton/python/triton/code_gen.py", line 1308, in _compile\n'
            "    generator.visit(self.parse())\n"
            '  File "/home/jansel/run.py", line 12, in <module>\n'
            "    kernel[grid](x)\n"
            "ValueError: Did you forget to add @triton.jit ?",
            "Did you forget to add @triton.jit ?",
        ),
        # Triton's CompilationError: the kernel's source and a caret, then the message
        (
            "triton.compiler.errors.CompilationError: at 3:24:def my_kernel(in_, out, mul):\n"
            "    val = tl.load(in_)\n"
            "    tl.store(out, val * mul.to(tl.int64))\n"
            "                        ^\n"
            "AttributeError(\"'constexpr' object has no attribute 'to'\")",
            "'constexpr' object has no attribute 'to'",
        ),
        # MLIR with a location and a note after it
        (
            "loc(\"/home/u/kern.py\":258:0): error: 'cute.copy' op expects matching layouts\n"
            'loc("/home/u/kern.py":258:0): note: see current operation: %3 = "cute.copy"(%1)',
            "'cute.copy' op expects matching layouts",
        ),
        # ptxas: the first error, not the fatal trailer
        (
            "ptxas /tmp/tmpxft_0001.ptx, line 45; error   : Feature '.bf16' requires .target sm_80 or higher\n"
            "ptxas fatal   : Ptx assembly aborted due to errors",
            "Feature '.bf16' requires .target sm_80 or higher",
        ),
        # clang-style file:line:col
        (
            "/home/u/kern.cu:17:5: error: no matching function for call to 'make_tiled_copy'",
            "no matching function for call to 'make_tiled_copy'",
        ),
        # a C++ exception that ended the process
        (
            "terminate called after throwing an instance of 'std::runtime_error'\n"
            "  what():  Unsupported copy mode for this architecture\n"
            "Aborted (core dumped)",
            "Unsupported copy mode for this architecture",
        ),
        # C's assert
        ("python: Lowering.cpp:387: Assertion `op.getAxis() < 3' failed.", "op.getAxis() < 3"),
        # wrapped by a terminal: the lines run on into one message
        (
            "RuntimeError: out of resource: shared memory, Required: 110592, Hardware\n"
            "limit: 101376. Reducing block sizes or `num_stages` may help.",
            "out of resource: shared memory, Required: 110592, Hardware limit: 101376. "
            "Reducing block sizes or `num_stages` may help.",
        ),
        # inside the asker's sentence, with their question below it
        (
            "copying a scalar stops with\nerror: Can't deduce copy extents from args\n"
            "how do I copy a single scalar?",
            "Can't deduce copy extents from args",
        ),
        (
            "AttributeError: module 'triton.language' has no attribute 'make_block_ptr' "
            "- what do I use for block pointers?",
            "module 'triton.language' has no attribute 'make_block_ptr'",
        ),
    ],
)
def test_the_message_is_read_out_of_each_form(pasted: str, message: str) -> None:
    assert errortext.message(pasted) == message


def test_the_askers_words_around_a_paste_are_kept_apart_from_it() -> None:
    pasted = (
        "my fused kernel fails with a CompilationError whose root is\n"
        '    raise ValueError("`other` cannot be provided without `mask`")\n'
        "ValueError: `other` cannot be provided without `mask`\n"
        "which load caused it?"
    )
    assert errortext.message(pasted) == "`other` cannot be provided without `mask`"
    own = errortext.own_words(pasted)
    assert "fused kernel" in own and "which load caused it?" in own
    assert "cannot be provided" not in own


@pytest.mark.parametrize(
    "text",
    ["how do I tile a GEMM", "tl.dot", "why does my kernel error out", "split a layout into tiles"],
)
def test_questions_names_and_phrases_are_not_pasted_errors(text: str) -> None:
    assert errortext.message(text) is None


CORE_PY = '''\
"""Values of the tile language."""


class constexpr:
    """A value known when the kernel is compiled."""

    def __init__(self, value):
        self.value = value


class tensor:
    """A block of values in registers."""

    def to(self, dtype):
        """Cast the tensor to dtype."""
        return self
'''

USES_PY = '''\
"""Kernels that cast scalars: each marks a constexpr argument and casts with to()."""


def scale(x, mul):
    """A constexpr object has no to(): when mul is a constexpr, the attribute to of the
    tensor object casts, to int64, and the constexpr object stays as it is."""
    return x.to("int64") * mul


def constexpr_object_attribute(obj, name):
    """The attribute name of a constexpr object, or of the object it wraps."""
    return getattr(obj, name)


def to_constexpr(obj):
    """Wrap an object as a constexpr: has no effect on an object that is one already."""
    return obj


def shift(x, mul):
    """Shift by a constexpr: call to() on the tensor, not on the constexpr object."""
    return x.to("int64") + mul
'''


def test_a_message_python_wrote_finds_the_class_it_names(
    isolated_home: Path, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No source line raises ``'constexpr' object has no attribute 'to'`` (Python writes
    it): the definition of the class the message quotes comes first, from a traceback as
    from the bare message; without the rule, chunks that share its words lead."""
    from ctxkernel import search

    ws = _indexed(
        isolated_home, upstream, {"src/lang/core.py": CORE_PY, "src/lang/uses.py": USES_PY}
    )
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/k.py", line 9, in <module>\n'
        "    my_kernel[(1,)](x, out, 1)\n"
        "AttributeError: 'constexpr' object has no attribute 'to'"
    )
    pasted = ["AttributeError: 'constexpr' object has no attribute 'to'", traceback]

    def first(query: str) -> tuple[str, int]:
        hit = ws.search(query, k=5).hits[0]
        return hit.chunk.path, hit.chunk.start_line

    for query in pasted:
        assert first(query) == ("src/lang/core.py", 4), query
    monkeypatch.setattr(search, "PYTHON_NAMES", 0)
    fresh = Workspace()
    assert any(fresh.search(q, k=5).hits[0].chunk.path != "src/lang/core.py" for q in pasted)


@pytest.mark.parametrize(
    "message,names",
    [
        ("'constexpr' object has no attribute 'to'", ["constexpr"]),
        ("unsupported operand type(s) for +: 'tensor' and 'NoneType'", ["tensor"]),
        ("make_tiled_copy() got an unexpected keyword argument 'tiler'", ["make_tiled_copy"]),
        (
            "cannot import name 'TensorDescriptor' from 'triton.tools'",
            ["triton.tools.TensorDescriptor"],
        ),
        ("module 'triton.language' has no attribute 'dot_scaled'", ["triton.language.dot_scaled"]),
        ("'int' object is not callable", []),
        ("Layout mismatch in broadcast: a vs b", []),
    ],
)
def test_the_names_a_message_of_pythons_own_quotes(message: str, names: list[str]) -> None:
    assert errortext.python_names(message) == names


def test_the_words_a_message_is_searched_by_do_not_depend_on_the_hash_seed() -> None:
    """Which lines are read for a message's raise site (its longest words) was taken from
    a set: among words of one length, the process's hash seed chose, and the same pasted
    error ranked its two raise sites either way round from one run to the next."""
    import subprocess

    message = (
        "Cannot mod fp8e4nv by 128 because they have different signedness; this is "
        "unlikely to result in a useful answer. Cast them to the same signedness."
    )
    code = (
        "import sys; from ctxkernel import raises; "
        "p = raises.prepare(sys.argv[1]); print(p.content, p.keys)"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code, message],
            env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in range(6)
    }  # fmt: skip
    assert len(seen) == 1, seen
