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

from .errors import UserError, shown, warn_once

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
    # files indexed for the concept links only: chunked and stored (``show``, ``related``,
    # ``docs``'s links reach them) but never search candidates (see ``is_link_only``)
    link_only: tuple[str, ...] = ()

    def wants(self, path: str) -> bool:
        """Whether a file (upstream-relative posix path) belongs to this corpus."""
        if not any(_glob_match(path, g) for g in self.include + self.link_only):
            return False
        return not any(_glob_match(path, g) for g in self.exclude)

    def is_link_only(self, path: str) -> bool:
        """Whether a wanted file is a link-only source: its chunks are kept apart from the
        searched ones (no lexical terms, no vectors, no defined names, no document counts),
        so adding one changes no search result. A ``link_only`` glob wins over ``include``."""
        return any(_glob_match(path, g) for g in self.link_only)

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
    """The corpus definitions that parse; a broken file costs only its own corpus
    (``corpus_errors`` says what is wrong with it)."""
    return _load_all()[0]


def corpus_errors() -> dict[str, str]:
    """Corpus name (the file's stem) -> the one-line error of a definition that does not parse."""
    return _load_all()[1]


def _load_all() -> tuple[dict[str, Corpus], dict[str, str]]:
    found: dict[str, Corpus] = {}
    errors: dict[str, str] = {}
    for directory in corpora_dirs():
        for file in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            try:
                corpus = load_corpus_file(file)
            except UserError as exc:
                # a later directory's definition of the same name replaces this one
                found.pop(file.stem, None)
                errors[file.stem] = str(exc)
                continue
            errors.pop(corpus.name, None)
            errors.pop(file.stem, None)
            found[corpus.name] = corpus
    return found, errors


def get_corpus(name: str) -> Corpus:
    known, errors = _load_all()
    if name not in known:
        if name in errors:
            raise UserError(errors[name])
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
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"corpus definition {file.name}: cannot read it: {exc}") from exc


class _Fields:
    """Typed reads of one corpus definition; a value of the wrong type is a UserError
    naming the file, the key and what was expected."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, key: str, expected: str, value: Any) -> UserError:
        quoted = repr(value)
        if len(quoted) > 60:
            quoted = quoted[:57] + "..."
        return UserError(f"{self.where}: {key} must be {expected}, got {quoted}")

    def table(self, data: dict[str, Any], key: str) -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(key, "a table", value)
        return value

    def string(self, data: dict[str, Any], key: str, default: str = "", prefix: str = "") -> str:
        value = data.get(key, default)
        if not isinstance(value, str):
            raise self.fail(prefix + key, "a string", value)
        return value

    def strings(
        self, data: dict[str, Any], key: str, default: list[str], prefix: str = ""
    ) -> tuple[str, ...]:
        value = data.get(key, default)
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) for v in items):
            raise self.fail(prefix + key, "a string or a list of strings", value)
        return tuple(items)

    def integer(self, data: dict[str, Any], key: str, default: int, prefix: str = "") -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(prefix + key, "a positive integer", value)
        return value

    def known(self, data: dict[str, Any], keys: str, prefix: str = "") -> None:
        """Warn (once) of keys this table may not hold: a misspelt ``[files] includes``
        would otherwise index everything, silently."""
        allowed = keys.split()
        for key in data:
            if key not in allowed:
                warn_once(
                    f"{self.where}: unknown key {shown(prefix + key)} ignored "
                    f"(known{' in [' + prefix.rstrip('.') + ']' if prefix else ''}: "
                    f"{', '.join(allowed)})"
                )

    def mapping(self, data: dict[str, Any], key: str) -> tuple[tuple[str, str], ...]:
        table = self.table(data, key)
        for glob, value in table.items():
            if not isinstance(value, str):
                raise self.fail(f"[{key}] {glob!r}", "a string", value)
        return tuple((str(k), v) for k, v in table.items())


def _parse_corpus(data: dict[str, Any], file: Path) -> Corpus:
    where = f"corpus definition {file.name}"
    f = _Fields(where)
    f.known(data, "name description source files chunkers kinds links limits")
    name = f.string(data, "name", file.stem) or file.stem
    if not re.fullmatch(r"[A-Za-z0-9_.-]{2,60}", name):
        raise UserError(f"{where}: name {name!r} must be 2-60 letters, digits, '.', '_' or '-'")
    src = f.table(data, "source")
    pkg = src.get("package")
    package = None
    if pkg is not None:
        if not isinstance(pkg, dict):
            raise f.fail("source.package", "a table", pkg)
        f.known(pkg, "distributions distribution strip prefix version_ref", "source.package.")
        if "distributions" in pkg:
            dists = f.strings(pkg, "distributions", [], "source.package.")
        else:
            one = f.string(pkg, "distribution", "", "source.package.")
            dists = (one,) if one else ()
        package = PackageSpec(
            distributions=dists,
            strip=f.strings(pkg, "strip", [], "source.package."),
            prefix=f.string(pkg, "prefix", "", "source.package."),
            version_ref=f.string(pkg, "version_ref", "v{version}", "source.package."),
        )
        if not package.distributions:
            raise UserError(f"{where}: [source.package] needs distributions")
    source = SourceSpec(
        git=f.string(src, "git", "", "source."),
        ref=f.string(src, "ref", "", "source."),
        url=f.string(src, "url", "", "source."),
        package=package,
    )
    if not (source.git or source.url or source.package):
        raise UserError(f"{where}: [source] needs git, url or package")
    f.known(src, "git ref url package", "source.")
    files = f.table(data, "files")
    f.known(files, "include exclude link_only", "files.")
    chunkers = f.mapping(data, "chunkers")
    kinds = f.mapping(data, "kinds")
    for _, kind in kinds:
        if kind not in KINDS:
            raise UserError(f"{where}: unknown kind {kind!r} (one of {', '.join(KINDS)})")
    links = f.table(data, "links")
    f.known(links, "blob doc", "links.")
    limits = f.table(data, "limits")
    f.known(limits, "max_file_bytes max_lines min_lines target_lines", "limits.")
    return Corpus(
        name=name,
        description=f.string(data, "description").strip(),
        source=source,
        include=f.strings(files, "include", ["**"], "files."),
        exclude=f.strings(files, "exclude", [], "files."),
        link_only=f.strings(files, "link_only", [], "files."),
        chunkers=chunkers,
        kinds=kinds,
        blob_url=f.string(links, "blob", "", "links."),
        doc_url=f.string(links, "doc", "", "links."),
        max_file_bytes=f.integer(limits, "max_file_bytes", 4_000_000, "limits."),
        max_lines=f.integer(limits, "max_lines", 120, "limits."),
        min_lines=f.integer(limits, "min_lines", 12, "limits."),
        target_lines=f.integer(limits, "target_lines", 48, "limits."),
        definition=file,
    )


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
