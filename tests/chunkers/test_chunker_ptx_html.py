"""The PTX HTML chunker: Sphinx sections (new and old style) to text pieces."""

from __future__ import annotations

from ctxkernel.chunkers import MAX_CHUNK_CHARS, Piece, ptx_html

PAGE = """\
<!DOCTYPE html>
<html><head><title>PTX ISA 8.5</title>
<script>var s = "<section id='fake'>";</script>
<style>h1 { color: red; }</style>
</head>
<body>
<nav class="wy-nav-side"><ul><li>Nav item</li></ul></nav>
<div itemprop="articleBody">
<section id="instruction-set">
<h1><span class="section-number">9. </span>Instruction Set<a class="headerlink" href="#instruction-set" title="Link to this heading">¶</a></h1>
<p>This chapter describes the
PTX instruction set.</p>
<section id="asynchronous-multiply-and-accumulate-instruction-wgmma-mma-async">
<h2><span class="section-number">9.7.15.5.2. </span>Asynchronous Multiply-and-Accumulate Instruction: <code class="docutils literal notranslate"><span class="pre">wgmma.mma_async</span></code><a class="headerlink" href="#asynchronous-multiply-and-accumulate-instruction-wgmma-mma-async">¶</a></h2>
<p>Perform matrix multiply-and-accumulate across a <em>warpgroup</em>.</p>
<div class="highlight-text notranslate"><div class="highlight"><pre><span></span>wgmma.mma_async.sync.aligned.shape.dtype.f16.f16  d, a-desc, b-desc;
.shape = {.m64n8k16};  // a &lt; b &amp;&amp; c
</pre></div></div>
<ul class="simple">
<li><p>First item with <code class="docutils literal notranslate"><span class="pre">.m64</span></code></p></li>
<li>Second item</li>
</ul>
<table class="docutils align-default">
<thead><tr><th><p>Shape</p></th><th><p>Type</p></th></tr></thead>
<tbody>
<tr><td><p>m64n8k16</p></td><td><p>.f16</p></td></tr>
</tbody>
</table>
</section>
</section>
<div class="section" id="mbarrier-test-wait-mbarrier-try-wait">
<h3>9.7.12.15.16. Parallel Synchronization and Communication Instructions: mbarrier.test_wait/mbarrier.try_wait<a class="headerlink" href="#mbarrier-test-wait-mbarrier-try-wait" title="Permalink to this headline">¶</a></h3>
<p>Test the completion of the current phase.</p>
<div class="section" id="performance-tuning-directives-reqntid">
<h4>11.4.2. Performance-Tuning Directives: .reqntid</h4>
<p>Number of threads in the thread block.</p>
</div>
</div>
</div>
<footer><p>Copyright NVIDIA</p></footer>
</body></html>
"""

WGMMA_TEXT = """\
# 9.7.15.5.2. Asynchronous Multiply-and-Accumulate Instruction: wgmma.mma_async
Perform matrix multiply-and-accumulate across a warpgroup.
```
wgmma.mma_async.sync.aligned.shape.dtype.f16.f16  d, a-desc, b-desc;
.shape = {.m64n8k16};  // a < b && c
```
- First item with `.m64`
- Second item
| Shape | Type |
| m64n8k16 | .f16 |"""


def _rows(pieces: list[Piece]) -> list[tuple[int, int, str, str]]:
    return [(p.start_line, p.end_line, p.anchor, p.symbol) for p in pieces]


