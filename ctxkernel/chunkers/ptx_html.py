"""The PTX HTML chunker: a Sphinx HTML page cut into its sections, converted to text.

NVIDIA's PTX ISA reference is one huge Sphinx page of nested ``<section id=...>`` (new
Sphinx) or ``<div class="section" id=...>`` (old Sphinx) elements, each opening with a
heading such as ``9.7.15.5.2. Asynchronous Multiply-and-Accumulate Instruction:
wgmma.mma_async``. Each section's own content, up to its first child section, becomes
a piece whose lines are those of the HTML source and whose text is readable: the
heading as ``# ...``, paragraphs as lines, ``<pre>`` kept verbatim inside ``` fences,
lists as ``- item``, tables as ``| a | b |`` rows, inline code in backticks. Scripts,
styles, navigation and footers are dropped. Long sections are split at paragraph
boundaries into parts sharing the anchor. Only the standard library's HTML parser is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from html.parser import HTMLParser

from ._merge import DOC_CHARS, clip, one_line, part_title
from .base import DEFAULT_MAX_LINES, MAX_CHUNK_CHARS, Piece
from .markdown import heading_names, strip_section_number

_SKIP_TAGS = {
    "script", "style", "noscript", "template", "svg", "nav", "footer", "button", "form",
    "select", "iframe", "math",
}  # fmt: skip
_SKIP_CLASSES = {"headerlink", "footer", "sphinxsidebar", "related", "rst-footer-buttons"}
_BLOCK_TAGS = {
    "p", "div", "section", "article", "blockquote", "dl", "dt", "dd", "ul", "ol", "li",
    "table", "thead", "tbody", "tfoot", "tr", "caption", "figure", "figcaption", "hr",
    "h1", "h2", "h3", "h4", "h5", "h6", "pre", "br", "main", "aside",
}  # fmt: skip
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_FENCE = "```"
# Fence lines are marked inside a section's body so a "```" inside a <pre> is not one.
_FENCE_MARK = "\x00```"


def chunk(text: str, path: str, max_lines: int = DEFAULT_MAX_LINES) -> list[Piece]:
    """Cut a Sphinx HTML page into one text piece per section (split when long)."""
    if not text.strip():
        return []
    lines = text.splitlines()
    parser = _Converter()
    # Fed with "\n" breaks only, the parser's line numbers are those of str.splitlines().
    parser.feed("\n".join(lines))
    parser.close()
    parser.finish(len(lines))
    sections = [s for s in parser.sections if s.body]
    if not parser.sections and parser.root.body:
        root = parser.root
        root.start_line, root.own_end = 1, len(lines)
        root.title = one_line(parser.page_title)
        sections = [root]
    pieces: list[Piece] = []
    for sec in sections:
        pieces.extend(_section_pieces(sec, max(1, max_lines)))
    pieces.sort(key=lambda p: (p.start_line, p.end_line))
    return pieces


@dataclass
class _Section:
    ident: str
    start_line: int
    parent: _Section | None
    title: str = ""
    doc: str = ""  # its first paragraph
    own_end: int = 0  # last line of the section's own content (before its first child)
    collecting: bool = True  # False once a child section has started
    body: list[tuple[int, str]] = field(default_factory=list)  # (source line, text line)

    def crumbs(self) -> str:
        names: list[str] = []
        node: _Section | None = self
        while node is not None:
            if node.title:
                names.append(strip_section_number(node.title))
            node = node.parent
        return " > ".join(reversed(names))


class _Converter(HTMLParser):
    """Streams the page once, routing each section's own content into text lines."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[_Section] = []
        self.root = _Section("", 1, None)
        self.open: list[_Section] = []
        self.containers: list[tuple[str, _Section | None]] = []  # open div/section tags
        self.skip_tag = ""
        self.skip_depth = 0
        self.page_title = ""
        self.in_title = False
        self.heading: list[str] | None = None
        self.heading_line = 0
        self.pre: list[str] | None = None
        self.pre_line = 0
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.row_line = 0
        self.inline: list[str] = []
        self.inline_line = 0
        self.prefix = ""
        self.lists = 0

    # -- routing --------------------------------------------------------------------------

    def target(self) -> _Section | None:
        if self.open:
            top = self.open[-1]
            return top if top.collecting else None
        return self.root

    def emit(self, line: int, text: str) -> None:
        sec = self.target()
        if sec is not None:
            sec.body.append((line, text))

    def flush(self) -> None:
        """End the paragraph being collected: it becomes one text line."""
        text = " ".join("".join(self.inline).split())
        if text:
            self.emit(self.inline_line or self.getpos()[0], self.prefix + text)
            self.prefix = ""
            sec = self.target()
            if sec is not None and not sec.doc:
                sec.doc = text
        self.inline = []
        self.inline_line = 0

    def add_text(self, data: str) -> None:
        if self.heading is not None:
            self.heading.append(data)
        elif self.pre is not None:
            self.pre.append(data)
        elif self.cell is not None:
            self.cell.append(data)
        else:
            if not self.inline_line and data.strip():
                self.inline_line = self.getpos()[0]
            self.inline.append(data)

    # -- parser callbacks -----------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip_tag:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return
        attr = {k: v or "" for k, v in attrs}
        classes = set(attr.get("class", "").split())
        if tag == "title":
            self.in_title = True
            return
        if tag in _SKIP_TAGS or classes & _SKIP_CLASSES or attr.get("role") == "navigation":
            self.skip_tag, self.skip_depth = tag, 1
            return
        line = self.getpos()[0]
        if tag in _BLOCK_TAGS:
            if self.cell is not None:
                self.cell.append(" ")
            elif self.heading is None and self.pre is None:
                self.flush()
        if tag == "section" or (tag == "div" and "section" in classes):
            self.start_section(attr.get("id", ""), line)
            self.containers.append((tag, self.open[-1]))
        elif tag in ("div", "section"):
            self.containers.append((tag, None))
        elif tag in _HEADINGS:
            self.heading, self.heading_line = [], line
        elif tag == "pre":
            self.pre, self.pre_line = [], line
        elif tag == "code" and self.pre is None and self.heading is None:
            self.add_text("`")
        elif tag in ("ul", "ol"):
            self.lists += 1
        elif tag == "li":
            self.prefix = "  " * max(0, self.lists - 1) + "- "
        elif tag == "tr":
            self.row, self.row_line = [], line
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if self.skip_tag:
            if tag == self.skip_tag:
                self.skip_depth -= 1
                if self.skip_depth == 0:
                    self.skip_tag = ""
            return
        line = self.getpos()[0]
        if tag == "title":
            self.in_title = False
        elif tag in ("div", "section"):
            self.flush()
            self.end_container(tag, line)
        elif tag in _HEADINGS and self.heading is not None:
            self.end_heading()
        elif tag == "pre" and self.pre is not None:
            self.end_pre()
        elif tag == "code" and self.pre is None and self.heading is None:
            self.add_text("`")
        elif tag in ("td", "th") and self.row is not None and self.cell is not None:
            self.row.append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if any(self.row):
                self.emit(self.row_line, "| " + " | ".join(self.row) + " |")
            self.row, self.cell = None, None
        elif tag in ("ul", "ol"):
            self.flush()
            self.lists = max(0, self.lists - 1)
        elif tag in _BLOCK_TAGS and self.cell is None:
            self.flush()
            if tag == "li":
                self.prefix = ""

    def handle_data(self, data: str) -> None:
        if self.skip_tag:
            return
        if self.in_title:
            self.page_title += data
            return
        self.add_text(data)

    # -- structure ------------------------------------------------------------------------

    def start_section(self, ident: str, line: int) -> None:
        parent = self.open[-1] if self.open else None
        if parent is not None and parent.collecting:
            parent.collecting = False
            parent.own_end = max(parent.start_line, line - 1)
        sec = _Section(ident, line, parent)
        self.sections.append(sec)
        self.open.append(sec)

    def end_container(self, tag: str, line: int) -> None:
        for k in range(len(self.containers) - 1, -1, -1):
            if self.containers[k][0] == tag:
                closed = self.containers[k:]
                del self.containers[k:]
                for _, sec in reversed(closed):
                    if sec is not None:
                        self.close_section(sec, line)
                return

    def close_section(self, sec: _Section, line: int) -> None:
        if sec.collecting:
            sec.collecting = False
            sec.own_end = line
        while self.open:
            if self.open.pop() is sec:
                break

    def end_heading(self) -> None:
        assert self.heading is not None
        text = " ".join("".join(self.heading).split())
        self.heading = None
        if not text:
            return
        sec = self.target()
        if sec is not None and not sec.title and sec is not self.root:
            sec.title = text
            self.emit(self.heading_line, "# " + text)
        else:
            self.emit(self.heading_line, "## " + text)

    def end_pre(self) -> None:
        assert self.pre is not None
        raw = "".join(self.pre)
        self.pre = None
        if raw.startswith("\n"):
            raw = raw[1:]
        body = raw.rstrip().split("\n")
        if not any(s.strip() for s in body):
            return
        self.emit(self.pre_line, _FENCE_MARK)
        for k, text in enumerate(body):
            self.emit(self.pre_line + k, text.rstrip())
        self.emit(self.pre_line + len(body) - 1, _FENCE_MARK)

    def finish(self, n_lines: int) -> None:
        """Close what the page left open (truncated HTML) at its last line."""
        self.flush()
        for sec in self.open:
            if sec.collecting:
                sec.collecting = False
                sec.own_end = n_lines
        self.open = []


