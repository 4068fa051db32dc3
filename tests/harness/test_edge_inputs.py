"""Edge inputs (``EDGE_INPUTS``, ``harness/rungs/edges.py``): the setting, the transforms
and the trials they make, and the worker rebuilding the views with the parent's strides.

Through the real harness: the planted cheats ``c06_strided_unit_columns`` (wrong only on
strided inputs), ``c06_contiguous_rows``, ``c06_nan_scrubbed``, ``c06_empty_shortcut`` and
their honest counterpart ``c06_honest_stride_aware`` (``test_harness_cheats.py``), and
the example solutions of softmax and rmsnorm, which opt in (``test_harness_examples.py``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch
from cheatspec import EXAMPLES

from harness.errors import ProblemError
from harness.options import RunOptions
from harness.problems.problem import load_problem
from harness.problems.problemspec import EDGE_CLASSES
from harness.rungs.edges import (
    PITCH,
    broadcast_view,
    edge_classes,
    edge_trials,
    padded_view,
    replace_leaves,
    strided_view,
    with_nonfinite,
)
from harness.rungs.inputs import Inputs, flatten
from harness.worker.calltensors import place

VECTOR_ADD = EXAMPLES / "vector_add"


def _with_setting(tmp_path: Path, value: str, base: Path = VECTOR_ADD) -> Path:
    """A copy of ``base``'s problem whose ``EDGE_INPUTS`` is ``value`` (the last one wins)."""
    folder = tmp_path / f"p{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    source = (base / "problem.py").read_text()
    (folder / "problem.py").write_text(f"{source}\nEDGE_INPUTS = {value}\n")
    return folder


# -- the setting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"strided"', "EDGE_INPUTS: expected True, False, a list of classes or a dict"),
        ("3", "EDGE_INPUTS: expected True, False, a list of classes or a dict"),
        ('["diagonal"]', "EDGE_INPUTS: unknown class 'diagonal' (classes: padded, strided"),
        ('{"strided": "yes"}', "EDGE_INPUTS['strided']: expected True, False or a list of input"),
        ('{"strided": ["x"]}', "EDGE_INPUTS['strided']: expected True, False or a list of input"),
        ('{"size0": [0]}', "EDGE_INPUTS['size0']: expected True, False or a list of dimension"),
    ],
    ids=["string", "number", "unknown-class", "dict-string", "dict-names", "size0-numbers"],
)
def test_a_wrongly_typed_edge_setting_is_one_line(tmp_path: Path, value: str, message: str) -> None:
    with pytest.raises(ProblemError) as raised:
        load_problem(_with_setting(tmp_path, value))
    text = str(raised.value)
    assert message in text and "\n" not in text, text
    assert text.startswith("problem.py: ")


def test_edge_classes_are_off_unless_named(tmp_path: Path) -> None:
    assert edge_classes(load_problem(VECTOR_ADD)) == {}  # the default: none
    for value, want in (
        ("False", {}),
        ("True", dict.fromkeys(EDGE_CLASSES)),
        ('["nonfinite", "strided"]', {"strided": None, "nonfinite": None}),
        (
            '{"strided": [1], "padded": False, "size0": ["n"], "broadcast": True}',
            {"strided": (1,), "broadcast": None, "size0": ("n",)},
        ),
    ):
        got = edge_classes(load_problem(_with_setting(tmp_path, value)))
        assert got == want, value
        assert list(got) == [c for c in EDGE_CLASSES if c in want]  # always in class order


# -- the transforms -----------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(7, 33), (3, 4, 17), (5, 1)], ids=str)
def test_padded_and_strided_views_hold_the_same_values_not_contiguous(
    shape: tuple[int, ...],
) -> None:
    t = torch.randn(shape)
    for make in (padded_view, strided_view):
        view = make(t)
        assert view is not None
        assert not view.is_contiguous(), (make.__name__, view.stride())
        assert torch.equal(view, t) and view.shape == t.shape
        assert view.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    padded = padded_view(t)
    assert padded is not None and padded.stride(-1) == 1
    assert padded.stride(-2) % PITCH == 0 and padded.stride(-2) > shape[-1]
    strided = strided_view(t)
    assert strided is not None and all(s >= 2 for s in strided.stride())


def test_views_of_what_cannot_be_made_non_contiguous_are_none() -> None:
    assert padded_view(torch.randn(50)) is None  # a row of a wider one is still contiguous
    assert padded_view(torch.randn(1, 50)) is None
    assert strided_view(torch.randn(1)) is None
    assert broadcast_view(torch.randn(1, 1)) is None
    one = strided_view(torch.arange(6, dtype=torch.int32))  # integers too
    assert one is not None and one.stride() == (2,) and one.tolist() == list(range(6))


def test_a_broadcast_view_repeats_one_slice_with_stride_0() -> None:
    t = torch.randn(6, 9)
    view = broadcast_view(t)
    assert view is not None and view.stride() == (0, 1) and view.shape == t.shape
    assert torch.equal(view, t[:1].expand(6, 9))
    column = broadcast_view(torch.randn(1, 5, 3))  # the first dimension longer than 1
    assert column is not None and column.stride()[1] == 0


