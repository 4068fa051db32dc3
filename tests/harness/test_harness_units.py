"""Unit tests of the pieces that need no worker: channel, metrics, policy, static scan, verdict."""

from __future__ import annotations

import json
import math
import os
import sys
import types
from pathlib import Path

import pytest
import torch
from conftest import run_python

from harness.metrics import compare
from harness.problems.policy import Policy
from harness.problems.problem import Tolerance
from harness.process import channel
from harness.staticscan import scan
from harness.verdict import RungResult, Verdict
from harness.worker.snapshots import IdentitySnapshot

# -- channel -----------------------------------------------------------------------------


def _roundtrip(header: dict, tensors: list[torch.Tensor]) -> channel.Frame:
    data = b"".join(bytes(memoryview(c).cast("B")) for c in channel.encode(header, tensors))
    prefix = channel._PREFIX.size
    _, head_len, payload_len = channel._PREFIX.unpack(data[:prefix])
    head = data[prefix : prefix + head_len]
    payload = memoryview(data[prefix + head_len :])
    assert len(payload) == payload_len
    return channel.decode(head, payload)


def test_channel_roundtrip_keeps_dtype_shape_and_bits() -> None:
    x = torch.randn(5, 7).t()  # non-contiguous
    b = torch.randn(3, 4).to(torch.bfloat16)
    nan = torch.tensor([float("nan"), -0.0, float("inf")])
    frame = _roundtrip({"op": "x"}, [x, b, nan, torch.empty(0, 3)])
    assert frame.header == {"op": "x"}
    got_x, got_b, got_nan, got_empty = frame.tensors
    assert torch.equal(got_x, x) and got_b.dtype == torch.bfloat16 and torch.equal(got_b, b)
    assert torch.equal(got_nan.view(torch.int32), nan.view(torch.int32))
    assert got_empty.shape == (0, 3)


def test_channel_tensors_share_the_payload_they_were_read_into() -> None:
    """A frame's tensors are views of the payload ``recv`` read (no second copy of an
    upstream-sized reply); one whose bytes do not sit at its dtype's alignment (a float32
    after three int8 bytes) is copied out and keeps its values."""
    small = torch.tensor([1, 2, 3], dtype=torch.int8)
    x = torch.arange(6, dtype=torch.float32)
    head = json.dumps(
        {
            "tensors": [
                {"dtype": "int8", "shape": [3], "nbytes": 3},
                {"dtype": "float32", "shape": [6], "nbytes": 24},
                {"dtype": "float32", "shape": [6], "nbytes": 24},
            ]
        }
    ).encode()
    payload = bytearray(bytes(small.numpy()) + bytes(x.numpy()) + bytes(x.numpy()))
    frame = channel.decode(head, memoryview(payload))
    got_small, misaligned, _ = frame.tensors
    assert torch.equal(got_small, small) and torch.equal(misaligned, x)
    aligned_payload = bytearray(bytes(x.numpy()) + bytes(small.numpy()))
    head2 = json.dumps(
        {
            "tensors": [
                {"dtype": "float32", "shape": [6], "nbytes": 24},
                {"dtype": "int8", "shape": [3], "nbytes": 3},
            ]
        }
    ).encode()
    shared, _ = channel.decode(head2, memoryview(aligned_payload)).tensors
    aligned_payload[0:4] = bytes(torch.tensor([42.0]).numpy())
    assert float(shared[0]) == 42.0  # the tensor is the payload's own bytes
    assert torch.equal(shared[1:], x[1:])


