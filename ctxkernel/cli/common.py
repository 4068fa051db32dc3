"""Options and helpers shared by the command modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from harness import envvars

F = TypeVar("F", bound=Callable[..., Any])


def index_options(func: F) -> F:
    """--index-dir and --chroma-url: which index a command works on."""
    func = click.option(
        "--chroma-url",
        envvar=envvars.CTXKERNEL_CHROMA_URL.name,  # click reads it; declared there
        default=None,
        metavar="URL",
        help="Use a chromadb server (http://HOST:PORT) instead of the local store; env CTXKERNEL_CHROMA_URL.",
    )(func)
    func = click.option(
        "--index-dir",
        type=click.Path(file_okay=False),
        default=None,
        help="Where the local index lives (default: indexes/ under CTXKERNEL_HOME or the checkout).",
    )(func)
    return func


def json_option(func: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print JSON Lines (one object per line, with a 'type').",
    )(func)


def embed_option(func: F) -> F:
    """--embed: the embedder an index run uses (static, minilm, or a model directory)."""
    return click.option(
        "--embed",
        "embed",
        default=None,
        metavar="EMBEDDER",
        help="Embedder: 'static' (default; distilled offline from the bundled MiniLM, no torch at "
        "search time, ~13x faster to index on a CPU), 'minilm' (the transformer itself) or a "
        "local sentence-transformers model directory; env CTXKERNEL_EMBED.",
    )(func)


def workspace(index_dir: str | None, chroma_url: str | None, embed: str | None = None) -> Any:
    from ..workspace import Workspace

    return Workspace(index_dir, chroma_url, embed)
