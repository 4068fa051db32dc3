"""The C++/CUDA chunker: declarations by braces, namespaces, templates, robustness."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from ctxkernel.chunkers import MAX_CHUNK_CHARS, Piece, cpp
from ctxkernel.chunkers._cpp_heads import head_info

Check = Callable[..., None]  # the `check` fixture from conftest.py


def _spans(pieces: list[Piece]) -> list[tuple[int, int, str]]:
    return [(p.start_line, p.end_line, p.symbol) for p in pieces]


HEADER = """\
#pragma once
#include <cute/config.hpp>

namespace cute {

/// Makes a tiled copy.
/// Second line.
template <class... Args,
          class LayoutThr>
CUTE_HOST_DEVICE
auto
make_tiled_copy(Copy_Atom<Args...> const& atom, LayoutThr const& thr = {})
{
  return 1;
}

using TiledCopy64 = TiledCopy<int>;
typedef int index_t;

namespace detail {
template <>
struct Copy_Traits<SM90_TMA_LOAD> : TMA_LOAD_Unpack<SM90_TMA_LOAD>
{
  using ThrID = Layout<_1>;
};
} // namespace detail

namespace {
int helper(int x) { return x; }
}

} // namespace cute

extern "C" {
__global__ void __launch_bounds__(128) kernel(float* out) {
  asm volatile("{ wgmma.fence.sync.aligned; }" ::: "memory");
}
}
"""


def test_namespaces_templates_and_leading_comments(check: Check) -> None:
    pieces = cpp.chunk(HEADER, "copy.hpp", 120)
    assert _spans(pieces) == [
        (1, 4, ""),
        (6, 15, "cute::make_tiled_copy"),
        (17, 20, ""),
        (21, 26, "cute::detail::Copy_Traits<SM90_TMA_LOAD>"),
        (28, 32, "cute::helper"),
        (34, 38, "kernel"),
    ]
    glue, copy, aliases, traits, helper, kernel = pieces
    assert copy.title == (
        "template <class... Args, class LayoutThr> CUTE_HOST_DEVICE auto "
        "make_tiled_copy(Copy_Atom<Args...> const& atom, LayoutThr const& thr = {})"
    )
    assert copy.doc == "Makes a tiled copy.\nSecond line."
    assert copy.defines == ("make_tiled_copy",)
    assert aliases.defines == ("TiledCopy64", "index_t")
    assert traits.title == (
        "template <> struct Copy_Traits<SM90_TMA_LOAD> : TMA_LOAD_Unpack<SM90_TMA_LOAD>"
    )
    assert traits.defines == ("Copy_Traits",)
    assert helper.defines == ("helper",)
    assert kernel.title == "__global__ void __launch_bounds__(128) kernel(float* out)"
    assert kernel.defines == ("kernel",)
    assert glue.title == "#pragma once"
    check(HEADER, pieces)


def test_crlf_line_endings_give_the_same_line_numbers() -> None:
    crlf = HEADER.replace("\n", "\r\n")
    assert _spans(cpp.chunk(crlf, "copy.hpp", 120)) == _spans(cpp.chunk(HEADER, "copy.hpp", 120))


TENSOR = """\
namespace cute {

// A tensor.
template <class Engine, class Layout>
struct Tensor
{
  using iterator = typename Engine::iterator;
  using value_type = typename Engine::value_type;

  // Shape accessor.
  CUTE_HOST_DEVICE constexpr
  decltype(auto)
  shape() const {
    return layout().shape();
  }

  template <class Coord>
  CUTE_HOST_DEVICE constexpr
  decltype(auto)
  operator()(Coord const& coord) {
    return data()[layout()(coord)];
  }