def test_a_large_frame_arrives_whole_in_unzeroed_memory_its_tensors_share() -> None:
    """A payload of at least ``UNZEROED_BYTES`` is read into a ``torch.empty`` buffer (no
    zero-filling pass): it arrives whole through a real pipe, across several reads, and the
    decoded tensor is a view of that buffer."""
    big = torch.randn((channel.UNZEROED_BYTES * 3) // 4 + 5)
    read_fd, write_fd = channel.pipe()
    unused_r, unused_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the sender: a worker's blocking end
        os.close(read_fd)
        channel.BlockingEnd(unused_r, write_fd).send({"n": 1}, [big])
        os._exit(0)
    os.close(write_fd)
    end = channel.ParentEnd(unused_w, read_fd)
    try:
        import time

        frame = end.recv(time.monotonic() + 60, lambda: None, 1 << 30)
    finally:
        os.waitpid(pid, 0)
        end.close()
        os.close(unused_r)
    (got,) = frame.tensors
    assert frame.header["n"] == 1 and torch.equal(got, big)
    assert got.untyped_storage().nbytes() >= channel.UNZEROED_BYTES  # the payload's buffer
    view = channel.receive_buffer(channel.UNZEROED_BYTES)
    assert not view.readonly and view.nbytes == channel.UNZEROED_BYTES
    assert isinstance(channel.receive_buffer(10).obj, bytearray)  # small parts: as before


def _in_flight(write_fd: int) -> int:
    """How many bytes a pipe takes with nobody reading (a non-blocking writer's count)."""
    os.set_blocking(write_fd, False)
    block = b"x" * (64 << 10)
    total = 0
    try:
        while total < 8 * channel.PIPE_BYTES:
            total += os.write(write_fd, block)
    except BlockingIOError:
        pass
    return total


def test_channel_pipe_holds_a_megabyte_in_flight() -> None:
    """A worker's channel pipe takes ``PIPE_BYTES`` before the writer must wait (Linux's
    default takes 64 KiB: a 6 GB tensor was 100,000 wake-ups each way); where the system
    refuses the size, the pipe still works at the default."""
    limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    plain = os.pipe()
    roomy = channel.pipe()
    try:
        assert _in_flight(plain[1]) <= 64 << 10
        assert _in_flight(roomy[1]) == min(channel.PIPE_BYTES, max(limit, 64 << 10))
    finally:
        for fd in (*plain, *roomy):
            os.close(fd)


def test_a_tree_leaves_out_the_tensors_its_sender_found_unchanged() -> None:
    """``pack_tree(..., unchanged=)``: a tensor the predicate accepts travels as a ``same``
    node (its description kept, no bytes) and unpacks as ``UNCHANGED``, in its place."""
    x, y = torch.arange(4.0), torch.ones(3)
    tensors: list[torch.Tensor] = []
    tree = channel.pack_tree(
        (x, {"b": y, "n": 3}), tensors, describe=lambda t: {"shape": list(t.shape)},
        unchanged=lambda t: t is x,
    )  # fmt: skip
    assert len(tensors) == 1 and tensors[0] is y
    first, rest = channel.unpack_tree(tree, tensors)
    assert first is channel.UNCHANGED and rest["b"] is y and rest["n"] == 3
    assert tree["tuple"][0] == {"same": True, "shape": [4]}


def test_an_input_is_unchanged_only_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.worker import calltensors
    from harness.worker.calltensors import unchanged_since_sent

    source = torch.tensor([0.0, float("nan"), 1.5])
    assert unchanged_since_sent(source.clone(), source)
    assert not unchanged_since_sent(torch.tensor([-0.0, float("nan"), 1.5]), source)
    assert not unchanged_since_sent(source.clone().to(torch.float64), source)
    assert not unchanged_since_sent(source.clone()[:2], source)
    assert not unchanged_since_sent(torch.nn.Parameter(source.clone()), source)
    strided = torch.empty(3, 2)[:, 0]
    strided.copy_(source)
    assert unchanged_since_sent(strided, source)
    monkeypatch.setattr(calltensors, "COMPARE_CHUNK", 2)  # a change in the last chunk only
    long = torch.arange(7.0)
    changed = long.clone()
    changed[6] = 0.5
    assert unchanged_since_sent(long.clone(), long) and not unchanged_since_sent(changed, long)


def test_channel_rejects_unknown_dtypes_and_bad_sizes() -> None:
    with pytest.raises(channel.ChannelError, match="unknown dtype"):
        channel.tensor_from_bytes(b"\0" * 4, "pickle", [1])
    with pytest.raises(channel.ChannelError, match="announced"):
        channel.tensor_from_bytes(b"\0" * 3, "float32", [1])
    head = b'{"tensors": [{"dtype": "float32", "shape": [4], "nbytes": 16}]}'
    with pytest.raises(channel.ChannelError, match="past the end"):
        channel.decode(head, memoryview(b"\0" * 8))
    with pytest.raises(channel.ChannelError, match="not JSON"):
        channel.decode(b"\x80\x04pickle", memoryview(b""))


def test_tree_packing() -> None:
    tensors: list[torch.Tensor] = []
    tree = channel.pack_tree((torch.ones(2), [3, {"k": torch.zeros(1)}], None), tensors)
    value = channel.unpack_tree(tree, tensors)
    assert isinstance(value, tuple) and value[1][0] == 3 and value[2] is None
    assert len(channel.tree_leaves(tree)) == 2


# -- metrics -----------------------------------------------------------------------------


FP32 = Tolerance.for_dtype(torch.float32)


def test_exact_match_and_metrics() -> None:
    x = torch.randn(100)
    result = compare(x.clone(), x, FP32)
    assert (
        result.ok
        and result.max_abs == 0
        and math.isinf(result.psnr)
        and result.cossim == pytest.approx(1.0)
    )


def test_nan_never_passes_but_matching_nonfinite_does() -> None:
    expected = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    assert compare(expected.clone(), expected, FP32).ok
    got = expected.clone()
    got[0] = float("nan")
    result = compare(got, expected, FP32)
    assert not result.ok and result.nonfinite == 1 and "NaN/Inf" in result.reason
    got = expected.clone()
    got[2] = -float("inf")
    assert not compare(got, expected, FP32).ok


def test_worst_mismatch_indices() -> None:
    expected = torch.zeros(4, 5) + 1.0
    got = expected.clone()
    got[2, 3] = 5.0
    got[1, 1] = 1.5
    result = compare(got, expected, FP32)
    assert result.mismatches == 2
    assert result.worst[0] == {"index": [2, 3], "expected": 1.0, "got": 5.0, "abs_err": 4.0}
    assert result.worst[1]["index"] == [1, 1]


def test_fp32_tolerance_tells_a_bf16_computation_apart() -> None:
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 128, generator=gen), torch.randn(128, 32, generator=gen)
    expected = a @ b
    assert compare(a.double().matmul(b.double()).float(), expected, FP32).ok
    downgraded = (a.bfloat16() @ b.bfloat16()).float()
    assert not compare(downgraded, expected, FP32).ok


