"""The retrieval queries — search, grep, docs, read, list_corpora, related — declared once.

Each dataclass is one query as the library runs it; its fields' metadata
(``harness.optionspec.option``) generate both the command's click parameters (``ctxkernel search``,
``grep``, ``docs``, ``show``, ``related``) and the agent tool's input schema (``ctxkernel.tools``, the
MCP server), so a default or a limit is written in one place. A field only one side
offers says so (``tool=False``: ``--rerank``, ``--engine``; ``cli=False``:
``max_tokens``, the size of a tool's result).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.optionspec import option

from .corpus import KINDS

if TYPE_CHECKING:
    from .docs import DocsResult
    from .grep import GrepResult
    from .related import Related
    from .search import SearchResult
    from .workspace import Workspace

# A tool's result is counted in tokens of the embedding model's tokenizer; the cap keeps
# every result under 20,000 of them, below the 25,000 at which Claude Code cuts an MCP
# result (``tools.base.Budget`` enforces it).
MIN_MAX_TOKENS = 200
DEFAULT_MAX_TOKENS = 4000
MAX_MAX_TOKENS = 20000

# A search query's length: room for a whole pasted traceback (a Triton compilation error
# with its frames and the kernel's source runs to several thousand characters)
MAX_QUERY_CHARS = 16_000

GREP_DEFAULT_TIMEOUT_S = 10.0
GREP_MAX_TIMEOUT_S = 30.0
MODES = ("hybrid", "lexical", "dense")
ENGINES = ("auto", "rg", "python")
# what ``arch.parse_target`` reads: sm_90, sm90, sm_90a, compute_90, 90
ARCH_PATTERN = "^(sm_?|compute_)?[0-9]{2,3}[af]?$"


def _max_tokens() -> Any:
    return field(
        default=DEFAULT_MAX_TOKENS,
        metadata=option(
            help="Upper bound on the size of the result in tokens (about 3 characters of "
            "code each). Longer output is cut between hits or lines, with a note saying "
            "what was left out.",
            cli=False,
            low=MIN_MAX_TOKENS,
            high=MAX_MAX_TOKENS,
        ),
    )


def _corpora(what: str) -> Any:
    return field(
        default=(),
        metadata=option(
            "--corpus",
            "-c",
            help="Only these corpora (repeatable; default: all indexed).",
            tool_help=f'Corpus name or list of names to {what}, e.g. "cutlass", "triton", '
            '"ptx" (list_corpora shows what is indexed). Default: all indexed corpora.',
            many=True,
            min_length=1,
            metavar="NAME",
            dest="corpora",
        ),
    )


def _arch(help: str) -> Any:
    return field(
        default=None,
        metadata=option(
            "--arch",
            help=help,
            tool_help="Target GPU architecture, e.g. sm_80, sm_90, sm_100: drop what it "
            "cannot run (sm_100-only tcgen05 code on sm_90, sm_90a-only wgmma code on sm_100).",
            pattern=ARCH_PATTERN,
            like="sm_80, sm_90, sm_100, ...",
            metavar="SM",
        ),
    )


def _path_glob(example: str) -> Any:
    return field(
        default=None,
        metadata=option(
            "--path",
            help=f"Only files whose path matches this glob, e.g. {example}.",
            min_length=1,
            metavar="GLOB",
        ),
    )


@dataclass(frozen=True, kw_only=True)
class SearchQuery:
    """``ctxkernel search`` and the ``search`` tool."""

    query: str = field(
        metadata=option(
            help="What to look for: a question in plain words or a name.",
            argument=True,
            min_length=1,
            max_length=MAX_QUERY_CHARS,
        )
    )
    corpus: tuple[str, ...] = _corpora("search")
    k: int = field(
        default=10, metadata=option("-k", help="How many hits to return.", low=1, high=50)
    )
    mode: str = field(
        default="hybrid",
        metadata=option(
            "--mode",
            help="hybrid (default) fuses both; lexical for exact identifiers and error "
            "messages; dense for paraphrased questions.",
            choices=MODES,
        ),
    )
    path: str | None = _path_glob('"examples/python/CuTeDSL/**" or "python/triton/language/*"')
    language: str | None = field(
        default=None,
        metadata=option(
            "--language",
            help="Only this language: python, cpp, cuda, markdown, rst, html, ptx.",
            min_length=1,
        ),
    )
    kind: str | None = field(
        default=None,
        metadata=option(
            "--kind",
            help="Only this kind of file: " + ", ".join(KINDS) + ".",
            choices=KINDS,
        ),
    )
    lines_per_hit: int = field(
        default=20,
        metadata=option("--lines", help="At most this many lines of each hit.", low=1, high=400),
    )
    rerank: bool = field(
        default=False,
        metadata=option(
            "--rerank",
            help="Re-score the best 30 candidates with a local cross-encoder (off by "
            "default; slower).",
            tool=False,
        ),
    )
    rerank_model: str | None = field(
        default=None,
        metadata=option(
            "--rerank-model",
            help="The cross-encoder for --rerank: a saved model directory (default: env "
            "CTXKERNEL_RERANK_MODEL; never downloaded unless CTXKERNEL_ALLOW_DOWNLOAD=1).",
            tool=False,
            metavar="DIR",
        ),
    )
    arch: str | None = _arch(
        "Only hits the target can run (sm_80, sm_90, sm_100, ...); hits say what they need."
    )
    max_tokens: int = _max_tokens()

    def run(self, ws: Workspace) -> SearchResult:
        """This query's result on a Workspace."""
        return ws.search(
            self.query,
            list(self.corpus) or None,
            self.k,
            self.mode,
            self.path,
            self.language,
            self.kind,
            rerank=self.rerank or bool(self.rerank_model),
            rerank_model=self.rerank_model,
            arch=self.arch,
        )


