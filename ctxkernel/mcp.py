"""MCP server: the agent tools of ``ctxkernel.tools`` served with the official ``mcp`` SDK's
low-level ``Server`` — over stdio (the client spawns ``ctxkernel mcp``) or streamable HTTP.

The tool list and input schemas come straight from the ToolSet (nothing is re-declared
here). One Workspace, and so one embedding model, lives for the whole server process;
calls run one at a time in a worker thread so the event loop keeps answering. A bad
argument or a failed lookup is a tool result with ``isError: true``, never a crash; a call
to a tool the server does not have is a protocol error (invalid params). Logs go to
stderr: on stdio, stdout is the protocol.

The doors a client could push on, and how each is shut:

- stdio: lines are cut from bounded reads (``MAX_LINE_BYTES``; a longer line is dropped as
  it streams in, never held whole), their nesting is measured before any parser recurses
  into them (``MAX_DEPTH``), and every request with an id gets a reply — a JSON-RPC error
  when the line is not JSON, not a request, or its handler fails. Notifications never get
  one. A pipe is read and written by asyncio's pipe transports on the event loop, not a
  thread per line (~1.5 ms less per call on a 2-core machine).
- HTTP: bound to loopback unless ``--host`` says otherwise (a warning then), and every
  request must carry the bearer token made at start (``secrets``, printed once, kept in a
  0600 file) or read from ``--token-file``; it is compared in constant time.
- check_kernel: a problem is code the server imports and runs, so a call may name one
  only under the folders given at start (:class:`ProblemRoots`), symlinks resolved.
"""

from __future__ import annotations

import fcntl
import hmac
import io
import ipaddress
import json
import logging
import os
import re
import secrets
import socket
import stat
import sys
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import UserError, shown
from .tools import ToolSet
from .tools.base import Tool, ToolError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCError, RequestId

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
    token_file: str | Path | None = None,
    max_line: int | None = None,
) -> None:
    """Run the server until the client goes away (stdio) or it is interrupted (HTTP).

    Over HTTP every request needs ``Authorization: Bearer TOKEN``: the token is read from
    ``token_file``, or made here, printed once on stderr and kept (0600) until the server
    stops. ``max_line`` caps a stdio request line (bytes; ``MAX_LINE_BYTES``)."""
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
            listener = listening_socket(host, port)  # a bad address or a busy port: UserError
            token = bearer_token(listener.getsockname()[1], token_file)
            try:
                with _forgotten_on_sigterm(token):
                    anyio.run(_serve_http, app, host, listener, log_level, warm, token)
            finally:
                token.forget()
                listener.close()
        else:
            anyio.run(_serve_stdio, app, warm, max_line or MAX_LINE_BYTES)
    except KeyboardInterrupt:
        pass


@contextmanager
def _forgotten_on_sigterm(token: BearerToken) -> Iterator[None]:
    """The token file removed on SIGTERM too (how an operator or a service manager stops
    the server): uvicorn stops gracefully on it and then raises it again, whose default
    action ends the process before any ``finally`` runs. Then the signal's own action."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler (an embedding caller's own thread)
        return

    def forget_then_stop(signum: int, frame: Any) -> None:
        token.forget()
        signal.signal(signum, previous)
        signal.raise_signal(signum)

    previous = signal.signal(signal.SIGTERM, forget_then_stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- check_kernel's problems -----------------------------------------------------------


class ProblemRoots:
    """The folders ``check_kernel`` may take a problem from, fixed at start.

    Loading a problem imports its ``problem.py``: a client that could name any path
    could run any Python file on the machine that looks like a problem. A path is
    resolved (symlinks and ``..`` followed) before it is compared, so a link inside a
    root that points out of it is refused too. The server's own ``--problem`` is the
    operator's choice and always allowed.
    """

    def __init__(self, roots: Sequence[str | Path], problem: str | Path | None = None) -> None:
        self.roots = [Path(r).resolve() for r in roots] or [Path.cwd().resolve()]
        self.problem = Path(problem).resolve() if problem else None

    def admit(self, problem: str) -> str:
        """The resolved path of ``problem``; ToolError when it lies outside every root."""
        try:
            path = Path(problem).resolve()
        except (OSError, ValueError, RuntimeError) as exc:  # NUL byte, a symlink loop
            raise ToolError(
                f"check_kernel: problem {shown(problem)} is not a usable path: {exc}"
            ) from None
        allowed = [*self.roots, *([self.problem] if self.problem else [])]
        if not any(path.is_relative_to(root) for root in allowed):
            roots = ", ".join(str(r) for r in self.roots)
            raise ToolError(
                f"check_kernel: problem {shown(problem)} is outside the folders this server "
                f"takes problems from ({roots}); the operator can add one with --problems-root"
            )
        return str(path)

    def guard(self, tool: Tool) -> Tool:
        """``tool`` (check_kernel) with each call's ``problem`` admitted first."""
        inner = tool.handler

        def handler(ws: Any, args: dict[str, Any]) -> str:
            if args.get("problem") is not None:
                args = {**args, "problem": self.admit(str(args["problem"]))}
            return inner(ws, args)

        return replace(tool, handler=handler)


