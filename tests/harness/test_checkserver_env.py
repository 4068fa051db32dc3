"""A check server is the user's, not the shell's: it answers only for the libraries it
loaded, a user has few of them at once, and ``status`` says what each serves."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.server import client as checkserver


def test_a_reinstalled_library_gets_a_new_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = tmp_path / "site" / "ckfakelib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(checkserver, "FINGERPRINTED_PACKAGES", ("ckfakelib",))
    before = checkserver.fingerprint(code="same")
    assert "ckfakelib" in checkserver.installed_libraries()
    assert checkserver.fingerprint(code="same") == before  # stable while nothing changes
    time.sleep(0.01)
    (lib / "__init__.py").write_text("VERSION = 22\n")  # the library changed on disk
    assert checkserver.fingerprint(code="same") != before


def test_starting_one_more_server_retires_the_oldest_idle_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = [
        {"alive": True, "busy": False, "started": 3.0, "pid": 3, "socket": "/s/3.sock"},
        {"alive": True, "busy": True, "started": 1.0, "pid": 1, "socket": "/s/1.sock"},
        {"alive": True, "busy": False, "started": 2.0, "pid": 2, "socket": "/s/2.sock"},
        {"alive": True, "busy": False, "started": 4.0, "pid": 4, "socket": "/s/4.sock"},
        {"alive": False, "socket": "/s/dead.sock"},
    ]
    asked: list[str] = []

    def ask(path: Path, doc: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
        asked.append(f"{doc['type']} {path.name}")
        return {"type": "stopping"}

    monkeypatch.setattr(checkserver, "servers", lambda: docs)
    monkeypatch.setattr(checkserver, "ask", ask)
    stopped = checkserver.retire_oldest(keep=checkserver.MAX_SERVERS - 1)
    # four alive, room for two before the new one: the two oldest idle go, the busy one stays
    assert stopped == [2, 3]
    assert asked == ["stop 2.sock", "stop 3.sock"]


def test_status_says_which_environment_each_server_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {
        "alive": True, "pid": 9, "uptime_s": 1.0, "idle_s": 0.5, "requests": 2,
        "idle_timeout_s": 600.0, "code": "/x", "log": "/x.log",
        "serves": {"python": "3.11.7", "versions": {"torch": "2.13.0", "triton": "3.9.0"},
                   "env": {"TRITON_INTERPRET": "1"}},
    }  # fmt: skip
    monkeypatch.setattr(checkserver, "servers", lambda: [doc])
    lines: list[str] = []
    checkserver.print_status(False, lines.append)
    text = "\n".join(lines)
    assert "serves: python 3.11.7; torch 2.13.0, triton 3.9.0" in text
    assert "with: TRITON_INTERPRET=1" in text


def test_the_server_holds_no_secret_of_the_users_environment() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "ANTHROPIC_API_KEY": "sk-ant-xyz", "HOME": "/h"}
    kept = checkserver.without_secrets(env)
    assert "ANTHROPIC_API_KEY" not in kept and kept["HOME"] == "/h"
    assert sys.executable  # the client sends its own interpreter, not a secret
