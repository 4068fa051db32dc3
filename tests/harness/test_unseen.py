"""Unseen shapes (harness/problems/unseen.py): derived from a problem's own shapes and a secret,
odd (so not multiples of 16 or 128), never public, within the public range, size 1
where the problem allows it, only shapes the problem's generator and reference accept;
``UNSEEN`` narrows or switches them off."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ProblemError
from harness.problems.problem import load_problem
from harness.problems.unseen import UnseenPolicy, new_secret, unseen_shapes, varying_dims

ROOT = Path(__file__).resolve().parents[2]
HEAD = """
import torch

def generate_input(seed, m, n, k=8, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(m, n, generator=gen),)

def ref_kernel(inputs):
    return inputs[0] * 2
"""


def problem(tmp_path: Path, extra: str, name: str = "p") -> Path:
    path = tmp_path / name / "problem.py"
    path.parent.mkdir()
    path.write_text(HEAD + extra)
    return path.parent


def test_derived_shapes_are_odd_new_and_in_range(tmp_path: Path) -> None:
    p = load_problem(
        problem(tmp_path, 'SHAPES = [{"m": 64, "n": 256, "k": 8}, {"m": 128, "n": 1024, "k": 8}]\n')
    )
    assert varying_dims(p.shapes) == ["m", "n"]  # k never varies: structural, kept
    for secret in range(20):
        shapes = unseen_shapes(p, secret)
        assert len(shapes) == 2
        for shape in shapes:
            assert shape not in p.shapes and shape["k"] == 8
        first, second = shapes
        for dim, (lo, hi) in {"m": (64, 128), "n": (256, 1024)}.items():
            value = first[dim]
            assert lo <= value <= hi and value % 2 == 1, (secret, first)
            assert value not in (64, 128, 256, 1024)
        assert 1 in (second["m"], second["n"])  # size 1 where the problem allows it
    assert unseen_shapes(p, 7) == unseen_shapes(p, 7)  # the secret decides
    assert len({str(unseen_shapes(p, new_secret())) for _ in range(6)}) > 1


def test_the_example_problems_get_unseen_shapes() -> None:
    for name in ("vector_add", "softmax", "rmsnorm", "matmul_bf16"):
        p = load_problem(ROOT / "examples" / name)
        shapes = unseen_shapes(p, 12345)
        assert len(shapes) == 2 and all(s not in p.shapes for s in shapes), name
        assert all(v % 16 and v % 128 for s in shapes for v in s.values()), (name, shapes)


def test_a_problem_narrows_or_switches_them_off(tmp_path: Path) -> None:
    shapes = 'SHAPES = [{"m": 16, "n": 64}, {"m": 48, "n": 640}]\n'
    off = load_problem(problem(tmp_path, shapes + "UNSEEN = False\n", "off"))
    assert unseen_shapes(off, 1) == []
    narrow = load_problem(problem(tmp_path, shapes + (
        'UNSEEN = {"dims": ["n"], "min": {"n": 100}, "multiple_of": {"n": 16}, "one": False, '
        '"count": 3, "shapes": [{"m": 5, "n": 7}]}\n'), "narrow"))  # fmt: skip
    got = unseen_shapes(narrow, 3)
    assert got[0] == {"m": 5, "n": 7} and len(got) == 3  # given shapes first, as they are
    for shape in got[1:]:
        assert shape["m"] in (16, 48)  # m does not vary
        assert shape["n"] >= 100 and shape["n"] % 16 == 0 and (shape["n"] // 16) % 2 == 1
    bad = load_problem(problem(tmp_path, shapes + 'UNSEEN = {"dimz": ["n"]}\n', "bad"))
    with pytest.raises(ProblemError, match="unknown key"):
        unseen_shapes(bad, 1)
    assert UnseenPolicy.parse(None) == UnseenPolicy() and not UnseenPolicy.parse(False).enabled


def test_shapes_the_problem_cannot_build_are_never_used(tmp_path: Path) -> None:
    # this generator rejects m = 1 and odd n: the derived shapes avoid both
    strict = HEAD.replace("    gen = torch", "    assert m > 1 and n % 2 == 0\n    gen = torch")
    path = tmp_path / "strict" / "problem.py"
    path.parent.mkdir()
    path.write_text(strict + 'SHAPES = [{"m": 2, "n": 64}, {"m": 40, "n": 640}]\n')
    p = load_problem(path.parent)
    for secret in range(5):
        shapes = unseen_shapes(p, secret)
        assert shapes, secret
        for shape in shapes:  # only m can take an odd size here; n stays a public one
            assert shape["m"] > 1 and shape["m"] % 2 == 1 and shape["n"] in (64, 640)
    nothing = load_problem(problem(tmp_path, "SHAPES = [{}]\n", "fixed"))
    assert unseen_shapes(nothing, 1) == []  # nothing to vary: new seeds only
