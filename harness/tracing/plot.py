"""A PNG of a Chrome trace timeline: sections as coloured bars, one row per warp (or CTA).

Reads any Chrome trace with complete events (``ph: "X"``) -- the harness's own
``*.trace.json`` and Proton's ``*.chrome_trace`` alike. Rows are (process, thread)
pairs in process order; beyond ``max_rows`` an even sample is drawn (the title says
so). matplotlib is imported here, lazily, with the Agg backend: no display needed.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from .proton import load_chrome_events

MAX_ROWS = 64


def _lanes(
    events: list[dict[str, Any]],
) -> tuple[dict[tuple[str, str], list[tuple[float, float, str]]], dict[tuple[str, str], str]]:
    names: dict[tuple[str, str], str] = {}
    sort_index: dict[str, float] = {}
    lanes: dict[tuple[str, str], list[tuple[float, float, str]]] = defaultdict(list)
    for e in events:
        if not isinstance(e, dict):
            continue
        pid, tid = str(e.get("pid", "")), str(e.get("tid", ""))
        if e.get("ph") == "M":
            args = e.get("args") or {}
            if e.get("name") == "process_name":
                names[(pid, "")] = str(args.get("name", pid))
            elif e.get("name") == "thread_name":
                names[(pid, tid)] = str(args.get("name", tid))
            elif e.get("name") == "process_sort_index":
                sort_index[pid] = float(args.get("sort_index", 0))
            continue
        if e.get("ph") != "X" or e.get("cat") in ("call_path", "flow"):
            continue
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        lanes[(pid, tid)].append((ts, dur, str(e.get("name", "?"))))

    def order(key: tuple[str, str]) -> tuple[Any, ...]:
        pid, tid = key
        return (sort_index.get(pid, 0.0), _natural(pid), _natural(tid))

    ordered = dict(sorted(lanes.items(), key=lambda kv: order(kv[0])))
    labels = {
        key: f"{names.get((key[0], ''), key[0])} / {names.get(key, key[1])}" for key in ordered
    }
    return ordered, labels


def _natural(text: str) -> tuple[Any, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def plot_timeline(
    source: str | Path | dict[str, Any] | list[Any],
    output: str | Path,
    title: str | None = None,
    width_px: int = 1400,
    height_px: int | None = None,
    max_rows: int = MAX_ROWS,
    dpi: int = 100,
) -> Path:
    """Render ``source`` (a path or a parsed Chrome trace) to ``output`` (PNG); returns it.
    ``height_px`` defaults to what the rows need (at least 400 px)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    doc: Any = source
    if isinstance(source, (str, Path)):
        import json

        text = Path(source).read_text()
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = source  # one document per line: load_chrome_events reads it
    events = load_chrome_events(doc)
    lanes, labels = _lanes(events)
    if not lanes:
        raise ValueError("the trace holds no complete ('X') events to draw")
    keys = list(lanes)
    sampled = len(keys) > max_rows
    if sampled:
        step = len(keys) / max_rows
        keys = [keys[int(i * step)] for i in range(max_rows)]
    sections: list[str] = []
    for key in keys:
        for _, _, name in lanes[key]:
            if name not in sections:
                sections.append(name)
    cmap = plt.get_cmap("tab10" if len(sections) <= 10 else "tab20")
    colours = {name: cmap(i % cmap.N) for i, name in enumerate(sections)}
    rows = len(keys)
    height = height_px or max(400, 120 + 18 * rows)
    fig = plt.figure(figsize=(width_px / dpi, height / dpi), dpi=dpi)
    ax = fig.add_axes((0.16, 0.08, 0.68, 0.84))
    t0 = min(ts for key in keys for ts, _, _ in lanes[key])
    for row, key in enumerate(keys):
        by_name: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for ts, dur, name in lanes[key]:
            by_name[name].append((ts - t0, max(dur, 1e-6)))
        for name, bars in by_name.items():
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colours[name], linewidth=0)
    ax.set_ylim(-0.6, rows - 0.4)
    ax.invert_yaxis()
    tick_every = max(1, rows // 32)
    ax.set_yticks(range(0, rows, tick_every))
    ax.set_yticklabels([labels[keys[i]] for i in range(0, rows, tick_every)], fontsize=7)
    ax.set_xlabel("time (µs from the first record)")
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    other = doc.get("otherData", {}).get("ctxkernel", {}) if isinstance(doc, dict) else {}
    head = title or "intra-kernel trace"
    summary = other.get("summary") or {}
    if summary.get("sentence"):
        head += f"\n{summary['sentence']}"
    if sampled:
        head += f"\n({rows} of {len(lanes)} rows shown, evenly sampled)"
    ax.set_title(head, fontsize=9)
    handles = [Patch(facecolor=colours[n], label=n) for n in sections]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out
