"""A scripted stand-in for the Anthropic Messages API, on 127.0.0.1, for the real SDK.

``ScriptedAPI(policy)`` answers ``POST /v1/messages``: the policy gets the request body
and the request's index and returns a :class:`Reply` (streamed as server-sent events when
the request asks for a stream, JSON otherwise; ``stream_as`` makes it answer a stream
with JSON, or with a body of the test's choice) or an :class:`Error` (a 429 rate limit, a
529 overload...). Every request body and the credentials it carried are kept for the
test to inspect.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: list[dict[str, Any]]
    stop_reason: str = "tool_use"
    input_tokens: int = 1200
    output_tokens: int = 300
    cache_read: int = 0
    cache_write: int = 0


@dataclass
class Error:
    status: int
    kind: str
    message: str
    retry_after_ms: int | None = 5


Policy = Callable[[dict[str, Any], int], "Reply | Error"]


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(name: str, args: dict[str, Any], ident: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": name, "input": args}


@dataclass
class ScriptedAPI:
    policy: Policy
    model: str = "claude-sonnet-5-5"
    requests: list[dict[str, Any]] = field(default_factory=list)
    credentials: list[str] = field(default_factory=list)
    url: str = ""
    # "sse": stream when asked; "json": answer a streamed request with the plain JSON
    # message, as some API-compatible servers do; bytes: that body as application/json
    stream_as: str | bytes = "sse"

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers["content-length"])))
        key = handler.headers.get("x-api-key") or handler.headers.get("authorization", "")
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
            self.credentials.append(key.removeprefix("Bearer "))
        answer = self.policy(body, index)
        if isinstance(answer, Error):
            data = json.dumps(
                {"type": "error", "error": {"type": answer.kind, "message": answer.message}}
            )
            handler.send_response(answer.status)
            handler.send_header("content-type", "application/json")
            if answer.retry_after_ms is not None:
                handler.send_header("retry-after-ms", str(answer.retry_after_ms))
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data.encode())
            return
        message = {
            "id": f"msg_{index:03d}", "type": "message", "role": "assistant", "model": body.get("model", self.model),
            "content": answer.content, "stop_reason": answer.stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens,
                      "cache_read_input_tokens": answer.cache_read,
                      "cache_creation_input_tokens": answer.cache_write},
        }  # fmt: skip
        if isinstance(self.stream_as, bytes):
            payload = self.stream_as
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
        elif body.get("stream") and self.stream_as == "sse":
            payload = sse(message)
            handler.send_response(200)
            handler.send_header("content-type", "text/event-stream")
        else:
            payload = json.dumps(message).encode()
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    @contextmanager
    def serve(self) -> Iterator[ScriptedAPI]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                api.handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.url = f"http://127.0.0.1:{server.server_port}"
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


def sse(message: dict[str, Any]) -> bytes:
    """A message as the Messages API streams it."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}  # fmt: skip
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": first},
            )
        )
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))  # fmt: skip
    events.append(("message_stop", {"type": "message_stop"}))
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


# -- reading requests --------------------------------------------------------------------


def last_user_text(body: dict[str, Any]) -> str:
    """Everything the last user message says: its text and its tool results."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else json.dumps(inner))
    return "\n".join(parts)


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
