"""The paths inside a pasted error name the library files that answer it: a traceback's
deepest library frame, under someone else's prefix, finds the chunk at its line; an
nvcc diagnostic's header path finds the header; the user's own files and a suffix that
ends two corpus files alike name nothing. The messages pasted here are another version's
wording, which no site of the corpus raises, so only the paths can find the answer.

``pastedpaths`` is imported in each test that reads it, so that every test here stands or
falls on its own."""

from __future__ import annotations

import pytest

from ctxkernel import Workspace

from .test_pasted_error_sites import SHAPES_HPP as INT_TUPLE_HPP

CORPUS = "paths"

SEMANTIC_PY = '''\
"""Semantics of the front end: operations on tensors made IR."""


def to_tensor(x, builder):
    """A Python value made a tensor."""
    if isinstance(x, bool):
        return builder.get_int1(x)
    if isinstance(x, int):
        return builder.get_int32(x)
    raise TypeError(f"cannot convert {x} to tensor")


def dot(lhs, rhs, acc, builder):
    """The matrix product of two blocks, added to an accumulator."""
    lhs_k = lhs.shape[-1]
    rhs_k = rhs.shape[0]
    if lhs_k != rhs_k:
        raise ValueError(f"inner dimensions differ: {lhs_k} and {rhs_k}")
    ret_ty = acc.type
    if ret_ty.element_ty != lhs.type.element_ty:
        raise ValueError("the dot's output type must match its accumulator")
    return builder.create_dot(lhs.handle, rhs.handle, acc.handle)


def reshape(x, shape, builder):
    """The block with another shape of as many elements."""
    numel = 1
    for s in shape:
        numel *= s
    if numel != x.numel:
        raise ValueError("reshape cannot change the number of elements")
    return builder.create_reshape(x.handle, shape)
'''

JIT_PY = '''\
"""The kernel launcher: arguments bound, the kernel compiled and run."""


class JITFunction:
    """A kernel that compiles on its first call."""

    def run(self, *args, grid, **kwargs):
        """Bind the arguments, compile for their types, launch on the grid."""
        bound = self.bind(*args, **kwargs)
        kernel = self.compile(bound)
        return kernel[grid](*bound)
'''

ERRORS_MD = """\
# Accumulation width and operand errors

Operands disagree on their accumulation width when the accumulator of a product is of
another width than its operands: operands of fp16 disagree with an accumulation width of
fp32 unless the accumulation is asked for. Pick the accumulation width of the operands, or
cast the operands to the accumulation width.
"""

TILES_MD = """\
# Tiles that do not divide

A tile that does not divide the shape it tiles is refused when the kernel compiles: the
compiler reports that the tile does not divide the shape, and names the tile and the shape.
Pick a tile that divides the shape, or pad the shape to a multiple of the tile.
"""

ATTN_PY = '''\
"""An attention example: the forward pass of a fused kernel."""


def forward(q, k, v):
    """Scores of q against k, softmax, then the weighted sum of v."""
    scores = q @ k.T
    return softmax(scores) @ v


def softmax(x):
    return x
'''

UTILS_A = '''\
"""Helpers of the first backend."""


def cdiv(a, b):
    """a divided by b, rounded up."""
    return (a + b - 1) // b
'''

UTILS_B = '''\
"""Helpers of the second backend."""


def next_power_of_2(n):
    """The smallest power of two not below n."""
    return 1 << (n - 1).bit_length()
'''

FILES = {
    "src/tl/language/semantic.py": SEMANTIC_PY,
    "src/tl/runtime/jit.py": JIT_PY,
    "docs/errors.md": ERRORS_MD,
    "include/cute/int_tuple.hpp": INT_TUPLE_HPP,
    "docs/tiles.md": TILES_MD,
    "src/examples/attn.py": ATTN_PY,
    "src/first/tl/utils.py": UTILS_A,
    "src/second/tl/utils.py": UTILS_B,
}

SITE = "/home/alice/.venv/lib/python3.11/site-packages"
TRACEBACK = f"""\
Traceback (most recent call last):
  File "/home/alice/proj/train.py", line 40, in <module>
    main()
  File "/home/alice/proj/attn.py", line 6, in forward
    out = kernel[grid](q, k, acc)
  File "{SITE}/tl/runtime/jit.py", line 9, in run
    return kernel[grid](*bound)
  File "{SITE}/tl/language/semantic.py", line 21, in dot
    raise ValueError(msg)
ValueError: operands disagree on accumulation width"""


def _ranked(ws: Workspace, query: str) -> list[tuple[str, int, int]]:
    hits = ws.search(query, corpora=[CORPUS], k=10).hits
    return [(h.chunk.path, h.chunk.start_line, h.chunk.end_line) for h in hits]


def test_a_tracebacks_deepest_library_frame_finds_the_chunk_at_its_line(
    files_ws: Workspace,
) -> None:
    """The user's frames come first and the message is another version's wording that a
    docs page shares all its words with; the deepest frame names the corpus's
    ``src/tl/language/semantic.py`` under a virtualenv: its chunk at line 21 (``dot``)
    leads, above the frame that called it (``jit.py``)."""
    ranked = _ranked(files_ws, TRACEBACK)
    path, start, end = ranked[0]
    assert path == "src/tl/language/semantic.py" and start <= 21 <= end, ranked
    paths = [p for p, _, _ in ranked]
    if "src/tl/runtime/jit.py" in paths:
        assert paths.index("src/tl/runtime/jit.py") > 0


