"""Redaction of secrets printed in another form than verbatim (``harness/redact.py``).

A candidate printed the API key reversed with separators between its characters and it
landed in ``result.json`` and ``feedback.txt``: only the exact value was redacted. These
properties draw random secrets and print each in every form a simple transformation
gives (reversed, spaced out, hex, base64 at every alignment, a stretch of it) and check
that nothing of it survives, while ordinary output is left as it was.
"""

from __future__ import annotations

import base64
import json
import string
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import redact as redaction
from harness.redact import MARK, redact, redact_bytes, redact_obj, redact_tree

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
ALNUM = string.ascii_letters + string.digits
OPEN, CLOSE = "« ", " »"  # context without letters, digits or base64 characters


def _letters(text: str) -> str:
    return "".join(c for c in text if c in ALNUM)


# Secrets as they come: mostly token characters, some punctuation, with enough letters
# and digits, and enough different characters, that the looser forms apply.
SECRETS = (
    st.text(st.sampled_from(ALNUM + "-_.+/=!@#$%^&*"), min_size=16, max_size=80)
    .filter(lambda s: len(_letters(s)) >= redaction.MIN_LENGTH)
    .filter(lambda s: len(set(_letters(s))) >= redaction.MIN_VARIETY)
)
SEPARATORS = st.text(st.sampled_from(" -_.,:;/|*\t\n'\"()[]"), min_size=1, max_size=3)


def _spaced(secret: str, data: st.DataObject) -> str:
    seps = data.draw(st.lists(SEPARATORS, min_size=len(secret) - 1, max_size=len(secret) - 1))
    return secret[0] + "".join(sep + c for sep, c in zip(seps, secret[1:], strict=True))


def _in_context(leak: str, secret: str) -> str:
    return redact(OPEN + leak + CLOSE, [secret])


@SETTINGS
@given(secret=SECRETS)
def test_the_secret_itself_and_reversed_are_redacted(secret: str) -> None:
    for leak in (secret, secret[::-1]):
        assert _in_context(leak, secret) == OPEN + MARK + CLOSE


@SETTINGS
@given(secret=SECRETS, data=st.data())
def test_the_secret_spaced_out_is_redacted(secret: str, data: st.DataObject) -> None:
    """``s-k-a-n-t``, ``s k a n t`` and any other run of separators, both directions."""
    for text in (secret, secret[::-1]):
        out = _in_context(_spaced(text, data), secret)
        assert MARK in out
        assert _letters(out) == _letters(MARK), out


@SETTINGS
@given(secret=SECRETS, data=st.data())
def test_the_secret_as_hex_is_redacted(secret: str, data: st.DataObject) -> None:
    digits = secret.encode().hex()
    case = data.draw(st.sampled_from(["lower", "upper", "mixed"]))
    if case == "upper":
        digits = digits.upper()
    elif case == "mixed":
        flips = data.draw(st.lists(st.booleans(), min_size=len(digits), max_size=len(digits)))
        digits = "".join(c.upper() if f else c for c, f in zip(digits, flips, strict=True))
    pairs = [digits[i : i + 2] for i in range(0, len(digits), 2)]
    style = data.draw(st.sampled_from(["", " ", ":", ", 0x", "\\x"]))
    head = {", 0x": "0x", "\\x": "\\x"}.get(style, "")
    leak = head + style.join(pairs)
    assert _in_context(leak, secret) == OPEN + head + MARK + CLOSE


def _base64_fragments(raw: bytes, urlsafe: bool) -> list[str]:
    """The characters of each alignment that depend on ``raw`` alone, worked out from the
    other end: drop the ones that change when the bytes around it change."""
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    fragments = []
    for offset in range(3):
        a = encode(bytes(offset) + raw + bytes(3)).decode()
        b = encode(b"\xff" * offset + raw + b"\xff" * 3).decode()
        same = [x if x == y else "\0" for x, y in zip(a, b, strict=True)]
        fragments.append(max("".join(same).split("\0"), key=len))
    return fragments


@SETTINGS
@given(
    secret=SECRETS,
    before=st.binary(max_size=7),
    after=st.binary(max_size=7),
    urlsafe=st.booleans(),
    wrap=st.sampled_from([0, 64, 76]),
)
def test_the_secret_as_base64_at_any_offset_is_redacted(
    secret: str, before: bytes, after: bytes, urlsafe: bool, wrap: int
) -> None:
    raw = secret.encode()
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    blob = encode(before + raw + after).decode()
    if wrap:
        blob = "\n".join(blob[i : i + wrap] for i in range(0, len(blob), wrap))
    out = _in_context(blob, secret)
    assert MARK in out
    flat = out.replace("\n", "")
    for fragment in _base64_fragments(raw, urlsafe):
        assert fragment not in flat
    # what is left encodes the bytes around the secret (and a few bits of its edges)
    left = len(flat) - len(OPEN + MARK + CLOSE)
    assert left <= 4 * (len(before) + len(after)) // 3 + 8, out


@SETTINGS
@given(secret=SECRETS, data=st.data())
def test_a_long_stretch_of_the_secret_is_redacted(secret: str, data: st.DataObject) -> None:
    """A key printed in pieces: any ``RUN_MIN`` characters of it in order, or reversed."""
    size = data.draw(st.integers(redaction.RUN_MIN, len(secret)))
    start = data.draw(st.integers(0, len(secret) - size))
    piece = secret[start : start + size]
    for leak in (piece, piece[::-1]):
        assert _in_context(leak, secret) == OPEN + MARK + CLOSE


