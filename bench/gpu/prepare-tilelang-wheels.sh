#!/usr/bin/env bash
# Prepare the folder .whl-tl/ to ship TileLang to the GPU machine (no network there).
# That machine: Python 3.12.3, torch 2.11.0+cu130, CUDA 13.0, and already cloudpickle,
# ml-dtypes, numpy, psutil, tqdm, typing-extensions. TileLang 0.1.15 needs besides
# apache-tvm-ffi, torch-c-dlpack-ext and z3-solver (libtilelang.so links libz3).
# Run from the repo root on a machine with PyPI access. .whl-tl/ and .whl-tl-src/ are
# ignored (.gitignore). Needs xz. The tilelang (50 MB) and z3-solver (29 MB) wheels are
# over the 64 MiB a call may carry together, so their contents travel as one tar.xz
# (x86 BCJ filter, 256 MiB dictionary: the two copies of libz3.so in the z3 wheel become
# one; z3's command-line binary is left out): 79 MB of wheels -> a 32.5 MB tar.xz, 35 MB in
# all with the two small wheels (measured 2026-12-01). Takes ~16 min on 1 busy core (xz -9e).
# It does not fit in one call together with the CuTeDSL wheels (~58 MB): ship them in
# separate calls.
set -euo pipefail
mkdir -p .whl-tl .whl-tl-src
dl() { python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$1" "$2"; }
dl .whl-tl apache-tvm-ffi==0.1.12         # 2.7 MB
dl .whl-tl torch-c-dlpack-ext==0.1.5      # 0.9 MB
dl .whl-tl-src tilelang==0.1.15           # 50 MB
dl .whl-tl-src z3-solver==4.15.4.0        # 29 MB
tmp=$(mktemp -d)
unzip -q .whl-tl-src/tilelang-0.1.15-*.whl -d "$tmp"
unzip -q .whl-tl-src/z3_solver-4.15.4.0-*.whl -x 'z3_solver-4.15.4.0.data/*' -d "$tmp"
(cd "$tmp" && tar cf - . | xz --x86 --lzma2=preset=9e,dict=256MiB,nice=273 -T1) > .whl-tl/tilelang-content.tar.xz
rm -rf "$tmp"
du -sh .whl-tl
# On the GPU machine (carry: .whl-tl), from the repo root:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-tl/*.whl
#   tar -xJf .whl-tl/tilelang-content.tar.xz -C /tmp/site
#   export PYTHONPATH=/tmp/site:$PWD
#   python3 -c 'import tilelang; print(tilelang.__version__)'
# The TileLang GPU validation: PYTHONUNBUFFERED=1 python3 bench/gpu/gpu_tilelang.py --out $OUT
