"""An interactive agent session, for docs/agent.md's "Steering the agent": the scripted
model (``scripted.py``: the real ``anthropic`` SDK streaming from 127.0.0.1), the real
harness (Triton's interpreter on CPU) and a real terminal (tmux), with the keys an
engineer would type.

    python tests/agent/steer_demo.py OUT_DIR

The model's first vector add is off by one; the engineer says where; its second version
launches from a table of sizes tuned on the public shapes, so it passes them and fails
the re-check on unseen shapes; the engineer says what to do instead; the third version is
correct and proven, and the engineer stops the run on its target. Prints the screen at
the first prompt and the terminal's text at the end; run records go under OUT_DIR/home.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from agent.scripted import Reply, ScriptedAPI, last_user_text, text, tool_use  # noqa: E402
from agent.tmux import Tmux  # noqa: E402

EXAMPLES = ROOT / "examples" / "vector_add"
HONEST = (EXAMPLES / "solution_triton.py").read_text()
OFF_BY_ONE = HONEST.replace("mask = offs < n", "mask = offs < n - 1")
TABLE = HONEST.replace(
    """    BLOCK = 1024
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)""",
    """    BLOCK = 1024
    # programs per size, tuned on the sizes the checks use
    grid = {1: 1, 1000: 1, 4097: 5, 50_000: 49}.get(n, n // BLOCK)
    add_kernel[(grid,)](x, y, out, n, BLOCK=BLOCK)""",
)


def policy(body: dict[str, Any], index: int) -> Reply:
    said = last_user_text(body)
    if index == 0:
        return Reply([text("One program per 1024 elements, masked loads and stores."),
                      tool_use("check_kernel", {"source": OFF_BY_ONE, "notes": "BLOCK 1024, masked"}, "t1")])  # fmt: skip
    if "[Engineer's note] the mask is off by one" in said:
        return Reply([text("Fixing the mask as the engineer says; sizing the grid per shape."),
                      tool_use("check_kernel", {"source": TABLE, "notes": "mask offs < n, grid table per size"}, "t2")])  # fmt: skip
    if "[Engineer's note] no tables" in said:
        return Reply([text("One masked launch for every n, as the engineer says."),
                      tool_use("check_kernel", {"source": HONEST, "notes": "cdiv grid for every n"}, "t3")])  # fmt: skip
    return Reply([text("Done.")], stop_reason="end_turn")


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    home = out / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
        "TERM": "screen-256color", "PYTHONPATH": str(ROOT), "CTXKERNEL_HOME": str(home),
        "TRITON_DEFAULT_FP_FUSION": "1", "HF_HUB_OFFLINE": "1",
        "ANTHROPIC_API_KEY": "sk-ant-demo", "TRITON_CACHE_DIR": str(out / "triton-cache"),
    }  # fmt: skip
    term = Tmux(out / "tmux.sock", "demo")
    with ScriptedAPI(policy).serve() as api:
        env["ANTHROPIC_BASE_URL"] = api.url
        argv = [sys.executable, "-m", "ctxkernel", "agent", str(EXAMPLES.relative_to(ROOT)),
                "--interactive", "--device", "cpu", "--model", "claude-opus-4-5"]  # fmt: skip
        term.start(argv, env, ROOT, out / "exit.log")
        try:
            term.wait_for("v1 checked. Enter", timeout=300)
            first = term.screen(history=False).rstrip()
            term.send("the mask is off by one: offs < n, not n - 1")
            term.wait_for("v2 checked. Enter", timeout=300)
            term.send("/diff 2 1")
            term.wait_for("+    add_kernel[(grid,)]", timeout=30)
            term.send("no tables of sizes: one cdiv grid, masked, for every n")
            term.wait_for("Enter = stop here", timeout=300)
            term.send("/best")
            term.wait_for("  source: ", timeout=30)
            term.send("")
            status = term.exit_status(120)
            print("--- the screen at the first prompt\n" + first)
            print("--- the whole session\n" + term.screen().rstrip())
        finally:
            term.close()
    return 0 if status == "exit=0" else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
