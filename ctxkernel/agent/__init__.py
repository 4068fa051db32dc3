"""The agent loop: Claude drives the index (context) and the harness (ground truth)
from a first version to a kernel near the roofline.

Modules, one concept each:

- ``client``: Messages API calls with retries, usage and cost (:class:`ModelClient`)
- ``prompt``: the system prompt (problem, device, backend primer, rules)
- ``context``: prompt caching and trimming old turns
- ``check_tool``: the harness as a tool (``check_kernel``), concurrent evaluation
- ``loop``: the policy (rounds, samples, stops, resume) (:class:`Agent`)
- ``state``: what a run was asked and what its rounds leave behind
- ``recheck``: proving a best (fresh re-check on unseen shapes, side-by-side timing)
- ``steer``: the engineer's notes (``--note``, ``steer.md``, the console) and commands
- ``console``: the live view on a terminal and the interactive console
- ``runs``: run records under ``runs/agent/<run-id>/``
- ``plot``: the progress PNG

Names are imported on first use (``ctxkernel runs`` must not pay for torch or the SDK);
``anthropic`` is imported only when a call is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .check_tool import CheckSession, Outcome, evaluate, make_check_tool
    from .client import (
        DEFAULT_MODEL,
        APIFailure,
        ModelClient,
        ModelSettings,
        Price,
        RetryPolicy,
        Usage,
    )
    from .loop import Agent, run_agent
    from .runs import RunRecord, list_runs, resolve_run
    from .state import AgentConfig, RunResult
    from .steer import Steering

__all__ = [
    "DEFAULT_MODEL",
    "APIFailure",
    "Agent",
    "AgentConfig",
    "CheckSession",
    "ModelClient",
    "ModelSettings",
    "Outcome",
    "Price",
    "RetryPolicy",
    "RunRecord",
    "RunResult",
    "Steering",
    "Usage",
    "evaluate",
    "list_runs",
    "make_check_tool",
    "resolve_run",
    "run_agent",
]

_EXPORTS = {
    "CheckSession": "check_tool",
    "Outcome": "check_tool",
    "evaluate": "check_tool",
    "make_check_tool": "check_tool",
    "DEFAULT_MODEL": "client",
    "APIFailure": "client",
    "ModelClient": "client",
    "ModelSettings": "client",
    "Price": "client",
    "RetryPolicy": "client",
    "Usage": "client",
    "Agent": "loop",
    "AgentConfig": "state",
    "RunResult": "state",
    "run_agent": "loop",
    "RunRecord": "runs",
    "list_runs": "runs",
    "resolve_run": "runs",
    "Steering": "steer",
}


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module_name}", __name__), name)
