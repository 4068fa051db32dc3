"""The fused list's last shaping, before the cut at k: hits of one file whose lines touch
are merged into the better-ranked one (``merge_adjacent``), and where set, a file's
further hits wait behind the other files' (``spread``)."""

from __future__ import annotations

from .corpus import Chunk, Hit

REGION_GAP = 0  # lines between two hits of one file that make them one region
MAX_PER_FILE = 0  # hits of one file before the rest of that file waits (0: no limit)


def spread(hits: list[Hit]) -> list[Hit]:
    """One hit per file region: a hit within ``REGION_GAP`` lines of a better one of its
    file, or past the ``MAX_PER_FILE``-th of its file, moves behind the other files'
    hits (in its order), so neighbouring chunks of one file do not fill the slots."""
    if not REGION_GAP and not MAX_PER_FILE:
        return hits
    first: list[Hit] = []
    later: list[Hit] = []
    per_file: dict[tuple[str, str], list[Hit]] = {}
    for hit in hits:
        c = hit.chunk
        kept = per_file.setdefault((c.corpus, c.path), [])
        near = any(
            c.start_line <= k.chunk.end_line + REGION_GAP
            and k.chunk.start_line <= c.end_line + REGION_GAP
            for k in kept
        )
        if (REGION_GAP and near) or (MAX_PER_FILE and len(kept) >= MAX_PER_FILE):
            later.append(hit)
        else:
            kept.append(hit)
            first.append(hit)
    return first + later


def merge_adjacent(hits: list[Hit]) -> list[Hit]:
    """Fold hits of one file whose line ranges touch or overlap into the better-ranked one."""
    out: list[Hit] = []
    for hit in hits:
        c = hit.chunk
        for kept in out:
            k = kept.chunk
            if (
                k.corpus == c.corpus
                and k.path == c.path
                and c.start_line <= k.end_line + 1
                and k.start_line <= c.end_line + 1
            ):
                if c.start_line >= k.start_line and c.end_line <= k.end_line:
                    break  # already covered
                first, second = (k, c) if k.start_line <= c.start_line else (c, k)
                if second.start_line > first.end_line:
                    merged_text = first.text + "\n" + second.text
                else:  # overlapping: the second's lines past the first's end follow it
                    tail = second.text.splitlines()[first.end_line - second.start_line + 1 :]
                    merged_text = "\n".join([first.text, *tail]) if tail else first.text
                kept.chunk = Chunk(
                    **{
                        **k.__dict__,
                        "start_line": first.start_line,
                        "end_line": max(first.end_line, second.end_line),
                        "text": merged_text,
                        "url": _relink(
                            k.url, first.start_line, max(first.end_line, second.end_line)
                        ),
                    }
                )
                kept.extra.setdefault("merged", []).append(c.id)
                break
        else:
            out.append(hit)
    return out


def _relink(url: str, start: int, end: int) -> str:
    if "#L" in url:
        return url.split("#L")[0] + f"#L{start}-L{end}"
    return url