@SETTINGS
@given(secret=SECRETS, extra=st.text(ALNUM, min_size=4, max_size=20))
def test_a_secret_holding_another_is_redacted_with_it(secret: str, extra: str) -> None:
    longer = secret + extra
    text = f"first {longer} then {secret} then {'-'.join(_letters(longer)[::-1])}"
    out = redact(text, [secret, longer])
    assert out == f"first {MARK} then {MARK} then {MARK}"


# Ordinary output a check produces: a verdict, numbers, paths, addresses, JSON.
ORDINARY = [
    "verdict: PASSED  (vector_add, backend triton, cpu (Triton interpreter))",
    "correctness  FAILED  trial 2/3 (seed 1234): max abs err 3.051758e-05 > atol 1e-05",
    "mismatch at [0, 17]: expected 0.5000, got 0.4999 (rel 2.000000e-04)",
    "tensor([0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.])",
    "tensor([ 0.0000,  1.0000,  2.0000,  3.0000,  4.0000,  5.0000,  6.0000,  7.0000])",
    "run: runs/vector_add/20240611-142233-3fa9c2d1/result.json",
    "/home/user/.cache/ctxkernel/triton/6f/6f1e0a8b9c3d2e4f5a6b7c8d9e0f1a2b/kernel.ptx",
    "Segmentation fault at 0x00007f3a9c0e1000 (pid 4242), 16777216 bytes, 2^24 elements",
    'File "candidate.py", line 12, in custom_kernel\n    out = torch.empty_like(x)',
    json.dumps({"type": "rung", "name": "benchmark", "median_us": 12.5, "n": 1 << 20}),
    "sha256:" + "0123456789abcdef" * 4,
    "aGVsbG8gd29ybGQ= is base64 of hello world; 48656c6c6f is hex of Hello",
]
TOKENS = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["sk-ant-api03-", "hf_", "ghp_", "xoxb-", ""]),
    st.text(st.sampled_from(ALNUM + "-_"), min_size=20, max_size=64),
).filter(lambda s: len(set(s)) >= 10)


@SETTINGS
@given(secret=TOKENS)
def test_ordinary_text_is_left_unchanged(secret: str) -> None:
    for text in ORDINARY:
        assert redact(text, [secret]) == text
    doc = {"reason": ORDINARY[1], "metrics": {"max_abs_err": 3.05e-05, "shape": [4096, 4096]}}
    assert redact_obj(doc, [secret]) == doc


def test_a_secret_of_one_repeated_character_leaves_printed_zeros_alone() -> None:
    """The looser forms need a varied secret: a password of zeros spaced out is a tensor
    of zeros, and its stretches are the digits of a float."""
    secret = "0000000000000000"
    for text in ("tensor([0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.])",
                 "err 1.000000000001e+00"):  # fmt: skip
        assert redact(text, [secret]) == text
    assert redact(f"key {secret} end", [secret]) == f"key {MARK} end"


def test_redact_bytes_keeps_bytes_that_are_not_utf8() -> None:
    secret = "sk-ant-api03-Zx81qPmW7vTn4LbE"
    data = b"\xff\xfe head " + "-".join(secret[::-1]).encode() + b" tail \x80\x00"
    assert redact_bytes(data, [secret]) == b"\xff\xfe head " + MARK.encode() + b" tail \x80\x00"
    clean = b"\xff\xfe nothing to see \x80"
    assert redact_bytes(clean, [secret]) == clean


def test_redact_tree_rewrites_a_file_holding_the_secret_as_hex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tok-9fQ2xLmP4vRz8WcB"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    leaky = tmp_path / "worker.stdout.log"
    leaky.write_text("key: " + secret.encode().hex().upper() + "\n")
    quiet = tmp_path / "feedback.txt"
    quiet.write_text("verdict: PASSED\n")
    assert redact_tree(tmp_path) == [leaky]
    assert leaky.read_text() == f"key: {MARK}\n"
    assert quiet.read_text() == "verdict: PASSED\n"


def _ordinary_mib() -> str:
    lines: list[str] = []
    i = 0
    while sum(map(len, lines)) < 1 << 20:
        lines.append(
            f"trial {i % 7}: max abs err {i * 1.37e-7:.6e} at ({i % 4096}, {i * 31 % 4096}) "
            f"runs/vector_add/20240611-{i:06d}/worker.stdout.log 0x{i * 2654435761:016x}"
        )
        i += 1
    return "\n".join(lines)


SLOW = 3.0  # seconds: about 0.1 s on the 2-core CI machine; far more means backtracking


def test_redacting_a_mib_of_output_is_fast() -> None:
    values = ["sk-ant-api03-" + "Zx81qPmW7vTn4LbE" * 6, "hf_QmZ2x9WkLp4RvT8sNc", "a1" * 20]
    text = _ordinary_mib()
    started = time.perf_counter()
    assert redact(text, values) == text
    leaky = text + values[0][::-1] + "-".join(values[0]) + values[0].encode().hex()
    assert redact(leaky, values).endswith(MARK)
    assert time.perf_counter() - started < SLOW


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("a" * (1 << 20), "a" * 16),  # the secret everywhere, overlapping itself
        ("a-" * (1 << 19), "ab" * 8),  # separators between almost-matches
        (("a" + " " * 999) * 1000, "aaaaaaaaab"),  # long separator runs
        ("Zx81qPmW7vTn" * (1 << 16), "Zx81qPmW7vTnLbE4"),  # a stretch everywhere
        ("0x" * (1 << 19), "0x0x0x0x0x0x0x0x"),  # hex separators that are also the secret
    ],
    ids=["repeated", "near-misses", "long-separators", "stretches", "hex-separators"],
)
def test_no_text_makes_redaction_backtrack(text: str, secret: str) -> None:
    started = time.perf_counter()
    redact(text, [secret])
    assert time.perf_counter() - started < SLOW
