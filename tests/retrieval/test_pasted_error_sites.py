"""Pasted errors of real users' reports find what raised them where the raise-site match
used to miss: a message that is the first sentence of a longer one (or cut off) against a
site that differs from it in one word; runtime values of many words (a list's repr, a
class name) in a format field's place; a bare message on a line of its own between the
asker's sentences; a bare message of Python's own; and a message no site of the corpus
raises (another version's wording) that names the function it came from."""

from __future__ import annotations

import pytest

from ctxkernel import Workspace, errortext, raises, search

from .test_error_forms import CORE_PY, USES_PY

CORPUS = "pasted"

COPY_PY = '''\
"""Copies between buffers of the tile language."""


def copy(src, dst):
    """Copy src to dst; the extents come from whichever side has them."""
    src_extent = extent_of(src)
    dst_extent = extent_of(dst)
    assert src_extent or dst_extent, "Can't deduce copy extents from args. Both src and dst miss extents info."
    return src_extent or dst_extent


def extent_of(buf):
    return getattr(buf, "shape", None)
'''

ATOMIC_PY = '''\
"""Atomic updates of the tile language."""


def atomic_max(dst, value):
    """Atomic maximum of dst and value."""
    src_extent = extent_of(value)
    dst_extent = extent_of(dst)
    assert src_extent or dst_extent, "Can't deduce atomicmax extents from args"
    return dst


def atomic_min(dst, value):
    """Atomic minimum of dst and value."""
    src_extent = extent_of(value)
    dst_extent = extent_of(dst)
    assert src_extent or dst_extent, "Can't deduce atomicmin extents from args"
    return dst


def atomic_add(dst, value):
    """Atomic sum of dst and value."""
    src_extent = extent_of(value)
    dst_extent = extent_of(dst)
    assert src_extent or dst_extent, "Can't deduce atomicadd extents from args"
    return dst


def extent_of(buf):
    return getattr(buf, "shape", None)
'''

SEMANTIC_PY = '''\
"""Semantics of the front end: Python values made tensors."""


def to_tensor(x, builder):
    if isinstance(x, bool):
        return builder.get_int1(x)
    if isinstance(x, int):
        return builder.get_int32(x)
    raise TypeError(f"cannot convert {x} of type {type(x)} to tensor")
'''

INTERPRETER_MD = """\
# Debugging kernels with the interpreter

Set TRITON_INTERPRET=1 to run a kernel on the CPU with numpy: every tensor of the tutorial
becomes an array you can print, and each call of a libdevice function is looked up in the
interpreter's table of math functions. A function the table lacks is not supported by the
interpreter; the tutorial lists which libdevice calls are.
"""

SHAPES_HPP = """\
#pragma once
namespace cute {

// Division for shapes: a divided by b, rounding up.
template <class IntTupleA, class IntTupleB>
constexpr auto
shape_div(IntTupleA const& a, IntTupleB const& b)
{
  static_assert(IntTupleA::value % IntTupleB::value == 0 || IntTupleB::value % IntTupleA::value == 0,
                "Divisibility Condition");
  return (a + b - 1) / b;
}

}  // namespace cute
"""

SAFE_HPP = """\
#pragma once
namespace cute {

// Exact division of static integers: a static failure when the division leaves a rest.
template <class T, class U>
constexpr auto
safe_div(T const& t, U const& u)
{
  static_assert(t % u == 0, "Static safe_div requires t % u == 0");
  return t / u;
}

// Static shapes and their failure modes are described in the layout docs.
template <class Shape>
constexpr auto
static_shape_failure_note(Shape const& s)
{
  return s;
}

}  // namespace cute
"""

SHAPES_MD = """\
# Static shape failures

A static shape_div failure is a compile-time failure of a static shape: the static
division of one static shape by another fails when neither divides the other. Read the
failure's static shapes, then pick a tile whose static shape divides the layout's shape.
"""

TILED_PY = '''\
"""Tiled copies: a copy atom tiled over threads, and each thread's part of a tensor."""


def make_tiled_copy_C(atom, tiled_mma):
    """A tiled copy of the accumulator C: the atom tiled like the MMA's C partition."""
    return (atom, tiled_mma)


def partition_D(tiled_copy, tensor):
    """Each thread's part of the destination tensor of a tiled copy: the tensor divided
    by the copy's tile, a static shape divided by a static shape; a static shape_div
    failure here means the copy's tile does not divide the tensor."""
    return (tiled_copy, tensor)
'''

FILES = {
    "src/tl/copy_op.py": COPY_PY,
    "src/tl/atomic.py": ATOMIC_PY,
    "src/tl/semantic.py": SEMANTIC_PY,
    "docs/interpreter.md": INTERPRETER_MD,
    "src/tl/core.py": CORE_PY,
    "src/tl/uses.py": USES_PY,
    "include/cute/int_tuple.hpp": SHAPES_HPP,
    "include/cute/safe.hpp": SAFE_HPP,
    "docs/shapes.md": SHAPES_MD,
    "src/tl/tiled.py": TILED_PY,
}


