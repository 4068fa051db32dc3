"""The ``related`` tool: from any hit id, what the concept links connect to it — the PTX
section it implements, the other wrappers of the same instruction, its callers and
sibling examples (``ctxkernel/related.py``), under the token budget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.optionspec import from_tool, tool_schema

from ..queries import RelatedQuery
from ..related import render_related
from ..render import counted
from .base import Budget, Tool
from .retrieval import _safe_ref

if TYPE_CHECKING:
    from ..workspace import Workspace


def _related(ws: Workspace, args: dict[str, Any]) -> str:
    query = from_tool(RelatedQuery, args)
    _safe_ref(query.ref.strip())
    lines = render_related(query.run(ws))
    budget = Budget(query.max_tokens)
    shown = budget.add_lines(lines)
    if shown < len(lines):
        return budget.render(f"{counted(len(lines) - shown, 'line')} not shown; raise max_tokens")
    return budget.render()


RELATED = Tool(
    name="related",
    description="""\
From any hit id (as search, grep and docs print it), what is connected to it across the \
corpora: the PTX section it implements (for a CuTe atom, a CuTeDSL op, a Gluon \
intrinsic), the other wrappers of the same instruction, the code that calls it and \
sibling examples that use the same instruction. Use it after finding one piece (an atom, \
a section, an example) to get its documentation and a working example.

Returns the hit's concepts (PTX names) and the linked ids grouped by relation, each \
with its corpus group, required architecture and upstream URL. Pass arch (sm_90) to drop \
what the target cannot run.

Examples: {"ref": "cutlass:include/cute/arch/mma_sm90_gmma.hpp:128-172"}; \
{"ref": "triton:python/triton/experimental/gluon/language/nvidia/hopper/__init__.py:105-151", \
"arch": "sm_90"}""",
    input_schema=tool_schema(RelatedQuery),
    handler=_related,
)
