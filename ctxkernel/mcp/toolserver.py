"""The MCP application: the SDK's low-level ``Server`` over a ToolSet (its tools listed
and called, the server's instructions and version) and the one worker lane its calls and
the start-up warm-up run in."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import shown
from ..tools import ToolSet

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

# one logger for the whole server, whichever module writes the line
log = logging.getLogger("ctxkernel.mcp")
T = TypeVar("T")

INSTRUCTIONS = """\
A local index of GPU-kernel references: CUTLASS/CuTe/CuTeDSL, Triton and the PTX ISA.
Call list_corpora once for the corpus names. Use docs for one known name (tl.dot,
wgmma.mma_async, make_tiled_copy), search for questions in plain words or identifiers,
grep for an exact regex over one corpus, and read with an id (corpus:path:start-end) that
the others print to see more lines. Cite what you use by its id and URL."""


class ToolServer:
    """An MCP ``Server`` over a ToolSet, and the one worker lane its calls run in.

    Calls (and the start-up warm-up) run one at a time in a worker thread: the Workspace
    is not meant to be shared between threads, and two threads importing torch and
    chromadb at once can trip over each other's half-initialised modules.
    """

    def __init__(self, toolset: ToolSet) -> None:
        import anyio

        self.toolset = toolset
        self.limiter = anyio.CapacityLimiter(1)
        self.server = self._build()

    def _build(self) -> Server[Any]:
        import mcp.types as types
        from mcp.server.lowlevel import Server
        from mcp.shared.exceptions import MCPError
        from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

        toolset = self.toolset

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(
                tools=[
                    types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
                    for t in toolset
                ]
            )

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            if params.name not in toolset:
                # a tool the server never listed is a bad request, not a failed call
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"unknown tool {shown(params.name)} (tools: {', '.join(toolset.names())})",
                )
            try:
                result = await self._in_worker(toolset.call, params.name, params.arguments)
            except Exception as exc:  # ToolSet.call answers tool errors itself: this is a
                # bug below it; the client still gets a reply naming it, the server goes on
                log.error("%s failed: %s: %s", params.name, type(exc).__name__, exc)
                log.debug("%s failed", params.name, exc_info=True)
                raise MCPError(
                    code=INTERNAL_ERROR,
                    message=f"{params.name}: internal error: {type(exc).__name__}: {exc}",
                ) from None
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=result.text)],
                is_error=result.is_error,
            )

        def input_schema(name: str) -> dict[str, Any] | None:
            return toolset.get(name).input_schema if name in toolset else None

        return Server(
            "ctxkernel",
            version=_version(),
            instructions=INSTRUCTIONS,
            get_tool_input_schema=input_schema,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )

    async def _in_worker(self, fn: Callable[..., T], *args: Any, abandon: bool = False) -> T:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(
            fn, *args, limiter=self.limiter, abandon_on_cancel=abandon
        )

    async def warm_up(self) -> None:
        """Open the index and load the embedding model before the first call needs them."""
        await self._in_worker(_warm_up, self.toolset, abandon=True)


def _warm_up(toolset: ToolSet) -> None:
    try:
        ws = toolset.workspace
        if ws.store.corpora():
            ws.searcher.warm()  # each corpus's own embedder
    except Exception as exc:  # the calls that need it will report it; the server keeps going
        log.warning("warm-up failed: %s", exc)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxkernel")
    except PackageNotFoundError:
        return "0"