  struct Inner { int x; };

private:
  Engine engine_;
};

} // namespace cute
"""


def test_a_long_struct_becomes_a_header_and_its_members(check: Check) -> None:
    pieces = cpp.chunk(TENSOR, "tensor.hpp", 8)
    assert _spans(pieces) == [
        (1, 8, "cute::Tensor"),
        (10, 15, "cute::Tensor::shape"),
        (17, 22, "cute::Tensor::operator()"),
        (24, 24, "cute::Tensor::Inner"),
        (26, 30, "cute::Tensor"),
    ]
    header, shape, call, _inner, rest = pieces
    assert header.title == "template <class Engine, class Layout> struct Tensor"
    assert header.doc == "A tensor."
    assert header.defines == ("Tensor",)
    assert shape.title == "CUTE_HOST_DEVICE constexpr decltype(auto) shape() const"
    assert shape.doc == "Shape accessor."
    assert call.defines == ("operator()",)
    assert rest.title == "private:"
    check(TENSOR, pieces)


def test_a_struct_within_max_lines_is_one_piece() -> None:
    assert _spans(cpp.chunk(TENSOR, "tensor.hpp", 120)) == [(1, 30, "cute::Tensor")]


BIG_FUNCTION = """\
void big(int n) {
  int a = 0;
  for (int i = 0; i < n; ++i) {
    a += i;
  }
  if (a) {
    a = 1;
  }
  return;
}
"""


def test_a_long_function_is_split_at_depth_one_statements(check: Check) -> None:
    pieces = cpp.chunk(BIG_FUNCTION, "big.cu", 4)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 2), (3, 5), (6, 8), (9, 10)]
    assert {p.symbol for p in pieces} == {"big"}
    assert pieces[1].title == "void big(int n) (part 2/4)"
    check(BIG_FUNCTION, pieces)


def test_a_function_without_statement_ends_is_cut_into_windows(check: Check) -> None:
    text = "int table() {\n  return f(\n" + "    1,\n" * 10 + "    2);\n}\n"
    pieces = cpp.chunk(text, "t.cpp", 5)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 5), (6, 10), (11, 14)]
    check(text, pieces)


LITERALS = """\
const char* kPtx = R"ptx(
{ .reg .b32 r; }
)ptx";
// a comment with { brace
/* and } another */
char c = '{';
int digits = 1'000'000;
#define OPEN {
#define BODY(name) \\
  struct name {    \\
    int x;         \\
  };
void f() { }
"""


def test_braces_in_literals_comments_and_directives_do_not_count(check: Check) -> None:
    pieces = cpp.chunk(LITERALS, "lit.cpp", 120)
    assert _spans(pieces) == [(1, 12, ""), (13, 13, "f")]
    check(LITERALS, pieces)


def test_unbalanced_braces_are_closed_at_end_of_file(check: Check) -> None:
    text = "struct A {\n  int x;\n};\n\nvoid broken() {\n  if (x) {\n    y();\n\nvoid after() {}\n"
    pieces = cpp.chunk(text, "broken.cpp", 120)
    assert _spans(pieces) == [(1, 3, "A"), (5, 9, "broken")]
    check(text, pieces)
    stray = "}\nint f() { return 1; }\n}\n};\nint g();\n"
    pieces = cpp.chunk(stray, "stray.cpp", 120)
    assert [p.symbol for p in pieces if p.symbol] == ["f"]
    check(stray, pieces)


def test_alternative_preprocessor_branches_count_once(check: Check) -> None:
    text = (
        "#if defined(A)\n"
        "void f(int a) {\n"
        "#else\n"
        "void f() {\n"
        "#endif\n"
        "  return;\n"
        "}\n"
        "\n"
        "#if 0\n"
        "struct Dead {\n"
        "#endif\n"
        "int g() { return 0; }\n"
    )
    pieces = cpp.chunk(text, "pp.cpp", 120)
    # The dead `#if 0` block cannot swallow g; its `#endif` closes onto f.
    assert _spans(pieces) == [(1, 11, "f"), (12, 12, "g")]
    assert pieces[0].title == "void f(int a)"
    check(text, pieces)


def test_wgmma_asm_blocks_inside_member_functions(check: Check) -> None:
    text = """\
struct MMA_64x8x16_F16F16F16_SS
{
  CUTE_HOST_DEVICE static void
  fma(uint64_t const& desc_a, uint32_t& d0)
  {
#if defined(CUTE_ARCH_MMA_SM90A_ENABLED)
    asm volatile(
    "{\\n"
      ".reg .pred p;\\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 "
      "{%0, %1},"
    "}\\n"
      : "+r"(d0)
      :  "l"(desc_a));
#else
    CUTE_INVALID_CONTROL_PATH("no sm90a");
#endif
  }
};

struct Next {};
"""
    pieces = cpp.chunk(text, "mma.hpp", 120)
    assert _spans(pieces) == [(1, 19, "MMA_64x8x16_F16F16F16_SS"), (21, 21, "Next")]
    pieces = cpp.chunk(text, "mma.hpp", 10)
    assert [p.symbol for p in pieces][:2] == [
        "MMA_64x8x16_F16F16F16_SS",
        "MMA_64x8x16_F16F16F16_SS::fma",
    ]
    check(text, pieces)


def test_documented_prototypes_are_pieces_and_plain_ones_glue(check: Check) -> None:
    text = """\
/**
 * \\brief Allocates device memory.
 */
extern __host__ cudaError_t cudaMalloc(void **devPtr, size_t size);

