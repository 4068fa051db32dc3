#!/usr/bin/env bash
# The sandbox's walls on a GPU machine, in one device call (about 8 minutes):
#   1. what a worker sees there (`sandbox run --explain --device cuda`), and a CUDA + Triton
#      program run through `sandbox run` (the GPU must work inside the walls);
#   2. the GPU tests of the harness (honest Triton, CuTeDSL, CUDA C++ examples and the GPU
#      cheats) and the wall tests, the CUDA C++ host-code escapes included, as root;
#   3. the wall tests and an honest GPU check again as an unprivileged user.
# Carry: .whl (CuTeDSL wheels, bench/prepare-cutedsl-wheels.sh). Results under $OUT.
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${OUT:-$PWD/gpu-walls-out}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 HF_HUB_OFFLINE=1
SITE=/tmp/ck-site
T0=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
{
  date -u +"%Y-%m-%d %H:%M:%S UTC"; uname -r; id
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  grep -E "Seccomp|NoNewPrivs" /proc/self/status
} > "$OUT_DIR/env.txt" 2>&1
cat "$OUT_DIR/env.txt"

if [ -d .whl ]; then
  stamp "install CuTeDSL"
  rm -rf $SITE && mkdir -p $SITE
  python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl/*.whl > /dev/null 2>&1
  tar -xJf .whl/cu13-content.tar.xz -C $SITE
  export PYTHONPATH="$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages"
fi

stamp "1. explain + a CUDA/Triton program inside the walls"
timeout -k 5 120 python3 -m ctxkernel sandbox run --device cuda --explain > "$OUT_DIR/explain.txt" 2>&1
echo "exit $?" >> "$OUT_DIR/explain.txt"; cat "$OUT_DIR/explain.txt"
cat > /tmp/ck_gpu_probe.py <<'EOF'
import torch, triton, triton.language as tl

@triton.jit
def add(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)

a = torch.randn(4096, 4096, device="cuda")
print("matmul", float((a @ a).sum()) != 0.0)
x, y = torch.randn(10000, device="cuda"), torch.randn(10000, device="cuda")
o = torch.empty_like(x)
add[(triton.cdiv(10000, 1024),)](x, y, o, 10000, B=1024)
print("triton add ok", bool(torch.allclose(o, x + y)))
EOF
timeout -k 5 180 python3 -m ctxkernel sandbox run --device cuda --backend triton --bind /tmp/ck_gpu_probe.py \
  -- python3 /tmp/ck_gpu_probe.py > "$OUT_DIR/probe.txt" 2>&1
echo "exit $?" >> "$OUT_DIR/probe.txt"; cat "$OUT_DIR/probe.txt"

stamp "2. GPU tests and wall tests, as root"
timeout -k 10 ${PYTEST_S:-330} python3 -m pytest -q -p no:cacheprovider -rfE \
  tests/harness/test_walls.py tests/harness/test_harness_gpu.py tests/harness/test_harness_sandbox.py \
  > "$OUT_DIR/pytest-root.log" 2>&1
echo "exit $?" >> "$OUT_DIR/pytest-root.log"; tail -25 "$OUT_DIR/pytest-root.log"

stamp "3. as an unprivileged user"
id ckuser >/dev/null 2>&1 || useradd -m ckuser
for d in "$PWD" "$SITE"; do p=$d; while [ "$p" != / ]; do chmod o+rx "$p" 2>/dev/null; p=$(dirname "$p"); done; done
chmod -R o+rX "$PWD" "$SITE" 2>/dev/null
runuser -u ckuser -- env PYTHONPATH="${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HOME=/home/ckuser \
  timeout -k 10 ${USER_S:-200} python3 -m pytest -q -p no:cacheprovider -rfE \
  tests/harness/test_walls.py tests/harness/test_harness_gpu.py -k "honest or wall or native or explain or host" \
  > "$OUT_DIR/pytest-user.log" 2>&1
echo "exit $?" >> "$OUT_DIR/pytest-user.log"; tail -25 "$OUT_DIR/pytest-user.log"
stamp "done"
