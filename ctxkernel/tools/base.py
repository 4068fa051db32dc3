"""The tool model: :class:`Tool` (name, description for a model, input schema, handler),
:class:`ToolSet` (the tools one agent or server offers, bound to a Workspace), the registry,
the Anthropic Messages API forms (:func:`anthropic_tools`, :func:`run_tool_use`) and the
:class:`Budget` every tool's text output is kept under."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UserError, shown
from ..queries import MAX_MAX_TOKENS
from ..render import counted
from . import tokens

if TYPE_CHECKING:
    from ..workspace import Workspace

log = logging.getLogger(__name__)

# Results are counted in tokens of the embedding model's tokenizer (``tokens.py``); the
# cap (MAX_MAX_TOKENS, declared with the queries' max_tokens) keeps every result under
# 20,000 of them, below the 25,000 at which Claude Code cuts an MCP result.
# CHARS_PER_TOKEN is only a rough guide for people sizing max_tokens.
CHARS_PER_TOKEN = 3
NOTICE_TOKENS = 160  # kept free at the end of every result for the cut notice
NOTICE_CHARS = 300  # the longest cut notice a tool writes (at most NOTICE_TOKENS tokens)

# (workspace, validated arguments) -> text; the workspace is None for a tool that says
# it needs none (so a harness tool never opens the index)
Handler = Callable[[Any, dict[str, Any]], str]


class ToolError(Exception):
    """Bad input or a failed lookup; the message is what the model sees as the error result."""


@dataclass(frozen=True)
class Tool:
    """One agent tool: what the model sees (name, description, schema) and what runs."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    needs_workspace: bool = True

    def validate(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """The arguments checked against the schema, with the schema's defaults filled in."""
        import jsonschema

        args = dict(arguments or {})
        validator = jsonschema.Draft202012Validator(self.input_schema)
        errors = sorted(validator.iter_errors(args), key=lambda e: (len(e.path), str(e.path)))
        if errors:
            found = "; ".join(dict.fromkeys(_schema_error(e, self) for e in errors[:4]))
            raise ToolError(f"{self.name}: invalid input: {found}")
        for key, prop in self.input_schema.get("properties", {}).items():
            if key not in args and "default" in prop:
                args[key] = prop["default"]
        return args

    def to_anthropic(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def to_mcp(self) -> dict[str, Any]:
        """The MCP ``tools/list`` wire form (camelCase ``inputSchema``)."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }


@dataclass
class ToolResult:
    text: str
    is_error: bool = False


_REGISTRY: dict[str, Tool] = {}


def register(tool: Tool, *, replace: bool = False) -> Tool:
    """Add a tool to the default set (every ToolSet created afterwards carries it)."""
    if tool.name in _REGISTRY and not replace:
        raise ValueError(f"a tool named {tool.name!r} is already registered")
    _check_schema(tool)
    _REGISTRY[tool.name] = tool
    return tool


def builtin_tools() -> list[Tool]:
    """The registered tools, in registration order."""
    return list(_REGISTRY.values())


class ToolSet:
    """The tools an agent or server offers, bound to one Workspace (made on first use)."""

    def __init__(
        self,
        workspace: Workspace | Callable[[], Workspace] | None = None,
        tools: Iterable[Tool] | None = None,
    ) -> None:
        self._workspace: Workspace | None = None
        self._factory: Callable[[], Workspace] | None = None
        if workspace is None:
            self._factory = _default_workspace
        elif callable(workspace):
            self._factory = workspace
        else:
            self._workspace = workspace
        self._tools: dict[str, Tool] = {}
        for tool in builtin_tools() if tools is None else tools:
            self.register(tool)

    @property
    def workspace(self) -> Workspace:
        if self._workspace is None:
            assert self._factory is not None
            self._workspace = self._factory()
        return self._workspace

    def register(self, tool: Tool, *, replace: bool = False) -> ToolSet:
        if tool.name in self._tools and not replace:
            raise ValueError(f"this ToolSet already has a tool named {tool.name!r}")
        _check_schema(tool)
        self._tools[tool.name] = tool
        return self

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r} (tools: {', '.join(self._tools)})")
        return tool

    def run(self, name: str, arguments: Mapping[str, Any] | None = None) -> str:
        """Validate and run one tool; ToolError for anything the model should correct."""
        tool = self.get(name)
        if arguments is not None and not isinstance(arguments, Mapping):
            raise ToolError(f"{name}: input must be a JSON object, got {type(arguments).__name__}")
        args = tool.validate(arguments)
        try:
            return tool.handler(self.workspace if tool.needs_workspace else None, args)
        except ToolError:
            raise
        except UserError as exc:
            raise ToolError(f"{name}: {exc}") from exc

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
        """Like :meth:`run` but never raises: errors come back as ``is_error`` results.

        Whatever a tool returns leaves as valid UTF-8 text of at most ``MAX_MAX_TOKENS``
        tokens, so a reply can always be encoded and never passes the token cap."""
        try:
            result = ToolResult(self.run(name, arguments))
        except ToolError as exc:
            result = ToolResult(str(exc), is_error=True)
        except Exception as exc:  # a bug must not end the agent's loop or the server
            log.exception("tool %s failed", name)
            result = ToolResult(f"{name}: internal error: {type(exc).__name__}: {exc}", True)
        result.text = _deliverable(result.text)
        return result


def _deliverable(text: str) -> str:
    """``text`` with any lone surrogate escaped, under the cap of every result."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return cap_result(text)


def _default_workspace() -> Workspace:
    from ..workspace import Workspace

    return Workspace()


# --- Anthropic Messages API -------------------------------------------------------------


def anthropic_tools(
    toolset: ToolSet | Iterable[Tool] | None = None, *, cache_control: bool = False
) -> list[dict[str, Any]]:
    """Tool definitions in the Messages API ``tools`` format.

    ``cache_control=True`` marks the last tool ``{"type": "ephemeral"}`` so the whole tool
    list is a cached prompt prefix.
    """
    tools = list(toolset) if toolset is not None else builtin_tools()
    out = [t.to_anthropic() for t in tools]
    if cache_control and out:
        out[-1]["cache_control"] = {"type": "ephemeral"}
    return out


def run_tool_use(target: ToolSet | Workspace, block: Any) -> dict[str, Any]:
    """Execute a ``tool_use`` block (a dict or an SDK ``ToolUseBlock``) and return the
    ``tool_result`` content block to send back in the next user message."""
    toolset = target if isinstance(target, ToolSet) else ToolSet(target)
    block_id, name, arguments = _tool_use_fields(block)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            result = ToolResult(f"{name}: input is not valid JSON: {exc}", True)
            return _tool_result(block_id, result)
    result = toolset.call(name, arguments)
    return _tool_result(block_id, result)


def _tool_use_fields(block: Any) -> tuple[str, str, Any]:
    if isinstance(block, Mapping):
        kind, block_id, name = block.get("type"), block.get("id"), block.get("name")
        arguments = block.get("input", {})
    else:
        kind, block_id, name = (getattr(block, a, None) for a in ("type", "id", "name"))
        arguments = getattr(block, "input", {})
    if kind not in (None, "tool_use") or not block_id or not name:
        raise ValueError(f"not a tool_use block: {block!r}")
    return str(block_id), str(name), arguments


def _tool_result(block_id: str, result: ToolResult) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": block_id,
        "content": result.text,
        "is_error": result.is_error,
    }


# --- output under a token budget --------------------------------------------------------


class Budget:
    """Collects output pieces while they fit in ``max_tokens`` tokens of the embedding
    model's tokenizer (never more than ``MAX_MAX_TOKENS``), keeping room for the closing
    ``[cut: …]`` line.

    Until the pieces could pass the limit their length in characters stands for their
    count (a token covers at least one character), so small results never tokenize.
    """

    def __init__(self, max_tokens: int) -> None:
        self.total = max(1, min(max_tokens, MAX_MAX_TOKENS))
        self.limit = self.total - min(NOTICE_TOKENS, self.total // 3)
        self.parts: list[str] = []
        self.used = 0  # tokens (an upper bound in characters until ``exact``)
        self.exact = False
        self._counted: dict[str, int] = {}  # text -> tokens, for texts counted once already

    def _count(self, texts: list[str]) -> list[int]:
        """Token counts, each distinct text tokenized at most once per budget (the parts
        are counted again when the budget turns exact and when the cut notice is sized)."""
        seen = self._counted
        todo = list({t for t in texts if t not in seen})
        if todo:
            seen.update(zip(todo, tokens.count(todo), strict=True))
        return [seen[t] for t in texts]

    def _costs(self, texts: list[str]) -> list[int]:
        """Tokens each text would use, its newline included."""
        if not self.exact and self.used + sum(len(t) + 1 for t in texts) > self.limit:
            self.used = sum(n + 1 for n in self._count(self.parts))
            self.exact = True
        if not self.exact:
            return [len(t) + 1 for t in texts]
        room = self.limit - self.used
        costs = [room + 1 if tokens.lower_bound(t) > room else -1 for t in texts]
        todo = [i for i, c in enumerate(costs) if c < 0]
        for i, n in zip(todo, self._count([texts[i] for i in todo]), strict=True):
            costs[i] = n + 1
        return costs

    def fits(self, text: str) -> bool:
        return self.used + self._costs([text])[0] <= self.limit

    def add(self, text: str) -> bool:
        return self.add_lines([text]) == 1

    def add_lines(self, lines: Iterable[str]) -> int:
        """Add lines in order while they fit; how many went in."""
        pending = list(lines)
        n = 0
        for start in range(0, len(pending), 256):
            batch = pending[start : start + 256]
            for line, cost in zip(batch, self._costs(batch), strict=True):
                if self.used + cost > self.limit:
                    return n
                self.parts.append(line)
                self.used += cost
                n += 1
        return n

    def render(self, cut: str = "") -> str:
        text = "\n".join(self.parts)
        if cut:
            notice = f"[cut: {cut}]"
            # the parts as they are now (a tool may have rewritten one), counted exactly
            used = sum(n + 1 for n in self._count(self.parts)) if self.exact else self.used
            room = max(0, self.total - used)
            if len(notice) > room and tokens.count([notice])[0] > room:
                notice = notice[: max(0, room - 2)] + "…]"  # a token is at least a character
            text = f"{text}\n{notice}" if text else notice
        return text


def cap_result(text: str) -> str:
    """``text`` cut between lines to at most ``MAX_MAX_TOKENS`` tokens (any tool's result,
    errors and registered tools included)."""
    if len(text) <= MAX_MAX_TOKENS or tokens.count([text])[0] <= MAX_MAX_TOKENS:
        return text
    budget = Budget(MAX_MAX_TOKENS)
    lines = text.splitlines()
    shown = budget.add_lines(lines)
    return budget.render(
        f"{counted(len(lines) - shown, 'more line')} passed the size limit of a tool result"
    )


# --- schema checks ----------------------------------------------------------------------


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_schema(tool: Tool) -> None:
    try:
        import jsonschema
    except ImportError:  # a harness-only install (a GPU box): the schemas are checked in CI
        return

    try:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"tool {tool.name!r}: invalid input schema: {exc.message}") from exc
    if tool.input_schema.get("type") != "object":
        raise ValueError(f"tool {tool.name!r}: the input schema must be an object")


def _schema_error(error: Any, tool: Tool) -> str:
    where = "/".join(str(p) for p in error.absolute_path)
    if len(error.message) > 200 or not _encodable(error.message):
        # the message quotes the value: a huge string or one with a lone surrogate
        what = {"maxLength": "is too long", "minLength": "is too short"}.get(
            str(error.validator), f"fails {error.validator}"
        )
        return f"{where or 'input'}: {shown(error.instance)} {what}"
    if error.validator == "additionalProperties":
        allowed = ", ".join(tool.input_schema.get("properties", {}))
        return f"{error.message} (accepted: {allowed})"
    if error.validator == "required":
        return error.message
    if error.validator == "anyOf" and where:
        return f"{where}: expected a string or a list of strings, got {error.instance!r}"
    return f"{where}: {error.message}" if where else error.message
