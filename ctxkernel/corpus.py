"""Corpus definitions (``corpora/*.toml``) and the records the index holds: Chunk and Hit.

A corpus says where its files come from (git, an installed package, a docs page),
which files count (include/exclude globs), how each file type is chunked, and how
chunks are tagged (kind, architecture). Users add a corpus by dropping a TOML file in
``corpora/`` (built in) or ``<config dir>/corpora`` — no code change.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness import paths

from .errors import UserError

KINDS = ("example", "tutorial", "source", "doc", "test")

# Languages by file suffix; also the default chunker for the suffix.
LANGUAGES: dict[str, tuple[str, str]] = {
    ".py": ("python", "python"),
    ".pyi": ("python", "python"),
    ".h": ("cpp", "cpp"),
    ".hpp": ("cpp", "cpp"),
    ".hh": ("cpp", "cpp"),
    ".cuh": ("cuda", "cpp"),
    ".cu": ("cuda", "cpp"),
    ".cpp": ("cpp", "cpp"),
    ".cc": ("cpp", "cpp"),
    ".cxx": ("cpp", "cpp"),
    ".inl": ("cpp", "cpp"),
    ".inc": ("cpp", "cpp"),
    ".md": ("markdown", "markdown"),
    ".rst": ("rst", "rst"),
    ".html": ("html", "ptx_html"),
    ".htm": ("html", "ptx_html"),
    ".ipynb": ("notebook", "notebook"),
    ".txt": ("text", "lines"),
    ".td": ("tablegen", "lines"),
    ".mlir": ("mlir", "lines"),
    ".ptx": ("ptx", "lines"),
    ".toml": ("toml", "lines"),
    ".yaml": ("yaml", "lines"),
    ".yml": ("yaml", "lines"),
    ".json": ("json", "lines"),
    ".cmake": ("cmake", "lines"),
    ".sh": ("shell", "lines"),
}

# Target architecture tags, read from paths and text: one pass of one regex.
_ARCH_RE = re.compile(
    r"(?<![A-Za-z0-9])sm_?(?P<num>\d{2,3})[af]?(?![0-9])"
    r"|\b(?P<word>ampere|hopper|blackwell|wgmma|gmma|tcgen05|umma)\b",
    re.I,
)
_ARCH_WORDS = {
    "ampere": "sm80",
    "hopper": "sm90",
    "blackwell": "sm100",
    "wgmma": "sm90",
    "gmma": "sm90",
    "tcgen05": "sm100",
    "umma": "sm100",
}


@dataclass(frozen=True)
class PackageSpec:
    """How an installed Python distribution maps onto the upstream repository's paths."""

    distributions: tuple[str, ...]
    strip: tuple[str, ...] = ()  # leading path parts of installed files to drop
    prefix: str = ""  # what to put in front to get the upstream path
    version_ref: str = "v{version}"  # git ref that matches an installed version, for links


@dataclass(frozen=True)
class SourceSpec:
    git: str = ""
    ref: str = ""
    url: str = ""  # a documentation page (http download)
    package: PackageSpec | None = None


@dataclass(frozen=True)
class Corpus:
    name: str
    description: str
    source: SourceSpec
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    chunkers: tuple[tuple[str, str], ...]  # (glob, chunker name), first match wins
    kinds: tuple[tuple[str, str], ...]  # (glob, kind), first match wins; default "source"
    blob_url: str = ""  # "{base}/blob/{ref}/{path}#L{start}-L{end}"
    doc_url: str = ""  # "{url}{anchor}" for documentation pages
    max_file_bytes: int = 4_000_000
    max_lines: int = 120
    min_lines: int = 12  # smaller neighbouring pieces are joined (chunkers/coalesce.py)
    target_lines: int = 48  # ... up to about this many lines
    definition: Path | None = None

    def wants(self, path: str) -> bool:
        """Whether a file (upstream-relative posix path) belongs to this corpus."""
        if not any(_glob_match(path, g) for g in self.include):
            return False
        return not any(_glob_match(path, g) for g in self.exclude)

    def chunker_for(self, path: str) -> str:
        for glob, name in self.chunkers:
            if _glob_match(path, glob):
                return name
        return LANGUAGES.get(Path(path).suffix.lower(), ("text", "lines"))[1]

    def kind_for(self, path: str) -> str:
        for glob, kind in self.kinds:
            if _glob_match(path, glob):
                return kind
        return "source"

    def link(self, *, ref: str, path: str, start: int, end: int, anchor: str = "") -> str:
        """Upstream URL of a chunk: a blob URL at the commit with a line range, or a doc anchor."""
        if anchor and self.doc_url:
            return self.doc_url.format(anchor=anchor, path=path)
        if self.blob_url and ref:
            return self.blob_url.format(ref=ref, path=path, start=start, end=end)
        return ""