@dataclass(frozen=True, kw_only=True)
class GrepQuery:
    """``ctxkernel grep`` and the ``grep`` tool."""

    pattern: str = field(
        metadata=option(
            help="The regular expression (Rust regex / ripgrep syntax).",
            argument=True,
            min_length=1,
            max_length=500,
        )
    )
    corpus: str = field(
        metadata=option(
            "--corpus",
            "-c",
            help='The one corpus to search, e.g. "cutlass", "triton", "ptx".',
            min_length=1,
        )
    )
    ignore_case: bool = field(
        default=False,
        metadata=option("-i", "--ignore-case", help="Match letters in either case."),
    )
    path: str | None = _path_glob('"include/cute/**"')
    context: int = field(
        default=2,
        metadata=option(
            "-C", "--context", help="Lines of context before and after each match.", low=0, high=20
        ),
    )
    max_matches: int = field(
        default=100,
        metadata=option(
            "--max-count",
            "--max-matches",
            help="Stop after this many matching lines.",
            low=1,
            high=1000,
        ),
    )
    timeout_s: float = field(
        default=GREP_DEFAULT_TIMEOUT_S,
        metadata=option(
            "--timeout",
            help="Give up after this many seconds (returning what was found).",
            above=0,
            high=GREP_MAX_TIMEOUT_S,
        ),
    )
    engine: str = field(
        default="auto",
        metadata=option(
            "--engine",
            help="ripgrep (rg) when installed, else Python; or force one.",
            choices=ENGINES,
            tool=False,
        ),
    )
    max_tokens: int = _max_tokens()

    def run(self, ws: Workspace) -> GrepResult:
        """This query's result on a Workspace."""
        return ws.grep(
            self.corpus,
            self.pattern,
            ignore_case=self.ignore_case,
            path_glob=self.path,
            context=self.context,
            max_results=self.max_matches,
            time_limit_s=self.timeout_s,
            engine=self.engine,
        )


@dataclass(frozen=True, kw_only=True)
class DocsQuery:
    """``ctxkernel docs`` and the ``docs`` tool."""

    topic: str = field(
        metadata=option(
            help="The name to look up, spelled as in code or the PTX manual.",
            argument=True,
            min_length=1,
            max_length=300,
        )
    )
    corpus: tuple[str, ...] = _corpora("look in")
    alternatives: int = field(
        default=5,
        metadata=option(
            "--alternatives",
            "-n",
            help="How many other candidates to list after the best one.",
            low=0,
            high=20,
        ),
    )
    arch: str | None = _arch("Only what the target can run (sm_90, sm_100, ...).")
    max_tokens: int = _max_tokens()

    def run(self, ws: Workspace) -> DocsResult:
        """This query's result on a Workspace."""
        return ws.docs(self.topic, list(self.corpus) or None, self.alternatives, arch=self.arch)


@dataclass(frozen=True, kw_only=True)
class ReadQuery:
    """``ctxkernel show`` and the ``read`` tool."""

    ref: str = field(
        metadata=option(
            help="corpus:path or corpus:path:start-end, as hits print it.",
            argument=True,
            min_length=3,
            max_length=1000,
        )
    )
    start_line: int | None = field(
        default=None,
        metadata=option(
            "--start-line",
            help="First line to show (1-based); overrides the range in ref.",
            low=1,
        ),
    )
    end_line: int | None = field(
        default=None,
        metadata=option("--end-line", help="Last line to show; overrides the range in ref.", low=1),
    )
    max_tokens: int = _max_tokens()


@dataclass(frozen=True, kw_only=True)
class ListCorporaQuery:
    """The ``list_corpora`` tool (``ctxkernel corpora`` prints more, from the same status)."""

    max_tokens: int = _max_tokens()


@dataclass(frozen=True, kw_only=True)
class RelatedQuery:
    """``ctxkernel related`` and the ``related`` tool."""

    ref: str = field(
        metadata=option(
            help="A hit id corpus:path:start-end (or corpus:path:line), as hits print it.",
            argument=True,
            min_length=3,
            max_length=1000,
        )
    )
    arch: str | None = _arch("Only what the target can run (sm_90, sm_100, ...).")
    max_tokens: int = _max_tokens()

    def run(self, ws: Workspace) -> Related:
        """This query's result on a Workspace."""
        return ws.related(self.ref.strip(), self.arch)


QUERIES: dict[str, type] = {
    "search": SearchQuery,
    "grep": GrepQuery,
    "docs": DocsQuery,
    "read": ReadQuery,
    "list_corpora": ListCorporaQuery,
    "related": RelatedQuery,
}
