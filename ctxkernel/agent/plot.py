"""The progress plot of a run: time and percent of roofline per version, as a PNG.

Correct versions are points (the best-so-far line through them), failed versions are
crosses at the bottom of the time panel, the target is a dashed line on the roofline
panel, versions that overfit the public shapes are marked apart from the other failures,
and a dotted line after a version marks where the engineer's guidance arrived. On a device without timing (a CPU) the plot shows how far up the harness's
ladder each version got instead. matplotlib is imported here only, with the Agg backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError

LADDER = ["pre-checks", "compile", "run", "correctness", "anti-cheat"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise UserError("plotting needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_run(
    versions: Sequence[Mapping[str, Any]],
    out: Path,
    *,
    title: str = "",
    target: float | None = None,
    notes: Sequence[int] = (),
) -> Path:
    """Write the PNG for these version metas; returns its path. ``notes``: the version
    after which each note of the engineer arrived (0: before the first)."""
    plt = _pyplot()
    timed = [v for v in versions if v.get("ok") and isinstance(v.get("time_us"), (int, float))]
    roof = [v for v in versions if v.get("ok") and isinstance(v.get("roofline"), (int, float))]
    xs = [int(v["version"]) for v in versions]
    if timed or roof:
        fig, (ax_t, ax_r) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        _time_panel(ax_t, versions, timed)
        _roofline_panel(ax_r, roof, target)
        ax_r.set_xlabel("version")
    else:
        fig, ax = plt.subplots(1, 1, figsize=(8, 3.5))
        levels = [int(v.get("level") or 0) for v in versions]
        colors = ["tab:green" if v.get("ok") else "tab:red" for v in versions]
        ax.bar(xs, levels, color=colors)
        ax.set_yticks(range(len(LADDER) + 1), ["none", *LADDER])
        ax.set_ylabel("rungs passed")
        ax.set_xlabel("version")
        ax.set_title("no timing on this device: ladder progress per version", fontsize=9)
    _note_marks(fig.axes, notes)
    if xs:
        fig.axes[-1].set_xticks(xs)
    fig.suptitle(title or "agent run")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _note_marks(axes: Sequence[Any], notes: Sequence[int]) -> None:
    """A dotted line between version n and n+1 where guidance arrived after version n."""
    for i, after in enumerate(sorted(set(notes))):
        for ax in axes:
            ax.axvline(after + 0.5, linestyle=":", color="tab:orange",
                       label="engineer's note" if i == 0 and ax is axes[0] else None)  # fmt: skip
        axes[0].annotate("note", (after + 0.5, 1.0), xycoords=("data", "axes fraction"),
                         fontsize=7, color="tab:orange", ha="center", va="bottom")  # fmt: skip
    if notes:
        axes[0].legend(fontsize=8)


def _time_panel(
    ax: Any, versions: Sequence[Mapping[str, Any]], timed: list[Mapping[str, Any]]
) -> None:
    if timed:
        xs = [v["version"] for v in timed]
        ys = [v["time_us"] for v in timed]
        ax.plot(xs, ys, "o", color="tab:blue", label="correct version")
        best, running = [], float("inf")
        for y in ys:
            running = min(running, y)
            best.append(running)
        ax.step(xs, best, where="post", color="tab:blue", alpha=0.5, label="best so far")
        if max(ys) > 20 * min(ys) > 0:  # a log axis only when times span decades
            ax.set_yscale("log")
    failed = [v["version"] for v in versions if not v.get("ok") and not v.get("overfit")]
    overfit = [v["version"] for v in versions if v.get("overfit")]
    low = min((v["time_us"] for v in timed), default=1.0)
    if failed:
        ax.plot(failed, [low] * len(failed), "x", color="tab:red", label="failed")
    if overfit:
        ax.plot(overfit, [low] * len(overfit), "D", color="tab:red", mfc="none",
                label="overfit (failed unseen shapes)")  # fmt: skip
    ax.set_ylabel("time (us)")
    ax.legend(fontsize=8)


def _roofline_panel(ax: Any, roof: list[Mapping[str, Any]], target: float | None) -> None:
    if roof:
        ax.plot([v["version"] for v in roof], [100 * v["roofline"] for v in roof], "o-",
                color="tab:purple")  # fmt: skip
    if target is not None:
        ax.axhline(100 * target, linestyle="--", color="gray", label=f"target {target:.0%}")
        ax.legend(fontsize=8)
    ax.set_ylabel("% of roofline")
    ax.set_ylim(0, 105)