def test_nonfinite_inputs_hold_a_nan_and_both_infinities_in_rows_of_their_own() -> None:
    t = torch.randn(8, 20)
    out, where = with_nonfinite(t, random.Random(3)) or (None, "")
    assert out is not None
    assert int(torch.isnan(out).sum()) == 1
    assert int((out == float("inf")).sum()) == 1 and int((out == float("-inf")).sum()) == 1
    rows = {int(r) for r in (~torch.isfinite(out)).nonzero()[:, 0]}
    assert len(rows) == 3
    same = torch.isfinite(out)
    assert torch.equal(out[same], t[same]) and torch.isfinite(t).all()
    assert where.count("[") == 3
    small, _ = with_nonfinite(torch.randn(2), random.Random(0)) or (None, "")
    assert small is not None and int((~torch.isfinite(small)).sum()) == 2
    assert with_nonfinite(torch.arange(5), random.Random(0)) is None  # integers: none


def test_replace_leaves_numbers_tensors_as_flatten_does() -> None:
    a, b, c = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    value = (a, {"k": [3, b]}, c)
    new = torch.full((1,), 9.0)
    out = replace_leaves(value, {1: new})
    leaves = [t for t in flatten(out) if isinstance(t, torch.Tensor)]
    assert leaves[0] is a and leaves[1] is new and leaves[2] is c
    assert out[1]["k"][0] == 3


# -- the worker rebuilds the parent's views ------------------------------------------------


def test_the_worker_rebuilds_each_view_with_nan_between_its_elements() -> None:
    t = torch.randn(5, 33)
    for make in (padded_view, strided_view, broadcast_view):
        view = make(t)
        assert view is not None
        # what crosses the channel: the logical values, row-major, and the strides
        placed = place(view.contiguous(), tuple(view.stride()), "cpu")
        assert placed.stride() == view.stride() and torch.equal(placed, view)
        storage = torch.empty(0).set_(placed.untyped_storage())  # the whole buffer
        assert storage.numel() >= view.numel()
        # a kernel reading the first numel elements as if contiguous meets NaN
        assert bool(torch.isnan(storage[: view.numel()]).any()), make.__name__
    dense = place(torch.randn(3, 4).t().contiguous(), (1, 3), "cpu")  # a dense layout
    assert dense.stride() == (1, 3) and dense.untyped_storage().nbytes() == 12 * 4
    ints = place(torch.arange(6).view(2, 3), (6, 2), "cpu")
    assert ints.tolist() == [[0, 1, 2], [3, 4, 5]]


# -- the trials ----------------------------------------------------------------------------


def _inputs(problem: Path, **options: Any) -> Inputs:
    return Inputs(load_problem(problem), RunOptions(device="cpu", secret=11, **options), "cpu")


def test_softmax_asks_for_every_class_and_gets_one_trial_each() -> None:
    inputs = _inputs(EXAMPLES / "softmax")
    trials = list(edge_trials(inputs))
    assert [t.kind for t in trials] == list(EDGE_CLASSES)
    largest = inputs.shapes[inputs.largest_shape_index()]
    for trial in trials:
        if trial.kind == "size0":
            assert trial.shape["m"] == 0 and trial.leaves[0].numel() == 0
            assert inputs.reference(trial).shape == (0, trial.shape["n"])
            continue
        assert trial.shape == largest
        plain = inputs.make(trial.shape_index, trial.trial, record=False)  # same seed
        (got,), (want,) = trial.leaves, plain.leaves
        if trial.kind in ("padded", "strided"):
            assert not got.is_contiguous() and torch.equal(got, want)
            assert torch.equal(inputs.reference(trial), inputs.reference(plain))
        elif trial.kind == "broadcast":
            assert got.stride()[0] == 0 and torch.equal(got, want[:1].expand_as(want))
        else:
            assert int((~torch.isfinite(got)).sum()) == 3
            assert not bool(torch.isfinite(inputs.reference(trial)).all())
        label = trial.label
        assert f"seed {trial.seed}" in label and "shape m=" in label, label
    assert "strides [" in trials[1].label and "NaN, +Inf, -Inf at" in trials[4].label


def test_edge_trials_are_narrowed_switched_off_and_skipped_with_no_unseen(
    tmp_path: Path,
) -> None:
    rmsnorm = EXAMPLES / "rmsnorm"
    assert list(edge_trials(_inputs(rmsnorm, unseen=False))) == []
    only_weight = _with_setting(tmp_path, '{"strided": [1]}', base=rmsnorm)
    (trial,) = edge_trials(_inputs(only_weight))
    x, weight = trial.leaves
    assert x.is_contiguous() and not weight.is_contiguous() and weight.stride() == (2,)
    assert "input #1 strides [2]" in trial.label and "input #0" not in trial.label
    vector = _with_setting(tmp_path, '["padded"]')  # 1-D inputs: nothing to pad, no trial
    assert list(edge_trials(_inputs(vector))) == []
    unknown = _with_setting(tmp_path, '{"size0": ["k"]}', base=rmsnorm)
    with pytest.raises(ProblemError, match=r"EDGE_INPUTS\['size0'\] names 'k'"):
        list(edge_trials(_inputs(unknown)))


def test_size0_is_skipped_where_the_reference_does_not_define_it(tmp_path: Path) -> None:
    source = (
        (VECTOR_ADD / "problem.py")
        .read_text()
        .replace(
            "    return x + y\n",
            "    assert x.numel(), 'an empty vector has no sum'\n    return x + y\n",
        )
    )
    folder = tmp_path / "strict"
    folder.mkdir()
    (folder / "problem.py").write_text(source + '\nEDGE_INPUTS = ["size0", "nonfinite"]\n')
    assert [t.kind for t in edge_trials(_inputs(folder))] == ["nonfinite"]
