#!/usr/bin/env bash
# GPU evidence for the walls, every user, correctness at every size and the tool rungs, in
# one device call (each step has its own time limit; nothing stops the rest). STEPS picks:
#   bisect    ncu and compute-sanitizer behind each wall (bench/gpu/gpu_profilers_bisect.py)
#   fixtures  real ncu / compute-sanitizer output for the parsers (capture_tool_fixtures.py)
#   rungs     `check --profile --expect-isa wgmma --sanitize` inside the walls: the wgmma
#             matmul and the vector add, in the default mode and in none mode
#   user      honest and off-by-one vector add checks as an unprivileged user (auto, none)
#   usertests the GPU harness tests (every example's honest solution, the GPU cheats) as an
#             unprivileged user, in the default mode and in none mode
#   g16       the GPU-busy flood cheat alone (test_harness_gpu.py -k g16) as an unprivileged
#             user, default mode
#   evtests   the evidence cheats' GPU tests through pytest (e04 and e05 judged at their
#             runtime rungs, which the CLI's policy scan stops before; EVTESTS_K: pytest -k)
#   drawtests the gpu-marked tests of the inputs drawn on the device (KernelBench's get_inputs
#             under the device, the perturbed inputs' signs): test_real_suites.py,
#             test_signal_and_budgets.py
#   kb        upstream KernelBench level 1 Softmax, FrobeniusNorm, L2Norm, Min (files in
#             .kb/, carried; never committed) at upstream sizes (--shapes bench): the honest
#             Triton kernels of bench/candidates/ and the zero writer (KB_PROBLEMS picks:
#             "23_Softmax:softmax 39_L2Norm_:l2norm", file stem and candidate name; KB_CANDS
#             picks "zero honest" or either; KB_PROFILE=1 runs the honest check under py-spy,
#             every process, stacks in the tarball: carry .pyspy with the wheel). KB_S: each
#             check's limit (default 420 s: the honest Softmax at upstream size took 349 s on
#             an H100 at fa791ad, the zero writer 157 s), so one problem a device call; KB_JSON=1
#             adds --json: a harness error's traceback is printed from the verdict
#   cheats    the planted evidence cheats through the CLI (bench/gpu/gpu_evidence.sh, no pytest)
#   cutedsl   the CuTeDSL vector add inside the walls (carry .whl: the cu13 content as
#             prepare-cutedsl-wheels.sh makes it, and the three small wheels unpacked into
#             one .whl/rest-content.tar.xz -- `for w in WHEELS; do unzip -q $w -d D; done;
#             tar cf - -C D . | xz -9e` -- 2.8 MB instead of 4.7: tree and .whl then fit 64 MiB)
#   hostesc   the CUDA C++ `load_inline` candidate whose host code tries the escapes
#             (tests/harness/walls/gpu_host_code_escapes.py through test_walls.py -k cuda_host),
#             the test's own two modes, default and none (two CUDA builds, ~1 min each)
#   sol       the bf16 GEMM examples at BENCH_SHAPES (8192^3 first) through `check --bench
#             --compile-ref --json`, twice each (the SOL score and the library/compile baselines
#             of the verdict; the two runs must agree within 2 %); time nothing beside it
#   tilelang  the TileLang vector add and bf16 GEMM inside the walls, default and none mode
#             (carry .whl-tl: bench/gpu/prepare-tilelang-wheels.sh; not in the same call as
#             cutedsl: both sets together pass 64 MiB)
# Logs in one tarball under $OUT (the device tool brings back few files).
#   STEPS="bisect fixtures" bash bench/gpu/gpu_evidence_steps.sh
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${OUT:-$PWD/gpu-evidence-out}
W=$(mktemp -d /tmp/ck-evidence.XXXXXX)
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1 OUT="$W" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
STEPS=${STEPS:-bisect fixtures rungs user kb}
T0=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
{
  date -u +"%Y-%m-%d %H:%M:%S UTC"; uname -r; id
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
} > "$W/env.txt" 2>&1
cat "$W/env.txt"
check() {  # check LOG ARGS...: one harness check, its ladder kept in LOG
  local log=$1; shift
  timeout -k 5 "${CHECK_S:-240}" python3 -m harness check --no-server --no-record --progress "$@" > "$W/$log" 2>&1
  echo "exit $?" >> "$W/$log"
  echo "== $log"; grep -E "^\[|verdict|exit" "$W/$log" | cut -c1-400
}

