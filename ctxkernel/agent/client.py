"""The model client: one Messages API call with tool use, retried with backoff on rate
limits (429), overload (529), other 5xx answers and dropped connections, with the token
usage and the dollar cost of every call.

It wraps the official ``anthropic`` SDK, which reads ``ANTHROPIC_API_KEY`` (or
``ANTHROPIC_AUTH_TOKEN``) and ``ANTHROPIC_BASE_URL`` itself: this module never stores or
prints the key, never logs request headers and never prints the SDK client. Once the
SDK has read the key it is taken out of this process's environment (the copy
``/proc/<pid>/environ`` shows included) and remembered only for redaction.
Calls stream (``messages.stream``), so a large ``max_tokens`` or a thinking budget does
not hit the SDK's ten-minute limit on non-streaming requests; a server that answers a
streamed request with a plain JSON message is understood too. The SDK's own retries are
off: ours log each retry (status, wait) so a run's transcript shows them, and a failure
that outlasts them becomes :class:`APIFailure`, which the loop turns into a clean stop.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# the SDK (anthropic 2.14) lists it and uses it in its own examples; claude-sonnet-4-5
# reaches end of life on 2026-11-30 (the SDK warns)
DEFAULT_MODEL = "claude-sonnet-5-5"

# USD per million tokens: (input, output). Cache writes (5-minute TTL) cost 1.25x input
# and cache reads 0.1x input. Most specific prefix first; a model matched only by its
# family name gets that family's current price, flagged as an estimate.
_PRICES: list[tuple[str, float, float]] = [
    ("claude-opus-4-5", 5.0, 25.0),
    ("claude-opus-4-1", 15.0, 75.0),
    ("claude-opus-4-0", 15.0, 75.0),
    ("claude-opus-4-2025", 15.0, 75.0),
    ("claude-3-opus", 15.0, 75.0),
    ("claude-sonnet-4", 3.0, 15.0),
    ("claude-3-7-sonnet", 3.0, 15.0),
    ("claude-3-5-sonnet", 3.0, 15.0),
    ("claude-haiku-4-5", 1.0, 5.0),
    ("claude-3-5-haiku", 0.8, 4.0),
    ("claude-3-haiku", 0.25, 1.25),
]
_FAMILY_PRICES: dict[str, tuple[float, float]] = {
    "opus": (5.0, 25.0),
    "sonnet": (3.0, 15.0),
    "haiku": (1.0, 5.0),
}
_RETRY_STATUS = {408, 409, 429}
_CREDENTIALS = (("ANTHROPIC_API_KEY", "api_key"), ("ANTHROPIC_AUTH_TOKEN", "auth_token"))
_RETRY_ERROR_TYPES = {"overloaded_error", "rate_limit_error", "api_error", "timeout_error"}


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens, and where the numbers came from."""

    input: float
    output: float
    source: str = "table"  # "table" | "family estimate" | "option"

    @property
    def cache_write(self) -> float:
        return self.input * 1.25

    @property
    def cache_read(self) -> float:
        return self.input * 0.1

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_write_tokens * self.cache_write
            + usage.cache_read_tokens * self.cache_read
        ) / 1e6

    @classmethod
    def parse(cls, text: str) -> Price:
        """``"3,15"`` (input, output dollars per million tokens)."""
        try:
            a, b = (float(x) for x in text.replace("/", ",").split(","))
        except ValueError:
            raise ValueError(
                f"expected INPUT,OUTPUT dollars per million tokens, got {text!r}"
            ) from None
        if a < 0 or b < 0:
            raise ValueError("prices cannot be negative")
        return cls(a, b, "option")


def price_for(model: str) -> Price | None:
    """The list price of a model id, an estimate from its family name, or None."""
    name = model.lower()
    for prefix, inp, out in _PRICES:
        if name.startswith(prefix):
            return Price(inp, out, "table")
    for family, (inp, out) in _FAMILY_PRICES.items():
        if family in name:
            return Price(inp, out, "family estimate")
    return None


