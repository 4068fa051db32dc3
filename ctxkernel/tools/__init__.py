"""Agent tools: ``search``, ``grep``, ``docs``, ``read``, ``list_corpora`` and ``related``,
defined once.

A :class:`Tool` is a name, a description written for an LLM (when to use it, what it
returns, examples), a JSON schema of its input and a handler ``(workspace, args) -> text``.
The same definitions become Anthropic Messages API ``tools`` (:func:`anthropic_tools`,
:func:`run_tool_use`), the MCP server's tools (``ctxkernel.mcp``) and ``ctxkernel tools``.

Every result is plain text under a token budget (``max_tokens`` tokens of the embedding model's tokenizer, at most 20,000), cut
only between hits or lines, ending with a ``[cut: …]`` line saying what was left out. Every
hit cites ``corpus:path:start-end`` and its upstream URL; ``read`` takes those ids back.
Bad input raises :class:`ToolError`, which callers turn into an error result the model
sees; nothing here is allowed to take the process down.

Registration is open: ``register(Tool(...))`` adds a tool to every ToolSet made after it,
``ToolSet(ws).register(tool)`` to one set only (the agent adds the harness's
``check_kernel`` that way).

``base`` holds the model (Tool, ToolSet, registry, Anthropic forms, Budget);
``retrieval`` the five retrieval tools; ``related`` the concept-links tool.
"""

from __future__ import annotations

from ..queries import DEFAULT_MAX_TOKENS
from .base import (
    CHARS_PER_TOKEN,
    Budget,
    Handler,
    Tool,
    ToolError,
    ToolResult,
    ToolSet,
    anthropic_tools,
    builtin_tools,
    register,
    run_tool_use,
)
from .related import RELATED
from .retrieval import DOCS, GREP, LIST_CORPORA, READ, SEARCH, check_grep_pattern

for _tool in (SEARCH, GREP, DOCS, READ, LIST_CORPORA, RELATED):
    register(_tool)

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_MAX_TOKENS",
    "DOCS",
    "GREP",
    "LIST_CORPORA",
    "READ",
    "RELATED",
    "SEARCH",
    "Budget",
    "Handler",
    "Tool",
    "ToolError",
    "ToolResult",
    "ToolSet",
    "anthropic_tools",
    "builtin_tools",
    "check_grep_pattern",
    "register",
    "run_tool_use",
]
