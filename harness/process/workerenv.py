"""The worker's scrubbed environment: what a candidate's process may see of its parent's.

Kept: the variables below, ``LC_*``, and each backend's ``env_passthrough``; set: ``HOME``,
``TMPDIR`` and every backend's cache folders inside the worker's own temp dir, the
harness on ``PYTHONPATH``, no bytecode, unbuffered output, the parent's user site only
when the parent itself imports from it (a ``pip install --user`` install: the worker's
``HOME`` moved, so ``PYTHONUSERBASE`` points at the parent's),
``CTXKERNEL_WORKER=1``. Nothing else of the parent's (no secret, no ``CTXKERNEL_*``)
gets through. A spawned worker starts with it; a worker forked from a warm template
(``zygote.py``) has its environment replaced by it before anything else runs.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

ENV_KEEP = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "LD_LIBRARY_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_VISIBLE_DEVICES",
        "CC",
        "CXX",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "TORCH_CUDA_ARCH_LIST",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "PYTORCH_CUDA_ALLOC_CONF",
    }
)  # and each backend's env_passthrough
ENV_KEEP_PREFIXES = ("LC_",)


def harness_root() -> Path:
    return Path(__file__).resolve().parents[2]


def kept_env() -> dict[str, str]:
    """The parent's variables a worker keeps (before the worker's own are set)."""
    from ..backends import env_passthrough

    keep = ENV_KEEP | env_passthrough()
    return {k: v for k, v in os.environ.items() if k in keep or k.startswith(ENV_KEEP_PREFIXES)}


def python_path() -> str:
    paths = [str(harness_root())]
    paths += [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).is_dir()
    ]
    return os.pathsep.join(dict.fromkeys(paths))


def user_site_env() -> dict[str, str]:
    """How the worker finds the parent's user site: ``PYTHONUSERBASE`` when the parent
    imports from it, else ``PYTHONNOUSERSITE`` (nothing of the user's reaches it)."""
    import site

    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    if user_site and os.path.realpath(user_site) in {os.path.realpath(p) for p in sys.path}:
        return {"PYTHONUSERBASE": site.getuserbase()}
    return {"PYTHONNOUSERSITE": "1"}


def scrubbed_env(workdir: Path, extra: dict[str, str]) -> dict[str, str]:
    from ..backends import cache_env

    env = kept_env()
    home = workdir / ".home"
    tmp = workdir / ".tmp"
    for d in (home, tmp):
        d.mkdir(exist_ok=True)
    env.update(
        {
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "XDG_CACHE_HOME": str(home / ".cache"),
            **cache_env(home),
            "PYTHONPATH": python_path(),
            "PYTHONDONTWRITEBYTECODE": "1",
            **user_site_env(),
            "PYTHONUNBUFFERED": "1",
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "CTXKERNEL_WORKER": "1",
        }
    )
    env.update(extra)
    return env


def fingerprint() -> str:
    """What a worker template's interpreter was started with, besides its own folders: a
    template is reused only while this stays the same."""
    items = [*sorted(kept_env().items()), ("PYTHONPATH", python_path())]
    items += sorted(user_site_env().items())
    return hashlib.sha256(repr(items).encode()).hexdigest()[:16]
