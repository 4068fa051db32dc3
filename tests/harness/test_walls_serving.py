"""Bind and listen, refused to the candidate after the CUDA driver has served its own socket.

The CUDA driver binds and listens on an abstract Unix socket of its own as it starts
(``cuda-uvmfd-<netns>-<pid>``; with bind refused, ``cudaGetDeviceCount`` fails with error
304: seen on the H200, bench/RESULTS.md). So a worker's first filter leaves the two calls
out (``serving``) and the worker refuses them itself once CUDA is up, before the candidate
is imported (``seccomp.refuse_serving``). These tests hold that second filter to what the
first one did: every thread, every child, no way back.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_python

from harness.process import seccomp

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="no seccomp table here")

PROBE = """
import ctypes, errno, json, os, socket, subprocess, sys, threading
from harness.process import seccomp

def serve(tag):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(f"\\0ctxkernel-serving-test-{os.getpid()}-{tag}")
        s.listen(1)
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        s.close()

ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # no new privileges
seccomp.install(network=True, serving=SERVING)
out = {"first filter": serve("a")}
ready, go, seen = threading.Event(), threading.Event(), {}
def thread():
    ready.set()
    go.wait()
    seen["a thread started before"] = serve("t")
t = threading.Thread(target=thread)
t.start()
ready.wait()
seccomp.refuse_serving()
out["after"] = serve("b")
go.set()
t.join()
out.update(seen)
child = (
    "import socket, sys\\n"
    "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\\n"
    "try:\\n    s.bind('\\\\0ctxkernel-serving-test-child'); s.listen(1); print('ok')\\n"
    "except OSError as exc:\\n    print(exc.errno)\\n"
)
out["a child"] = subprocess.run([sys.executable, "-c", child], capture_output=True,
                                text=True).stdout.strip()
print(json.dumps(out))
"""


@pytest.mark.parametrize("serving", [True, False], ids=["left-to-the-worker", "first-filter"])
def test_refuse_serving_reaches_every_thread_and_child(serving: bool) -> None:
    out = json.loads(run_python(PROBE.replace("SERVING", str(serving)), timeout=60))
    assert out["first filter"] == ("ok" if serving else "EPERM"), out
    assert out["after"] == "EPERM", out
    assert out["a thread started before"] == "EPERM", out
    assert out["a child"] == "1", out  # EPERM


def test_worker_launch_defers_serving_to_the_worker() -> None:
    """The launcher's command line says so for a worker only; ``sandbox run`` of any other
    program keeps bind and listen in the first filter (in none mode, where no network
    namespace keeps an abstract name private, for CUDA too)."""
    from harness.process import sandbox

    worker = sandbox.command("none", ["python"], 5, writable="/w", serving_later=True)
    other = sandbox.command("none", ["python"], 5, writable="/w")
    assert "--serving-later" in worker[: worker.index("--")]
    assert "--serving-later" not in other
