"""Reading a C++ declaration head: its kind, its name, the alias it defines, its comment.

The head is the text of a declaration before its ``{`` or ``;``, comments removed and
whitespace collapsed (``template <class T> struct Copy_Traits<SM90_TMA_LOAD> : Base``).
These are heuristics over text, not a parser: they aim at the names a person would
search for and never raise.
"""

from __future__ import annotations

import re

from ._merge import DOC_CHARS, clip

CLASS_KEY = re.compile(r"\b(?:struct|class|union|enum(?:\s+(?:class|struct))?)\b")
_TEMPLATE = re.compile(r"\s*template\s*<")
_ATTRIBUTE = re.compile(
    r"\s*(?:\[\[.*?\]\]|(?:alignas|__align__|__declspec|__attribute__|_Alignas)\s*(?=\()"
    r"|[A-Z][A-Z0-9_]*\b(?!\s*(?:::|<|\{|:(?!:)|final\b|$)))",
    re.S,
)
_QUALIFIED = re.compile(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*")
_OPERATOR = re.compile(
    r"((?:[A-Za-z_]\w*\s*(?:<[^;{}()]*?>)?\s*::\s*)*)operator\s*(\(\s*\)|\[\s*\]|(?:new|delete)\s*(?:\[\s*\])?"
    r'|""\s*\w+|[^\s\w(]+|\s+[^(]+?)\s*\('
)
_NOT_NAMES = {
    "__attribute__", "alignas", "decltype", "__declspec", "__launch_bounds__", "noexcept",
    "sizeof", "alignof", "requires", "__align__", "static_assert", "if", "for", "while",
    "switch", "return", "_Alignas", "throw", "__cluster_dims__", "__grid_constant__",
}  # fmt: skip
_IDENT_BEFORE = re.compile(
    r"((?:[A-Za-z_]\w*\s*(?:<[^<>;{}]*(?:<[^<>;{}]*(?:<[^<>;{}]*>[^<>;{}]*)*>[^<>;{}]*)*>)?\s*::\s*)*~?[A-Za-z_]\w*)\s*$"
)
_TEMPLATE_ARGS = re.compile(r"<[^<>]*(?:<[^<>]*(?:<[^<>]*>[^<>]*)*>[^<>]*)*>")
_USING_ALIAS = re.compile(r"^using\s+([A-Za-z_]\w*)\s*(?:\[\[.*?\]\]\s*)?=", re.S)
_TYPEDEF_FN = re.compile(r"\(\s*[*&^]\s*([A-Za-z_]\w*)\s*\)")
_TYPEDEF_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$")
_COMMENT_MARK = re.compile(r"^(?:/{2,}[!<]?|/\*+!?<?|\*+(?!/))")
_ANGLE_EVENTS = re.compile(r"[()\[\]<>{;]")
_RULE = re.compile(r"[-=*/#_~+.<> ]*")


def _skip_angles(s: str, i: int) -> int:
    """Index just past the '>' matching the '<' at ``s[i]``; -1 if it never closes."""
    depth = paren = 0
    for m in _ANGLE_EVENTS.finditer(s, i):
        k, ch = m.start(), m.group()
        if ch in "([":
            paren += 1
        elif ch in ")]":
            paren = max(0, paren - 1)
        elif paren == 0 and ch == "<":
            depth += 1
        elif paren == 0 and ch == ">" and (k == 0 or s[k - 1] != "-"):
            depth -= 1
            if depth == 0:
                return k + 1
        elif ch in "{;":
            return -1
    return -1


def _skip_angles_back(s: str, end: int) -> int:
    """Index of the '<' matching the '>' at ``s[end - 1]``; -1 if there is none."""
    depth = paren = 0
    for k in range(end - 1, max(-1, end - 400), -1):
        ch = s[k]
        if ch in ")]":
            paren += 1
        elif ch in "([":
            paren = max(0, paren - 1)
        elif paren == 0 and ch == ">":
            depth += 1
        elif paren == 0 and ch == "<":
            depth -= 1
            if depth == 0:
                return k
        elif ch in "{};":
            return -1
    return -1


def _strip_templates(head: str) -> str:
    while True:
        m = _TEMPLATE.match(head)
        if m is None:
            return head.strip()
        j = _skip_angles(head, m.end() - 1)
        head = head[m.end() :] if j < 0 else head[j:]


def _depth_zero(s: str) -> list[bool]:
    """For each index of ``s``, whether it is outside every ( ) and [ ] group.

    A group's own brackets count as outside, so ``f(`` is found at depth zero.
    """
    if "(" not in s and "[" not in s:
        return [True] * len(s)
    out: list[bool] = []
    depth = 0
    for ch in s:
        if ch in ")]":
            depth = max(0, depth - 1)
        out.append(depth == 0)
        if ch in "([":
            depth += 1
    return out


def head_info(head: str) -> tuple[str, str, str]:
    """(kind, bare name, display name) of a declaration head (text before '{' or ';').

    kind is "class" (struct/class/union/enum), "function", "variable" or "other";
    display keeps a specialisation's template arguments: ``Copy_Traits<SM90_TMA_LOAD>``.
    """
    body = _strip_templates(head)
    body = re.sub(r"^(?:typedef|friend|export)\s+", "", body)
    top = _depth_zero(body)
    for m in CLASS_KEY.finditer(body):
        if not top[m.start()]:
            continue
        rest = body[m.end() :]
        while True:
            a = _ATTRIBUTE.match(rest)
            if a is None or not a.group().strip():
                break
            rest = rest[a.end() :]
            if rest.lstrip().startswith("("):
                paren_end = _close_paren(rest, rest.index("("))
                rest = rest[paren_end:]
        n = _QUALIFIED.match(rest.lstrip())
        if n is None:
            return "class", "", ""
        rest = rest.lstrip()
        name = re.sub(r"\s+", "", n.group())
        after = rest[n.end() :].lstrip()
        display = name
        if after.startswith("<"):
            j = _skip_angles(after, 0)
            if j > 0:
                display = name + " ".join(after[:j].split())
                after = after[j:].lstrip()
        if not after or after.startswith(("final", "{")) or re.match(r":(?!:)", after):
            return "class", name.split("::")[-1], clip(display, 160)
        break
    op = _OPERATOR.search(body)
    if op is not None and top[op.start()]:
        sym = " ".join(op.group(2).split())
        bare = "operator " + sym if sym[:1].isalpha() else "operator" + sym.replace(" ", "")
        qual = re.sub(r"\s+", "", _TEMPLATE_ARGS.sub("", op.group(1)))
        return "function", bare, qual + bare
    eq = next((k for k, ch in enumerate(body) if ch == "=" and top[k] and _is_assign(body, k)), -1)
    candidates: list[tuple[str, str]] = []
    for k, ch in enumerate(body):
        if ch != "(" or not top[k] or (eq >= 0 and k > eq):
            continue
        name_end = len(body[:k].rstrip())
        targs = ""
        if name_end and body[name_end - 1] == ">":  # a specialisation: one<half_t>()
            lt = _skip_angles_back(body, name_end)
            if lt < 0:
                continue
            targs, name_end = " ".join(body[lt:name_end].split()), lt
        ident = _IDENT_BEFORE.search(body, max(0, name_end - 300), name_end)
        if ident is None:
            continue
        qual = re.sub(r"\s+", "", _TEMPLATE_ARGS.sub("", ident.group(1))).lstrip(":")
        bare = qual.split("::")[-1]
        if bare in _NOT_NAMES or bare == "operator":
            continue
        if bare.isupper() and len(bare) > 1:
            args = _close_paren(body, k)
            candidates.append((bare, " ".join(body[ident.start(1) : args].split())))
            continue
        return "function", bare, clip(qual + targs, 160)
    if candidates:
        return "function", candidates[0][0], clip(candidates[0][1], 160)
    if eq >= 0:
        n2 = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$", body[:eq])
        if n2 is not None:
            return "variable", n2.group(1), n2.group(1)
    n3 = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$", body)
    return "other", (n3.group(1) if n3 else ""), (n3.group(1) if n3 else "")


def _is_assign(s: str, k: int) -> bool:
    before = s[k - 1] if k > 0 else ""
    after = s[k + 1] if k + 1 < len(s) else ""
    return before not in "=!<>+-*/%&|^" and after != "="


def _close_paren(s: str, k: int) -> int:
    """Index just past the ')' matching the '(' at ``s[k]`` (end of ``s`` if unclosed)."""
    depth = 0
    for j in range(k, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def alias_name(head: str) -> str:
    """The name a ``using X = ...`` or ``typedef ... X`` declaration introduces, else ''."""
    body = _strip_templates(head).rstrip(";").strip()
    m = _USING_ALIAS.match(body)
    if m is not None:
        return m.group(1)
    if body.startswith("typedef"):
        fn = _TYPEDEF_FN.search(body)
        if fn is not None:
            return fn.group(1)
        tail = _TYPEDEF_NAME.search(body)
        return tail.group(1) if tail else ""
    return ""


def comment_text(lines: list[str]) -> str:
    """A comment block's words, comment markers and ruler lines removed."""
    out: list[str] = []
    for line in lines:
        s = _COMMENT_MARK.sub("", line.strip())
        s = re.sub(r"\*+/\s*$", "", s).strip()
        if s and not _RULE.fullmatch(s):
            out.append(s)
    return clip("\n".join(out), DOC_CHARS)