# -- sections to pieces ---------------------------------------------------------------------


def _section_pieces(sec: _Section, max_lines: int) -> list[Piece]:
    """A section's text as one piece, or parts cut between blocks when it is long."""
    title = sec.title or sec.ident
    anchor = "#" + sec.ident if sec.ident else ""
    parts = _pack(_blocks(sec.body), max_lines)
    n = len(parts)
    pieces: list[Piece] = []
    for k, part in enumerate(parts, 1):
        start = sec.start_line if k == 1 else part[0][0]
        if pieces and start <= pieces[-1].start_line:
            # Only on pages with several blocks per source line: keep ids unique.
            merged = (pieces[-1].text or "") + "\n" + _text(part)
            pieces[-1] = replace(pieces[-1], text=merged[:MAX_CHUNK_CHARS])
            continue
        if pieces:
            pieces[-1] = replace(pieces[-1], end_line=max(pieces[-1].start_line, start - 1))
        pieces.append(
            Piece(
                start,
                max(start, sec.own_end),
                symbol=sec.crumbs(),
                title=part_title(title, k, n),
                doc=clip(sec.doc, DOC_CHARS),
                anchor=anchor,
                defines=heading_names(sec.title),
                text=_text(part),
            )
        )
    return pieces


Block = list[tuple[int, str]]


