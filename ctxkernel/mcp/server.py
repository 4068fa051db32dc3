"""``serve()``: what ``ctxkernel mcp`` runs -- the tools of a Workspace (or a given
ToolSet) served over stdio or HTTP until the client goes away or the server is stopped."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..tools import ToolSet
from .http import BearerToken, bearer_token, listening_socket, serve_http
from .lines import MAX_LINE_BYTES
from .stdio import serve_stdio
from .toolserver import ToolServer


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
        from ..workspace import Workspace

        toolset = ToolSet(Workspace(index_dir, chroma_url))
    app = ToolServer(toolset)
    try:
        if http:
            listener = listening_socket(host, port)  # a bad address or a busy port: UserError
            token = bearer_token(listener.getsockname()[1], token_file)
            try:
                with _forgotten_on_sigterm(token):
                    anyio.run(serve_http, app, host, listener, log_level, warm, token)
            finally:
                token.forget()
                listener.close()
        else:
            anyio.run(serve_stdio, app, warm, max_line or MAX_LINE_BYTES)
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
