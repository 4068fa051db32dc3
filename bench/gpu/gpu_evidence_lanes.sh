#!/usr/bin/env bash
# The GPU evidence steps that time nothing, side by side in one device call (each a lane of
# bench/gpu/gpu_evidence_steps.sh, plus bench/gpu/gpu_suites.py's GPU MODE and KernelBench
# sweep): upstream KernelBench at upstream sizes (kb), the rungs inside the walls (rungs),
# the CUDA C++ host-code escapes (hostesc), the GPU harness tests as an unprivileged user
# (usertests) and CuTeDSL inside the walls (cutedsl). Carry .kb, bench/.upstream and .whl
# (about 62 MiB with the tree). What times (cheats, sol, the speed rows) belongs in a quiet
# call of its own. Everything comes back in $OUT/lanes.tgz.
# LANES picks some (default all: kb rungs hostesc usertests cutedsl suites).
#   LANE_S=360 bash bench/gpu/gpu_evidence_lanes.sh
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
S=${LANE_S:-360}
E=$(mktemp -d /tmp/ck-lanes.XXXXXX)
OUT_DIR=${OUT:-$PWD/gpu-evidence-out}
mkdir -p "$OUT_DIR"
LANES=${LANES:-kb rungs hostesc usertests cutedsl suites}
on() { case " $LANES " in *" $1 "*) return 0;; esac; return 1; }
lane() {  # lane NAME VAR=VALUE...: one gpu_evidence_steps.sh run, its log in NAME.txt
  local n=$1; shift; on "$n" || return 0; mkdir -p "$E/$n"
  (env OUT="$E/$n" "$@" timeout -k 5 "$S" bash bench/gpu/gpu_evidence_steps.sh > "$E/$n.txt" 2>&1) &
}
lane kb STEPS=kb KB_S=150
lane rungs STEPS=rungs CHECK_S=200
lane hostesc STEPS=hostesc HOSTESC_S=$((S - 10))
lane usertests STEPS=usertests USER_TESTS_S=$(((S - 20) / 2))
lane cutedsl STEPS=cutedsl CHECK_S=$(((S - 20) / 2))
on suites && mkdir -p "$E/suites" && (timeout -k 5 "$S" python3 bench/gpu/gpu_suites.py run --only gpumode,kernelbench \
  --budget-s $((S - 20)) --out "$E/suites" > "$E/suites.txt" 2>&1) &
wait
tar -czf "$OUT_DIR/lanes.tgz" -C /tmp "$(basename "$E")" $(cd /tmp && ls -d ck-evidence.* 2>/dev/null)
for n in kb rungs hostesc usertests cutedsl; do
  echo "##### $n"; grep -E "^==|^\[|verdict|exit|passed|failed" "$E/$n.txt" | cut -c1-300 | tail -40
done
echo "##### suites"; tail -3 "$E/suites.txt"
