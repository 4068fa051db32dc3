"""Fixtures for the agent tests: the demo index of the tool tests (the loop searches it),
the example problems, a scripted Messages API and a model client pointed at it with a
test key that must never reach a file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from retrieval.conftest import run_cli as run_cli
from tools.conftest import demo_defined as demo_defined
from tools.conftest import demo_index as demo_index
from tools.conftest import toolset as toolset
from tools.conftest import ws as ws

from ctxkernel.agent import ModelClient, ModelSettings, RetryPolicy
from harness.redact import clear_forgotten

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SECRET = "sk-ant-test-0123456789-DO-NOT-WRITE-ME"


@pytest.fixture(autouse=True)
def _no_remembered_key() -> Iterator[None]:
    """The client takes the key out of the environment and keeps it for later clients of
    the process; a test that removes the key means it gone."""
    yield
    clear_forgotten()


@pytest.fixture
def api_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The key the SDK reads from the environment; every test checks it is never written."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    yield


def make_client(url: str, model: str = "claude-sonnet-5-5", attempts: int = 4) -> ModelClient:
    return ModelClient(
        ModelSettings(model=model, max_tokens=4096),
        base_url=url,
        retry=RetryPolicy(max_attempts=attempts, backoff_s=0.01, max_backoff_s=0.05),
    )


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under root whose bytes contain needle."""
    data = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


def source(rel: str) -> str:
    return (EXAMPLES / rel).read_text()
