#!/usr/bin/env bash
# Where a pool slot's time goes when three checks run at once (issue 27's pool >= 40/min):
# bench/harness/pool_throughput.py of this tree with 1 slot and with 3 (the 3-slot run under
# py-spy, every process's stacks, idle ones too), and of an older tree with 3 slots beside it.
#   POOL_BASE=.base-42c9549 bash bench/harness/pool_profile.sh OUT_DIR   (POOL_RUNS picks: 1slot 3slots base omp2)
# Needs a py-spy wheel in .pyspy/ (pip download py-spy --no-deps -d .pyspy) for the profile;
# without it the runs go on unprofiled. Each verdict's rung seconds are in the JSON rows
# (median_rung_s), so a slowed rung shows without the profile too.
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-$PWD/pool-profile-out}}
BASE=${POOL_BASE:-}
COPIES=${POOL_COPIES:-16}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
export CTXKERNEL_HOME=$(mktemp -d /tmp/ck-pool-home.XXXXXX)
SPY=""
if ls .pyspy/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy .pyspy/*.whl > /dev/null 2>&1 \
    && SPY=/tmp/pyspy/bin/py-spy
  [ -x "$SPY" ] || SPY=""
fi
pool() {  # pool TREE SLOTS NAME [profile]
  local tree=$1 slots=$2 name=$3 cmd
  cmd=(python3 "$tree/bench/harness/pool_throughput.py" --problems vector_add --copies "$COPIES"
       --slots-per-gpu "$slots" --out "$OUT_DIR/$name.json")
  [ -f "$tree/bench/harness/pool_throughput.py" ] || cmd[1]="$tree/bench/pool_throughput.py"
  echo "== $name ($(date -u +%T))"
  if [ "${4:-}" = profile ] && [ -n "$SPY" ]; then
    timeout -k 5 "${POOL_S:-150}" "$SPY" record --idle --subprocesses --nonblocking -r 25 \
      --format raw -o "$OUT_DIR/$name.stacks.txt" -- "${cmd[@]}" > "$OUT_DIR/$name.log" 2>&1
  else
    timeout -k 5 "${POOL_S:-150}" "${cmd[@]}" > "$OUT_DIR/$name.log" 2>&1
  fi
  echo "exit $?"; tail -n 25 "$OUT_DIR/$name.log" | grep -E "candidates_per_min|median_rung|slot|Error" | cut -c1-600
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT_DIR/env.txt" 2>&1
has() { case " ${POOL_RUNS:-1slot 3slots base omp2} " in *" $1 "*) return 0;; esac; return 1; }
has 1slot && pool . 1 head-1slot
has 3slots && pool . 3 head-3slots profile
has base && [ -n "$BASE" ] && [ -d "$BASE" ] && pool "$BASE" 3 base-3slots
# the same with each process's CPU thread pools at 2 (three slots' parents and workers each
# starting one thread per core would oversubscribe the machine)
has omp2 && OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 pool . 3 head-3slots-omp2
# the device tool brings back few files: everything in one tarball too
tar czf "$OUT_DIR.tgz" -C "$(dirname "$OUT_DIR")" "$(basename "$OUT_DIR")"
