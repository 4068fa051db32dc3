#!/usr/bin/env bash
# GPU validation of the harness (issue 5): every acceptance check on one CUDA machine.
#
#   bench/gpu/gpu_validate.sh [OUT_DIR]        (default: $OUT, else ./gpu-validate-out)
#   STEPS="vector_add side_stream" bench/gpu/gpu_validate.sh   (only those steps; summary always)
#
# Works on a bare machine with no network: python3 with torch + triton, nvcc, ncu,
# cuobjdump. CuTeDSL is installed from the carried wheels in .whl/ (made by
# prepare-cutedsl-wheels.sh; see ../shared/device.md) into /tmp/ck-site.
# One failing step never stops the others. Phase A (no precise timing) runs in parallel:
# the CUDA C++ and CuTeDSL candidates through the whole ladder, the small-tile matmul
# dump, and `pytest -m "gpu and not slow" tests/harness` (the issue-4 GPU tests). Phase B
# runs alone on the GPU: vector add at n=2^28 (two timing runs, roofline, ncu), the
# side-stream cheat, the warpgroup-MMA bf16 matmul. The ceilings are measured first, alone.
# Writes to OUT_DIR (at most 8 files): summary.json, steps.log, pytest.log, env.txt,
# progress.log (each step's tail as it ends), ncu_vector_add.csv, dumps.tar.gz; prints a
# table last. DEADLINE (seconds, default 900) skips later steps so the summary is written.
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-$PWD/gpu-validate-out}}
WORK=$(mktemp -d /tmp/ck-validate.XXXXXX)
LOGS=$WORK/logs
mkdir -p "$OUT_DIR" "$LOGS"
: >"$OUT_DIR/progress.log"
PY=${PYTHON:-python3}
SITE=/tmp/ck-site
CUTE_PATH="$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
export CTXKERNEL_HOME=$WORK/home   # a fresh cache: the ceilings are measured in this run
STEPS=${STEPS:-"ceilings cuda cutedsl matmul_dump pytest vector_add side_stream matmul_wgmma"}
DEADLINE=${DEADLINE:-900}  # seconds: later steps are skipped past it, so the summary is always written
T0=$(date +%s)

want() {
  [[ " $STEPS " == *" $1 "* ]] || return 1
  if (( $(date +%s) - T0 > DEADLINE )); then echo "skip $1: past the ${DEADLINE}s deadline"; return 1; fi
}
run() {  # run NAME TIMEOUT_S CMD...: output to logs/NAME.log, exit status to logs/NAME.rc
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  echo "[+$(( start - T0 ))s] start $name"
  timeout --kill-after=15 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  echo "$rc" >"$LOGS/$name.rc"
  echo "[+$(( $(date +%s) - T0 ))s] end $name: exit $rc after $(( $(date +%s) - start )) s"
  { echo "===== $name (exit $rc, $(( $(date +%s) - start )) s) ====="; tail -c 4000 "$LOGS/$name.log"; } >>"$OUT_DIR/progress.log"
  return $rc
}

{
  date -u +"%Y-%m-%d %H:%M:%S UTC"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
  $PY -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)' 2>&1
  for tool in nvcc ncu cuobjdump nvdisasm ptxas; do echo "$tool: $(command -v $tool || echo missing)"; done
  ncu --version 2>&1 | tail -1
  $PY -c 'import pynvml; print("pynvml ok")' 2>&1 | tail -1
} >"$OUT_DIR/env.txt" 2>&1
cat "$OUT_DIR/env.txt"

# -- the ceilings, with the GPU to ourselves ---------------------------------------------------
want ceilings && run ceilings 120 $PY bench/gpu/gpu_checks.py ceilings --out "$WORK"

# -- phase A: pass/fail checks, in parallel ---------------------------------------------------
if want cuda; then run cuda 420 $PY bench/gpu/gpu_checks.py cuda --out "$WORK" & fi
if want cutedsl; then
  (
    run cutedsl_install 240 bash -c "
      set -e
      test -d .whl || { echo 'no .whl/: run prepare-cutedsl-wheels.sh where pip works, carry .whl'; exit 3; }
      rm -rf $SITE && mkdir -p $SITE
      $PY -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl/*.whl
      tar -xJf .whl/cu13-content.tar.xz -C $SITE
      PYTHONPATH=$CUTE_PATH $PY -c 'import cutlass.cute; print(\"cutlass.cute imports\")'
    " && run cutedsl 300 env PYTHONPATH="$CUTE_PATH${PYTHONPATH:+:$PYTHONPATH}" \
      $PY bench/gpu/gpu_checks.py cutedsl --out "$WORK"
  ) &
fi
if want matmul_dump; then run matmul_dump 240 $PY bench/gpu/gpu_checks.py matmul_dump --out "$WORK" & fi
if want pytest; then
  (
    run pytest 420 $PY -m pytest -q -p no:cacheprovider -m "gpu and not slow" tests/harness
    cp "$LOGS/pytest.rc" "$WORK/pytest.rc"
  ) &
fi
wait

# -- phase B: timing, one at a time -----------------------------------------------------------
want vector_add && run vector_add 240 $PY bench/gpu/gpu_checks.py vector_add --out "$WORK"
want side_stream && run side_stream 120 $PY bench/gpu/gpu_checks.py side_stream --out "$WORK"
want matmul_wgmma && run matmul_wgmma 200 $PY bench/gpu/gpu_checks.py matmul_wgmma --out "$WORK"

# -- results ----------------------------------------------------------------------------------
for f in "$LOGS"/*.log; do
  name=$(basename "$f" .log)
  [ "$name" = pytest ] && continue
  echo "===== $name (exit $(cat "$LOGS/$name.rc" 2>/dev/null || echo '?')) ====="
  tail -c 60000 "$f"
done >"$OUT_DIR/steps.log"
[ -f "$LOGS/pytest.log" ] && tail -c 200000 "$LOGS/pytest.log" >"$OUT_DIR/pytest.log"
csv=$(ls "$WORK"/dumps/vector_add/ncu-*.csv 2>/dev/null | head -1)
[ -n "$csv" ] && cp "$csv" "$OUT_DIR/ncu_vector_add.csv"
[ -d "$WORK/dumps" ] && tar -C "$WORK" -czf "$OUT_DIR/dumps.tar.gz" --exclude='*.so' --exclude='*.ii' dumps
$PY bench/gpu/gpu_checks.py summary --out "$WORK"
status=$?
cp "$WORK/summary.json" "$OUT_DIR/summary.json" 2>/dev/null
echo "[+$(( $(date +%s) - T0 ))s] done; logs in $OUT_DIR"
exit $status
