"""Settings: which index to use (``--index-dir``, ``CTXKERNEL_HOME``, a chroma server
with ``--chroma-url``) and which embedder indexes (``--embed``: ``static`` or ``minilm`` or a
model directory), from arguments, environment and the optional ``config.toml`` in the
config dir — in that order of precedence; and where built embedders are cached."""

from __future__ import annotations

import errno
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import envvars, paths

from .errors import UserError, shown, warn_once

# the keys config.toml may hold (each a string), with what they set
KEYS = {
    "index_dir": "where the local index lives",
    "chroma_url": "a chromadb server to use instead of the local store",
    "embed": "the embedder index runs use: static, minilm or a model directory",
    "embed_model": "the model directory of a sentence-transformers embedder",
}


@dataclass(frozen=True)
class Settings:
    index_dir: Path
    chroma_url: str | None = None
    embed_model: str | None = None
    embed: str | None = None  # the config file's choice (arguments and env come first)


def config_file() -> Path:
    return paths.config_dir() / "config.toml"


def _file_settings() -> dict[str, Any]:
    file = config_file()
    if not file.is_file():
        return {}
    try:
        with open(file, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{file.name}: invalid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{file.name}: cannot read it: {exc}") from exc
    for key, value in data.items():
        if key not in KEYS:
            # a misspelt key would otherwise be a setting silently not made
            warn_once(
                f"{file}: unknown key {shown(key)} ignored (known: {', '.join(sorted(KEYS))})"
            )
        elif not isinstance(value, str):
            raise UserError(
                f"{key} in {file.name} must be a string (a quoted TOML value), got {shown(value)}"
            )
    return {k: v for k, v in data.items() if k in KEYS}


def resolve(index_dir: str | Path | None = None, chroma_url: str | None = None) -> Settings:
    conf = _file_settings()
    env_dir = envvars.CTXKERNEL_INDEX_DIR.get()
    chosen_dir = Path(
        index_dir or env_dir or conf.get("index_dir") or paths.default_index_dir()
    ).expanduser()
    url = chroma_url or envvars.CTXKERNEL_CHROMA_URL.get() or conf.get("chroma_url") or None
    model = envvars.CTXKERNEL_EMBED_MODEL.get() or conf.get("embed_model") or None
    embed = conf.get("embed") or conf.get("embed_model") or None
    check_dir(chosen_dir, "index dir")
    return Settings(index_dir=chosen_dir, chroma_url=url, embed_model=model, embed=embed)


def embedders_dir() -> Path:
    """Where built embedders (static models distilled offline) are cached, per recipe
    digest: env CTXKERNEL_EMBEDDERS_DIR, else ``embedders/`` in the cache dir."""
    explicit = envvars.CTXKERNEL_EMBEDDERS_DIR.get()
    if explicit is not None:
        return explicit
    return paths.cache_dir() / "embedders"


def check_dir(path: Path, what: str) -> None:
    """UserError for a path that no file system call could take (a NUL byte, a name too
    long) or that is there and not a folder; one that does not exist yet is fine."""
    text = str(path)
    if "\0" in text:
        raise UserError(f"{what} {shown(text)}: a path cannot hold a NUL character")
    try:
        os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR,):
            raise UserError(f"{what} {shown(text)}: a part of it is not a folder") from None
        raise UserError(f"{what} {shown(text)}: {exc.strerror}") from None
    if not path.is_dir():
        raise UserError(f"{what} {shown(text)} is not a folder")
