"""The buffered sequential kernel of dot / matmul (``accumulate._seq_products``): against
the step-by-step MPFR reference of tests/test_accumulate.py, with sums that float64 cannot
hold exactly (operands 80 binades apart), overflow in the middle of a chain, and every
rounding mode it takes; and bit for bit the generic ``_seq`` path it replaces."""

from __future__ import annotations

import sys
import zlib
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
import floatfmt.accumulate  # noqa: F401
from floatfmt import eft
from tests.test_accumulate import Ref, _ref_dot, _same, _terms

ac = sys.modules["floatfmt.accumulate"]
MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "odd"]


@pytest.mark.parametrize("fmt,acc", [("bf16", "fp32"), ("fp16", "fp16"), ("bf16", "bf16"),
                                     ("fp32", "fp32")])
@pytest.mark.parametrize("mode", MODES)
def test_seq_kernel_matches_reference_on_inexact_float64_sums(fmt, acc, mode, monkeypatch):
    calls = []
    real = eft.to_sticky
    monkeypatch.setattr(eft, "to_sticky", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(zlib.crc32(f"{fmt} {acc} {mode}".encode()))
    spread = 40 if ff.info(fmt).max > 1e30 else 7
    A = np.asarray(_terms(fmt, 6 * 41, rng, spread)).reshape(6, 41)
    B = np.asarray(_terms(fmt, 41 * 4, rng, spread)).reshape(41, 4)
    A[0, 5] = 0.0  # a zero product in a chain
    got = ff.matmul(A, B, fmt, acc_fmt=acc, rounding=mode)
    ref = Ref(acc, mode)
    for i in range(6):
        for j in range(4):
            want = _ref_dot(A[i].tolist(), B[:, j].tolist(), ref, "sequential")
            assert _same(got[i, j], want), (i, j, got[i, j], want)
    if acc != "fp16":
        assert calls, "no step had an inexact float64 sum: the test misses the sticky path"


@pytest.mark.parametrize("mode", MODES)
def test_seq_kernel_overflow_inside_the_chain(mode):
    """An fp16 accumulator that overflows at step 2 and is then brought back by
    cancellation (which Inf does not allow), and a NaN from Inf - Inf."""
    a = np.array([[60000.0, 60000.0, -60000.0, 1.0], [60000.0, 60000.0, 1.0, 1.0]])
    b = np.array([1.0, 1.0, 1.0, 1.0])[:, None] * np.array([[1.0, -1.0]])
    got = ff.matmul(a, b, "fp16", acc_fmt="fp16", rounding=mode)
    ref = Ref("fp16", mode)
    for i in range(2):
        for j in range(2):
            prods = [x * y for x, y in zip(a[i].tolist(), b[:, j].tolist())]  # exact
            want = ref.r(Fraction(prods[0]))
            for p in prods[1:]:
                want = ref.add(want, p)  # round(acc + p), Inf and NaN included
            assert _same(got[i, j], want), (mode, i, j, got[i, j], want)


@pytest.mark.parametrize("mode", MODES)
def test_seq_kernel_equals_generic_path(mode, monkeypatch):
    rng = np.random.default_rng(zlib.crc32(mode.encode()))
    A = np.asarray(_terms("bf16", 3 * 20 * 64, rng, 30)).reshape(3, 20, 64)
    B = np.asarray(_terms("bf16", 64 * 24, rng, 30)).reshape(64, 24)
    fast = ff.matmul(A, B, "bf16", rounding=mode)
    dfast = ff.dot(A[0], B.T[:20], "bf16", rounding=mode)
    monkeypatch.setattr(ac, "_seq_products_ok", lambda actx: False)
    slow = ff.matmul(A, B, "bf16", rounding=mode)
    dslow = ff.dot(A[0], B.T[:20], "bf16", rounding=mode)
    assert _same(fast, slow) and _same(dfast, dslow)


@pytest.mark.parametrize("mode", MODES)
def test_seq_kernel_sum_on_a_tie_with_a_remainder(mode):
    """acc = 1 + 2**-23 plus the product (1 + 2**-23) * 2**-24 (1 - 2**-23) = 2**-24 -
    2**-70: the float64 sum is the fp32 tie 1 + 3 * 2**-24 and the remainder -2**-70
    decides every mode (RNE of the float64 sum alone would give 1 + 2**-22)."""
    a = np.array([[1.0, 1.0 + 2.0 ** -23]])
    b = np.array([[1.0 + 2.0 ** -23], [2.0 ** -24 * (1 - 2.0 ** -23)]])
    got = ff.matmul(a, b, "fp32", rounding=mode)[0, 0]
    exact = Fraction(1) + Fraction(2) ** -23 + Fraction(2) ** -24 - Fraction(2) ** -70
    want = Ref("fp32", mode).r(exact)
    assert _same(got, want), (mode, got, want)
    if mode == "nearest_even":
        assert got == 1.0 + 2.0 ** -23
