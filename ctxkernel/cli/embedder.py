"""`ctxkernel embedder`: build and describe the static embedder (distilled offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..render import json_line
from .common import json_option


@click.group("embedder")
def embedder_group() -> None:
    """The static embedder: a Model2Vec model distilled from the bundled MiniLM.

    Built once per recipe (base model + identifier vocabulary + sizes) into the cache
    dir; `index` builds it on first use, `embedder build` ahead of time.
    """


_RECIPE = click.option(
    "--recipe",
    "preset",
    type=click.Choice(["default", "fast", "tiny"]),
    default=None,
    help="Which recipe (default: env CTXKERNEL_STATIC_RECIPE, else 'default'; 'fast' "
    "builds in about 1.5 minutes on 2 cores, its identifiers without MiniLM's padding "
    "(recipe version 3); 'tiny' builds in seconds, for tests and quick tries).",
)


@embedder_group.command("build")
@_RECIPE
@click.option("--force", is_flag=True, help="Distil again even when the model is cached.")
@json_option
def build_cmd(preset: str | None, force: bool, as_json: bool) -> int:
    """Distil the static embedder now (once; nothing is downloaded).

    The default recipe takes about a minute on 2 cores (the transformer's rows of its
    padded identifiers ship with ctxkernel; 5-10 minutes for a vocabulary or base model
    they were not made for), `--recipe fast` about 1.5.
    """
    import time

    from ..embedders import static as static_embed
    from ..progress import for_cli

    rec = static_embed.recipe(preset)
    t0 = time.perf_counter()
    was_built = static_embed.is_built(rec.digest) and not force
    with for_cli(as_json) as bar:  # a bar on a terminal, lines in a log, nothing with --json
        folder = static_embed.build(rec, force=force, log=bar.log, progress=bar)
    info = _info(rec, folder) | {
        "built_now": not was_built,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    if as_json:
        json_line(info)
    else:
        state = "built" if not was_built else "already built"
        click.echo(f"{rec.key}: {state} in {folder} ({info['size_bytes'] / 1e6:.1f} MB)")
    return 0


@embedder_group.command("info")
@_RECIPE
@json_option
def info_cmd(preset: str | None, as_json: bool) -> int:
    """The current recipe, whether its model is built, and where."""
    from ..embedders import static as static_embed

    rec = static_embed.recipe(preset)
    info = _info(rec, static_embed.model_dir(rec.digest))
    if as_json:
        json_line(info)
    else:
        built = "built" if info["built"] else "not built yet (`ctxkernel embedder build`)"
        click.echo(f"{rec.key}: {built}")
        click.echo(f"  dir {info['dir']}")
        click.echo(
            f"  base {rec.base_model}, {len(rec.vocabulary)} extra identifiers, "
            f"{rec.pca_dims} dimensions"
        )
    return 0


def _info(rec: Any, folder: Path) -> dict[str, Any]:
    from ..embedders import static as static_embed

    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0
    return {
        "type": "embedder",
        "key": rec.key,
        "built": static_embed.is_built(rec.digest),
        "dir": str(folder),
        "size_bytes": size,
        **rec.describe(),
    }
