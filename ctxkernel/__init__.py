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

from .corpus import Chunk, Corpus, Hit, get_corpus, load_corpora
from .errors import UserError
from .indexer import IndexReport
from .search import Filters, SearchResult
from .store import CorpusRecord, Store
from .workspace import CorpusStatus, FileRange, Workspace

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
