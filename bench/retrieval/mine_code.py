"""Mining from source code for ``bench/retrieval/mine_queries.py``: the corpus's files as the
indexer sees them, raise/assert/static_assert sites and their messages (``error``
queries), and public API names resolved to their definitions (``api`` queries).
"""

from __future__ import annotations

import ast
import random
import re
import string
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import mine_text as mt

from ctxkernel.corpus import Corpus, get_corpus

CODE_SUFFIXES = (".py", ".hpp", ".h", ".cu", ".cuh", ".cpp", ".cc")


@dataclass
class Mined:
    corpus: str
    kind: str
    query: str
    relevant: list[str]
    origin: str  # where it was mined from (for audits; the eval ignores it)
    id: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "corpus": self.corpus,
            "kind": self.kind,
            "query": self.query,
            "relevant": self.relevant,
            "origin": self.origin,
        }


# --- the corpus as the indexer sees it ----------------------------------------------------


@dataclass
class CorpusFiles:
    name: str
    root: Path
    corpus: Corpus
    paths: list[str]
    _text: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, name: str, root: Path) -> CorpusFiles:
        corpus = get_corpus(name)
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, text=True, check=True
        ).stdout
        paths = sorted(p for p in out.split("\0") if p and corpus.wants(p))
        keep = []
        for p in paths:
            f = root / p
            if f.is_file() and f.stat().st_size <= corpus.max_file_bytes:
                keep.append(p)
        return cls(name, root, corpus, keep)

    def text(self, path: str) -> str | None:
        if path not in self._text:
            try:
                data = (self.root / path).read_bytes()
                self._text[path] = "" if b"\0" in data[:8192] else data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                self._text[path] = ""
        return self._text[path] or None

    def lines(self, path: str) -> list[str]:
        return (self.text(path) or "").splitlines()


