"""One stdio line, admitted or answered: lines cut from bounded reads (a longer one is
dropped as it streams in, never held whole), their nesting measured before any parser
recurses into them, and the JSON-RPC error that answers a line that is not JSON or not a
request (a notification or a response gets none)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCError, RequestId

# one logger for the whole server, whichever module writes the line
log = logging.getLogger("ctxkernel.mcp")

MAX_LINE_BYTES = 4 << 20  # one request line; check_kernel's largest source fits with room
MAX_DEPTH = 64  # nesting of one message; MCP's own messages nest a few levels
HEAD_BYTES = 4096  # of an over-long line, kept to find the request's id in


@dataclass(frozen=True)
class _Overlong:
    """A line longer than the limit, dropped as it streamed in: its first bytes (for the
    request's id) and how long it was."""

    head: bytes
    size: int


async def bounded_lines(
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


def admit(
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