# -- HTTP: loopback and a bearer token ---------------------------------------------------

LOOPBACK_NAMES = ("localhost",)
MIN_TOKEN_CHARS = 16
MAX_TOKEN_FILE_BYTES = 4096
_TOKEN_TEXT = re.compile(r"[\x21-\x7e]+")  # what an Authorization header can carry as is


@dataclass
class BearerToken:
    """The secret every HTTP request must carry, and the file this server saved it in
    (``None`` when the operator gave the file: theirs to keep)."""

    value: str
    saved: Path | None = None

    def forget(self) -> None:
        """Remove the saved file at the end, unless another server has replaced it since."""
        if self.saved is None:
            return
        with suppress(OSError):
            if self.saved.read_text().strip() == self.value:
                self.saved.unlink()


def token_path(port: int) -> Path:
    """Where a server on ``port`` keeps the token it made: ``mcp/`` in the ctxkernel
    cache dir (under ``CTXKERNEL_HOME`` when set), one file per port."""
    from harness import paths

    return paths.cache_dir() / "mcp" / f"http-{port}.token"


def bearer_token(port: int, token_file: str | Path | None = None) -> BearerToken:
    """The operator's token from ``token_file``, or a new one saved in :func:`token_path`;
    UserError for a token file that is unreadable, open to others, or too weak."""
    if token_file is not None:
        return BearerToken(_read_token(Path(token_file)))
    value = secrets.token_urlsafe(32)
    return BearerToken(value, _save_token(value, token_path(port)))


def _read_token(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            data = fh.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"the token file {path} is not a regular file")
    if info.st_mode & 0o077:  # as ssh does for a private key
        mode = stat.S_IMODE(info.st_mode)
        raise UserError(f"the token file {path} is open to others (mode {mode:o}): chmod 600 it")
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise UserError(f"the token file {path} is longer than {MAX_TOKEN_FILE_BYTES} bytes")
    token = data.decode("ascii", errors="replace").strip()
    if len(token) < MIN_TOKEN_CHARS or not _TOKEN_TEXT.fullmatch(token):
        raise UserError(
            f"the token in {path} must be one line of at least {MIN_TOKEN_CHARS} printable "
            "ASCII characters without spaces"
        )
    return token


