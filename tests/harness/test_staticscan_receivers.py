"""The forbidden-op rule matches torch's ``add``, not Python's ``set.add``.

A candidate for a problem that forbids ``add`` kept a ``seen = set()`` and called
``seen.add(...)``: the static scan read every ``.add()`` as ``Tensor.add`` and rejected
it. A method now counts only on a receiver that may be a tensor; a receiver that every
binding in the file makes a Python container is not one. Torch's own spellings
(``torch.add``, ``torch.ops.aten.add``, ``torch.Tensor.add``) always count.
"""

from __future__ import annotations

import pytest

from harness.problems.policy import Policy
from harness.staticscan import scan

ADD = Policy.from_entries(["add", "aten::add"])
MATMUL = Policy.from_entries(["matmul"])


def _errors(source: str, policy: Policy = ADD) -> list[tuple[str, str]]:
    return [(f.rule, f.message) for f in scan(source, policy).errors]


@pytest.mark.parametrize(
    "source",
    [
        "def custom_kernel(i):\n    seen = set()\n    seen.add(1)\n    return i\n",
        "SEEN = {1, 2}\ndef custom_kernel(i):\n    SEEN.add(3)\n    return i\n",
        "d = {}\ndef custom_kernel(i):\n    d.add(1)\n    return i\n",
        "def custom_kernel(i):\n    seen: set[int] = set()\n    seen.add(1)\n    return i\n",
        "def custom_kernel(i):\n    set().add(1)\n    {1}.add(2)\n    return i\n",
        "def custom_kernel(i):\n    a, b = set(), []\n    a.add(1)\n    return i\n",
        "import collections\ndef custom_kernel(i):\n    c = collections.Counter()\n    c.add(1)\n    return i\n",
        "class Seen:\n    def __init__(self):\n        self.ids = set()\n"
        "    def note(self, x):\n        self.ids.add(x)\ndef custom_kernel(i):\n    return i\n",
        "def custom_kernel(i):\n    seen = set()\n    try:\n        return k(i)\n    except Exception:\n"
        "        seen.add(1)\n        return i\n",
        "def custom_kernel(i):\n    seen = set()\n    getattr(seen, 'add')(1)\n    return i\n",
    ],
    ids=[
        "local-set",
        "module-set-display",
        "dict-display",
        "annotated",
        "display-receiver",
        "tuple-unpacked",
        "collections",
        "self-attribute",
        "in-an-except",
        "getattr",
    ],
)
def test_set_add_is_not_the_forbidden_torch_add(source: str) -> None:
    assert _errors(source) == []


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def custom_kernel(i):\n    x, y = i\n    return x.add(y)\n", "calls .add()"),
        ("def custom_kernel(i):\n    x, y = i\n    return x.add_(y)\n", "calls .add_()"),
        ("def custom_kernel(i):\n    return i[0].add(i[1])\n", "calls .add()"),
        # a name bound to a set somewhere and to anything else elsewhere may be a tensor
        (
            "def custom_kernel(i):\n    s = set()\n    s = i[0]\n    return s.add(i[1])\n",
            "calls .add()",
        ),
        ("def custom_kernel(i, s=set()):\n    return s.add(i[1])\n", "calls .add()"),
        (
            "def custom_kernel(i):\n    s = set()\n    for s in i:\n        pass\n    return s.add(i[1])\n",
            "calls .add()",
        ),
        (
            "s = set()\ndef custom_kernel(i):\n    globals()['s'] = i[0]\n    return s.add(i[1])\n",
            "calls .add()",
        ),
        ("set = list\ndef custom_kernel(i):\n    s = set()\n    return s.add(i)\n", "calls .add()"),
        ("import torch\ndef custom_kernel(i):\n    return torch.add(*i)\n", "uses torch.add"),
        (
            "import torch\ndef custom_kernel(i):\n    return torch.ops.aten.add.Tensor(*i)\n",
            "uses torch.ops.aten.add",
        ),
        (
            "from torch.ops import aten\ndef custom_kernel(i):\n    return aten.add_(*i)\n",
            "uses torch.ops.aten.add_",
        ),
        (
            "import torch\ndef custom_kernel(i):\n    return torch.Tensor.add(*i)\n",
            "calls torch.Tensor.add()",
        ),
        ("def custom_kernel(i):\n    return getattr(i[0], 'add')(i[1])\n", "looks up 'add'"),
    ],
    ids=[
        "unpacked-input",
        "in-place",
        "subscript",
        "rebound",
        "parameter",
        "loop-target",
        "globals",
        "shadowed-set",
        "torch.add",
        "aten-overload",
        "aten-imported",
        "tensor-class",
        "getattr",
    ],
)
def test_torch_add_in_every_spelling_is_still_forbidden(source: str, message: str) -> None:
    errors = _errors(source)
    assert errors and all(rule == "P101" for rule, _ in errors), errors
    assert any(message in text for _, text in errors), errors


def test_an_aten_op_the_problem_does_not_forbid_is_not_flagged() -> None:
    assert _errors("import torch\ndef custom_kernel(i):\n    return torch.ops.aten.mul(*i)\n") == []


def test_matmul_methods_still_need_no_tensor_proof() -> None:
    source = "def custom_kernel(i):\n    a, b = i\n    return a.matmul(b)\n"
    assert [rule for rule, _ in _errors(source, MATMUL)] == ["P101"]
