"""The HTTP transport: the server bound to loopback unless told otherwise, and every request
gated by the bearer token made at start (or read from ``--token-file``), compared in
constant time, before any route, session or body is looked at."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import re
import secrets
import socket
import stat
import sys
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from .toolserver import ToolServer

# one logger for the whole server, whichever module writes the line
log = logging.getLogger("ctxkernel.mcp")

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


async def serve_http(
    app: ToolServer,
    host: str,
    listener: socket.socket,
    log_level: str,
    warm: bool,
    token: BearerToken,
) -> None:
    """Serve ``app`` as streamable HTTP on ``listener``, behind the token's gate, until
    the server is stopped."""
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