def language_for(path: str) -> str:
    return LANGUAGES.get(Path(path).suffix.lower(), ("text", "lines"))[0]


def arch_tags(path: str, text: str = "") -> tuple[str, ...]:
    """Architectures a chunk targets, from its path and (the start of) its text."""
    found: set[str] = set()
    for haystack in (path, text[:3000]):
        for match in _ARCH_RE.finditer(haystack):
            num = match.group("num")
            found.add(f"sm{num}" if num else _ARCH_WORDS[match.group("word").lower()])
    return tuple(sorted(found, key=lambda t: int(t[2:])))


@dataclass
class Chunk:
    """One indexed unit: a piece of a file with everything needed to cite and filter it."""

    corpus: str
    path: str
    start_line: int
    end_line: int
    text: str
    symbol: str = ""
    title: str = ""
    doc: str = ""
    anchor: str = ""
    defines: tuple[str, ...] = ()
    language: str = "text"
    kind: str = "source"
    arch: tuple[str, ...] = ()
    commit: str = ""
    url: str = ""
    file_hash: str = ""

    @property
    def id(self) -> str:
        return chunk_id(self.corpus, self.path, self.start_line, self.end_line)


@dataclass
class Hit:
    """A search or grep result: a chunk (or a line range) with its score and how it was found."""

    chunk: Chunk
    score: float = 0.0
    rank: int = 0
    via: str = ""  # "hybrid", "lexical", "dense", "grep", "docs"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.chunk.id

    def to_json(self) -> dict[str, Any]:
        c = self.chunk
        data: dict[str, Any] = {
            "type": "hit",
            "id": c.id,
            "corpus": c.corpus,
            "path": c.path,
            "start_line": c.start_line,
            "end_line": c.end_line,
            "score": round(self.score, 6),
            "rank": self.rank,
            "via": self.via,
            "symbol": c.symbol,
            "defines": list(c.defines),
            "title": c.title,
            "language": c.language,
            "kind": c.kind,
            "arch": list(c.arch),
            "commit": c.commit,
            "url": c.url,
            "text": c.text,
        }
        data.update(self.extra)
        return data


def chunk_id(corpus: str, path: str, start: int, end: int) -> str:
    return f"{corpus}:{path}:{start}-{end}"


_ID_RE = re.compile(
    r"^(?P<corpus>[A-Za-z0-9_.-]+):(?P<path>.+?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$"
)


def parse_chunk_id(text: str) -> tuple[str, str, int | None, int | None]:
    """Split ``corpus:path[:start[-end]]``; UserError if it is not of that form."""
    match = _ID_RE.match(text.strip())
    if not match:
        raise UserError(f"not a chunk reference: {text!r} (expected corpus:path[:start-end])")
    start = int(match["start"]) if match["start"] else None
    end = int(match["end"]) if match["end"] else start
    if start is not None and (start < 1 or (end is not None and end < start)):
        raise UserError(f"bad line range in {text!r}: lines are 1-based and start <= end")
    return match["corpus"], match["path"], start, end


# --- loading definitions -------------------------------------------------------------


def builtin_corpora_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "corpora", here / "_builtin_corpora"):
        if candidate.is_dir():
            return candidate
    return here.parent / "corpora"


