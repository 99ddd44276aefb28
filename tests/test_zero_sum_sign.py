"""Issue 9, class 8: the sign of an exact zero sum is one IEEE rule, whatever the order.

IEEE 754 (6.3): x + y with x, y both zero of the same sign keeps that sign; any other
exact zero sum is +0, except under roundTowardNegative (``down``), where it is -0.
For a sum of many terms evaluated by any tree of such additions (with every partial
sum exact) this gives, by induction over the tree:

* modes other than ``down``: -0 exactly when every term is -0;
* ``down``: +0 exactly when every term is +0, else -0.

The rule is written here from that statement, not from floatfmt, and checked for
``sum`` / ``dot`` / ``matmul`` in every order and mode, ``add`` and ``fma``, over every
sign pattern of zeros and cancelling terms up to length 5 (all partial sums exact).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import floatfmt as ff
from conftest import ALL_MODES

ORDERS = ("sequential", "pairwise", "kahan", "blocked", "exact")
MODES = ALL_MODES
ALPHABET = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5)


def ieee_zero_sign_negative(terms, mode) -> bool:
    """True when the exact zero sum of ``terms`` is -0 (the rule above)."""
    neg = [t == 0 and math.copysign(1.0, t) < 0 for t in terms]
    pos = [t == 0 and math.copysign(1.0, t) > 0 for t in terms]
    if mode == "down":
        return not all(pos)
    return all(neg)


def zero_sum_sequences(n):
    """Every sequence of n terms from ALPHABET whose exact sum is zero."""
    return [s for s in itertools.product(ALPHABET, repeat=n) if sum(s) == 0]


def _check(results, seqs, mode, fmt, what):
    neg_zero = ff.get_format(fmt).negative_zero
    bad = []
    for r, s in zip(np.ravel(results), seqs):
        want_neg = ieee_zero_sign_negative(s, mode) and neg_zero
        if r != 0 or bool(np.signbit(r)) != want_neg:
            bad.append((s, float(r)))
    assert not bad, f"{what}: {len(bad)} of {len(seqs)} wrong, e.g. {bad[:4]}"


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32", "fp64", "fp8_e4m3", "fp8_e4m3fnuz"])
@pytest.mark.parametrize("order", ORDERS)
def test_sum_zero_sign_every_order_and_mode(fmt, order):
    for n in range(1, 6):
        seqs = zero_sum_sequences(n)
        X = np.array(seqs, np.float64).T  # one sequence per column
        for mode in MODES:
            for block in ((32, 2) if order == "blocked" else (32,)):
                r = ff.sum(X, fmt, order=order, axis=0, rounding=mode, block=block, rng=0)
                _check(r, seqs, mode, fmt, f"sum {fmt} {order} {mode} n={n} block={block}")
            # scalar form (axis=None) on a few sequences
            for s in seqs[:: max(1, len(seqs) // 7)]:
                r = ff.sum(list(s), fmt, order=order, rounding=mode, rng=0)
                _check([r], [s], mode, fmt, f"sum(axis=None) {fmt} {order} {mode}")


@pytest.mark.parametrize("fmt,acc", [("fp16", "fp32"), ("bf16", "bf16"), ("fp64", "fp64"),
                                     ("fp32", "fp16")])
@pytest.mark.parametrize("order", ORDERS)
def test_dot_and_matmul_zero_sign(fmt, acc, order):
    """Terms a_k * b_k: zero products carry the sign sign(a) * sign(b)."""
    signs = (1.0, -1.0)
    for n in range(1, 5):
        seqs = zero_sum_sequences(n)
        terms = np.array(seqs, np.float64)
        # write each term as a * b with a sign split that varies per element
        rng = np.random.default_rng(n)
        bsign = rng.choice(signs, terms.shape)
        A = terms * bsign  # exact: the sign moves to b (zeros included: -0 * -1 = +0)
        B = np.ones_like(terms) * bsign
        assert np.array_equal(np.signbit(A * B), np.signbit(terms))
        for mode in MODES:
            r = ff.dot(A, B, fmt, acc_fmt=acc, order=order, rounding=mode, rng=0)
            out_fmt = acc
            _check(r, seqs, mode, out_fmt, f"dot {fmt}/{acc} {order} {mode} n={n}")
            M = ff.matmul(A[:, None, :], B[:, :, None], fmt, acc_fmt=acc, order=order,
                          rounding=mode, rng=0)
            _check(M.reshape(-1), seqs, mode, out_fmt, f"matmul {fmt}/{acc} {order} {mode} n={n}")


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32", "fp64", "fp8_e5m2"])
def test_add_sub_fma_zero_sign(fmt):
    pairs = zero_sum_sequences(2)
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    for mode in MODES:
        _check(ff.add(a, b, fmt, rounding=mode, rng=0), pairs, mode, fmt, f"add {fmt} {mode}")
        _check(ff.sub(a, -b, fmt, rounding=mode, rng=0), pairs, mode, fmt, f"sub {fmt} {mode}")
        # fma(x, y, c) with x * y = a: y = +-1
        for ysign in (1.0, -1.0):
            x = a * ysign
            r = ff.fma(x, np.full(a.shape, ysign), b, fmt, rounding=mode, rng=0)
            _check(r, pairs, mode, fmt, f"fma {fmt} {mode} y={ysign}")
