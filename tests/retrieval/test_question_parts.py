"""A long question in the asker's words is also searched sentence by sentence: the
parts are the sentences of at least four words; a short query has none."""

from __future__ import annotations

from ctxkernel import querytext


def test_a_long_question_splits_into_its_sentences() -> None:
    q = (
        "on H200 a tilelang T.gemm with block_N=96 runs slower than block_N=64, and the "
        "generated code uses a different instruction shape. why would a wider tile be "
        "slower here? is there a rule for which block sizes map to one wgmma"
    )
    parts = querytext.sentences(q)
    assert len(parts) == 3
    assert parts[1].startswith("why would a wider tile")
    assert all(len(p.split()) >= querytext.SENTENCE_MIN_WORDS for p in parts)


def test_short_queries_and_single_sentences_are_not_split() -> None:
    assert querytext.sentences("how do I tile a GEMM with TMA? and swizzle it") == []
    one = " ".join(["word"] * 30)
    assert querytext.sentences(one) == []
