#!/usr/bin/env bash
# One GPU session on a 2-GPU machine (the last validation run of 2026-11-30):
#   phase A, in parallel: intra-kernel traces on GPU 1 (bench/gpu/trace_validate.py, issue 8)
#            and, on GPU 0, the CUDA C++ candidate through the ladder plus the GPU cheat
#            tests again (bench/gpu/gpu_validate.sh steps "cuda pytest", issues 4 and 5);
#   phase B, alone: pool throughput, one GPU vs two (bench/harness/pool_throughput.py, issue 7).
# Everything lands in one tarball under $OUT (the device tool brings back at most 8 files),
# plus the small summaries beside it. Each phase has a time limit; nothing stops the rest.
#   bench/gpu/gpu_session.sh            (uses $OUT; default ./gpu-session-out)
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${OUT:-$PWD/gpu-session-out}
W=$(mktemp -d /tmp/ck-session.XXXXXX)
mkdir -p "$OUT_DIR" "$W/trace" "$W/validate" "$W/pool"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
T0=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$W/env.txt" 2>&1
python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.device_count())' >> "$W/env.txt" 2>&1
cat "$W/env.txt"

stamp "phase A: traces on GPU 1, CUDA C++ + GPU tests on GPU 0"
( CUDA_VISIBLE_DEVICES=1 timeout -k 10 ${TRACE_S:-230} python3 bench/gpu/trace_validate.py --out "$W/trace" \
    --only env,triton,cuda,cli-triton --budget $(( ${TRACE_S:-230} - 10 )) > "$W/trace/run.log" 2>&1; echo "trace exit $?" ) &
( CUDA_VISIBLE_DEVICES=0 STEPS="cuda pytest" DEADLINE=200 timeout -k 10 ${VALIDATE_S:-230} \
    bash bench/gpu/gpu_validate.sh "$W/validate" > "$W/validate/run.log" 2>&1; echo "validate exit $?" ) &
wait
stamp "phase A done"
tail -25 "$W/trace/run.log"; tail -15 "$W/validate/run.log"

stamp "phase B: pool throughput"
timeout -k 10 ${POOL_S:-200} python3 bench/harness/pool_throughput.py --problems vector_add --copies ${COPIES:-6} \
    --out "$W/pool/pool.json" > "$W/pool/run.log" 2>&1; echo "pool exit $?"
tail -20 "$W/pool/run.log"
stamp "done"

cp "$W/trace/results.json" "$OUT_DIR/trace_results.json" 2>/dev/null
cp "$W/pool/pool.json" "$OUT_DIR/pool.json" 2>/dev/null
cp "$W/validate/summary.json" "$OUT_DIR/validate_summary.json" 2>/dev/null
for png in "$W"/trace/*.png; do [ -f "$png" ] && cp "$png" "$OUT_DIR/" ; done 2>/dev/null
tar -C "$W" -czf "$OUT_DIR/session.tar.gz" . 2>/dev/null
ls -la "$OUT_DIR"
