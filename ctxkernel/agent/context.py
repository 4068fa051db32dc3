"""Conversation hygiene: prompt caching and trimming what the model no longer needs.

Caching: the system prompt and the tool list are one cached prefix (``cache_control`` on
the system block and on the last tool), and every request moves one more breakpoint to
the last block of the conversation, so each call reads the previous call's prefix from
the cache (three breakpoints of the four the API allows).

Trimming: when the context grows past the run's budget, the oldest turns are compacted,
oldest first, until the estimate is back under the low-water mark — in one go, so the
cached prefix breaks rarely. Old tool results become their first lines (a check's
verdict line, a search's hit ids, which ``read`` takes back), old candidate sources in
``check_kernel`` calls become a pointer to the version kept on disk, old thinking is
dropped and long old text is cut. The first message (the task) and the last few turns
are never touched.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

CACHE = {"type": "ephemeral"}
CHARS_PER_TOKEN = 4
TRIMMED = "[trimmed"
RESULT_KEEP_CHARS = 600
TEXT_KEEP_CHARS = 1500
_HIT_ID = re.compile(r"^\[\d+\] [\w.-]+:\S+:\d+-\d+")


def system_blocks(text: str) -> list[dict[str, Any]]:
    """The system prompt as one cached text block."""
    return [{"type": "text", "text": text, "cache_control": dict(CACHE)}]


def request_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of the conversation for one request, with a cache breakpoint on its last
    cacheable block (the stored conversation stays free of breakpoints)."""
    out = copy.deepcopy(list(messages))
    for message in reversed(out):
        content = message.get("content")
        if isinstance(content, str):
            if content:
                message["content"] = [
                    {"type": "text", "text": content, "cache_control": dict(CACHE)}
                ]
                return out
            continue
        for block in reversed(content or []):
            if block.get("type") in ("text", "tool_result", "tool_use", "image", "document"):
                if block.get("type") == "text" and not block.get("text"):
                    continue
                block["cache_control"] = dict(CACHE)
                return out
    return out


def estimate_tokens(*parts: Any) -> int:
    """A rough token count (4 characters a token) of prompts, tools and messages."""
    chars = 0
    for part in parts:
        chars += len(part) if isinstance(part, str) else len(json.dumps(part, default=str))
    return chars // CHARS_PER_TOKEN


@dataclass
class TrimReport:
    blocks: int
    tokens_before: int
    tokens_after: int


def trim(
    messages: list[dict[str, Any]],
    *,
    target_tokens: int,
    keep_recent: int = 4,
    source_note: Callable[[str], str] | None = None,
) -> TrimReport:
    """Compact old turns in place, oldest first, until the conversation is estimated
    under ``target_tokens`` or nothing old is left. ``source_note(tool_use_id)`` says where
    an elided candidate source is kept."""
    before = estimate_tokens(messages)
    names: dict[str, str] = {}
    for message in messages:
        for block in _blocks(message):
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
    changed = 0
    size = before
    for message in messages[1 : max(1, len(messages) - keep_recent)]:
        if size <= target_tokens:
            break
        n = _compact(message, names, source_note)
        if n:
            changed += n
            size = estimate_tokens(messages)
    return TrimReport(changed, before, size)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _compact(
    message: dict[str, Any],
    names: dict[str, str],
    source_note: Callable[[str], str] | None,
) -> int:
    content = message.get("content")
    if isinstance(content, str):
        if len(content) > TEXT_KEEP_CHARS:
            message["content"] = _cut_text(content)
            return 1
        return 0
    changed = 0
    kept: list[dict[str, Any]] = []
    for block in content or []:
        kind = block.get("type")
        if kind in ("thinking", "redacted_thinking"):
            changed += 1  # old thinking is not needed again
            continue
        if kind == "text" and len(block.get("text", "")) > TEXT_KEEP_CHARS:
            block = {**block, "text": _cut_text(block["text"])}
            changed += 1
        elif kind == "tool_result":
            text = _result_text(block.get("content"))
            if len(text) > RESULT_KEEP_CHARS and not text.startswith(TRIMMED):
                name = names.get(str(block.get("tool_use_id")), "")
                block = {**block, "content": summarize_result(text, name)}
                changed += 1
        elif kind == "tool_use" and block.get("name") == "check_kernel":
            source = (block.get("input") or {}).get("source")
            if isinstance(source, str) and not source.startswith("# " + TRIMMED):
                where = source_note(str(block.get("id"))) if source_note else "not kept"
                block = {
                    **block,
                    "input": {**block["input"], "source": f"# {TRIMMED}: source kept as {where}]"},
                }
                changed += 1
        kept.append(block)
    if not kept:
        kept = [{"type": "text", "text": "(earlier reasoning trimmed)"}]
    message["content"] = kept
    return changed


def _cut_text(text: str) -> str:
    head = text[: TEXT_KEEP_CHARS // 3].rstrip()
    return f"{head}\n{TRIMMED}: {len(text) - len(head)} more characters]"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content or "")


def summarize_result(text: str, tool_name: str) -> str:
    """What an old tool result shrinks to: a check's headline, a lookup's hit ids."""
    lines = text.splitlines()
    if tool_name == "check_kernel":
        kept = lines[:2]
        how = "the version's verdict is kept on disk"
    else:
        kept = [line for line in lines if _HIT_ID.match(line)][:12] or lines[:3]
        how = "call the tool again (or read an id) for the text"
    body = "\n".join(line[:200] for line in kept)
    return f"{TRIMMED} from {len(text)} characters; {how}]\n{body}"
