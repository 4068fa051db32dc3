"""Regression tests named after what broke on the H200 (2026-12-01): torch.profiler's first
use imports torch._dynamo, which rebinds torch.manual_seed to its own wrapper, and every
honest GPU candidate was rejected for "candidate code replaced torch.manual_seed"; the same
wrapper made by a candidate around other code must still be caught."""

from __future__ import annotations

from conftest import run_python

PRELUDE = """
    import sys
    assert "torch._dynamo" not in sys.modules
    import functools, torch
    from harness.worker.snapshots import IdentitySnapshot
    snap = IdentitySnapshot.take()
    original = torch.manual_seed
"""


def test_torch_dynamo_rewrapping_the_rng_functions_is_not_a_candidate_patch() -> None:
    out = run_python(
        PRELUDE
        + """
    import torch._dynamo
    assert torch.manual_seed is not original  # dynamo did rebind it
    print(sorted(n for n in snap.changed() if "seed" in n or "rng" in n.lower()))
    """
    )
    assert out == "[]"


def test_a_candidate_wrapper_around_other_code_is_still_caught() -> None:
    out = run_python(
        PRELUDE
        + """
    @functools.wraps(original)
    def inner(*args, **kwargs):  # same name and __wrapped__ as dynamo's, other code
        return None
    torch.manual_seed = inner
    print("torch.manual_seed" in snap.changed())
    """
    )
    assert out == "True"


def test_a_poisoned_disable_function_under_dynamo_s_wrapper_is_caught() -> None:
    out = run_python(
        PRELUDE
        + """
    import torch._dynamo
    original.__dynamo_disable = lambda *a, **k: None  # what dynamo's wrapper would call
    print("torch.manual_seed" in snap.changed())
    """
    )
    assert out == "True"


def test_a_wrapper_of_a_changed_original_is_caught() -> None:
    out = run_python(
        PRELUDE
        + """
    import torch._dynamo
    original.__code__ = (lambda seed: None).__code__
    print("torch.manual_seed" in snap.changed())
    """
    )
    assert out == "True"