def _text(block: Block) -> str:
    return "\n".join(_FENCE if t == _FENCE_MARK else t for _, t in block)


def _blocks(body: list[tuple[int, str]]) -> list[Block]:
    """Text lines grouped into what must stay together: a paragraph line, a fenced block."""
    blocks: list[Block] = []
    k = 0
    while k < len(body):
        if body[k][1] == _FENCE_MARK:
            j = k + 1
            while j < len(body) and body[j][1] != _FENCE_MARK:
                j += 1
            blocks.append(body[k : j + 1])
            k = j + 1
        else:
            blocks.append([body[k]])
            k += 1
    return blocks


def _size(block: Block) -> int:
    return sum(len(t) + 1 for _, t in block)


def _pack(blocks: list[Block], max_lines: int) -> list[Block]:
    """Blocks gathered into parts of at most ``max_lines`` lines and MAX_CHUNK_CHARS."""
    limit = MAX_CHUNK_CHARS - 2 * (len(_FENCE_MARK) + 1)
    units: list[Block] = []
    for block in blocks:
        if len(block) <= max_lines and _size(block) <= limit:
            units.append(block)
        elif block[0][1] == _FENCE_MARK:
            units.extend(_split_fence(block, max_lines, limit))
        else:
            # A single paragraph line beyond the limit is truncated: it cannot be split
            # without inventing a line break, and the piece would be refused otherwise.
            units.extend([(ln, t[:limit])] for ln, t in block)
    parts: list[Block] = []
    current: Block = []
    for unit in units:
        if current and (
            len(current) + len(unit) > max_lines or _size(current) + _size(unit) > limit
        ):
            parts.append(current)
            current = []
        current = current + unit
    if current:
        parts.append(current)
    return parts


def _split_fence(block: Block, max_lines: int, limit: int) -> list[Block]:
    """A ``<pre>`` block too long for one piece, re-fenced in slices."""
    inner = block[1:-1]
    out: list[Block] = []
    room = max(1, max_lines - 2)
    current: Block = []
    for ln, text in inner:
        text = text[: limit - 2 * len(_FENCE_MARK)]
        if current and (len(current) >= room or _size(current) + len(text) + 1 > limit - 10):
            out.append([(current[0][0], _FENCE_MARK), *current, (current[-1][0], _FENCE_MARK)])
            current = []
        current.append((ln, text))
    if current:
        out.append([(current[0][0], _FENCE_MARK), *current, (current[-1][0], _FENCE_MARK)])
    return out
