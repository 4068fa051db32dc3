"""MCP server: the agent tools of ``ctxkernel.tools`` served with the official ``mcp`` SDK's
low-level ``Server`` — over stdio (the client spawns ``ctxkernel mcp``) or streamable HTTP.

The tool list and input schemas come straight from the ToolSet (nothing is re-declared
here). One Workspace, and so one embedding model, lives for the whole server process;
calls run one at a time in a worker thread so the event loop keeps answering. A bad
argument or a failed lookup is a tool result with ``isError: true``, never a crash; a call
to a tool the server does not have is a protocol error (invalid params). Logs
go to stderr: on stdio, stdout is the protocol. A stdio pipe (what a client spawning the
server gives) is read and written by asyncio's pipe transports on the event loop, not a
thread per line as the SDK's own stdio does (~1.5 ms less per call on a 2-core machine).
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .errors import shown
from .tools import ToolSet

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

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
                from mcp.shared.exceptions import MCPError
                from mcp_types import INVALID_PARAMS

                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"unknown tool {shown(params.name)} (tools: {', '.join(toolset.names())})",
                )
            result = await self._in_worker(toolset.call, params.name, params.arguments)
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


def build_server(toolset: ToolSet) -> Server[Any]:
    """A low-level MCP Server answering tools/list and tools/call from ``toolset``."""
    return ToolServer(toolset).server


def serve(
    *,
    index_dir: str | Path | None = None,
    chroma_url: str | None = None,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8765,
    warm: bool = True,
    log_level: str = "warning",
    toolset: ToolSet | None = None,
) -> None:
    """Run the server until the client goes away (stdio) or it is interrupted (HTTP)."""
    import anyio

    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, log_level.upper(), logging.WARNING),
        format="ctxkernel mcp: %(levelname)s %(name)s: %(message)s",
    )
    if toolset is None:
        from .workspace import Workspace

        toolset = ToolSet(Workspace(index_dir, chroma_url))
    app = ToolServer(toolset)
    try:
        if http:
            anyio.run(_serve_http, app, host, port, log_level, warm)
        else:
            anyio.run(_serve_stdio, app, warm)
    except KeyboardInterrupt:
        pass


async def _serve_stdio(app: ToolServer, warm: bool) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    log.info("serving over stdio")
    # fd 1 points at stderr while serving: nothing the model loading prints reaches the wire
    pending = _Pending()
    with _claimed_stdin() as stdin, _claimed_stdout() as stdout:
        lines, out = _ValidTextLines(stdin, pending), _CountedWriter(stdout, pending)
        async with (
            stdio_server(stdin=cast(Any, lines), stdout=cast(Any, out)) as (
                read_stream,
                write_stream,
            ),
            anyio.create_task_group() as tg,
        ):
            if warm:
                tg.start_soon(app.warm_up)
            server = app.server
            await server.run(read_stream, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()


@contextmanager
def _claimed_stdin() -> Iterator[Any]:
    """The wire's stdin as UTF-8 text lines (undecodable bytes become U+FFFD), with fd 0
    pointed at the null device meanwhile, so no child (a harness worker) reads protocol
    bytes."""
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        with _claimed(0, null, _PipeLines, "rb", errors="replace") as stdin:
            yield stdin
    finally:
        os.close(null)


@contextmanager
def _claimed_stdout() -> Iterator[Any]:
    """The wire's stdout, with fd 1 pointed at stderr meanwhile (what the model loading or
    a library prints never reaches the wire)."""
    with _claimed(1, 2, _PipeWriter, "wb", errors="strict") as stdout:
        yield stdout


@contextmanager
def _claimed(
    fd: int, divert: int, on_loop: Callable[[int], Any], mode: str, errors: str
) -> Iterator[Any]:
    """The wire behind ``fd`` through a private duplicate, with ``fd`` itself pointing at
    ``divert`` meanwhile. A pipe or socket (what a client spawning the server gives) is
    served on the event loop (``on_loop``); anything else (a terminal, a file) through a
    thread, as the SDK does. The duplicate's blocking mode is restored at the end."""
    import anyio

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    blocking = os.get_blocking(private)  # a pipe transport makes it non-blocking
    os.dup2(divert, fd)
    stream = on_loop(private) if _is_pipe(private) else None
    try:
        if stream is not None:
            yield stream
        else:
            raw = os.fdopen(private, mode, closefd=False)
            yield anyio.wrap_file(io.TextIOWrapper(raw, encoding="utf-8", errors=errors))
    finally:
        if stream is not None:
            stream.close()
        os.set_blocking(private, blocking)
        os.dup2(private, fd)
        os.close(private)


def _is_pipe(fd: int) -> bool:
    import stat

    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