def _save_token(value: str, path: Path) -> Path:
    """``value`` written to ``path``, mode 0600 from its creation, in a 0700 folder of
    this user (a token briefly readable by others would be no secret)."""
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise UserError(f"cannot keep the token in {folder}: not a folder of this user")
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)
        temp = folder / f".{path.name}.{os.getpid()}"
        with suppress(FileNotFoundError):
            temp.unlink()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, (value + "\n").encode("ascii"))
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError as exc:
        raise UserError(f"cannot write the token file {path}: {exc.strerror or exc}") from None
    return path


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (a loopback address, or ``localhost``)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerGate:
    """ASGI middleware in front of the whole HTTP app: a request without the token (or
    with another) is answered 401 before any route, session or body is looked at.
    Lifespan events pass through: they come from the server process, not a client."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode("ascii")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self._carries_token(scope):
            await self.app(scope, receive, send)
            return
        log.info("refused an HTTP request without the right token")
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        given = any(k.lower() == b"authorization" for k, _ in scope.get("headers", ()))
        challenge = b'Bearer realm="ctxkernel mcp"' + (b', error="invalid_token"' if given else b"")
        body = json.dumps({
            "error": "invalid_token" if given else "unauthorized",
            "error_description": "every request needs the header 'Authorization: Bearer TOKEN' "
            "with the token `ctxkernel mcp --http` printed at start",
        }).encode()  # fmt: skip
        await send({
            "type": "http.response.start", "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", challenge),
                        (b"content-length", str(len(body)).encode())],
        })  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    def _carries_token(self, scope: dict[str, Any]) -> bool:
        values = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
        if len(values) != 1:  # none, or two that could disagree
            return False
        scheme, _, given = values[0].strip().partition(b" ")
        # compare_digest: the time taken does not tell how much of a guess was right
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound here rather than by uvicorn: a failure is one line
    and exit 2 (uvicorn exits from inside the event loop), and ``--port 0`` has its real
    port to print and to name the token file after."""
    address = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
    except (OSError, OverflowError) as exc:  # OverflowError: a port above 65535
        sock.close()
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cannot listen on {host}:{port}: {why}") from None
    return sock


async def _serve_http(
    app: ToolServer,
    host: str,
    listener: socket.socket,
    log_level: str,
    warm: bool,
    token: BearerToken,
) -> None:
    import anyio
    import uvicorn

    port = listener.getsockname()[1]

    if not is_loopback(host):
        print(
            f"ctxkernel mcp: warning: serving on {host}, beyond this machine: anyone who can "
            "reach the port and holds the token can search and, with --check, run kernels",
            file=sys.stderr,
        )
    gated = BearerGate(app.server.streamable_http_app(host=host), token.value)
    config = uvicorn.Config(gated, host=host, port=port, log_level=log_level, access_log=False)
    shown_host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    print(f"ctxkernel mcp: streamable HTTP on http://{shown_host}:{port}/mcp", file=sys.stderr)
    if token.saved is not None:
        print(
            "ctxkernel mcp: every request needs 'Authorization: Bearer TOKEN'; "
            f"token: {token.value}",
            file=sys.stderr,
        )
        print(f"ctxkernel mcp: token saved in {token.saved} (mode 0600)", file=sys.stderr)
    else:
        print("ctxkernel mcp: every request needs the token of --token-file", file=sys.stderr)
    async with anyio.create_task_group() as tg:
        if warm:
            tg.start_soon(app.warm_up)
        await uvicorn.Server(config).serve(sockets=[listener])
        tg.cancel_scope.cancel()


# -- stdio: the wire -------------------------------------------------------------------

MAX_LINE_BYTES = 4 << 20  # one request line; check_kernel's largest source fits with room
MAX_DEPTH = 64  # nesting of one message; MCP's own messages nest a few levels
READ_CHUNK = 1 << 16
HEAD_BYTES = 4096  # of an over-long line, kept to find the request's id in
END_WAIT_S = 120.0  # how long the end of stdin waits for answers to the requests before it


