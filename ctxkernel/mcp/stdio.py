"""The stdio transport: the wire's descriptors claimed (fd 0 and 1 pointed elsewhere
while serving), a pipe read and written by asyncio's pipe transports on the event loop
(anything else through a thread), and the SDK's streams over it, every request read
answered before the session ends."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import stat
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from .lines import admit, bounded_lines

if TYPE_CHECKING:
    from mcp_types import RequestId

    from .toolserver import ToolServer

# one logger for the whole server, whichever module writes the line
log = logging.getLogger("ctxkernel.mcp")

READ_CHUNK = 1 << 16
END_WAIT_S = 120.0  # how long the end of stdin waits for answers to the requests before it


async def serve_stdio(app: ToolServer, warm: bool, max_line: int) -> None:
    """Serve ``app`` over the process's stdin and stdout until the client closes them."""
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
            async for line in bounded_lines(chunks, max_line):
                admitted = admit(line, max_line)
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