# a request line longer than this ends the session (the SDK reads lines of any length
# from a file; a pipe's reader needs a bound)
MAX_LINE = 1 << 30


class _PipeLines:
    """A pipe's lines, read by asyncio's pipe transport on the event loop: the SDK's stdin
    reader hands each line to a worker thread and back (~0.5 ms on a small machine, per
    request), this does not."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def __aiter__(self) -> AsyncIterator[str]:
        import asyncio

        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE)
        raw = os.fdopen(self.fd, "rb", buffering=0, closefd=False)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), raw
        )
        try:
            while line := await reader.readline():
                yield line.decode("utf-8", errors="replace")
        finally:
            transport.close()

    def close(self) -> None:
        """Nothing to let go of: the transport closes when the reading ends."""


class _PipeWriter:
    """The SDK's stdout writer's file (``write``, ``flush``) on asyncio's pipe transport."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._writer: Any = None

    async def _open(self) -> Any:
        import asyncio

        loop = asyncio.get_running_loop()
        raw = os.fdopen(self.fd, "wb", buffering=0, closefd=False)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, raw)
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return self._writer

    async def write(self, text: str) -> None:
        writer = self._writer or await self._open()
        writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        if self._writer is not None:
            await self._writer.drain()

    def close(self) -> None:
        """Let go of the transport (the descriptor stays open: its owner closes it)."""
        if self._writer is not None:
            self._writer.transport.abort()
            self._writer = None


_SURROGATE = re.compile("[\ud800-\udfff]")
_LONE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _ValidTextLines:
    """The stdin lines with lone surrogates (``"\\ud800"`` escapes, valid JSON syntax but
    not Unicode) replaced by U+FFFD, as undecodable bytes already are: the SDK would drop
    such a request without a reply. At the end of stdin it waits (``_Pending``) for the
    requests it passed on to be answered before the session ends."""

    def __init__(self, lines: Any, pending: _Pending | None = None) -> None:
        self.lines = lines
        self.pending = pending

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.lines:
            line = _valid_text(line) if _LONE_ESCAPE.search(line) else line
            if self.pending is not None:
                self.pending.asked(line)
            yield line
        if self.pending is not None:
            await self.pending.answered()


# a response's id, as the SDK writes it (``{"jsonrpc":"2.0","id":7,"result":...}``)
_RESPONSE_ID = re.compile(r'^\{"jsonrpc":\s*"2\.0",\s*"id":\s*(-?\d+|"(?:[^"\\]|\\.)*")')
END_WAIT_S = 120.0  # how long the end of stdin waits for answers to the requests before it


class _Pending:
    """The requests read and not answered yet. A client that writes its requests and then
    closes stdin (``cat requests.jsonl | ctxkernel mcp``, a replayed session) gets every
    answer: without this, the end of stdin ended the session while the SDK was still
    answering the last requests, and their answers were lost."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self.event: Any = None

    def asked(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if isinstance(message, dict) and "method" in message and message.get("id") is not None:
            self.open.add(json.dumps(message["id"], separators=(",", ":")))

    def wrote(self, text: str) -> None:
        match = _RESPONSE_ID.match(text)
        if match is not None:
            self.open.discard(match.group(1))
            if not self.open and self.event is not None:
                self.event.set()

    async def answered(self) -> None:
        import anyio

        if not self.open:
            return
        self.event = anyio.Event()
        with anyio.move_on_after(END_WAIT_S):
            await self.event.wait()


class _CountedWriter:
    """The wire's stdout, telling ``_Pending`` which responses went out."""

    def __init__(self, stream: Any, pending: _Pending) -> None:
        self.stream = stream
        self.pending = pending

    async def write(self, text: str) -> None:
        await self.stream.write(text)
        self.pending.wrote(text)

    async def flush(self) -> None:
        await self.stream.flush()


def _valid_text(line: str) -> str:
    try:
        message = json.loads(line)
    except ValueError:
        return line  # the SDK answers what does not parse at all
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
        return line  # only paired surrogates: valid as it is
    except UnicodeEncodeError:
        return json.dumps(_replace_surrogates(message), ensure_ascii=False) + "\n"


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


async def _serve_http(app: ToolServer, host: str, port: int, log_level: str, warm: bool) -> None:
    import anyio
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving on %s without authentication: anyone who can reach it can query", host)
    starlette_app = app.server.streamable_http_app(host=host)
    config = uvicorn.Config(
        starlette_app, host=host, port=port, log_level=log_level, access_log=False
    )
    print(f"ctxkernel mcp: streamable HTTP on http://{host}:{port}/mcp", file=sys.stderr)
    async with anyio.create_task_group() as tg:
        if warm:
            tg.start_soon(app.warm_up)
        await uvicorn.Server(config).serve()
        tg.cancel_scope.cancel()


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