if has bisect; then
  stamp "bisect"
  timeout -k 5 ${BISECT_S:-240} python3 bench/gpu/gpu_profilers_bisect.py > "$W/bisect.log" 2>&1
  echo "exit $?" >> "$W/bisect.log"; cut -c1-600 "$W/bisect.log"
fi
if has fixtures; then
  stamp "fixtures"
  timeout -k 5 ${FIXTURES_S:-180} python3 bench/gpu/capture_tool_fixtures.py > "$W/fixtures.log" 2>&1
  echo "exit $?" >> "$W/fixtures.log"; cut -c1-600 "$W/fixtures.log"
fi
if has rungs; then
  stamp "rungs inside the walls"
  check rungs-wgmma.log examples/matmul_bf16 examples/matmul_bf16/solution_triton_wgmma.py \
    --device cuda --profile --expect-isa wgmma --sanitize
  check rungs-add.log examples/vector_add examples/vector_add/solution_triton.py --device cuda \
    --profile --sanitize
  CTXKERNEL_ISOLATION=none check rungs-add-none.log examples/vector_add \
    examples/vector_add/solution_triton.py --device cuda --profile --sanitize
fi
if has user; then
  stamp "as an unprivileged user"
  id ckuser >/dev/null 2>&1 || useradd -m ckuser
  p=$PWD; while [ "$p" != / ]; do chmod o+rx "$p" 2>/dev/null; p=$(dirname "$p"); done
  chmod -R o+rX "$PWD" 2>/dev/null; chmod 1777 "$W"
  for mode in auto none; do
    for cand in examples/vector_add/solution_triton.py examples/vector_add/bad/off_by_one.py; do
      log="user-$mode-$(basename "$cand" .py).log"
      runuser -u ckuser -- env -i PATH="$PATH" HOME=/home/ckuser PYTHONPATH="$PYTHONPATH" \
        CTXKERNEL_ISOLATION=$mode timeout -k 5 180 python3 -m harness check examples/vector_add "$cand" \
        --device cuda --no-record > "$W/$log" 2>&1
      echo "exit $?" >> "$W/$log"; echo "== $log"; grep -E "^\[|verdict|exit" "$W/$log" | cut -c1-300
    done
  done
fi
if has usertests; then
  stamp "GPU harness tests as an unprivileged user"
  id ckuser >/dev/null 2>&1 || useradd -m ckuser
  p=$PWD; while [ "$p" != / ]; do chmod o+rx "$p" 2>/dev/null; p=$(dirname "$p"); done
  chmod -R o+rX "$PWD" 2>/dev/null; chmod 1777 "$W"
  for mode in auto none; do
    runuser -u ckuser -- env -i PATH="$PATH" HOME=/home/ckuser PYTHONPATH="$PYTHONPATH" \
      CTXKERNEL_ISOLATION=$mode timeout -k 5 ${USER_TESTS_S:-170} python3 -m pytest -q \
      -p no:cacheprovider -rfE -m gpu tests/harness/test_harness_gpu.py > "$W/usertests-$mode.log" 2>&1
    echo "exit $?" >> "$W/usertests-$mode.log"; echo "== usertests $mode"; tail -6 "$W/usertests-$mode.log"
  done
