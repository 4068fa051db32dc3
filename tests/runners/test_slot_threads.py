"""A pool slot gives torch its share of the CPUs: three slots each running their
comparisons on every core oversubscribed a 16-core machine (bench/RESULTS.md,
2026-12-06 06:00)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.runners.pool import PoolRunner
from harness.runners.slot import cpu_share

from .conftest import CandidateSet, small_options

REPO = Path(__file__).resolve().parents[2]


def test_cpu_share_divides_the_cpus_among_the_slots() -> None:
    assert cpu_share(16, 3) == 5
    assert cpu_share(16, 2) == 8
    assert cpu_share(2, 3) == 1  # never below one thread
    assert cpu_share(16, 1) is None  # one slot: torch's default
    assert cpu_share(16, None) is None


def _slot_threads(**env: str) -> int:
    """torch's thread count in a process that started as a slot does."""
    child_env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
    child_env.update(env)
    child_env["PYTHONPATH"] = str(REPO)
    code = (
        "import torch; from harness.runners.slot import share_cpus; share_cpus(); "
        "print(torch.get_num_threads())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=child_env, capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def test_a_slot_sets_torch_threads_to_its_share_unless_the_user_chose() -> None:
    cpus = len(os.sched_getaffinity(0))
    slots = max(2, cpus)  # a share of one thread, whatever this machine has
    assert _slot_threads(CTXKERNEL_POOL_SLOTS=str(slots)) == 1
    assert _slot_threads(CTXKERNEL_POOL_SLOTS=str(slots), OMP_NUM_THREADS="2") == 2


FAKE_SLOT = """#!{python}
# records the environment the pool gave it, then fails to start (fast)
import os, sys
open({where!r}, "a").write(os.environ.get("CTXKERNEL_POOL_SLOTS", "unset") + "\\n")
sys.exit(3)
"""


def test_the_pool_tells_each_slot_how_many_slots_share_the_machine(
    vector_add_set: CandidateSet, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.txt"
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_SLOT.format(python=sys.executable, where=str(seen)))
    fake.chmod(0o755)
    with PoolRunner(jobs=3, python=str(fake)) as pool:
        list(pool.run_many(vector_add_set.problem, vector_add_set.candidates[:1], small_options()))
    values = set(seen.read_text().split())
    assert values == {"3"}, values
