"""A worker's reply the parent cannot read (a finding that is a number, a call record that
is a string) ends the worker as a corrupted channel and fails the verdict, named: never a
traceback in a rung or in the ladder's goodbye (a wrong kernel's forged goodbye once
crashed the parent after the rungs, with no verdict, no ``--json`` line, no record)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from cheatspec import REPO, problem_path

from harness.process.session import malformed
from harness.rungs.ladder import Ladder

CHEAT = Path(__file__).resolve().parent / "cheats" / "c12_malformed_reply.py"


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ({"op": "bye", "integrity": [5]}, "'integrity' field is a list holding int"),
        ({"op": "bye", "integrity": [{"kind": "x"}]}, "'integrity'"),
        ({"op": "call", "calls": ["x"]}, "'calls'"),
        ({"op": "call", "calls": [{"forbidden": [1]}]}, "calls[0]['forbidden']"),
        ({"op": "call", "calls": [{"aten_elements": {"add": "many"}}]}, "'aten_elements'"),
        ({"op": "load", "env": []}, "'env' field is a list"),
        ({"op": "call", "error": "boom"}, "'error'"),
    ],
)
def test_a_reply_field_of_the_wrong_type_is_named(header: dict, words: str) -> None:
    said = malformed(header)
    assert said is not None and words in said, said


def test_the_workers_own_replies_are_not_malformed() -> None:
    assert malformed({"ok": True, "op": "bye", "integrity": []}) is None
    assert malformed({"ok": True, "op": "load", "env": {}, "error": None, "integrity": []}) is None
    call = {"call_no": 1, "elapsed_s": 0.1, "launches": None, "forbidden": ["aten::add"],
            "aten": {"aten::add": 1}, "aten_s": {}, "aten_elements": {"aten::add": 3},
            "host_elements": {}, "output": {"t": 0}, "changed_after_return": [],
            "earlier_changed": [], "settle_s": 0.0}  # fmt: skip
    assert malformed({"ok": True, "op": "call", "calls": [call], "integrity": []}) is None


def test_an_error_closing_the_workers_is_a_failed_verdict() -> None:
    ctx = mock.MagicMock()
    ctx.device = "cpu"
    ctx.workers.environment = {}
    ctx.findings.messages = []
    ctx.close.side_effect = AttributeError("'int' object has no attribute 'get'")
    verdict = Ladder([]).run(ctx)
    assert not verdict.ok
    failed = verdict.failed_rung
    assert failed is not None and failed.name == "close"
    assert "harness error closing the workers: AttributeError" in failed.reason


def test_a_malformed_reply_is_a_failed_verdict_with_a_json_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CTXKERNEL_PLANTED"}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "check", str(problem_path("vector_add")), str(CHEAT),
         "--no-record", "--device", "cpu", "--shapes", "n=1000", "--json"],
        capture_output=True, text=True, timeout=600, env=env, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    verdicts = [
        doc
        for doc in (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
        if doc.get("type") == "verdict"
    ]
    assert len(verdicts) == 1 and verdicts[0]["ok"] is False, done.stdout[-2000:]
    assert "malformed reply" in json.dumps(verdicts[0]), verdicts[0].get("reason")
