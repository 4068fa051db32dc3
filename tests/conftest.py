"""Shared fixtures: every test gets its own CTXKERNEL_HOME and caches under tmp_path."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

_OWN_EMBEDDERS: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """The static embedder of every test, session fixture and subprocess: the "tiny"
    recipe (distilled in seconds from the real bundled model, with a small vocabulary),
    built once per session in a temp dir (CTXKERNEL_TEST_EMBEDDERS_DIR keeps it across
    sessions instead)."""
    os.environ["CTXKERNEL_STATIC_RECIPE"] = "tiny"
    os.environ["CTXKERNEL_EMBED"] = "static"  # subprocesses of session fixtures too
    # no test (nor a session fixture's subprocess) starts a check server unless it asks:
    # tests/harness/test_checkserver.py enables it with a short idle timeout and stops it
    os.environ["CTXKERNEL_CHECK_SERVER"] = "0"
    kept = os.environ.get("CTXKERNEL_TEST_EMBEDDERS_DIR")
    if kept:
        os.environ["CTXKERNEL_EMBEDDERS_DIR"] = kept
    else:
        _OWN_EMBEDDERS.append(tempfile.mkdtemp(prefix="ck-embedders-"))
        os.environ["CTXKERNEL_EMBEDDERS_DIR"] = _OWN_EMBEDDERS[0]


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _OWN_EMBEDDERS:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def embedders_dir() -> Path:
    """Built embedders, shared by the session: the static one is distilled once."""
    return Path(os.environ["CTXKERNEL_EMBEDDERS_DIR"])


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedders_dir: Path) -> Path:
    """Point every user directory at the test's temp dir; no test touches the real ones
    (built embedders are the session's, see ``pytest_configure``)."""
    home = tmp_path / "ckhome"
    home.mkdir()
    monkeypatch.setenv("CTXKERNEL_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CTXKERNEL_CHROMA_URL", raising=False)
    monkeypatch.setenv("CTXKERNEL_CHECK_SERVER", "0")  # checks run in-process by default
    # tests index with the static embedder's tiny recipe (seconds), whatever the default;
    # the default itself is what tests/retrieval/test_embed.py checks with this unset
    monkeypatch.setenv("CTXKERNEL_EMBED", "static")
    monkeypatch.setenv("CTXKERNEL_EMBEDDERS_DIR", str(embedders_dir))
    monkeypatch.setenv("CTXKERNEL_STATIC_RECIPE", "tiny")
    return home


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests, with the reason, where no CUDA device is present."""
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none is present on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _has_cuda() -> bool:
    if os.environ.get("CTXKERNEL_FORCE_NO_GPU"):
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