fi
if has g16; then
  stamp "g16 as an unprivileged user"
  id ckuser >/dev/null 2>&1 || useradd -m ckuser
  p=$PWD; while [ "$p" != / ]; do chmod o+rx "$p" 2>/dev/null; p=$(dirname "$p"); done
  chmod -R o+rX "$PWD" 2>/dev/null; chmod 1777 "$W"
  runuser -u ckuser -- env -i PATH="$PATH" HOME=/home/ckuser PYTHONPATH="$PYTHONPATH" \
    CTXKERNEL_ISOLATION=auto timeout -k 5 ${G16_S:-120} python3 -m pytest -q -p no:cacheprovider \
    -rA -m gpu -k g16 tests/harness/test_harness_gpu.py > "$W/g16.log" 2>&1
  echo "exit $?" >> "$W/g16.log"; echo "== g16"; grep -E "PASSED|FAILED|passed|failed|Error|^exit" "$W/g16.log" | cut -c1-400
fi
if has evtests; then
  stamp "evidence cheats through pytest"
  timeout -k 5 ${EVTESTS_S:-240} python3 -m pytest -q -p no:cacheprovider -rA -m gpu \
    ${EVTESTS_K:+-k "$EVTESTS_K"} tests/harness/test_evidence_cheats.py > "$W/evtests.log" 2>&1
  echo "exit $?" >> "$W/evtests.log"; echo "== evtests"; grep -E "PASSED|FAILED|ERROR|passed|failed|^exit" "$W/evtests.log" | cut -c1-300
fi
if has drawtests; then
  stamp "inputs drawn on the device"
  timeout -k 5 ${DRAWTESTS_S:-120} python3 -m pytest -q -p no:cacheprovider -rA -m gpu \
    tests/harness/test_real_suites.py tests/harness/test_signal_and_budgets.py > "$W/drawtests.log" 2>&1
  echo "exit $?" >> "$W/drawtests.log"; echo "== drawtests"; grep -E "PASSED|FAILED|ERROR|passed|failed|^exit" "$W/drawtests.log" | cut -c1-300