def test_low_precision_floors() -> None:
    bf16 = Tolerance.for_dtype(torch.bfloat16)
    assert bf16.min_psnr is not None and bf16.min_cossim is not None
    expected = torch.randn(1000).bfloat16()
    assert compare(expected.float().mul(1.004).bfloat16(), expected, bf16).ok  # ~1 ulp
    assert not compare(torch.zeros_like(expected), expected, bf16).ok


def test_problem_tolerance_override_by_dtype() -> None:
    from harness.problems.problem import Problem

    problem = Problem(
        "p",
        path=None,
        format="native",
        shapes=[{}],
        generate=None,
        reference=None,
        tolerance={"float32": {"atol": 1e-3}},
    )  # type: ignore[arg-type]
    assert problem.tolerance_for(torch.float32).atol == 1e-3
    assert problem.tolerance_for(torch.float16) == Tolerance.for_dtype(torch.float16)


# -- policy and static scan ----------------------------------------------------------------


def test_policy_expansion() -> None:
    policy = Policy.from_entries(["torch.matmul", "@", "F.linear", "aten::exp"])
    assert "torch.nn.functional.linear" in policy.calls and "numpy.matmul" in policy.calls
    assert {"aten::mm", "aten::addmm", "aten::exp"} <= policy.aten
    assert policy.matmul_operator and "__matmul__" in policy.functions
    assert policy.explain("aten::mm") == "torch.matmul"


MATMUL = Policy.from_entries(["matmul"])


