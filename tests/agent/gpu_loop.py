"""The agent loop on a GPU, without the network: a scripted model (a stand-in for the
SDK client, so this runs where ``anthropic`` is not installed) submits a wrong vector add,
then the honest one; the real harness benchmarks it and the loop must stop on the
roofline target, not on "correct".

    python tests/agent/gpu_loop.py OUT_DIR [--target 0.5] [--samples 1]

Prints the run's summary as JSON and exits 0 when the stop is ``target`` with a measured
percent of roofline. Run records go under OUT_DIR/home (CTXKERNEL_HOME).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _stub_jsonschema() -> None:
    """Tool schemas are validated with jsonschema; a bare GPU machine may not have it."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        stub = types.ModuleType("jsonschema")

        class Validator:
            def __init__(self, schema: dict[str, Any]) -> None:
                self.schema = schema

            @staticmethod
            def check_schema(schema: dict[str, Any]) -> None:
                return None

            def iter_errors(self, args: dict[str, Any]) -> list[Any]:
                return []

        stub.Draft202012Validator = Validator  # type: ignore[attr-defined]
        stub.SchemaError = Exception  # type: ignore[attr-defined]
        sys.modules["jsonschema"] = stub
        print("note: jsonschema missing here; tool inputs are not schema-checked", file=sys.stderr)


class ScriptedSDK:
    """What ModelClient needs of ``anthropic.Anthropic``: ``messages.stream(**params)``."""

    api_key = "not-a-key"

    def __init__(self, wrong: str, honest: str) -> None:
        self.wrong, self.honest, self.calls = wrong, honest, 0
        self.messages = self

    def stream(self, **params: Any) -> Any:
        self.calls += 1
        source = self.wrong if len(params["messages"]) == 1 else self.honest
        block = SimpleNamespace(type="tool_use", id=f"toolu_{self.calls}", name="check_kernel",
                                input={"source": source, "notes": f"call {self.calls}"})  # fmt: skip
        usage = SimpleNamespace(input_tokens=1000, output_tokens=200,
                                cache_read_input_tokens=0, cache_creation_input_tokens=0)  # fmt: skip
        message = SimpleNamespace(id=f"msg_{self.calls}", model=params["model"], content=[block],
                                  stop_reason="tool_use", usage=usage)  # fmt: skip

        class Stream:
            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: Any) -> None:
                return None

            def get_final_message(self) -> Any:
                return message

        return Stream()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--target", type=float, default=0.5)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--runner", default=None)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    os.environ["CTXKERNEL_HOME"] = str(args.out / "home")
    _stub_jsonschema()

    from ctxkernel.agent import Agent, AgentConfig, ModelClient, ModelSettings
    from ctxkernel.tools import ToolSet

    examples = ROOT / "examples" / "vector_add"
    sdk = ScriptedSDK(
        (examples / "bad" / "off_by_one.py").read_text(),
        (examples / "solution_triton.py").read_text(),
    )
    client = ModelClient(ModelSettings(model="claude-sonnet-5-5"), sdk=sdk)
    config = AgentConfig(problem=str(examples), device=args.device, target=args.target,
                         max_iters=4, samples=args.samples, runner=args.runner)  # fmt: skip
    events: list[dict[str, Any]] = []
    toolset = ToolSet(lambda: None, tools=[])  # type: ignore[arg-type,return-value]
    result = Agent.start(config, client, toolset=toolset, on_event=events.append).run()
    for e in events:
        if e["type"] == "version":
            print(f"v{e['version']}: {e['headline']}", file=sys.stderr)
    print(json.dumps(result.summary, indent=2))
    best = result.best or {}
    ok = result.summary["stop_reason"] == "target" and isinstance(best.get("roofline"), float)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