@dataclass
class Usage:
    """Tokens of one call or a sum of calls (``input_tokens`` excludes cached tokens)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    @property
    def context_tokens(self) -> int:
        """What the prompt of the call held, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> Usage:
        doc = doc or {}
        return cls(**{k: int(doc.get(k, 0) or 0) for k in cls.__dataclass_fields__})

    @classmethod
    def from_sdk(cls, usage: Any) -> Usage:
        def get(name: str) -> int:
            return int(getattr(usage, name, 0) or 0)

        return cls(
            input_tokens=get("input_tokens"),
            output_tokens=get("output_tokens"),
            cache_read_tokens=get("cache_read_input_tokens"),
            cache_write_tokens=get("cache_creation_input_tokens"),
        )


@dataclass
class Reply:
    """One assistant message, as plain content blocks ready to send back."""

    content: list[dict[str, Any]]
    stop_reason: str | None
    usage: Usage
    cost: float | None
    model: str
    message_id: str
    attempts: int
    elapsed_s: float

    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]

    def text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text")


class APIFailure(Exception):
    """The API failed for good: a non-retryable answer, or retries ran out."""

    def __init__(self, message: str, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


@dataclass
class RetryPolicy:
    max_attempts: int = 6
    backoff_s: float = 2.0  # first wait; doubles each attempt, with jitter
    max_backoff_s: float = 60.0

    def wait(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_backoff_s * 2)
        base = min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)
        return base * random.uniform(0.75, 1.0)


def thinking_param(budget: int | str | None) -> dict[str, Any] | None:
    """``--thinking-budget``: an int >= 1024 (extended thinking), ``"adaptive"``, or off."""
    if budget in (None, 0, "0", "off", ""):
        return None
    if budget == "adaptive":
        return {"type": "adaptive"}
    tokens = int(budget)  # type: ignore[arg-type]
    if tokens < 1024:
        raise ValueError("a thinking budget is at least 1024 tokens (or 'adaptive')")
    return {"type": "enabled", "budget_tokens": tokens}


@dataclass
class ModelSettings:
    """What every request of a run sends besides the conversation."""

    model: str = DEFAULT_MODEL
    max_tokens: int = 16000
    temperature: float | None = None
    thinking: dict[str, Any] | None = None

    def request_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.thinking is not None:
            params["thinking"] = self.thinking  # the API takes no temperature with thinking
        elif self.temperature is not None:
            params["temperature"] = self.temperature
        return params


RetryCallback = Callable[[int, float, str], None]


@dataclass
class ModelClient:
    """Messages API calls for one run: settings, retries, usage and cost totals.

    ``sdk`` is an ``anthropic.Anthropic`` (made on first use from the environment, or
    passed in by a test). Thread-safe: ``--samples`` branches call it concurrently.
    """

    settings: ModelSettings
    price: Price | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    base_url: str | None = None
    timeout_s: float = 600.0
    sdk: Any = None
    on_retry: RetryCallback | None = None
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    calls: int = 0
    retries: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if self.price is None:
            self.price = price_for(self.settings.model)

    def _client(self) -> Any:
        with self._lock:
            if self.sdk is None:
                import anthropic

                from harness.redact import recall

                kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout_s}
                if self.base_url:
                    kwargs["base_url"] = self.base_url
                for name, arg in _CREDENTIALS:  # an earlier client took them out of os.environ
                    if name not in os.environ and (value := recall(name)):
                        kwargs[arg] = value
                self.sdk = anthropic.Anthropic(**kwargs)
                _forget_credentials(self.sdk)
            return self.sdk

    def check_credentials(self) -> None:
        """Fail early, before a run starts, when the SDK found no key or token."""
        sdk = self._client()
        if not any(getattr(sdk, a, None) for a in ("api_key", "auth_token", "credentials")):
            raise APIFailure(
                "no Anthropic credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
            )

    def create(
        self,
        *,
        system: Sequence[dict[str, Any]] | str,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
    ) -> Reply:
        """One call, retried; raises :class:`APIFailure` when it cannot succeed."""
        params = self.settings.request_params()
        params.update(system=system, messages=list(messages))
        if tools:
            params["tools"] = list(tools)
        attempt = 0
        started = time.monotonic()
        while True:
            attempt += 1
            try:
                message = self._stream(params)
                break
            except APIFailure:
                raise
            except Exception as exc:
                retryable, status, summary, retry_after = classify(exc)
                if not retryable or attempt >= self.retry.max_attempts:
                    tail = f" (after {attempt} attempts)" if retryable else ""
                    raise APIFailure(summary + tail, status, retryable) from None
                wait = self.retry.wait(attempt, retry_after)
                with self._lock:
                    self.retries += 1
                if self.on_retry is not None:
                    self.on_retry(attempt, wait, summary)
                time.sleep(wait)
        usage = Usage.from_sdk(getattr(message, "usage", None))
        cost = self.price.cost(usage) if self.price else None
        with self._lock:
            self.calls += 1
            self.usage.add(usage)
            if cost is not None:
                self.cost += cost
        return Reply(
            content=[block_to_dict(b) for b in message.content],
            stop_reason=getattr(message, "stop_reason", None),
            usage=usage,
            cost=cost,
            model=str(getattr(message, "model", self.settings.model)),
            message_id=str(getattr(message, "id", "")),
            attempts=attempt,
            elapsed_s=time.monotonic() - started,
        )

    def _stream(self, params: dict[str, Any]) -> Any:
        with self._client().messages.stream(**params) as stream:
            kind = str(stream.response.headers.get("content-type", ""))
            if "text/event-stream" not in kind:
                # an API-compatible server that does not stream answers with the message
                return message_from_body(stream.response.read(), kind)
            try:
                return stream.get_final_message()
            except AssertionError:  # the SDK's way of saying no message_start came
                raise APIFailure("the API's stream ended before it sent a message") from None


