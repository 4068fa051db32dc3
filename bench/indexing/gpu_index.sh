#!/usr/bin/env bash
# Time a full cold cutlass index with MiniLM on the GPU (fp16, large batches), on a machine
# with torch + CUDA, sentence-transformers, transformers, tokenizers and numpy and nothing
# fetched. Needs the carry folder bench/indexing/prepare_gpu_index.sh builds (.gpu-index/).
#
#   bench/indexing/gpu_index.sh            # from the repo root; results under $OUT (or ./gpu-index-out)
#
# Prints the index report and writes gpu_index.json: wall seconds, stages, texts embedded
# per second, the GPU, torch and CUDA versions. Runs the index twice on fresh stores (the
# first pays CUDA start-up and kernel selection) and reports both.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=${CARRY:-$ROOT/.gpu-index}
RESULTS=${OUT:-$ROOT/gpu-index-out}
PY=${PY:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$RESULTS" "$WORK/cutlass"
test -f "$CARRY/cutlass.tar.xz" || { echo "error: no $CARRY/cutlass.tar.xz (run bench/indexing/prepare_gpu_index.sh here first)" >&2; exit 2; }
tar -xJf "$CARRY/cutlass.tar.xz" -C "$WORK/cutlass"
WHEELS=$(ls "$CARRY"/wheels/*.whl | tr '\n' ':')
export PYTHONPATH="$ROOT:${WHEELS%:}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PY" "$ROOT/bench/indexing/gpu_index.py" --source "dir:$WORK/cutlass" --model "$CARRY/model/all-MiniLM-L6-v2" \
    --work "$WORK" --out "$RESULTS/gpu_index.json" --manifest "$CARRY/MANIFEST"
# the gpu-marked embedder test (fp16, large batches, vectors as on the CPU); RUN_GPU_TEST=0 skips it
if [ "${RUN_GPU_TEST:-1}" = 1 ]; then
    CTXKERNEL_EMBED_MODEL="$CARRY/model/all-MiniLM-L6-v2" "$PY" -m pytest -q -p no:cacheprovider -m gpu \
        "$ROOT/tests/retrieval/test_embedder_switch.py" 2>&1 | tail -5
fi