async def _serve_stdio(app: ToolServer, warm: bool, max_line: int) -> None:
    import anyio

    log.info("serving over stdio")
    # fd 1 points at stderr while serving: nothing the model loading prints reaches the wire
    with _claimed_stdin() as stdin, _claimed_stdout() as stdout:
        async with (
            _stdio_streams(stdin, stdout, max_line) as (read_stream, write_stream),
            anyio.create_task_group() as tg,
        ):
            if warm:
                tg.start_soon(app.warm_up)
            server = app.server
            await server.run(read_stream, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()


@asynccontextmanager
async def _stdio_streams(
    chunks: AsyncIterable[bytes], out: Any, max_line: int
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's read and write streams over the wire (what the SDK's ``stdio_server``
    gives, with the bounds and the replies to bad lines of this module).

    A request read is remembered until its answer is written: a client that writes its
    requests and then closes stdin (``cat requests.jsonl | ctxkernel mcp``, a replayed
    session) gets every answer before the session ends."""
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

    read_in, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    replies = write_stream.clone()  # the reader's own answers to lines it refuses
    pending: set[RequestId] = set()
    all_answered: anyio.Event | None = None  # made at the end of stdin, if any is pending

    async def reader() -> None:
        nonlocal all_answered
        async with read_in, replies:
            async for line in _bounded_lines(chunks, max_line):
                admitted = _admit(line, max_line)
                if isinstance(admitted, JSONRPCError):
                    await replies.send(SessionMessage(admitted))
                elif admitted is not None:
                    if isinstance(admitted.message, JSONRPCRequest):
                        pending.add(admitted.message.id)
                    await read_in.send(admitted)
            if pending:
                all_answered = anyio.Event()
                with anyio.move_on_after(END_WAIT_S):
                    await all_answered.wait()

    async def writer() -> None:
        async with write_out:
            async for item in write_out:
                message = item.message
                await out.write(message.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
                await out.flush()
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
                    pending.discard(message.id)
                    if not pending and all_answered is not None:
                        all_answered.set()

    reading = anyio.CancelScope()

    async def read_until_cancelled() -> None:
        with reading:
            await reader()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        tg.start_soon(read_until_cancelled)
        yield read_stream, write_stream
        reading.cancel()  # when the session ended first, the reader still waits on stdin
        await write_stream.aclose()  # the writer ends once what is left went out


@dataclass(frozen=True)
class _Overlong:
    """A line longer than the limit, dropped as it streamed in: its first bytes (for the
    request's id) and how long it was."""

    head: bytes
    size: int


async def _bounded_lines(
    chunks: AsyncIterable[bytes], limit: int
) -> AsyncIterator[bytes | _Overlong]:
    """The lines of ``chunks`` (without the newline), each at most ``limit`` bytes; a
    longer one comes out as an :class:`_Overlong` and is never held whole (a 200 MB line
    costs ``limit`` bytes of memory, not 200 MB)."""
    line = bytearray()
    head: bytes | None = None  # set while an over-long line is being dropped
    size = 0
    async for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = memoryview(chunk)[start : len(chunk) if end < 0 else end]
            if head is not None:
                size += len(piece)
            elif len(line) + len(piece) <= limit:
                line += piece
            else:  # from here on the line is only counted
                kept = bytes(line[:HEAD_BYTES])
                head = kept + bytes(piece[: HEAD_BYTES - len(kept)])
                size = len(line) + len(piece)
                line = bytearray()
            if end < 0:
                break
            yield bytes(line) if head is None else _Overlong(head, size)
            line, head, start = bytearray(), None, end + 1
    if head is not None:
        yield _Overlong(head, size)
    elif line:
        yield bytes(line)


def _admit(
    line: bytes | _Overlong, max_line: int = MAX_LINE_BYTES
) -> SessionMessage | JSONRPCError | None:
    """One line as the SDK's ``SessionMessage``, or the JSON-RPC error that answers it,
    or None (a blank line; a malformed notification or response, which get no reply)."""
    from mcp.shared.message import SessionMessage
    from mcp_types import (
        INVALID_REQUEST,
        PARSE_ERROR,
        JSONRPCNotification,
        jsonrpc_message_adapter,
    )

    if isinstance(line, _Overlong):
        head = line.head.decode("utf-8", errors="replace")
        return _error(
            _head_id(head),
            INVALID_REQUEST,
            f"request line of {line.size} bytes refused: the limit is {max_line}",
        )
    text = line.decode("utf-8", errors="replace")  # undecodable bytes become U+FFFD
    if not text.strip():
        return None
    deep = _nesting_error(text)
    if deep is not None:
        code, message = deep
        return _error(_head_id(text[:HEAD_BYTES]) if code != PARSE_ERROR else None, code, message)
    if _LONE_ESCAPE.search(text):
        text = _valid_text(text)
    try:
        parsed = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError:  # pydantic's ValidationError: say what is wrong, below
        return _malformed(text)
    if isinstance(parsed, JSONRPCNotification) and "id" in json.loads(text):
        # an id the model cannot hold (null, 1.5, [1]) is ignored by it, and the request
        # would pass for a notification: unanswered
        return _malformed(text)
    return SessionMessage(parsed)


def _error(rid: RequestId | None, code: int, message: str) -> JSONRPCError:
    from mcp_types import ErrorData, JSONRPCError

    log.info("refused a line: %s", message)
    return JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=code, message=message))


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


