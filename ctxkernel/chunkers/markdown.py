"""The prose chunkers: Markdown and reStructuredText cut into sections under headings.

A piece is one heading's own section (its heading line up to the next heading of any
level), with the heading breadcrumb as its symbol, the heading text as its title, the
URL fragment of the section as its anchor and its first paragraph as its doc. Sections
of a line or two are merged into the next sibling or child; long ones are split at
paragraph and code-fence boundaries. Text before the first heading is a piece of its
own. ``heading_names`` reads the code names a heading documents (backticked names,
``Title: wgmma.mma_async``, a bare ``cp.async.bulk.tensor``) and is shared with the
PTX HTML chunker.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from ._merge import DOC_CHARS, clip, finalize, first_line, is_blank, one_line, pack, part_title
from .base import DEFAULT_MAX_LINES, Piece

# A section with fewer non-blank lines than this under its heading is merged onward.
MIN_SECTION_LINES = 2
_MAX_DEFINES = 64

_SECTION_NUMBER = re.compile(r"^\s*(?:\d+\.)+\d*\s+|^\s*\d+\.?\s+(?=\D)")
_CODE_SPAN = re.compile(r"`+([^`]+?)`+")
_CODE_NAME = re.compile(r"[.%]?[A-Za-z_][\w.%]*(?:::[A-Za-z_][\w.%]*)*")


def heading_names(heading: str) -> tuple[str, ...]:
    """Code names a heading documents, for ``Piece.defines``.

    ``Asynchronous ... Instruction: wgmma.mma_async`` -> ``("wgmma.mma_async",)``;
    ``... Instructions: mbarrier.test_wait/mbarrier.try_wait`` gives both names;
    ``Performance-Tuning Directives: .reqntid`` -> ``(".reqntid",)``; backticked names
    (`` `tl.dot` ``) count; a heading that is nothing but a dotted or snake_case name
    (``cp.async.bulk.tensor``) names itself. Section numbers are ignored.
    """
    # links count by their text only: a URL's path segments are not names
    heading = _LINK.sub(r"\1", _IMAGE.sub(r"\1", heading))
    names: list[str] = []
    for span in _CODE_SPAN.findall(heading):
        m = _CODE_NAME.match(span.strip())
        if m is not None and len(m.group()) > 1:
            names.append(m.group().rstrip("."))
    text = strip_section_number(heading.replace("`", ""))
    if ": " in text:
        tail = text.rsplit(": ", 1)[1]
        for item in re.split(r"\s*[/,]\s*", tail.strip()):
            item = re.sub(r"\s*\([^)]*\)\s*$", "", item).strip()
            if _CODE_NAME.fullmatch(item) and _looks_like_code(item, loose=True):
                names.append(item)
    elif _CODE_NAME.fullmatch(text) and _looks_like_code(text, loose=False):
        names.append(text)
    return tuple(dict.fromkeys(names))


def strip_section_number(heading: str) -> str:
    """``9.7.15.5.2. Asynchronous ...`` -> ``Asynchronous ...``."""
    return _SECTION_NUMBER.sub("", heading).strip()


def _looks_like_code(name: str, *, loose: bool) -> bool:
    """A code name rather than a word: dotted, snake_case, ``%reg``, ``.directive``, CamelCase.

    ``loose`` also accepts a single lowercase word (``add``, ``tex``) after "Title:".
    """
    if name[0] in ".%" or any(c in name for c in "._%") or "::" in name:
        return True
    if re.search(r"[a-z][A-Z]|[A-Z]{2,}[a-z]|[A-Z][a-z]+[A-Z]", name):
        return True
    return loose and name.islower()


def slugify(text: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation other than - and _ dropped, spaces to -."""
    text = re.sub(r"[^\w\- ]", "", _plain(text).lower())
    return text.replace(" ", "-")


def docutils_id(text: str) -> str:
    """The id docutils/Sphinx gives a section titled ``text``."""
    ascii_text = unicodedata.normalize("NFKD", _plain(text)).encode("ascii", "ignore").decode()
    ident = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower())
    return re.sub(r"^[^a-z]+", "", ident).rstrip("-")


_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# permalink glyphs that docs converters leave in headings: the pilcrow, icon-font code points
_GLYPHS = re.compile("[\u00b6\ue000-\uf8ff]")


