# ctxkernel: setup, tests, lint, demo, benchmarks. `make help` lists the targets.
VENV ?= .venv
PY := $(VENV)/bin/python
CK := $(VENV)/bin/ctxkernel
PYTEST_ARGS ?=
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export TRITON_DEFAULT_FP_FUSION := 1

.PHONY: help setup test test-as-users lint format demo bench gpu-validate clean

help:
	@echo "make setup   create $(VENV): torch (CPU build first), then ctxkernel with dev extras"
	@echo "make test    setup + lint + the test suite (CPU; GPU tests are skipped without a GPU)"
	@echo "make test-as-users  the sandbox, cheat and warm-path tests again with CTXKERNEL_ISOLATION=none and as an unprivileged user"
	@echo "make demo    setup + index the Triton and CuTeDSL sources of the installed packages, then search and grep (2:47 and 3.9 GB measured on a 2-core machine, no GPU, 2026-12-04)"
	@echo "make bench   retrieval benchmarks (bench/indexing/index_bench.py); results go to bench/RESULTS.md by hand"
	@echo "make lint    ruff check, ruff format --check, mypy"
	@echo "make gpu-validate  on a CUDA machine: every GPU check of the harness (bench/gpu/gpu_validate.sh)"

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: a plain `torch` requirement with no torch installed pulls a multi-GB CUDA build
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e '.[dev,cutedsl,ray]'
	touch $@

setup: $(VENV)/.installed

lint: setup
	$(VENV)/bin/ruff check ctxkernel harness tests bench examples
	$(VENV)/bin/ruff format --check ctxkernel harness tests bench examples
	$(VENV)/bin/mypy

format: setup
	$(VENV)/bin/ruff format ctxkernel harness tests bench examples
	$(VENV)/bin/ruff check --fix ctxkernel harness tests bench examples

test: setup lint
	$(PY) -m pytest -q $(PYTEST_ARGS)

# what a non-root user, or a container that refuses namespaces, runs: the walls, the
# planted cheats, the warm paths, the check server and no worker outliving a killed check
AS_USERS_TESTS ?= tests/harness/test_walls.py tests/harness/test_walls_mounts.py \
	tests/harness/test_harness_sandbox.py \
	tests/harness/test_harness_warm_start.py tests/harness/test_harness_cheats.py \
	tests/harness/test_checkserver.py tests/harness/test_harness_examples.py \
	tests/harness/test_every_user.py tests/harness/test_walls_fallback.py \
	tests/harness/test_harness_cleanup.py \
	"tests/agent/test_agent_loop.py::test_cli_session_searches_fails_fixes_and_stops_at_the_target"
# none mode (a container that refuses namespaces); then as an unprivileged user
test-as-users: setup
	CTXKERNEL_ISOLATION=none $(PY) -m pytest -q -p no:cacheprovider $(AS_USERS_TESTS)
	.ci/as-unprivileged.sh $(PY) $(AS_USERS_TESTS)

demo: setup
	$(CK) index triton --source pkg:triton
	$(CK) index cutlass --source pkg:nvidia-cutlass-dsl
	$(CK) corpora --offline
	$(CK) search "how do I time a kernel and get the median" --corpus triton -k 3
	$(CK) search "partition a tensor across threads with a tiled copy" --corpus cutlass -k 3
	$(CK) search make_tiled_copy -k 3
	$(CK) grep "def do_bench" --corpus triton -C 2
	@echo
	@echo "ctxkernel is in $(VENV)/bin: 'source $(VENV)/bin/activate' (or put $(abspath $(VENV))/bin on PATH) to run it as 'ctxkernel ...'"
	@echo "PTX lookups (ctxkernel docs wgmma.mma_async) need the PTX ISA: ctxkernel index ptx"

bench: setup
	$(PY) bench/indexing/index_bench.py

gpu-validate:
	bench/gpu/gpu_validate.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