def test_sections_of_new_and_old_sphinx_become_text_pieces() -> None:
    pieces = ptx_html.chunk(PAGE, "index.html", 120)
    wgmma = "Asynchronous Multiply-and-Accumulate Instruction: wgmma.mma_async"
    mbarrier = (
        "Parallel Synchronization and Communication Instructions: "
        "mbarrier.test_wait/mbarrier.try_wait"
    )
    assert _rows(pieces) == [
        (9, 12, "#instruction-set", "Instruction Set"),
        (
            13,
            29,
            "#asynchronous-multiply-and-accumulate-instruction-wgmma-mma-async",
            f"Instruction Set > {wgmma}",
        ),
        (31, 33, "#mbarrier-test-wait-mbarrier-try-wait", mbarrier),
        (
            34,
            37,
            "#performance-tuning-directives-reqntid",
            f"{mbarrier} > Performance-Tuning Directives: .reqntid",
        ),
    ]
    chapter, instr, barrier, directive = pieces
    assert chapter.title == "9. Instruction Set"
    assert chapter.text == "# 9. Instruction Set\nThis chapter describes the PTX instruction set."
    assert chapter.defines == ()
    assert instr.title == f"9.7.15.5.2. {wgmma}"
    assert instr.text == WGMMA_TEXT
    assert instr.doc == "Perform matrix multiply-and-accumulate across a warpgroup."
    assert instr.defines == ("wgmma.mma_async",)
    assert barrier.defines == ("mbarrier.test_wait", "mbarrier.try_wait")
    assert barrier.text == (
        f"# 9.7.12.15.16. {mbarrier}\nTest the completion of the current phase."
    )
    assert directive.defines == (".reqntid",)
    assert directive.title == "11.4.2. Performance-Tuning Directives: .reqntid"
    for p in pieces:
        assert "Nav item" not in (p.text or "") and "Copyright" not in (p.text or "")
        assert "¶" not in (p.text or "") and "fake" not in (p.text or "")


def _long_section(paragraphs: int, code_lines: int) -> str:
    rows = ['<section id="memory-consistency-model">', "<h2>8. Memory Consistency Model</h2>"]
    rows += [f"<p>Paragraph {i} about ordering.</p>" for i in range(paragraphs)]
    rows.append("<pre>" + "\n".join(f"ld.acquire.gpu r{i}, [a];" for i in range(code_lines)))
    rows.append("</pre>")
    rows.append("</section>")
    return "\n".join(rows) + "\n"


def test_long_sections_split_between_blocks_with_one_anchor() -> None:
    page = _long_section(paragraphs=12, code_lines=4)
    pieces = ptx_html.chunk(page, "index.html", 8)
    # heading + 7 paragraphs | 5 paragraphs | the <pre> block, which is not cut
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 9), (10, 14), (15, 20)]
    assert [p.title for p in pieces] == [
        "8. Memory Consistency Model (part 1/3)",
        "8. Memory Consistency Model (part 2/3)",
        "8. Memory Consistency Model (part 3/3)",
    ]
    assert {p.anchor for p in pieces} == {"#memory-consistency-model"}
    assert pieces[1].text is not None and pieces[2].text is not None
    assert pieces[1].text == "\n".join(f"Paragraph {i} about ordering." for i in range(7, 12))
    assert pieces[2].text.splitlines() == [
        "```",
        "ld.acquire.gpu r0, [a];",
        "ld.acquire.gpu r1, [a];",
        "ld.acquire.gpu r2, [a];",
        "ld.acquire.gpu r3, [a];",
        "```",
    ]


def test_a_pre_block_longer_than_a_piece_is_refenced_in_slices() -> None:
    pieces = ptx_html.chunk(_long_section(paragraphs=0, code_lines=30), "index.html", 10)
    assert len(pieces) > 3
    for p in pieces:
        assert p.text is not None and p.text.count("```") % 2 == 0
        assert len(p.text.splitlines()) <= 10
    starts = [p.start_line for p in pieces]
    assert starts == sorted(set(starts))


def test_text_stays_under_the_char_limit() -> None:
    words = " ".join(["word"] * 4000)
    page = '<section id="s"><h1>Big</h1>\n' + f"<p>{words}</p>\n" * 4 + "</section>\n"
    pieces = ptx_html.chunk(page, "index.html", 120)
    assert len(pieces) >= 2
    assert all(p.text is not None and len(p.text) <= MAX_CHUNK_CHARS for p in pieces)


def test_a_page_without_sections_is_one_piece_titled_by_the_page() -> None:
    page = (
        "<html><head><title>Release Notes</title></head>\n<body>\n<p>Hello.</p>\n</body></html>\n"
    )
    (piece,) = ptx_html.chunk(page, "notes.html", 120)
    assert (piece.start_line, piece.end_line, piece.title, piece.text) == (
        1,
        4,
        "Release Notes",
        "Hello.",
    )


def test_truncated_html_and_empty_input_do_not_raise() -> None:
    assert ptx_html.chunk("", "x.html", 120) == []
    pieces = ptx_html.chunk('<section id="a"><h1>A</h1><p>text\n<section id="b">', "x.html", 120)
    assert [p.anchor for p in pieces] == ["#a"]
