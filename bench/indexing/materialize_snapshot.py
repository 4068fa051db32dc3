"""Turn a partial git snapshot (a bare repo whose largest blobs are absent, as the tool
library's `fetch` brings them) into a complete local git repository at its HEAD tree,
leaving out the absent files. The benchmarks index that repository with --source.

usage: python bench/indexing/materialize_snapshot.py SNAPSHOT_GIT_DIR OUT_DIR [SUBDIR]

With SUBDIR, only that folder of the snapshot is written, as the new repository's root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main(src: str, out: str, subdir: str = "") -> None:
    src_dir, out_dir = Path(src), Path(out)
    head = subprocess.run(
        ["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    prefix = subdir.strip("/") + "/" if subdir else ""
    tree = f"HEAD:{subdir.strip('/')}" if subdir else "HEAD"
    listing = subprocess.run(
        ["git", "-C", src, "ls-tree", "-r", "-z", tree], capture_output=True, check=True
    ).stdout
    entries = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        meta, path = raw.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob":
            entries.append((mode.decode(), sha.decode(), path.decode()))
    batch = subprocess.Popen(
        ["git", "-C", str(src_dir), "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert batch.stdin and batch.stdout
    missing = 0
    del prefix  # paths from `ls-tree HEAD:sub` are already relative to sub
    for mode, sha, path in entries:
        batch.stdin.write(sha.encode() + b"\n")
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            missing += 1
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        target = out_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            target.symlink_to(data.decode())
        else:
            target.write_bytes(data)
    batch.stdin.close()
    batch.wait()
    env_args = ["-c", "user.name=ctxkernel-bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(out_dir)], check=True)
    subprocess.run(["git", "-C", str(out_dir), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(out_dir), *env_args, "commit", "-q", "-m", f"snapshot of {head}"],
        check=True,
    )
    print(
        f"{len(entries) - missing} files written, {missing} absent from the snapshot; upstream HEAD {head}"
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
