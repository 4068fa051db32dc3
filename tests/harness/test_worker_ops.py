"""The worker's one op table: every request it answers is in ``OPS``; any other op is an
error reply (it used to be answered as ``artifacts``), and the worker serves on."""

from __future__ import annotations

from typing import Any

from harness.process import channel
from harness.worker.serve import OPS, Worker, _caught


class ScriptedEnd:
    """The worker's end of the channel, fed a list of request headers."""

    def __init__(self, headers: list[dict[str, Any]]) -> None:
        self.todo = list(headers)
        self.sent: list[dict[str, Any]] = []

    def recv(self, max_payload: int = 1 << 40) -> channel.Frame:
        if not self.todo:
            raise channel.ChannelClosed("closed")
        return channel.Frame(self.todo.pop(0), [])

    def send(self, header: dict[str, Any], tensors: Any = ()) -> None:
        self.sent.append(header)


def test_the_table_holds_every_request_the_ladder_sends() -> None:
    assert set(OPS) == {
        "load",
        "call",
        "bench",
        "bench_sample",
        "identity",
        "ceilings",
        "artifacts",
        "trace",
        "bye",
    }


def test_an_unknown_op_is_an_error_reply_and_the_worker_serves_on(tmp_path: Any) -> None:
    end = ScriptedEnd([{"op": "artefacts"}, {"op": None}, {"op": "bye"}])
    worker = Worker(end, str(tmp_path), "cpu")  # type: ignore[arg-type]
    assert worker.serve() == 0
    first, second, bye = end.sent
    assert first == {"ok": False, "op": "artefacts", "harness_error": "unknown request 'artefacts'"}
    assert second["ok"] is False and "unknown request None" in second["harness_error"]
    assert bye == {"ok": True, "op": "bye", "integrity": []}


def test_an_exception_in_a_handler_beside_call_is_the_harness_error(tmp_path: Any) -> None:
    def broken(worker: Any, req: dict[str, Any], tensors: Any) -> Any:
        raise RuntimeError("no bench ran")

    worker = Worker(ScriptedEnd([]), str(tmp_path), "cpu")  # type: ignore[arg-type]
    reply, tensors = _caught("bench_sample", broken)(worker, {}, [])
    assert reply["ok"] is False and reply["op"] == "bench_sample" and tensors == []
    assert "RuntimeError: no bench ran" in reply["harness_error"]


def test_the_table_is_read_only() -> None:
    import pytest

    with pytest.raises(TypeError):
        OPS["bye"] = OPS["load"]  # type: ignore[index]


def test_the_serve_loop_names_a_patch_that_emptied_its_handlers_reply(tmp_path: Any) -> None:
    """A handler's method replaced after the snapshot (as candidate code would through
    ``sys.modules``): the goodbye still names it, added by the loop, not the handler."""
    from harness.worker.snapshots import IdentitySnapshot

    end = ScriptedEnd([{"op": "bye"}])
    worker = Worker(end, str(tmp_path), "cpu")  # type: ignore[arg-type]
    worker.snapshot = IdentitySnapshot.take(extra_modules=["harness.worker.serve"])
    original = Worker.__dict__["integrity"]
    Worker.integrity = lambda self: []  # type: ignore[method-assign]
    try:
        assert worker.serve() == 0
    finally:
        Worker.integrity = original  # type: ignore[method-assign]
    (bye,) = end.sent
    messages = [item["message"] for item in bye["integrity"]]
    assert "candidate code replaced harness.worker.serve.Worker.integrity" in messages, bye
