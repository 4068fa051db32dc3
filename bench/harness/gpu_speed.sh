#!/usr/bin/env bash
# Issue 14 on one GPU: every acceptance number of "a verdict in seconds", ours beside the
# baseline tree, measured in the same run (bench/harness/check_speed.py does the measuring).
#
#   bench/harness/gpu_speed.sh speed  [OUT_DIR]   oneshot + long-lived + --bench + pool  (~6 min)
#   bench/harness/gpu_speed.sh bench  [OUT_DIR]   the --bench line only, many runs: long-lived blocks of
#                                         ours and the baseline's alternating, and warm calls
#                                         through the check server (~5 min)
#   bench/harness/gpu_speed.sh timing [OUT_DIR]   harness / ncu and two runs, Triton, CuTeDSL, CUDA C++
#                                         at n = 2^28 (~6 min; the CUDA C++ build is ~50 s a check)
#
# Needs, at the repo root: BASE (default .base-8021ae1; BASE_LABEL names it), an export of the baseline commit
# (`git archive 8021ae1 --prefix=.base-8021ae1/ | tar -x`), and for `timing` the CuTeDSL
# wheels in .whl/ (installed into /tmp/ck-site as bench/gpu/gpu_validate.sh does). Writes
# OUT_DIR/<part>.json, <part>.log and <part>.md (the RESULTS.md section; the coordinator
# appends it to bench/RESULTS.md).
set -u -o pipefail
cd "$(dirname "$0")/../.."
PART=${1:-speed}
OUT_DIR=${2:-${OUT:-$PWD/gpu-speed-out}}
BASE=${BASE:-.base-8021ae1}
PY=${PYTHON:-python3}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
export CTXKERNEL_HOME=$(mktemp -d /tmp/ck-speed-home.XXXXXX)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > "$OUT_DIR/env.txt" 2>&1
test -d "$BASE/harness" || { echo "no baseline tree at $BASE" | tee -a "$OUT_DIR/env.txt"; BASE=""; }
ARGS=(--device cuda --out "$OUT_DIR/$PART.json" --table "$OUT_DIR/$PART.md")
[ -n "$BASE" ] && ARGS+=(--baseline "$BASE" --baseline-label "${BASE_LABEL:-main at 8021ae1}")
case "$PART" in
  speed) ARGS+=(--only oneshot,longlived,bench,pool --rounds 3 --repeat 5 --pool-slots 1,3 --pool-copies 16) ;;
  bench) ARGS+=(--only longlived,bench --repeat 3 --blocks 2 --bench-repeat 6 --rounds 3 --server-repeat 5) ;;
  timing)
    SITE=/tmp/ck-site
    if [ -d .whl ] && [ ! -d "$SITE/nvidia_cutlass_dsl" ]; then
      rm -rf $SITE && mkdir -p $SITE
      $PY -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl/*.whl
      tar -xJf .whl/cu13-content.tar.xz -C $SITE
    fi
    [ -d "$SITE/nvidia_cutlass_dsl" ] && export PYTHONPATH="$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
    ARGS+=(--only timing ${TIMING_ARGS:-}) ;;  # e.g. TIMING_ARGS="--timing-repeat 2"
  *) echo "usage: bench/harness/gpu_speed.sh speed|bench|timing [OUT_DIR]"; exit 2 ;;
esac
$PY bench/harness/check_speed.py "${ARGS[@]}" > "$OUT_DIR/$PART.log" 2> "$OUT_DIR/$PART.err"
echo "exit $?"; cat "$OUT_DIR/$PART.md"
$PY bench/harness/speed_rows.py "$OUT_DIR/$PART.json" > "$OUT_DIR/$PART.rows.txt" 2>&1 || true
