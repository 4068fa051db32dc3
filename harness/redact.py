"""Redaction: secret values this process knows never reach a verdict, feedback or record.

The last line of defence behind the sandbox: whatever a candidate manages to print, the
values of this process's environment variables whose names look like credentials
(``ANTHROPIC_API_KEY``, ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``...) and the values
registered with ``remember`` (the agent's API key, read by its client) are replaced with
``[redacted]`` in verdict documents, feedback, ladder lines and run-record files.

``forget_env(name)`` takes a variable out of this process: its value is remembered (for
redaction, and for ``recall``: a later client of this process still finds the key), its
bytes are overwritten where the C library keeps them -- the original environment block,
which ``/proc/<pid>/environ`` reads, is not changed by ``unsetenv`` or ``os.environ.pop``
-- and then it is unset.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MARK = "[redacted]"
MIN_LENGTH = 8  # shorter values ("1", "true") would redact ordinary text
_SECRET_NAME = re.compile(
    r"(API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|_KEY$|^KEY$|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL"
    r"|(^|_)O?AUTH(_|$)|(^|_)PASS(_|$))",
)
_NOT_SECRET_NAME = re.compile(r"(_PATH|_FILE|_DIR|_SOCK|_URL|_HOST|_PORT)$")
_remembered: set[str] = set()
_forgotten: dict[str, str] = {}
_lock = threading.Lock()


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return bool(_SECRET_NAME.search(upper)) and not _NOT_SECRET_NAME.search(upper)


def remember(value: str | None) -> None:
    """Redact ``value`` from now on (a key this process got from somewhere else)."""
    if value and len(value) >= MIN_LENGTH:
        with _lock:
            _remembered.add(value)


def known() -> list[str]:
    """The secret values to redact, longest first (a key containing another key)."""
    values = {v for k, v in os.environ.items() if looks_secret(k) and len(v) >= MIN_LENGTH}
    with _lock:
        values |= _remembered
    return sorted(values, key=len, reverse=True)


def secret_env_names(environ: dict[str, str] | None = None) -> list[str]:
    return [k for k in (os.environ if environ is None else environ) if looks_secret(k)]


def redact(text: str, values: Iterable[str] | None = None) -> str:
    for value in known() if values is None else values:
        if value in text:
            text = text.replace(value, MARK)
    return text


def redact_bytes(data: bytes, values: Iterable[str] | None = None) -> bytes:
    for value in known() if values is None else values:
        raw = value.encode(errors="surrogateescape")
        if raw in data:
            data = data.replace(raw, MARK.encode())
    return data


def redact_obj(value: Any, values: list[str] | None = None) -> Any:
    """A JSON-like value with every string (keys too) redacted."""
    values = known() if values is None else values
    if not values:
        return value
    if isinstance(value, str):
        return redact(value, values)
    if isinstance(value, dict):
        return {redact_obj(k, values): redact_obj(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_obj(v, values) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_obj(v, values) for v in value)
    return value


def redact_tree(root: Path) -> list[Path]:
    """Rewrite every file under ``root`` that holds a secret value; returns those files."""
    values = known()
    changed: list[Path] = []
    if not values or not root.is_dir():
        return changed
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        clean = redact_bytes(data, values)
        if clean != data:
            path.write_bytes(clean)
            changed.append(path)
    return changed


def recall(name: str) -> str | None:
    """The variable's value: from the environment, or as it was when ``forget_env`` took it."""
    value = os.environ.get(name)
    if value is not None:
        return value
    with _lock:
        return _forgotten.get(name)


def clear_forgotten() -> None:
    """Drop what ``forget_env`` kept (a test that removes a key means it gone)."""
    with _lock:
        _forgotten.clear()


def forget_env(name: str) -> bool:
    """Remember ``name``'s value for redaction, wipe its bytes, unset it. True if it was set."""
    value = os.environ.get(name)
    if value is None:
        return False
    remember(value)
    with _lock:
        _forgotten[name] = value
    try:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        address = libc.getenv(os.fsencode(name))
        if address:
            size = len(ctypes.string_at(address))
            ctypes.memset(address, ord("*"), size)
    except (OSError, AttributeError):
        pass
    os.environ.pop(name, None)
    return True