def git_head(root: Path) -> tuple[str, str]:
    """(mirror commit, upstream commit named in a snapshot's subject or '')."""
    out = subprocess.run(
        ["git", "-C", str(root), "log", "-1", "--format=%H%n%s"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    m = re.search(r"\b([0-9a-f]{7,40})\b", out[1] if len(out) > 1 else "")
    return out[0], (m.group(1) if m else "")


# --- error messages -----------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRef:
    expr: str
    conversion: int = -1


Part = str | FieldRef


@dataclass
class Site:
    path: str
    start: int
    end: int
    exc: str
    parts: list[Part]
    area: str

    @property
    def key(self) -> str:
        text = "".join(p if isinstance(p, str) else "{}" for p in self.parts)
        return re.sub(r"\s+", " ", text).strip().lower()

    @property
    def literal(self) -> str:
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def pieces(self) -> list[str]:
        out = []
        for p in self.parts:
            if isinstance(p, str):
                out += [s.strip() for s in p.splitlines() if len(s.strip()) >= 4]
        return out


def _template(node: ast.expr) -> list[Part] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts: list[Part] = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
            elif isinstance(v, ast.FormattedValue):
                parts.append(FieldRef(ast.unparse(v.value), v.conversion))
            else:
                return None
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return left + right if left is not None and right is not None else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        parts = []
        auto = 0
        try:
            parsed = list(string.Formatter().parse(node.func.value.value))
        except ValueError:
            return None
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        for literal, name, _spec, conv in parsed:
            if literal:
                parts.append(literal)
            if name is None:
                continue
            arg: ast.expr | None
            if name == "":
                arg = node.args[auto] if auto < len(node.args) else None
                auto += 1
            elif name.isdigit():
                arg = node.args[int(name)] if int(name) < len(node.args) else None
            else:
                arg = kw.get(name.split(".")[0].split("[")[0])
            expr = ast.unparse(arg) if arg is not None else name
            parts.append(FieldRef(expr, ord(conv) if conv else -1))
        return parts
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
    ):
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        pieces = re.split(r"%[-#0 +]*\d*(?:\.\d+)?[sdrfxigeu]", node.left.value)
        if len(pieces) - 1 != len(args):
            return None
        parts = [pieces[0]]
        for a, lit in zip(args, pieces[1:], strict=True):
            parts += [FieldRef(ast.unparse(a)), lit]
        return parts
    return None


ERROR_TYPE = re.compile(r"(Error|Exception|Failure|NotImplemented)$|^DSL")
# internal tooling a kernel author does not run
NO_ERRORS_FROM = re.compile(r"^python/triton/(_[^/]*\.py|tools/)|^python/CuTeDSL/prep_")


def _is_error_type(exc: str) -> bool:
    return bool(exc) and bool(ERROR_TYPE.search(exc.rsplit(".", 1)[-1]))


def _exc_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return ast.unparse(node)
    return ""


def python_sites(cf: CorpusFiles, area_of: dict[str, str]) -> tuple[list[Site], int]:
    """Every raise/assert with a string message in the corpus's Python files."""
    sites: list[Site] = []
    unparsed = 0
    for path in cf.paths:
        if not path.endswith(".py"):
            continue
        text = cf.text(path)
        if text is None:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            unparsed += 1
            continue
        area = _area(path, area_of)
        for node in ast.walk(tree):
            msg: ast.expr | None = None
            exc = ""
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                exc = _exc_name(node.exc.func)
                if node.exc.args:
                    msg = node.exc.args[0]
                else:
                    msg = next(
                        (k.value for k in node.exc.keywords if k.arg in ("message", "msg")), None
                    )
            elif isinstance(node, ast.Assert) and node.msg is not None:
                exc, msg = "AssertionError", node.msg
            if msg is None or not _is_error_type(exc):
                continue
            parts = _template(msg)
            if parts is None:
                continue
            end = node.end_lineno or node.lineno
            sites.append(Site(path, node.lineno, end, exc, parts, area))
    return sites, unparsed


_STATIC_ASSERT = re.compile(r"\bstatic_assert\s*\(")
_CSTRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def cpp_sites(cf: CorpusFiles) -> list[Site]:
    """``static_assert(cond, "message")`` in the corpus's C++ files."""
    sites: list[Site] = []
    for path in cf.paths:
        if not path.endswith((".hpp", ".h", ".cu", ".cuh")):
            continue
        text = cf.text(path)
        if not text:
            continue
        for m in _STATIC_ASSERT.finditer(text):
            body_end = _matching_paren(text, m.end() - 1)
            if body_end < 0:
                continue
            body = text[m.end() : body_end]
            comma = _last_top_level_comma(body)
            if comma < 0:
                continue
            tail = body[comma + 1 :]
            literals = _CSTRING.findall(tail)
            if not literals or _CSTRING.sub("", tail).strip():
                continue
            message = "".join(literals).encode().decode("unicode_escape", errors="ignore")
            start = text.count("\n", 0, m.start()) + 1
            end = text.count("\n", 0, body_end) + 1
            sites.append(Site(path, start, end, "static_assert", [message], "cpp"))
    return sites


def _matching_paren(text: str, open_at: int) -> int:
    depth, i, n = 0, open_at, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            m = _CSTRING.match(text, i)
            i = m.end() if m else i + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        elif ch == ";" and depth <= 1:
            return -1
        i += 1
    return -1


def _last_top_level_comma(body: str) -> int:
    depth, last, i = 0, -1, 0
    while i < len(body):
        ch = body[i]
        if ch == '"':
            m = _CSTRING.match(body, i)
            i = m.end() if m else i + 1
            continue
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            last = i
        i += 1
    return last


def _area(path: str, area_of: dict[str, str]) -> str:
    for prefix, area in area_of.items():
        if path.startswith(prefix):
            return area
    return "other"


AREAS = {
    "cutlass": {"python/CuTeDSL/": "lib", "examples/": "example"},
    "triton": {
        "python/triton/language/": "lang",
        "python/triton/experimental/gluon/language/": "lang",
        "python/triton/": "lib",
        "python/tutorials/": "example",
        "python/examples/": "example",
    },
}
# share of a corpus's error queries drawn from each area
AREA_SHARE = {
    "cutlass": {"lib": 0.55, "example": 0.25, "cpp": 0.20},
    "triton": {"lang": 0.5, "lib": 0.3, "example": 0.2},
}
GENERIC = re.compile(
    r"^(not (yet )?implemented|unsupported|invalid|unknown|unreachable|should not|"
    r"internal error|todo)\b",
    re.I,
)


def good_message(site: Site) -> bool:
    lit = re.sub(r"\s+", " ", site.literal).strip()
    fields = sum(1 for p in site.parts if isinstance(p, FieldRef))
    n_words = len(re.findall(r"[A-Za-z]{2,}", lit))
    if len(lit) < 18 or n_words < 3 or fields > 4:
        return False
    if GENERIC.match(lit) and n_words < 5:
        return False
    return not lit.startswith(("[", "{")) and "\x1b" not in lit and "\\033" not in lit


def render_message(site: Site, corpus: str, rng: random.Random) -> str:
    out = []
    for p in site.parts:
        out.append(p if isinstance(p, str) else mt.field_value(p.expr, corpus, rng, p.conversion))
    text = re.sub(r"\s+", " ", "".join(out)).strip()
    if len(text) > 200:
        text = text[:200].rsplit(" ", 1)[0]
    return text


def mine_errors(cf: CorpusFiles, seed: int, quota: int, unparsed: Counter[str]) -> list[Mined]:
    sites, bad = python_sites(cf, AREAS[cf.name])
    unparsed[f"unparsed_python_files:{cf.name}"] += bad
    if cf.name == "cutlass":
        sites += cpp_sites(cf)
    by_key: dict[str, list[Site]] = defaultdict(list)
    for s in sites:
        by_key[s.key].append(s)
    candidates: dict[str, list[tuple[str, list[Site]]]] = defaultdict(list)
    for key in sorted(by_key):
        group = sorted(by_key[key], key=lambda s: (s.path, s.start))
        if len(group) > 8 or not good_message(group[0]):
            continue
        if all(NO_ERRORS_FROM.search(s.path) for s in group):
            continue
        candidates[group[0].area].append((key, group))
    rng = random.Random(f"{seed}:errors:{cf.name}")
    out: list[Mined] = []
    for area, share in AREA_SHARE[cf.name].items():
        pool = candidates.get(area, [])
        for _key, group in rng.sample(pool, min(len(pool), round(quota * share))):
            site = rng.choice([s for s in group if not NO_ERRORS_FROM.search(s.path)])
            r = random.Random(f"{seed}:{site.path}:{site.start}")
            message = render_message(site, cf.name, r)
            query = mt.render_error(
                site.exc, message, cf.name, site.path, r, site.exc == "AssertionError"
            )
            targets = [f"{s.path}:{s.start}-{s.end}" for s in group]
            targets += grep_alternatives(cf, group[0], sites)
            out.append(
                Mined(
                    cf.name,
                    "error",
                    query,
                    unique(targets),
                    f"{site.exc} at {site.path}:{site.start}",
                )
            )
    return out


def grep_alternatives(cf: CorpusFiles, site: Site, all_sites: list[Site]) -> list[str]:
    """Other code lines that hold every literal piece of the message (a message kept in a
    variable and raised elsewhere), outside any parsed raise site."""
    pieces = site.pieces
    if not pieces:
        return []
    longest = max(pieces, key=len)
    if len(longest) < 10:
        return []
    spans = defaultdict(list)
    for s in all_sites:
        spans[s.path].append((s.start, s.end))
    out = []
    for path in cf.paths:
        if not path.endswith(CODE_SUFFIXES):
            continue
        text = cf.text(path)
        if not text or longest not in text:
            continue
        lines = text.splitlines()
        for i, line in enumerate(lines, 1):
            if longest not in line:
                continue
            if any(a <= i <= b for a, b in spans[path]):
                continue
            window = "\n".join(lines[max(0, i - 3) : i + 2])
            if all(p in window for p in pieces):
                out.append(f"{path}:{i}-{i}")
    return out


def unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- public API names ---------------------------------------------------------------------


@dataclass(frozen=True)
class Definition:
    path: str
    name: str
    start: int
    end: int
    documented: bool


class Resolver:
    """Follows a package's imports from an ``__init__.py`` to where a name is defined."""

    def __init__(self, cf: CorpusFiles, package_root: str, package: str) -> None:
        self.cf = cf
        self.root = package_root  # e.g. python/CuTeDSL/cutlass
        self.package = package  # e.g. cutlass
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            text = self.cf.text(path) if path in set(self.cf.paths) else None
            try:
                self._trees[path] = ast.parse(text) if text else None
            except SyntaxError:
                self._trees[path] = None
        return self._trees[path]

    def module_file(self, current: str, module: str | None, level: int) -> str | None:
        if level:
            base = Path(current).parent
            for _ in range(level - 1):
                base = base.parent
        elif module and (module == self.package or module.startswith(self.package + ".")):
            base = Path(self.root).parent
        else:
            return None
        parts = module.split(".") if module else []
        cand = base.joinpath(*parts)
        for option in (f"{cand}.py", f"{cand}/__init__.py"):
            if option in self._paths():
                return option
        return None

    def _paths(self) -> set[str]:
        if not hasattr(self, "_pathset"):
            self._pathset = set(self.cf.paths)
        return self._pathset

    def exported(self, init: str) -> list[str]:
        tree = self.tree(init)
        if tree is None:
            return []
        names: list[str] = []
        declared: list[str] | None = None
        for stmt in _top_level(tree.body):
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets
            ):
                try:
                    declared = [str(x) for x in ast.literal_eval(stmt.value)]
                except ValueError:
                    declared = None
            elif isinstance(stmt, ast.ImportFrom):
                names += [a.asname or a.name for a in stmt.names if a.name != "*"]
            elif isinstance(stmt, ast.FunctionDef | ast.ClassDef):
                names.append(stmt.name)
            elif isinstance(stmt, ast.Assign):
                names += [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        chosen = declared if declared is not None else names
        return [n for n in dict.fromkeys(chosen) if not n.startswith("_")]

    def resolve(self, path: str, name: str, depth: int = 0) -> list[Definition]:
        tree = self.tree(path)
        if tree is None or depth > 8:
            return []
        found: list[Definition] = []
        for stmt in _top_level(tree.body):
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if stmt.name == name:
                    start = min([stmt.lineno] + [d.lineno for d in stmt.decorator_list])
                    found.append(
                        Definition(
                            path,
                            name,
                            start,
                            stmt.end_lineno or stmt.lineno,
                            ast.get_docstring(stmt) is not None,
                        )
                    )
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    value = stmt.value
                    if isinstance(value, ast.Name) and value.id != name:
                        found += self.resolve(path, value.id, depth + 1)
                    elif value is not None:
                        found.append(
                            Definition(
                                path, name, stmt.lineno, stmt.end_lineno or stmt.lineno, False
                            )
                        )
            elif isinstance(stmt, ast.ImportFrom):
                target = self.module_file(path, stmt.module, stmt.level)
                for a in stmt.names:
                    if a.name == "*":
                        if target and target != path:
                            found += self.resolve(target, name, depth + 1)
                    elif (a.asname or a.name) == name and target:
                        sub = (
                            self.module_file(target, a.name, 1)
                            if target.endswith("__init__.py")
                            else None
                        )
                        if sub:
                            continue  # a submodule, not an API name
                        found += self.resolve(target, a.name, depth + 1)
        return list(dict.fromkeys(found))


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for stmt in body:
        if isinstance(stmt, ast.If | ast.Try | ast.With):
            inner = list(stmt.body)
            if isinstance(stmt, ast.If):
                inner += stmt.orelse
            if isinstance(stmt, ast.Try):
                for h in stmt.handlers:
                    inner += h.body
                inner += stmt.orelse
            yield from _top_level(inner)
        else:
            yield stmt


# (module __init__ or file, package root, package, surface forms, weight)
NAMESPACES = {
    "cutlass": [
        (
            "python/CuTeDSL/cutlass/cute/__init__.py",
            ("cute.{n}", "cutlass.cute.{n}", "cute.{n}()"),
            14,
        ),
        (
            "python/CuTeDSL/cutlass/cute/nvgpu/cpasync/__init__.py",
            ("cute.nvgpu.cpasync.{n}", "cpasync.{n}"),
            5,
        ),
        (
            "python/CuTeDSL/cutlass/cute/nvgpu/tcgen05/__init__.py",
            ("cute.nvgpu.tcgen05.{n}", "tcgen05.{n}"),
            5,
        ),
        (
            "python/CuTeDSL/cutlass/cute/nvgpu/warpgroup/__init__.py",
            ("cute.nvgpu.warpgroup.{n}", "warpgroup.{n}"),
            3,
        ),
        (
            "python/CuTeDSL/cutlass/cute/nvgpu/warp/__init__.py",
            ("cute.nvgpu.warp.{n}", "warp.{n}"),
            3,
        ),
        ("python/CuTeDSL/cutlass/cute/nvgpu/__init__.py", ("cute.nvgpu.{n}",), 2),
        ("python/CuTeDSL/cutlass/cute/arch/__init__.py", ("cute.arch.{n}", "cute.arch.{n}()"), 5),
        (
            "python/CuTeDSL/cutlass/pipeline/__init__.py",
            ("cutlass.pipeline.{n}", "pipeline.{n}"),
            4,
        ),
        ("python/CuTeDSL/cutlass/utils/__init__.py", ("cutlass.utils.{n}", "utils.{n}"), 4),
        ("python/CuTeDSL/cutlass/__init__.py", ("cutlass.{n}",), 2),
    ],
    "triton": [
        ("python/triton/language/__init__.py", ("tl.{n}", "triton.language.{n}", "tl.{n}()"), 22),
        ("python/triton/__init__.py", ("triton.{n}", "@triton.{n}"), 5),
        ("python/triton/testing.py", ("triton.testing.{n}",), 3),
        ("python/triton/experimental/gluon/language/__init__.py", ("gl.{n}", "ttgl.{n}"), 9),
        (
            "python/triton/experimental/gluon/language/nvidia/blackwell/__init__.py",
            ("gl.nvidia.blackwell.{n}", "blackwell.{n}"),
            3,
        ),
        (
            "python/triton/experimental/gluon/language/nvidia/hopper/__init__.py",
            ("gl.nvidia.hopper.{n}", "hopper.{n}"),
            2,
        ),
    ],
}
PACKAGES = {"cutlass": ("python/CuTeDSL/cutlass", "cutlass"), "triton": ("python/triton", "triton")}
CPP_API_QUOTA = 10


def mine_api(cf: CorpusFiles, seed: int, quota: int) -> list[Mined]:
    root, package = PACKAGES[cf.name]
    res = Resolver(cf, root, package)
    rng = random.Random(f"{seed}:api:{cf.name}")
    spaces = NAMESPACES[cf.name]
    py_quota = quota - (CPP_API_QUOTA if cf.name == "cutlass" else 0)
    total_w = sum(w for *_, w in spaces)
    seen_defs: set[tuple[str, str]] = set()
    out: list[Mined] = []
    for init, forms, weight in spaces:
        entries = []
        for n in res.exported(init):
            defs = res.resolve(init, n)
            if not defs or not any(d.documented for d in defs):
                continue  # undocumented or unresolvable (e.g. bound in the excluded _mlir)
            entries.append((n, defs))
        want = round(py_quota * weight / total_w)
        rng.shuffle(entries)
        picked = 0
        for n, defs in entries:
            key = tuple(sorted({(d.path, d.name) for d in defs}))
            if picked >= want or any(k in seen_defs for k in key):
                continue
            seen_defs.update(key)
            query = rng.choice(forms).format(n=n)
            targets = [f"{d.path}#{d.name}" for d in defs]
            out.append(Mined(cf.name, "api", query, targets, f"{init} exports {n}"))
            picked += 1
    if cf.name == "cutlass":
        out += mine_cpp_api(cf, seed, CPP_API_QUOTA)
    return out


_STRUCT = re.compile(
    r"^\s*struct\s+([A-Z][A-Za-z0-9_]*[A-Za-z0-9])\s*(?:final\s*)?(?::[^;{]*)?\{?\s*$"
)


def mine_cpp_api(cf: CorpusFiles, seed: int, quota: int) -> list[Mined]:
    """``cute::`` structs (copy and MMA atoms, traits) with every definition site."""
    defs: dict[str, list[str]] = defaultdict(list)
    for path in cf.paths:
        if not (path.startswith("include/cute/") and path.endswith(".hpp")):
            continue
        lines = cf.lines(path)
        for i, line in enumerate(lines):
            m = _STRUCT.match(line)
            if not m:
                continue
            nxt = " ".join(lines[i : i + 3])
            if "{" not in nxt or re.search(r"struct\s+\w+\s*<", line):
                continue
            defs[m.group(1)].append(f"{path}:{i + 1}-{i + 3}")
    names = sorted(n for n, sites in defs.items() if "_" in n and len(sites) <= 3 and n[:2] == "SM")
    rng = random.Random(f"{seed}:cppapi")
    out = []
    for n in rng.sample(names, min(quota, len(names))):
        query = rng.choice(("cute::{n}", "{n}")).format(n=n)
        out.append(Mined("cutlass", "api", query, defs[n], f"struct {n} in include/cute"))
    return out