def corpora_dirs() -> list[Path]:
    """Where corpus definitions are read from, later ones overriding earlier ones by name."""
    dirs = [builtin_corpora_dir(), paths.config_dir() / "corpora"]
    if paths.home() != paths.config_dir():
        dirs.append(paths.home() / "corpora")
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def load_corpora() -> dict[str, Corpus]:
    found: dict[str, Corpus] = {}
    for directory in corpora_dirs():
        for file in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            corpus = load_corpus_file(file)
            found[corpus.name] = corpus
    return found


def get_corpus(name: str) -> Corpus:
    known = load_corpora()
    if name not in known:
        names = ", ".join(sorted(known)) or "none"
        raise UserError(f"unknown corpus {name!r} (known: {names}; add one as corpora/{name}.toml)")
    return known[name]


def load_corpus_file(file: Path) -> Corpus:
    return _parse_corpus(_read_toml(file), file)


@lru_cache(maxsize=64)
def _read_toml_cached(path: str, mtime: float) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        return _read_toml_cached(str(file), file.stat().st_mtime)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"corpus definition {file.name}: invalid TOML: {exc}") from exc


def _parse_corpus(data: dict[str, Any], file: Path) -> Corpus:
    where = f"corpus definition {file.name}"
    name = str(data.get("name") or file.stem)
    if not re.fullmatch(r"[A-Za-z0-9_.-]{2,60}", name):
        raise UserError(f"{where}: name {name!r} must be 2-60 letters, digits, '.', '_' or '-'")
    src = data.get("source", {})
    if not isinstance(src, dict):
        raise UserError(f"{where}: [source] must be a table")
    pkg = src.get("package")
    package = None
    if isinstance(pkg, dict):
        dists = pkg.get("distributions") or (
            [pkg["distribution"]] if pkg.get("distribution") else []
        )
        package = PackageSpec(
            distributions=tuple(str(d) for d in dists),
            strip=tuple(str(s) for s in _as_list(pkg.get("strip", []))),
            prefix=str(pkg.get("prefix", "")),
            version_ref=str(pkg.get("version_ref", "v{version}")),
        )
    source = SourceSpec(
        git=str(src.get("git", "")),
        ref=str(src.get("ref", "")),
        url=str(src.get("url", "")),
        package=package,
    )
    if not (source.git or source.url or source.package):
        raise UserError(f"{where}: [source] needs git, url or package")
    files = data.get("files", {})
    include = tuple(str(g) for g in _as_list(files.get("include", ["**"])))
    exclude = tuple(str(g) for g in _as_list(files.get("exclude", [])))
    chunkers = tuple((str(k), str(v)) for k, v in data.get("chunkers", {}).items())
    kinds = tuple((str(k), str(v)) for k, v in data.get("kinds", {}).items())
    for _, kind in kinds:
        if kind not in KINDS:
            raise UserError(f"{where}: unknown kind {kind!r} (one of {', '.join(KINDS)})")
    links = data.get("links", {})
    limits = data.get("limits", {})
    return Corpus(
        name=name,
        description=str(data.get("description", "")).strip(),
        source=source,
        include=include,
        exclude=exclude,
        chunkers=chunkers,
        kinds=kinds,
        blob_url=str(links.get("blob", "")),
        doc_url=str(links.get("doc", "")),
        max_file_bytes=int(limits.get("max_file_bytes", 4_000_000)),
        max_lines=int(limits.get("max_lines", 120)),
        min_lines=int(limits.get("min_lines", 12)),
        target_lines=int(limits.get("target_lines", 48)),
        definition=file,
    )


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _glob_match(path: str, glob: str) -> bool:
    """Glob with ``**`` spanning directories (fnmatch's ``*`` already crosses ``/``)."""
    if glob in ("**", "**/*", "*"):
        return True
    if glob.endswith("/**"):
        base = glob[:-3]
        return (
            path == base
            or path.startswith(base + "/")
            or fnmatch.fnmatchcase(path, glob[:-1] + "*")
        )
    if glob.startswith("**/"):
        return fnmatch.fnmatchcase(path, glob[3:]) or fnmatch.fnmatchcase(path, glob)
    return fnmatch.fnmatchcase(path, glob)
