"""ctxkernel: context and verification for writing GPU kernels with LLM agents.

Public API (the CLI, the agent tools and the MCP server use only these)::

    from ctxkernel import Workspace
    ws = Workspace()                       # the default index (see ctxkernel.config)
    ws.index("triton", source="pkg:triton")
    ws.search("how to time a kernel", corpora=["triton"], k=5).hits
    ws.grep("triton", r"def do_bench", context=2).hits
    ws.read("triton:python/triton/testing.py:1-40")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .corpus import Chunk, Corpus, Hit, get_corpus, load_corpora
    from .errors import UserError
    from .indexer import IndexReport
    from .search import Filters, SearchResult
    from .store import CorpusRecord, Store
    from .workspace import CorpusStatus, FileRange, Workspace

# name -> module; imported on first use so `ctxkernel docs` or `grep` start fast
_EXPORTS = {
    "Chunk": "corpus",
    "Corpus": "corpus",
    "Hit": "corpus",
    "get_corpus": "corpus",
    "load_corpora": "corpus",
    "UserError": "errors",
    "IndexReport": "indexer",
    "Filters": "search",
    "SearchResult": "search",
    "CorpusRecord": "store",
    "Store": "store",
    "CorpusStatus": "workspace",
    "FileRange": "workspace",
    "Workspace": "workspace",
}

__all__ = [
    "Chunk",
    "Corpus",
    "CorpusRecord",
    "CorpusStatus",
    "FileRange",
    "Filters",
    "Hit",
    "IndexReport",
    "SearchResult",
    "Store",
    "UserError",
    "Workspace",
    "get_corpus",
    "load_corpora",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxkernel' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
