"""Rendering links for search and docs: a few per group and one per file (``pick``), and
the "implemented by / used in" block, one heading per group and one line per link.
"""

from __future__ import annotations

from .. import arch as archmod
from ..render import counted
from .resolve import Link


def pick(links: list[Link], per_group: int = 3, per_file: int = 1) -> list[Link]:
    """At most ``per_group`` links of each group, ``per_file`` of each file: a header with
    eighty WGMMA atoms is one entry, not eighty."""
    shown: list[Link] = []
    groups: dict[str, int] = {}
    files: dict[tuple[str, str, str], int] = {}
    for link in links:
        fkey = (link.group, link.chunk.corpus, link.chunk.path)
        if groups.get(link.group, 0) >= per_group or files.get(fkey, 0) >= per_file:
            continue
        groups[link.group] = groups.get(link.group, 0) + 1
        files[fkey] = files.get(fkey, 0) + 1
        shown.append(link)
    return shown


def render_lines(links: list[Link], total: int | None = None, urls: bool = True) -> list[str]:
    """The "implemented by / used in" block: one heading per group, one line per link."""
    if not links:
        return []
    lines = ["implemented by / used in:"]
    group = None
    for link in links:
        if link.group != group:
            group = link.group
            lines.append(f"  {group}:")
        label = link.chunk.symbol or link.chunk.title or link.via
        arch = archmod.label(link.chunk)
        via = link.via.rsplit(":", 1)[-1]
        what = f"{link.role} {link.concept}" + (f" via {via}" if via and via != label else "")
        lines.append(
            f"    {link.chunk.id}  {label[:60]}  [{what}{', ' + arch if arch else ''}]"
            + (f"  {link.chunk.url}" if link.chunk.url and urls else "")
        )
    if total is not None and total > len(links):
        more = counted(total - len(links), "more link")
        lines.append(f"  ({more}; `ctxkernel related ID` for one hit's)")
    return lines