def _nesting_error(text: str, limit: int = MAX_DEPTH) -> tuple[int, str] | None:
    """The error for JSON ``text`` nested deeper than ``limit`` or whose brackets do not
    pair up, else None. ``json.loads`` recurses once per level: a line of 100,000 ``[``
    ended the server with RecursionError. This never recurses: with the strings taken
    out, each pass of a regular expression removes the innermost pairs, so ``limit``
    passes empty any text that nests no deeper; text they cannot empty is refused before
    any parser sees it."""
    from mcp_types import INVALID_REQUEST, PARSE_ERROR

    if text.count("[") + text.count("{") <= limit:
        return None  # too few brackets to nest that deep: most lines stop here
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(limit):
        brackets, removed = _INNERMOST.subn("", brackets)
        if not brackets:
            return None
        if not removed:
            return PARSE_ERROR, "parse error: the brackets do not pair up"
    return INVALID_REQUEST, f"invalid request: nested deeper than {limit} levels"


# the id at the start of a request (``{"jsonrpc": "2.0", "id": 7, ...``): what can be told
# of a line too long or too deep to parse
_HEAD_ID = re.compile(
    r'\s*\{\s*(?:"(?:jsonrpc|method)"\s*:\s*"[^"\\]{0,200}"\s*,\s*){0,2}'
    r'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")\s*[,}]'
)


def _head_id(head: str) -> RequestId | None:
    match = _HEAD_ID.match(head)
    if match is None:
        return None
    rid: RequestId = json.loads(match.group(1))
    return rid


def _malformed(text: str) -> JSONRPCError | None:
    """The reply to a line the SDK's message model refused, naming what is wrong; None for
    a notification or a response (JSON-RPC answers neither)."""
    from mcp_types import INVALID_REQUEST, PARSE_ERROR

    try:
        message = json.loads(text)  # safe: _nesting_error has bounded the depth
    except ValueError:  # not JSON, or an integer too long to convert
        return _error(None, PARSE_ERROR, "parse error: the line is not JSON")
    if not isinstance(message, dict):
        what = "a batch (an array) is not supported" if isinstance(message, list) else ""
        return _error(None, INVALID_REQUEST, "invalid request: " + (what or "not an object"))
    wrong = _what_is_wrong(message)
    if "id" not in message and "method" in message:
        log.info("dropped a notification: %s", wrong)
        return None
    if "method" not in message and ("result" in message or "error" in message):
        log.info("dropped a response: %s", wrong)
        return None
    rid = message.get("id")
    valid_id = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    return _error(rid if valid_id else None, INVALID_REQUEST, f"invalid request: {wrong}")


def _what_is_wrong(message: dict[str, Any]) -> str:
    rid, params = message.get("id"), message.get("params")
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "id" in message and (isinstance(rid, bool) or not isinstance(rid, int | str)):
        return f"id must be a string or an integer, not {_json_type(rid)}"
    if "method" not in message:
        return "no method"
    if not isinstance(message["method"], str):
        return f"method must be a string, not {_json_type(message['method'])}"
    if params is not None and not isinstance(params, dict):
        return f"params must be an object, not {_json_type(params)}"
    return "not a JSON-RPC request"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    names: dict[type, str] = {str: "a string", list: "an array", dict: "an object"}
    return names.get(type(value), "a value")