@pytest.mark.parametrize(
    ("source", "rules"),
    [
        ("import torch\ndef custom_kernel(i):\n    return torch.matmul(*i)\n", {"P101"}),
        ("from torch import mm\ndef custom_kernel(i):\n    return mm(*i)\n", {"P101"}),
        ("def custom_kernel(i):\n    a, b = i\n    return a.matmul(b)\n", {"P101"}),
        ("import torch\ndef custom_kernel(i):\n    return getattr(torch, 'mm')(*i)\n", {"P101"}),
        ("import numpy as np\ndef custom_kernel(i):\n    return np.matmul(*i)\n", {"P101"}),
        (
            "def custom_kernel(i):\n    try:\n        return k(i)\n    except Exception:\n        return i[0] @ i[1]\n",
            {"P101", "P102"},
        ),
        (
            "import triton\nimport triton.language as tl\n@triton.jit\ndef k(a, b):\n    x = tl.dot(a, b)\n    y = a @ b\ndef custom_kernel(i):\n    return i\n",
            set(),
        ),
        ("def custom_kernel(i):\n    assert i[0].data_ptr() % 16 == 0\n    return i\n", set()),
        ("C = {}\ndef custom_kernel(i):\n    return C[id(i[0])]\n", {"P501"}),
        (
            "C = {}\ndef custom_kernel(i):\n    return C.get((i[0].data_ptr(), i[0]._version))\n",
            {"P501"},
        ),
        ("import functools\n@functools.lru_cache\ndef custom_kernel(i):\n    return i\n", {"P502"}),
        (
            "import torch\ntorch.allclose = lambda *a: True\ndef custom_kernel(i):\n    return i\n",
            {"P401"},
        ),
        (
            "import sys\nsys.modules['torch'] = None\ndef custom_kernel(i):\n    return i\n",
            {"P401"},
        ),
        (
            "import time\nsetattr(time, 'perf_counter', lambda: 0)\ndef custom_kernel(i):\n    return i\n",
            {"P401"},
        ),
        ("def custom_kernel(i):\n    return custom_kernel.__globals__\n", {"P402"}),
        (
            "import inspect\ndef custom_kernel(i):\n    return inspect.currentframe().f_back\n",
            {"P402"},
        ),
        ("import gc\ndef custom_kernel(i):\n    return i\n", {"P402"}),
        ("import threading\ndef custom_kernel(i):\n    return i\n", {"P301"}),
        ("import os\ndef custom_kernel(i):\n    os.system('ls')\n    return i\n", {"P302"}),
        ("import os\ndef custom_kernel(i):\n    os.write(3, b'x')\n    return i\n", {"P404"}),
        (
            "import os\ndef custom_kernel(i):\n    open(f'/proc/{os.getpid()}/mem', 'rb')\n    return i\n",
            {"P405"},
        ),
        (
            "def custom_kernel(i):\n    open('/'.join(['', 'proc', 'se' + 'lf', 'm' + 'em']))\n    return i\n",
            {"P405"},
        ),
        ("def custom_kernel(i):\n    exec('x = 1')\n    return i\n", {"P201"}),
        (
            "import base64\nexec(base64.b64decode(b'eA=='))\ndef custom_kernel(i):\n    return i\n",
            {"P201", "P202"},
        ),
        (
            "import subprocess\nsubprocess.run('pip install x', shell=True)\ndef custom_kernel(i):\n    return i\n",
            {"P203", "P301"},
        ),
        ("import torch\ndef custom_kernel(i):\n    return torch.load('ref.pt')\n", {"P601"}),
        ("import os\ndef custom_kernel(i):\n    os._exit(0)\n", {"P603"}),
        (
            "from torch.utils._python_dispatch import _pop_mode\ndef custom_kernel(i):\n    return i\n",
            {"P403"},
        ),
        (
            "from reference import ref_kernel\ndef custom_kernel(i):\n    return ref_kernel(i)\n",
            {"P103"},
        ),
    ],
)
def test_static_rules(source: str, rules: set[str]) -> None:
    result = scan(source, MATMUL)
    assert {f.rule for f in result.errors} == rules, [(f.rule, f.message) for f in result.findings]


def test_scan_reports_syntax_and_missing_entry_with_lines() -> None:
    syntax = scan("def custom_kernel(i)\n    return i\n", MATMUL)
    assert [(f.rule, f.line) for f in syntax.findings] == [("P001", 1)]
    missing = scan("def kernel(i):\n    return i\n", MATMUL)
    assert missing.errors[0].rule == "P002"
    model = scan("class ModelNew:\n    pass\n", MATMUL, entry="ModelNew", entry_kind="model")
    assert not model.errors


def test_every_spelling_of_a_memory_file_is_named(tmp_path: Path) -> None:
    import threading

    from harness.worker.guards import memory_file

    pid, tid = os.getpid(), threading.get_native_id()
    link = tmp_path / "data.bin"
    link.symlink_to("/proc/self/mem")
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        for path in (
            "/proc/self/mem",
            "//proc//self/./mem",
            f"/proc/{pid}/mem",
            f"/proc/self/task/{tid}/mem",
            "/proc/thread-self/mem",
            "/proc/self/root/proc/self/mem",
            b"/proc/self/mem",
            Path("/proc/self/mem"),
            "mem",  # relative to a directory descriptor on /proc/self
            "task/1/mem",
            "/dev/mem",
            os.path.relpath(link),  # a symlink reached by a relative path (an absolute
            # one of the candidate's is judged when it is made: its target above)
            fd,
            f"/dev/fd/{fd}",
            f"/proc/self/fd/{fd}",
        ):
            assert memory_file(path), path
    finally:
        os.close(fd)
    for path in ("/proc/self/maps", "/proc/self/status", str(tmp_path / "memo.txt"), 0, None):
        assert not memory_file(path), path