def _plain(text: str) -> str:
    """Heading text without inline markup: links to their text, code marks dropped."""
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _GLYPHS.sub("", text)
    text = re.sub(r"`([^`<]*?)\s*<[^>]*>`_{1,2}", r"\1", text)  # rst `text <url>`_
    text = re.sub(r":[\w:.-]+:`", "`", text)  # rst roles such as :func:`name`
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "")
    text = re.sub(r"(\*{1,2})(\S(?:.*?\S)?)\1", r"\2", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class _Heading:
    line: int  # first line of the section: the heading (or its overline / label above it)
    body: int  # first line after the heading's own lines
    level: int
    raw: str  # heading text as written, markup included
    anchor: str

    @property
    def title(self) -> str:
        return _plain(self.raw)


# -- Markdown -------------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_SETEXT_TEXT = re.compile(r"^(?: {4}|\s*(?:[>|<]|[-*+]\s|\d+[.)]\s))")


def chunk(text: str, path: str, max_lines: int = DEFAULT_MAX_LINES) -> list[Piece]:
    """Cut Markdown into sections under ATX and setext headings (fences respected)."""
    if not text.strip():
        return []
    lines = text.splitlines()
    fence = _fence_ids(lines)
    headings: list[_Heading] = []
    slugs: dict[str, int] = {}
    start = _front_matter_end(lines) + 1
    for i in range(start, len(lines) + 1):
        if fence[i]:
            continue
        line = lines[i - 1]
        m = _ATX.match(line)
        if m is not None:
            raw = (m.group(2) or "").strip()
            headings.append(_Heading(i, i + 1, len(m.group(1)), raw, _unique(slugs, slugify(raw))))
            continue
        if (
            i > start
            and not fence[i - 1]
            and _SETEXT.match(line)
            and _setext_text(lines, fence, i - 1)
        ):
            raw = lines[i - 2].strip()
            level = 1 if line.strip()[0] == "=" else 2
            headings.append(_Heading(i - 1, i + 1, level, raw, _unique(slugs, slugify(raw))))
    strong = [
        ln
        for ln in range(1, len(lines))
        if (fence[ln] == 0 or fence[ln + 1] != fence[ln])
        and (is_blank(lines[ln]) or fence[ln] != fence[ln + 1])
    ]
    weak = [ln for ln in range(1, len(lines)) if fence[ln] == 0 or fence[ln + 1] != fence[ln]]

    def in_fence(ln: int) -> bool:
        return fence[ln] != 0

    return _section_pieces(lines, headings, max(1, max_lines), strong, weak, in_fence, _no_names)


def _fence_ids(lines: list[str]) -> list[int]:
    """For each line (1-based), the number of the fenced code block it is part of, or 0."""
    ids = [0] * (len(lines) + 2)
    fence_no = 0
    opener = ""
    for i, line in enumerate(lines, 1):
        if opener:
            ids[i] = fence_no
            closing = line.strip()
            if (
                closing.startswith(opener)
                and set(closing) == {opener[0]}
                and len(line) - len(line.lstrip()) < 4
            ):
                opener = ""
            continue
        m = _FENCE.match(line)
        if m is not None and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence_no += 1
            opener = m.group(1)
            ids[i] = fence_no
    return ids


def _front_matter_end(lines: list[str]) -> int:
    """The last line of a YAML front matter block opening the file, or 0."""
    if not lines or lines[0].strip() != "---":
        return 0
    for i in range(1, min(len(lines), 200)):
        if lines[i].strip() in ("---", "..."):
            return i + 1
    return 0


def _setext_text(lines: list[str], fence: list[int], ln: int) -> bool:
    """Whether line ``ln`` can be the text of a setext heading (a one-line paragraph)."""
    text = lines[ln - 1]
    if is_blank(text) or fence[ln] or _ATX.match(text) or _NOT_SETEXT_TEXT.match(text):
        return False
    return ln == 1 or is_blank(lines[ln - 2]) or fence[ln - 1] != 0


def _unique(seen: dict[str, int], slug: str) -> str:
    """GitHub's de-duplication: the second ``#usage`` becomes ``#usage-1``."""
    if not slug:
        return ""
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return "#" + (slug if n == 0 else f"{slug}-{n}")


def _no_names(s: int, e: int) -> tuple[str, ...]:
    return ()


# -- reStructuredText -----------------------------------------------------------------------

_ADORNMENT = re.compile(r"""^([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])\1*\s*$""")
_LABEL = re.compile(r"^\.\.\s+_[^:]+:\s*$")
_DIRECTIVE_NAME = re.compile(
    r"^\s*\.\.\s+(?:auto(?:function|class|method|data|attribute|exception|decorator)"
    r"|(?:py:)?(?:function|class|method|data|attribute|decorator))::\s*([\w.]+)"
)
_AUTOSUMMARY = re.compile(r"^(\s*)\.\.\s+autosummary::")


def chunk_rst(text: str, path: str, max_lines: int = DEFAULT_MAX_LINES) -> list[Piece]:
    """Cut reStructuredText into sections under its underlined (and overlined) titles."""
    if not text.strip():
        return []
    lines = text.splitlines()
    styles: dict[tuple[str, bool], int] = {}
    headings: list[_Heading] = []
    i = 1
    n = len(lines)
    while i < n:
        found = _rst_title(lines, i)
        if found is None:
            i += 1
            continue
        style, raw, size = found
        level = styles.setdefault(style, len(styles) + 1)
        start, k = i, i - 1
        floor = headings[-1].body if headings else 1
        while k >= floor and (is_blank(lines[k - 1]) or _LABEL.match(lines[k - 1])):
            if not is_blank(lines[k - 1]):
                start = k  # a ``.. _label:`` target belongs to the title below it
            k -= 1
        headings.append(_Heading(start, i + size, level, raw, "#" + docutils_id(raw)))
        i += size
    top_level = [ln for ln in range(1, n) if is_blank(lines[ln]) and not _indented(lines, ln + 1)]
    weak = [ln for ln in range(1, n) if is_blank(lines[ln])]

    def indented(ln: int) -> bool:
        return lines[ln - 1][:1].isspace()

    def names(s: int, e: int) -> tuple[str, ...]:
        return _rst_names(lines, s, e)

    return _section_pieces(lines, headings, max(1, max_lines), top_level, weak, indented, names)


def _rst_title(lines: list[str], i: int) -> tuple[tuple[str, bool], str, int] | None:
    """(style, title, lines used) if a section title starts at line ``i``."""
    line = lines[i - 1]
    over = _ADORNMENT.match(line)
    if over is not None and i + 2 <= len(lines):
        title, under = lines[i], lines[i + 1]
        u = _ADORNMENT.match(under)
        if (
            title.strip()
            and not _ADORNMENT.match(title)
            and u is not None
            and under.strip() == line.strip()
            and len(line.strip()) >= len(title.strip())
        ):
            return (over.group(1), True), title.strip(), 3
    if over is not None or is_blank(line) or line[:1].isspace():
        return None
    if i > 1 and not is_blank(lines[i - 2]):
        return None
    under_m = _ADORNMENT.match(lines[i]) if i < len(lines) else None
    if under_m is None:
        return None
    width = len(lines[i].strip())
    if width < len(line.strip()) and width < 4:
        return None
    return (under_m.group(1), False), line.strip(), 2


def _indented(lines: list[str], ln: int) -> bool:
    """Whether the next non-blank line from ``ln`` on is indented (inside a directive)."""
    for k in range(ln, len(lines) + 1):
        if not is_blank(lines[k - 1]):
            return lines[k - 1][:1].isspace()
    return False


def _rst_names(lines: list[str], s: int, e: int) -> tuple[str, ...]:
    """Names from ``.. autofunction:: triton.language.dot`` and autosummary entries."""
    names: list[str] = []
    in_summary = ""
    for ln in range(s, e + 1):
        line = lines[ln - 1]
        if in_summary:
            if is_blank(line):
                continue
            indent = line[: len(line) - len(line.lstrip())]
            if len(indent) <= len(in_summary):
                in_summary = ""
            else:
                entry = line.strip().lstrip("~")
                if not entry.startswith(":") and re.fullmatch(r"[A-Za-z_][\w.]*", entry):
                    names.append(entry)
                continue
        m = _DIRECTIVE_NAME.match(line)
        if m is not None:
            full = m.group(1)
            names.extend((full, full.rsplit(".", 1)[-1]))
            continue
        a = _AUTOSUMMARY.match(line)
        if a is not None:
            in_summary = a.group(1) + " "
    return tuple(dict.fromkeys(names))[:_MAX_DEFINES]


# -- sections to pieces (both formats) -------------------------------------------------------

LineTest = Callable[[int], bool]


def _section_pieces(
    lines: list[str],
    headings: list[_Heading],
    max_lines: int,
    cuts: list[int],
    weak_cuts: list[int],
    not_prose: LineTest,
    body_names: Callable[[int, int], tuple[str, ...]],
) -> list[Piece]:
    """One piece per section (small ones merged onward, long ones split at ``cuts``).

    ``not_prose(line)`` marks lines the doc (first paragraph) must not come from: code.
    """
    heading_lines = {ln for h in headings for ln in range(h.line, h.body)}

    def doc(s: int, e: int) -> str:
        return _first_paragraph(lines, s, e, lambda ln: ln in heading_lines or not_prose(ln))

    pieces: list[Piece] = []
    first = headings[0].line if headings else len(lines) + 1
    if any(not is_blank(lines[ln - 1]) for ln in range(1, first)):
        pieces.extend(
            _split(
                lines,
                Piece(1, first - 1, title=first_line(lines, 1, first - 1), doc=doc(1, first - 1)),
                max_lines,
                cuts,
                weak_cuts,
            )
        )
    crumbs: list[str] = []
    stack: list[_Heading] = []
    for h in headings:
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
        crumbs.append(" > ".join(x.title for x in stack))
    ends = [h.line - 1 for h in headings[1:]] + [len(lines)]
    i = 0
    while i < len(headings):
        h, e, j = headings[i], ends[i], i + 1
        while (
            j < len(headings)
            and _content_lines(lines, h.body, e) < MIN_SECTION_LINES
            and headings[j].level >= h.level
            # a heading with nothing under it always joins what follows, however long
            and (ends[j] - h.line < max_lines or _content_lines(lines, h.body, e) == 0)
        ):
            e, j = ends[j], j + 1
        names: list[str] = []
        for g in headings[i:j]:
            names.extend(heading_names(g.raw))
        names.extend(body_names(h.line, e))
        whole = Piece(
            h.line,
            e,
            symbol=crumbs[i],
            title=one_line(h.title),
            doc=doc(h.body, e),
            anchor=h.anchor,
            defines=tuple(dict.fromkeys(names))[:_MAX_DEFINES],
        )
        pieces.extend(_split(lines, whole, max_lines, cuts, weak_cuts))
        i = j
    return finalize(pieces, lines)


def _split(
    lines: list[str], whole: Piece, max_lines: int, cuts: list[int], weak: list[int]
) -> list[Piece]:
    ranges = pack(
        whole.start_line,
        whole.end_line,
        max_lines,
        _within(cuts, whole),
        _within(weak, whole),
        lines=lines,
    )
    n = len(ranges)
    return [
        Piece(
            s,
            e,
            symbol=whole.symbol,
            title=part_title(whole.title, k, n),
            doc=whole.doc,
            anchor=whole.anchor,
            defines=whole.defines,
        )
        for k, (s, e) in enumerate(ranges, 1)
    ]


def _within(cuts: list[int], p: Piece) -> list[int]:
    lo = bisect.bisect_left(cuts, p.start_line)
    hi = bisect.bisect_left(cuts, p.end_line)
    return cuts[lo:hi]


def _content_lines(lines: list[str], start: int, end: int) -> int:
    return sum(1 for ln in range(start, end + 1) if not is_blank(lines[ln - 1]))


def _first_paragraph(lines: list[str], start: int, end: int, skip: LineTest) -> str:
    """The first run of prose lines in ``start..end``: no code, headings or directives."""
    out: list[str] = []
    for ln in range(start, min(end, len(lines)) + 1):
        line = lines[ln - 1].strip()
        prose = (
            line
            and not skip(ln)
            and not _ATX.match(line)
            and not _ADORNMENT.match(line)
            and not line.startswith(("..", "<!--", ":", "|", "<"))
        )
        if prose:
            out.append(line)
        elif out:
            break
    return clip(" ".join(out), DOC_CHARS)