_SURROGATE = re.compile("[\ud800-\udfff]")
_LONE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _valid_text(line: str) -> str:
    """``line`` with lone surrogates (``"\\ud800"`` escapes, valid JSON syntax but not
    Unicode) replaced by U+FFFD, as undecodable bytes already are: the SDK's model refuses
    such a request."""
    try:
        message = json.loads(line)
    except ValueError:
        return line  # answered as not JSON
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
        return line  # only paired surrogates: valid as it is
    except UnicodeEncodeError:
        return json.dumps(_replace_surrogates(message), ensure_ascii=False)


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


# -- stdio: the descriptors ------------------------------------------------------------


@contextmanager
def _claimed_stdin() -> Iterator[Any]:
    """The wire's stdin as chunks of bytes, with fd 0 pointed at the null device
    meanwhile, so no child (a harness worker) reads protocol bytes."""
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        with _claimed(0, null, _PipeChunks, _FileChunks) as stdin:
            yield stdin
    finally:
        os.close(null)


@contextmanager
def _claimed_stdout() -> Iterator[Any]:
    """The wire's stdout, with fd 1 pointed at stderr meanwhile (what the model loading or
    a library prints never reaches the wire)."""
    with _claimed(1, 2, _PipeWriter, _FileWriter) as stdout:
        yield stdout


@contextmanager
def _claimed(
    fd: int, divert: int, on_loop: Callable[[int], Any], threaded: Callable[[int], Any]
) -> Iterator[Any]:
    """The wire behind ``fd`` through a private duplicate, with ``fd`` itself pointing at
    ``divert`` meanwhile. A pipe or socket (what a client spawning the server gives) is
    served on the event loop (``on_loop``); anything else (a terminal, a file) through a
    thread (``threaded``). The duplicate's blocking mode is restored at the end."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    blocking = os.get_blocking(private)  # a pipe transport makes it non-blocking
    os.dup2(divert, fd)
    stream = on_loop(private) if _is_pipe(private) else threaded(private)
    try:
        yield stream
    finally:
        stream.close()
        os.set_blocking(private, blocking)
        os.dup2(private, fd)
        os.close(private)


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _PipeChunks:
    """A pipe's bytes, read by asyncio's pipe transport on the event loop: the SDK's stdin
    reader hands each line to a worker thread and back (~0.5 ms on a small machine, per
    request), this does not. The reader's buffer is bounded (reading pauses when it is
    full), so a client writing faster than lines are handled costs no memory."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import asyncio

        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_CHUNK)
        raw = os.fdopen(self.fd, "rb", buffering=0, closefd=False)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), raw
        )
        try:
            while chunk := await reader.read(READ_CHUNK):
                yield chunk
        finally:
            transport.close()

    def close(self) -> None:
        """Nothing to let go of: the transport closes when the reading ends."""


class _FileChunks:
    """A file's or a terminal's bytes, each read in a worker thread (a read returns what
    a terminal has, a line, without waiting for a full chunk)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import anyio.to_thread

        while chunk := await anyio.to_thread.run_sync(
            os.read, self.fd, READ_CHUNK, abandon_on_cancel=True
        ):
            yield chunk

    def close(self) -> None:
        """Nothing to let go of: the descriptor's owner closes it."""


class _PipeWriter:
    """The wire's stdout (``write``, ``flush``) on asyncio's pipe transport."""

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


class _FileWriter:
    """The wire's stdout when it is a file or a terminal, written through a thread."""

    def __init__(self, fd: int) -> None:
        import anyio

        raw = os.fdopen(fd, "wb", closefd=False)
        self.file = anyio.wrap_file(io.TextIOWrapper(raw, encoding="utf-8", errors="strict"))

    async def write(self, text: str) -> None:
        await self.file.write(text)

    async def flush(self) -> None:
        await self.file.flush()

    def close(self) -> None:
        """Nothing to let go of: each message was flushed, the descriptor's owner closes it."""


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