def test_the_users_own_file_with_a_corpus_files_name_is_not_followed(
    files_ws: Workspace,
) -> None:
    """``/home/alice/proj/attn.py`` shares only its file name with the corpus's
    ``src/examples/attn.py``: the user's file, not the example; the library frames are still
    read and the user's frame line is never mapped to the example's chunk."""
    from ctxkernel import pastedpaths

    cache = files_ws.store.synced_cache(CORPUS)
    found = pastedpaths.library_rows({CORPUS: cache}, TRACEBACK, ["operands"])
    paths = [cache.chunks_by_rows([row])[row].path for _, row in found]
    assert paths == ["src/tl/language/semantic.py", "src/tl/runtime/jit.py"]


def test_an_nvcc_diagnostics_header_path_finds_the_header(files_ws: Workspace) -> None:
    """nvcc names the header under the user's own install prefix; the static_assert's
    message is another version's wording, which a docs page spells out."""
    pasted = (
        "/opt/deps/cutlass/include/cute/int_tuple.hpp(10): error: static assertion failed "
        'with "the tile does not divide the shape"\n'
        "          detected during:\n"
        '            instantiation of "auto kernel<Tile>(Tile)" at line 84 of '
        "/home/alice/proj/kern.cu"
    )
    path, start, end = _ranked(files_ws, pasted)[0]
    assert path == "include/cute/int_tuple.hpp" and start <= 10 <= end


@pytest.mark.parametrize(
    ("pasted", "found"),
    [
        # ``tl/utils.py`` ends both backends' helpers: neither is picked
        (f"{SITE}/tl/utils.py", None),
        # one more part decides it: the longer match
        ("/srv/backends/second/tl/utils.py", "src/second/tl/utils.py"),
        # the user's own code: no corpus file ends with two of its parts
        ("/home/alice/proj/attn.py", None),
        ("/home/alice/proj/kernels/semantic.py", None),
        (f"{SITE}/tl/language/semantic.py", "src/tl/language/semantic.py"),
    ],
)
def test_a_pasted_path_maps_to_the_file_of_its_longest_unambiguous_suffix(
    files_ws: Workspace, pasted: str, found: str | None
) -> None:
    from ctxkernel import pastedpaths

    cache = files_ws.store.synced_cache(CORPUS)
    index = pastedpaths.SuffixIndex(cache.files())
    hit = pastedpaths.resolve(pasted, {CORPUS: index})
    assert (hit[1] if hit else None) == found


def test_an_ambiguous_suffix_ranks_neither_file(files_ws: Workspace) -> None:
    """A frame in ``tl/utils.py`` (two corpus files end with it) puts neither first."""
    from ctxkernel import pastedpaths

    pasted = (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/tl/utils.py", line 5, in cdiv\n'
        "    return (a + b - 1) // b\n"
        "ZeroDivisionError: integer division or modulo by zero"
    )
    cache = files_ws.store.synced_cache(CORPUS)
    assert pastedpaths.library_rows({CORPUS: cache}, pasted, []) == []


@pytest.mark.parametrize(
    ("text", "places"),
    [
        (
            TRACEBACK,
            [
                (f"{SITE}/tl/language/semantic.py", 21, "dot"),
                (f"{SITE}/tl/runtime/jit.py", 9, "run"),
                ("/home/alice/proj/attn.py", 6, "forward"),
                ("/home/alice/proj/train.py", 40, ""),
            ],
        ),
        (
            "/usr/include/cute/layout.hpp:394:12: error: no match\n"
            "/usr/include/cute/tensor.hpp(77): error: more",
            [("/usr/include/cute/layout.hpp", 394, ""), ("/usr/include/cute/tensor.hpp", 77, "")],
        ),
        (
            'loc("/home/u/gemm.py":258:0): error: failed to legalize',
            [("/home/u/gemm.py", 258, "")],
        ),
        ("how do I tile a GEMM with cute::local_tile?", []),
    ],
)
def test_the_places_a_paste_names_deepest_first(
    text: str, places: list[tuple[str, int, str]]
) -> None:
    from ctxkernel import pastedpaths

    assert [(f.path, f.line, f.function) for f in pastedpaths.frames(text)] == places


_ADVERSARIAL = r"""
import sys
from ctxkernel import pastedpaths
n = 64_000
for text in ("/a.a" * (n // 4), "a." * (n // 2), "/" + "/".join(["abc.def"] * (n // 8)),
             'File "' + "/x" * (n // 2), 'loc("' + "a/" * (n // 2) + '.py":1:0)', '"a' * (n // 2)):
    assert pastedpaths.frames(text) == [], text[:40]
print("ok")
"""


def test_reading_paths_is_linear_in_the_text() -> None:
    """A query may be any 16,000 characters: a pattern of nested repeats over path
    characters backtracked quadratically (3-4 s at 16,000 characters of "/a.a", ~100 s
    at 64,000). The six shapes that did, at 64,000 characters, find nothing and finish;
    the limit is far above what a linear reading takes, so only backtracking meets it."""
    import os
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _ADVERSARIAL], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-1000:]
