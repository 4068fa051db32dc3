#!/usr/bin/env bash
# Re-verify on the H200, in one device call, the GPU fixes of issues 13 and 18 made on the CPU:
#   1. pytest -m gpu on issue 18's GPU tests and the harness GPU tests (every honest GPU
#      candidate must pass anti-cheat again: torch._dynamo's rewrap, filelock's audit hook);
#   2. the agent's gpu-marked recheck test (needs GitPython: carried in .whl-git);
#   3. bench/gpu/gpu_tilelang.py: the TileLang ladder on both examples, a wrong kernel, the
#      TileLang gpu tests (wheels carried in .whl-tl);
#   4. GPU MODE's own eval.py, unchanged, on conv2d_py's upstream "correct" file (our verdict
#      rejects it; does upstream's evaluator accept it on the same card?).
# Carry: .whl-tl .whl-git bench/.upstream. Results under $OUT; each step has a time limit.
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${OUT:-$PWD/gpu-verify-out}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 GIT_PYTHON_REFRESH=quiet
T0=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
  git log -1 --format='tree at %h %s' 2>/dev/null || true
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  for m in sentence_transformers transformers tokenizers chromadb numpy yaml; do
    python3 -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>/dev/null || echo "$m missing"
  done
} > "$OUT_DIR/env.txt" 2>&1
cat "$OUT_DIR/env.txt"

stamp "install carried wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gs .whl-git/*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-tl/*.whl > /dev/null 2>&1
tar -xJf .whl-tl/tilelang-content.tar.xz -C /tmp/site
stamp "installed"

stamp "1. issue 18 + harness gpu tests"
timeout -k 10 ${PYTEST_S:-240} python3 -m pytest -m gpu -q -p no:cacheprovider -rfE \
  tests/harness/test_gpu_issue18.py tests/harness/test_harness_gpu.py > "$OUT_DIR/pytest-gpu.log" 2>&1
echo "exit $?" >> "$OUT_DIR/pytest-gpu.log"; tail -30 "$OUT_DIR/pytest-gpu.log"

stamp "2. agent recheck gpu test"
PYTHONPATH=/tmp/gs timeout -k 10 ${AGENT_S:-90} python3 -m pytest -m gpu -q -p no:cacheprovider -rfE \
  tests/agent/test_recheck.py > "$OUT_DIR/pytest-agent.log" 2>&1
echo "exit $?" >> "$OUT_DIR/pytest-agent.log"; tail -8 "$OUT_DIR/pytest-agent.log"

stamp "3. TileLang"
mkdir -p "$OUT_DIR/tilelang"
PYTHONPATH=/tmp/site:$PWD timeout -k 10 ${TILELANG_S:-200} python3 bench/gpu/gpu_tilelang.py --out "$OUT_DIR/tilelang" \
  > "$OUT_DIR/tilelang/run.log" 2>&1
echo "exit $?" >> "$OUT_DIR/tilelang/run.log"; tail -25 "$OUT_DIR/tilelang/run.log"

stamp "4. upstream eval.py on conv2d_py"
P=bench/.upstream/reference-kernels/problems/pmpp_v2/conv2d_py
timeout -k 10 ${UPSTREAM_S:-60} python3 bench/gpu/gpumode_upstream_eval.py "$P" solutions/correct/ref.py submission.py \
  --out "$OUT_DIR/conv2d_upstream_eval.json" > "$OUT_DIR/conv2d_upstream_eval.log" 2>&1
echo "exit $?" >> "$OUT_DIR/conv2d_upstream_eval.log"; tail -40 "$OUT_DIR/conv2d_upstream_eval.log"
stamp "done"
rm -f "$OUT_DIR/tilelang/tilelang-dumps.tar.gz.tmp"
ls -la "$OUT_DIR" "$OUT_DIR/tilelang"