fi
if has kb; then
  stamp "upstream KernelBench at upstream sizes"
  for pair in ${KB_PROBLEMS:-23_Softmax:softmax 37_FrobeniusNorm_:frobenius 39_L2Norm_:l2norm \
      53_Min_reduction_over_a_dimension:min}; do
    f=${pair%%:*}; c=${pair##*:}
    # the card's memory in use while the checks run (parent and worker together)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$W/kb-$f-mem.txt" 2>&1 &
    sampler=$!
    # each process's share (the parent's and the worker's apart), for an out-of-memory's cause
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 500 \
      > "$W/kb-$f-procs.txt" 2>&1 &
    procs=$!
    case " ${KB_CANDS:-zero honest} " in *" zero "*)
      CHECK_S=${KB_S:-420} check "kb-$f-zero.log" ".kb/$f.py" bench/candidates/kb_zero_writer.py \
        --device cuda --shapes bench ${KB_JSON:+--json};; esac
    case " ${KB_CANDS:-zero honest} " in *" honest "*)
      if [ -n "${KB_PROFILE:-}" ] && ls .pyspy/*.whl > /dev/null 2>&1; then
        # where an upstream-sized check's time goes: every process's stacks, idle ones too
        python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy .pyspy/*.whl > /dev/null 2>&1
        timeout -k 5 "${KB_S:-420}" /tmp/pyspy/bin/py-spy record --idle --subprocesses --nonblocking \
          -r 20 --format raw -o "$W/kb-$f-honest.stacks.txt" -- python3 -m harness check --no-server \
          --no-record --progress ".kb/$f.py" "bench/candidates/kb_${c}_triton.py" --device cuda \
          --shapes bench > "$W/kb-$f-honest.log" 2>&1
        echo "exit $?" >> "$W/kb-$f-honest.log"; grep -E "^\[|verdict|exit" "$W/kb-$f-honest.log" | cut -c1-400
      else
        CHECK_S=${KB_S:-420} check "kb-$f-honest.log" ".kb/$f.py" "bench/candidates/kb_${c}_triton.py" \
          --device cuda --shapes bench ${KB_JSON:+--json}
      fi;; esac
    kill $sampler $procs 2>/dev/null
    if [ -n "${KB_JSON:-}" ]; then  # a harness error's traceback, from the verdict's details
      for log in "$W"/kb-$f-*.log; do
        python3 bench/gpu/verdict_tracebacks.py "$log"
      done
    fi
    stamp "$f done; most memory in use on the card: $(sort -n "$W/kb-$f-mem.txt" | tail -1) MiB"
  done
fi
if has cheats; then
  stamp "planted evidence cheats"
  OUT="$W/cheats" SKIP_TESTS=1 timeout -k 5 ${CHEATS_S:-330} bash bench/gpu/gpu_evidence.sh \
    > "$W/cheats.log" 2>&1
  echo "exit $?" >> "$W/cheats.log"; cut -c1-400 "$W/cheats.log"
fi
if has hostesc; then
  stamp "CUDA C++ host-code escapes (the test runs the default mode and none mode)"
  timeout -k 5 ${HOSTESC_S:-300} python3 -m pytest -q -p no:cacheprovider -rA -m gpu -k cuda_host \
    tests/harness/test_walls.py > "$W/hostesc.log" 2>&1
  echo "exit $?" >> "$W/hostesc.log"; echo "== hostesc"; tail -5 "$W/hostesc.log"
fi
if has sol; then
  stamp "GEMM speed of light, twice"
  for run in 1 2; do
    for cand in ${SOL_CANDS:-solution_triton_wgmma}; do
      timeout -k 5 ${SOL_S:-150} python3 -m harness check --no-server --no-record examples/matmul_bf16 \
        "examples/matmul_bf16/$cand.py" --device cuda --bench --compile-ref --json \
        > "$W/sol-$cand-$run.json" 2> "$W/sol-$cand-$run.err"
      echo "== sol $cand run $run: exit $?"; tail -c 300 "$W/sol-$cand-$run.err"
    done
  done
fi
if has cutedsl && [ -d .whl ]; then
  stamp "CuTeDSL inside the walls"
  SITE=/tmp/ck-site; rm -rf $SITE; mkdir -p $SITE; chmod 755 $SITE
  if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl/*.whl > /dev/null 2>&1
  fi
  for content in .whl/*-content.tar.xz; do tar -xJf "$content" -C $SITE; done
  python3 -c "import sys; sys.path[:0] = ['$SITE', '$SITE/nvidia_cutlass_dsl/dsl_packages']; import cutlass; print('cutlass DSL', cutlass.__version__ if hasattr(cutlass, '__version__') else '?')"
  PYTHONPATH="$PYTHONPATH:$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages" \
    check cutedsl-auto.log examples/vector_add examples/vector_add/solution_cutedsl.py --device cuda --bench
  PYTHONPATH="$PYTHONPATH:$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages" CTXKERNEL_ISOLATION=none \
    check cutedsl-none.log examples/vector_add examples/vector_add/solution_cutedsl.py --device cuda
fi
if has tilelang && [ -d .whl-tl ]; then
  stamp "TileLang inside the walls"
  SITE=/tmp/ck-site-tl; rm -rf $SITE; mkdir -p $SITE; chmod 755 $SITE
  python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl-tl/*.whl > /dev/null 2>&1
  tar -xJf .whl-tl/tilelang-content.tar.xz -C $SITE
  PYTHONPATH="$PYTHONPATH:$SITE" \
    check tilelang-auto.log examples/vector_add examples/vector_add/solution_tilelang.py --device cuda --bench
  PYTHONPATH="$PYTHONPATH:$SITE" CTXKERNEL_ISOLATION=none \
    check tilelang-none.log examples/vector_add examples/vector_add/solution_tilelang.py --device cuda
  PYTHONPATH="$PYTHONPATH:$SITE" \
    check tilelang-gemm.log examples/matmul_bf16 examples/matmul_bf16/solution_tilelang.py --device cuda --bench --expect-isa wgmma
fi
stamp "done"
tar -czf "$OUT_DIR/evidence.tgz" -C "$W" . && ls -la "$OUT_DIR"