def message_from_body(body: bytes, content_type: str) -> Any:
    """The ``Message`` in a plain JSON answer to a streamed request; ``APIFailure`` (one
    line naming the cause) when the body is not one."""
    import anthropic

    what = f"the API answered a streamed request with {content_type or 'no content type'}"
    try:
        doc = json.loads(body)
    except ValueError:
        raise APIFailure(
            f"{what} that is not JSON: {_first_line(body.decode(errors='replace'), 120)!r}"
        ) from None
    if isinstance(doc, dict) and doc.get("type") == "error":
        kind, message = _error_body(doc)
        raise APIFailure(f"{what}: {kind}: {message}".rstrip(": "))
    if not isinstance(doc, dict) or doc.get("type") != "message":
        got = doc.get("type") if isinstance(doc, dict) else type(doc).__name__
        raise APIFailure(f"{what} that is not a message (type {got!r})")
    try:
        return anthropic.types.Message.model_validate(doc)
    except Exception as exc:  # pydantic's ValidationError: name the first problem only
        raise APIFailure(f"{what} that is not a valid message: {_first_line(str(exc))}") from None


def _forget_credentials(sdk: Any) -> None:
    """Once the SDK holds the key, this process's environment does not: a candidate's
    worker that reached ``/proc/<parent>/environ`` would find no key there. The values
    are kept for redaction (``harness/redact.py``)."""
    from harness.redact import forget_env, remember

    for name, attr in _CREDENTIALS:
        forget_env(name)
        value = getattr(sdk, attr, None)
        remember(value if isinstance(value, str) else None)


def classify(exc: BaseException) -> tuple[bool, int | None, str, float | None]:
    """(retryable, HTTP status, one-line summary without secrets, retry-after seconds)."""
    import anthropic

    if isinstance(exc, TypeError) and "authentication" in str(exc):
        return False, None, "no Anthropic credentials: set ANTHROPIC_API_KEY", None
    if isinstance(exc, anthropic.APITimeoutError):
        return True, None, "request timed out", None
    if isinstance(exc, anthropic.APIConnectionError):
        return True, None, "connection error: " + _first_line(str(exc)), None
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind, message = _error_body(exc.body)
        retryable = status in _RETRY_STATUS or status >= 500 or kind in _RETRY_ERROR_TYPES
        summary = f"HTTP {status}" + (f" {kind}" if kind else "") + f": {message or exc.message}"
        return retryable, status, _first_line(summary), _retry_after(exc.response)
    if isinstance(exc, anthropic.APIError):
        kind, message = _error_body(getattr(exc, "body", None))
        summary = (kind + ": " if kind else "") + (message or str(exc))
        return kind in _RETRY_ERROR_TYPES, None, _first_line(summary), None
    raise exc


def _error_body(body: Any) -> tuple[str, str]:
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            return str(err.get("type", "")), str(err.get("message", ""))
    return "", ""


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue
    return None


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]


def block_to_dict(block: Any) -> dict[str, Any]:
    """An SDK content block as the plain dict the next request sends back."""
    if isinstance(block, Mapping):
        return dict(block)
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    dumped: dict[str, Any] = block.model_dump(mode="json", exclude_none=True)
    return dumped