def _first(ws: Workspace, query: str) -> tuple[str, int]:
    hit = ws.search(query, corpora=[CORPUS], k=5).hits[0]
    return hit.chunk.path, hit.chunk.start_line


@pytest.mark.parametrize(
    "pasted",
    [
        "AssertionError: Can't deduce copy extents from args",
        "copying one element into a local variable stops with\n"
        "error: Can't deduce copy extents from args\n"
        "how do I copy a single scalar?",
        "AssertionError: Can't deduce copy extents from args. Both src and",
    ],
)
def test_the_first_sentence_of_a_message_finds_its_site_over_one_a_word_apart(
    files_ws: Workspace, pasted: str
) -> None:
    """The pasted message is the first sentence of the copy's message, and one word away
    from each atomic's: the site that spells all of it leads (its words past the paste
    count only a little against it)."""
    assert _first(files_ws, pasted) == ("src/tl/copy_op.py", 4)


VALUES = (
    "cannot convert ['fp32[constexpr[2048], constexpr[1]]', 'fp32[constexpr[2048], "
    "constexpr[1]]'] of type <class 'triton.language.core.tuple'> to tensor"
)


def test_runtime_values_of_many_words_fill_a_format_field() -> None:
    """A list's repr and a class name stand where the site has ``{x}`` and
    ``{type(x)}``: the site accounts for the message as a bare paste needs."""
    site = raises.sites(SEMANTIC_PY)[-1]
    share = raises.site_share(site.pattern, raises.message_words(VALUES))
    assert share >= search.BARE_MIN_SHARE


@pytest.mark.parametrize("pasted", [VALUES, f"TypeError: {VALUES}"])
def test_a_message_with_runtime_values_of_many_words_finds_its_raise_site(
    files_ws: Workspace, pasted: str
) -> None:
    assert _first(files_ws, pasted) == ("src/tl/semantic.py", 4)


def test_a_bare_message_on_a_line_of_its_own_among_the_askers_words(
    files_ws: Workspace,
) -> None:
    """No type, no location: the message sits between the asker's sentences, which share
    their words with a docs page; the line that is the message is read for raise sites."""
    pasted = (
        "using libdevice functions under TRITON_INTERPRET=1 the tutorial fails with\n"
        "cannot convert None of type <class 'NoneType'> to tensor\n"
        "are libdevice calls supported by the interpreter?"
    )
    assert _first(files_ws, pasted) == ("src/tl/semantic.py", 4)


def test_a_bare_message_of_pythons_own_finds_the_class_it_names(files_ws: Workspace) -> None:
    assert _first(files_ws, "'constexpr' object has no attribute 'to'") == ("src/tl/core.py", 4)


ASKED = (
    "a register to smem copy built with make_tiled_copy_C(atom, tiled_mma): partition_D(sC)"
    " does not compile:\n{}\nhow do I read this partition failure?"
)


@pytest.mark.parametrize(
    "error",
    [
        '/tmp/build/kern.cu(394): error: static assertion failed with "Static shape_div failure"',
        "error: Static shape_div failure",
    ],
)
def test_a_message_no_site_raises_finds_the_function_it_names(
    files_ws: Workspace, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another version's wording: no static_assert of the corpus says it, a site of another
    message shares two of its words and a docs page all of them, and the asker's words
    name other functions; the message names the one it came from, whose definition comes
    first. Without the rule, what the asker's words name leads."""
    pasted = ASKED.format(error)
    assert _first(files_ws, pasted)[0] == "include/cute/int_tuple.hpp"
    monkeypatch.setattr(search, "MESSAGE_NAMES", 0)
    assert _first(Workspace(), pasted)[0] != "include/cute/int_tuple.hpp"


def test_a_site_whose_few_words_are_scattered_through_a_message_does_not_match() -> None:
    """A field may stand for the words between two literal words the message spells next
    to each other, not for whatever a site beside a word the message lacks leaves over."""
    site = raises.sites('target = {"kind": "cuda", "arch": "sm_90"}\n')[0]
    message = "(0) is false: Unsupported target for gemm: cuda -keys=cuda,gpu -arch=sm_120."
    assert raises.site_share(site.pattern, raises.message_words(message)) < raises.MIN_SHARE


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("cannot convert None of type <class 'NoneType'> to tensor", 1),
        ("the tutorial fails with\ncannot convert None to tensor\nwhy?", 2),
        ("how do I tile a GEMM", 0),
        ("why does it fail?\nwhat should I do?", 0),
    ],
)
def test_the_lines_read_as_bare_messages(text: str, found: int) -> None:
    assert len(errortext.bare_candidates(text)) == found


@pytest.mark.parametrize(
    ("message", "names"),
    [
        ("Static shape_div failure", ["shape_div"]),
        ("cute::make_tiled_copy failed for this atom", ["make_tiled_copy"]),
        ("Unsupported target for gemm: cuda -arch=sm_120", []),
        ("(load->indices.size() == ndim) is false", []),
    ],
)
def test_the_code_names_a_message_spells(message: str, names: list[str]) -> None:
    assert errortext.code_names(message) == names
