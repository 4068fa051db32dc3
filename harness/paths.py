"""Where ctxkernel keeps its state: home, indexes, runs, caches.

Shared by the harness and the retrieval side (``ctxkernel.config`` builds on it), and
free of heavy imports so the harness runs on a GPU machine without the retrieval stack.

Rules, in order:
- ``CTXKERNEL_HOME`` set: everything lives under it (``indexes/``, ``runs/``, ``cache/``,
  ``corpora/`` for user corpus definitions).
- running from a source checkout (``pyproject.toml`` beside the package) that this user
  may write: ``indexes/`` and ``runs/`` at the checkout root, caches under the XDG cache
  dir (a checkout shared read-only with other users counts as an install).
- otherwise: XDG data dir (``~/.local/share/ctxkernel``) and XDG cache dir.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import envvars

APP = "ctxkernel"


def _env_path(name: str) -> Path | None:  # the XDG variables
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def checkout_root() -> Path | None:
    """The source checkout this package runs from, if it runs from one."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "ctxkernel").is_dir():
        return root
    return None


def home() -> Path:
    """The directory that holds indexes and runs."""
    explicit = envvars.CTXKERNEL_HOME.get()
    if explicit is not None:
        return explicit
    root = checkout_root()
    if root is not None and os.access(root, os.W_OK):
        return root
    data = _env_path("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return data / APP


def cache_dir() -> Path:
    """Clones, downloads, measured device ceilings: safe to delete, rebuilt on demand."""
    explicit = envvars.CTXKERNEL_HOME.get()
    if explicit is not None:
        return explicit / "cache"
    cache = _env_path("XDG_CACHE_HOME") or Path.home() / ".cache"
    return cache / APP


def check_server_dir() -> Path:
    """Where this user's check servers keep their sockets (not created here); every
    worker's view leaves it out."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and envvars.CTXKERNEL_HOME.get() is None:
        return Path(runtime) / "ctxkernel"
    return cache_dir() / "check-server"


def config_dir() -> Path:
    """User configuration: extra corpus definitions live in ``<config_dir>/corpora``."""
    explicit = envvars.CTXKERNEL_HOME.get()
    if explicit is not None:
        return explicit
    config = _env_path("XDG_CONFIG_HOME") or Path.home() / ".config"
    return config / APP


def default_index_dir() -> Path:
    return home() / "indexes"


def default_runs_dir() -> Path:
    explicit = envvars.CTXKERNEL_RUNS.get()
    return explicit if explicit is not None else home() / "runs"