int undocumented(int);
"""
    pieces = cpp.chunk(text, "runtime.h", 120)
    assert _spans(pieces) == [(1, 4, "cudaMalloc"), (6, 6, "")]
    assert pieces[0].doc == "\\brief Allocates device memory."
    check(text, pieces)


def _generated_header(n: int) -> str:
    parts = ["#pragma once\n", "namespace cute {\n"]
    for i in range(n):
        parts.append(
            f"\n// GMMA {i}\n"
            "template <GMMA::Major tnspA>\n"
            f"struct MMA_Traits<SM90_64x{i}x16_F16_SS<tnspA>>\n"
            "{\n"
            "  using Shape_MNK = Shape<_64,_8,_16>;\n"
            "};\n"
        )
    parts.append("} // namespace cute\n")
    return "".join(parts)


def _chunk_cpu_seconds(n: int) -> float:
    text = _generated_header(n)
    started = time.process_time()  # CPU time: other jobs on the machine do not count
    cpp.chunk(text, "mma_traits_sm90_gmma.hpp", 120)
    return time.process_time() - started


def test_a_huge_generated_header_is_chunked_by_structure_in_linear_time(check: Check) -> None:
    # the machine's speed is not under test (bench/ measures that): the growth is. Eight
    # times the declarations cost about eight times the time when chunking is linear and
    # about sixty-four times when it is quadratic; the best of three runs damps noise.
    small = min(_chunk_cpu_seconds(625) for _ in range(3))
    large = min(_chunk_cpu_seconds(5000) for _ in range(3))
    assert large < 24 * max(small, 1e-3), f"{large:.2f}s for 5000 vs {small:.3f}s for 625"
    text = _generated_header(5000)
    pieces = cpp.chunk(text, "mma_traits_sm90_gmma.hpp", 120)
    symbols = [p.symbol for p in pieces]
    assert len(pieces) == 5000
    assert symbols[0] == "cute::MMA_Traits<SM90_64x0x16_F16_SS<tnspA>>"
    assert symbols[4321] == "cute::MMA_Traits<SM90_64x4321x16_F16_SS<tnspA>>"
    assert (pieces[1].start_line, pieces[1].end_line) == (11, 16)
    assert pieces[1].doc == "GMMA 1"
    check(text, pieces)


def test_long_lines_are_kept_under_the_char_limit(check: Check) -> None:
    text = "int table[] = {" + "1, " * 6000 + "};\nvoid f() {}\n"
    pieces = cpp.chunk(text, "table.cpp", 120)
    assert _spans(pieces) == [(1, 1, "table"), (2, 2, "f")]
    assert pieces[0].text is not None and len(pieces[0].text) == MAX_CHUNK_CHARS
    check(text, pieces)


def test_empty_and_comment_only_files() -> None:
    assert cpp.chunk("", "e.h", 120) == []
    assert _spans(cpp.chunk("// only\n// comments\n", "c.h", 120)) == [(1, 2, "")]


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ("template <> CUTLASS_HOST_DEVICE half_t one<half_t>()", ("function", "one", "one<half_t>")),
        ("auto operator<<(std::ostream& o, X const& x) -> std::ostream&", ("function", "operator<<", "operator<<")),
        ("operator bool() const", ("function", "operator bool", "operator bool")),
        ("Tensor<E,L>::operator()(C c)", ("function", "operator()", "Tensor::operator()")),
        ("Foo<T>::Foo(int x) : a_(x)", ("function", "Foo", "Foo::Foo")),
        ("static struct foo *get(void)", ("function", "get", "get")),
        ("DECLARE(Foo) struct Bar", ("class", "Bar", "Bar")),
        ("constexpr int kTable[4] =", ("variable", "kTable", "kTable")),
        ("auto f = [](int x)", ("variable", "f", "f")),
        ("TEST(SM90_CuTe, TmaLoad)", ("function", "TEST", "TEST(SM90_CuTe, TmaLoad)")),
        ("enum class Major : int", ("class", "Major", "Major")),
        ("template <class T> struct is_tensor<Tensor<T>> : true_type", ("class", "is_tensor", "is_tensor<Tensor<T>>")),
        ("struct SM90_TMA_LOAD final", ("class", "SM90_TMA_LOAD", "SM90_TMA_LOAD")),
        ("struct alignas(16) Foo : Base<decltype(f())>", ("class", "Foo", "Foo")),
        ("__global__ void __launch_bounds__(128, 1) kernel(float* x)", ("function", "kernel", "kernel")),
        ("std::enable_if_t<(N > 0), int> foo(int x)", ("function", "foo", "foo")),
    ],
)  # fmt: skip
def test_names_read_from_declaration_heads(head: str, expected: tuple[str, str, str]) -> None:
    assert head_info(head) == expected