def test_the_guard_refuses_a_memory_file_by_every_route(tmp_path: Path) -> None:
    out = run_python(
        f"""
        import os, pathlib
        import numpy as np
        from harness.worker.guards import install_audit_guard

        work = {str(tmp_path)!r}
        guard = install_audit_guard(work)
        proc = os.open("/proc/self", os.O_RDONLY)  # before the guard is on
        routes = {{
            "open": lambda: open("/proc/self/mem", "rb", buffering=0),
            "os.open": lambda: os.open(f"/proc/{{os.getpid()}}/task/{{os.getpid()}}/mem", 0),
            "dir_fd": lambda: os.open("mem", os.O_RDONLY, dir_fd=proc),
            "pathlib": lambda: pathlib.Path("/proc/thread-self/mem").read_bytes(),
            "numpy": lambda: np.fromfile("/proc/self/mem", count=1),
            "symlink": lambda: os.symlink("/proc/self/mem", os.path.join(work, "x")),
        }}
        guard.activate()
        refused = []
        for name, route in routes.items():
            try:
                route()
            except PermissionError as exc:
                refused.append(name if "memory file" in str(exc) else str(exc))
        guard.deactivate()
        print(" ".join(refused))
        print({{v.kind for v in guard.take_violations()}})
        """
    )
    assert out.splitlines() == ["open os.open dir_fd pathlib numpy symlink", "{'memory'}"], out


def test_policy_scan_off_downgrades_policy_rules() -> None:
    result = scan(
        "import torch\ndef custom_kernel(i):\n    return torch.matmul(*i)\n",
        MATMUL,
        enforce_policy=False,
    )
    assert not result.errors and result.findings[0].severity == "warning"


# -- identity snapshot ---------------------------------------------------------------------


def test_identity_snapshot_names_the_patched_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("ck_fake_timer")

    def perf() -> float:
        return 1.0

    fake.perf = perf  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ck_fake_timer", fake)
    snap = IdentitySnapshot.take(extra_modules=["ck_fake_timer"])
    assert "ck_fake_timer.perf" not in snap.changed()
    monkeypatch.setattr(fake, "perf", lambda: 0.0)
    assert "ck_fake_timer.perf" in snap.changed()
    monkeypatch.setattr(fake, "perf", perf)
    perf.__code__ = (lambda: 0.0).__code__  # same object, new body
    assert "ck_fake_timer.perf" in snap.changed()
    monkeypatch.setitem(sys.modules, "ck_fake_timer", types.ModuleType("ck_fake_timer"))
    assert "sys.modules['ck_fake_timer']" in snap.changed()


# -- verdict -------------------------------------------------------------------------------


def _verdict(ok: bool) -> Verdict:
    rungs = [
        RungResult("pre-checks", True, metrics={"errors": 0, "warnings": 0}),
        RungResult(
            "correctness",
            ok,
            metrics={"max_abs": 3.1e-07, "rmse": 4.0e-08, "psnr": 142.1, "cossim": 1.0},
            reason="" if ok else "3 of 10 elements outside atol=1e-05 rtol=1e-05",
            details={"worst": [{"index": [i, 2], "expected": 1.0, "got": 2.0} for i in range(50)]},
        ),
    ]
    return Verdict(
        ok,
        "softmax",
        "native",
        "cand.py",
        "triton",
        "cpu",
        True,
        rungs,
        integrity=[f"finding {i}" for i in range(50)],
    )


def test_rung_line_format() -> None:
    line = _verdict(True).rungs[1].line()
    assert line == "[correctness] ok  max_abs=3.1e-07 rmse=4.0e-08 psnr=142.1 cossim=1.000000"


def test_verdict_json_roundtrip_and_feedback_bound() -> None:
    verdict = _verdict(False)
    doc = verdict.to_json()
    assert doc["type"] == "verdict" and doc["failed_rung"] == "correctness"
    again = Verdict.from_json(doc)
    assert again.to_json() == doc
    text = verdict.feedback()
    assert len(text.splitlines()) <= 40
    assert "[0, 2]: expected 1 got 2" in text
    assert _verdict(True).feedback().startswith("PASSED")


def test_a_large_outputs_digest_reads_blocks_and_still_tells_outputs_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``DIGEST_WHOLE_BYTES`` the stale-result digest reads spaced blocks (hashing a
    6 GB output took 7 s a trial): the same bytes give the same digest; a change inside a
    block, or a different length, another."""
    from harness.rungs import correctness
    from harness.rungs.checks import OutputLeaf

    monkeypatch.setattr(correctness, "DIGEST_WHOLE_BYTES", 1024)
    monkeypatch.setattr(correctness, "DIGEST_BLOCKS", 4)
    monkeypatch.setattr(correctness, "DIGEST_BLOCK_BYTES", 64)

    def digest(t: torch.Tensor) -> list[bytes]:
        return correctness.output_digest(OutputLeaf(tensor=t, kind="tensor", meta={}))

    x = torch.arange(4096, dtype=torch.float32)
    assert digest(x) == digest(x.clone())
    y = x.clone()
    y[0] = -1.0  # inside the first block
    assert digest(y) != digest(x)
    assert digest(x[:-1]) != digest(x)
