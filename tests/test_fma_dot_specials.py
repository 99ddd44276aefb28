"""Issue 9, class 3: fma / dot / matmul with huge finite operands and Inf / NaN addends.

The exact product of two finite numbers is finite, however far past the float64
range ``a * b`` would land; so IEEE 754 gives ``fma(1e308, 10, -inf) == -inf`` (not
NaN), and an exact or fused dot product does the same.  The reference below is
written from that rule with ``Fraction`` arithmetic and the MPFR rounding oracle
(tests/oracles/mpfr.py), step by step for every order as the accumulate module
documents it: ``sequential`` fuses each product into the accumulator (fp64
products do not fit float64), ``exact`` rounds the exact sum once, the other
orders first round each product to the accumulator format.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from conftest import DET_MODES as MODES, mpfr as M, same_value as same

ORDERS = ("sequential", "pairwise", "kahan", "blocked", "exact")
HUGE = (1e308, -1e308, 1.7976931348623157e308, 2.0 ** 1000 * 1.5, -(2.0 ** 1020) * 1.25, 10.0,
        -16.0, 3.0, 0.75, 2.0 ** -600, -(2.0 ** -1000), 5e-324)
SPECIAL = (math.inf, -math.inf, math.nan)


# ------------------------------------------------------------------ reference, from the rule
def xprod(a, b):
    """Exact product: a Fraction (finite), a signed zero, or a float Inf / NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan
        return math.copysign(math.inf, math.copysign(1, a) * math.copysign(1, b))
    if a == 0 or b == 0:
        return math.copysign(0.0, math.copysign(1, a) * math.copysign(1, b))
    return Fraction(a) * Fraction(b)


def is_special(v):
    return isinstance(v, float) and not math.isfinite(v)


def xadd(x, y, mode):
    """Exact x + y: specials by IEEE (Inf + finite = Inf, Inf - Inf = NaN), zeros by IEEE."""
    if is_special(x) or is_special(y):
        fx = x if is_special(x) else 0.0
        fy = y if is_special(y) else 0.0
        with np.errstate(invalid="ignore"):
            return float(np.float64(fx) + np.float64(fy))
    q = Fraction(x) + Fraction(y)
    if q != 0:
        return q
    if x == 0 and y == 0 and math.copysign(1, float(x)) == math.copysign(1, float(y)):
        return float(x)
    return -0.0 if mode == "down" else 0.0


def rnd(v, fmt, mode):
    if isinstance(v, float) and (v == 0 or not math.isfinite(v)):
        return M.round_one(v, ff.get_format(fmt), mode)
    return M.round_one(Fraction(v), ff.get_format(fmt), mode)


def ref_fma(a, b, c, fmt, mode):
    a, b, c = (rnd(v, fmt, mode) for v in (a, b, c))  # operands are cast first
    return rnd(xadd(xprod(a, b), c, mode), fmt, mode)


def ref_dot(a, b, acc, order, mode, block=2):
    """Dot product of fp64 vectors a, b (already fp64 values) in acc with order."""
    add = lambda x, y: rnd(xadd(x, y, mode), acc, mode)  # noqa: E731
    P = [xprod(x, y) for x, y in zip(a, b)]
    if order == "exact":
        s = P[0]
        for p in P[1:]:
            s = xadd(s, p, mode)
        return rnd(s, acc, mode)
    if order == "sequential":  # fused: round(a_k * b_k + acc) from the exact value
        r = rnd(P[0], acc, mode)
        for p in P[1:]:
            r = add(p, r)
        return r
    T = [rnd(p, acc, mode) for p in P]  # the other orders round each product first
    if order == "pairwise":
        if len(T) == 1:
            return T[0]
        while len(T) > 1:
            nxt = [add(T[i], T[i + 1]) for i in range(0, len(T) - 1, 2)]
            if len(T) % 2:
                nxt.append(T[-1])
            T = nxt
        return T[0]
    if order == "kahan":
        s, c = T[0], 0.0
        for t in T[1:]:
            y = add(t, -c)
            s2 = add(s, y)
            c = add(add(s2, -s), -y)
            s = s2
        return s
    if order == "blocked":
        parts = []
        for i in range(0, len(T), block):
            r = T[i]
            for t in T[i + 1:i + block]:
                r = add(r, t)
            parts.append(r)
        r = parts[0]
        for p in parts[1:]:
            r = add(r, p)
        return r
    raise AssertionError(order)


def vectors(n, count, seed):
    rng = np.random.default_rng(seed)
    pool = np.array(HUGE + SPECIAL)
    A = rng.choice(np.array(HUGE), (count, n))
    B = rng.choice(np.array(HUGE), (count, n))
    # put an Inf (sometimes NaN) factor in some positions, so specials meet huge products
    for X in (A, B):
        m = rng.random((count, n)) < 0.25
        X[m] = rng.choice(pool[-3:], m.sum(), p=[0.45, 0.45, 0.1])
    return A, B


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("fmt", ["fp64", "fp32", "bf16"])
def test_fma_huge_product_and_special_addend_matches_reference(fmt):
    vals = HUGE + SPECIAL
    a, b, c = (np.array(v) for v in zip(*[(x, y, z) for x in vals for y in vals for z in vals]))
    bad = 0
    for mode in MODES:
        r = ff.fma(a, b, c, fmt, rounding=mode)
        for i in range(a.size):
            want = ref_fma(a[i], b[i], c[i], fmt, mode)
            if not same(float(r[i]), want):
                bad += 1
    assert bad == 0, f"{bad} mismatches"


def test_fma_example_from_the_issue():
    assert ff.fma(1e308, 10, -math.inf, "fp64") == -math.inf
    assert ff.fma(-1e308, 10, math.inf, "fp64") == math.inf
    assert math.isnan(ff.fma(1e308, 10, math.nan, "fp64"))


@pytest.mark.parametrize("acc", ["fp64", "fp32"])
@pytest.mark.parametrize("order", ORDERS)
def test_dot_matmul_huge_and_special_match_reference(acc, order):
    bad, total = [], 0
    for n in (1, 2, 3, 4):
        A, B = vectors(n, 60, seed=n)
        for mode in MODES:
            r = ff.dot(A, B, "fp64", acc_fmt=acc, order=order, rounding=mode, block=2)
            mm = ff.matmul(A[:, None, :], B[:, :, None], "fp64", acc_fmt=acc, order=order,
                           rounding=mode, block=2).reshape(-1)
            for i in range(A.shape[0]):
                want = ref_dot(A[i].tolist(), B[i].tolist(), acc, order, mode)
                total += 2
                for got, what in ((r[i], "dot"), (mm[i], "matmul")):
                    if not same(float(got), want):
                        bad.append((what, mode, A[i].tolist(), B[i].tolist(), float(got), want))
    assert not bad, f"{len(bad)} of {total} mismatches, e.g. {bad[:3]}"


def test_dot_example_from_the_issue():
    a, b = [1.0, 1e308], [-math.inf, 10.0]  # -inf first, then a product past float64
    for order in ("exact", "sequential"):
        assert ff.dot(a, b, "fp64", acc_fmt="fp64", order=order) == -math.inf


@pytest.mark.parametrize("order", ORDERS)
def test_sum_huge_and_special_matches_reference(order):
    """sum: partial sums of finite fp64 terms may pass the float64 range (then the
    mode decides between max and Inf, as for any finite value past max)."""
    bad, total = [], 0
    for n in (2, 3, 4, 5):
        A, _ = vectors(n, 60, seed=10 + n)
        for mode in MODES:
            r = ff.sum(A, "fp64", order=order, axis=1, rounding=mode, block=2)
            for i in range(A.shape[0]):
                want = ref_dot(A[i].tolist(), [1.0] * n, "fp64", order, mode)
                total += 1
                if not same(float(r[i]), want):
                    bad.append((mode, A[i].tolist(), float(r[i]), want))
    assert not bad, f"{len(bad)} of {total} mismatches, e.g. {bad[:3]}"


@pytest.mark.parametrize("order", ORDERS)
def test_batched_sums_equal_row_sums(order):
    """Summing along an axis (strided partial sums) gives each row's own sum: the
    remainder of an inexact float64 partial sum was written into a copy when numpy
    laid the partial sums out in Fortran order, so it was lost."""
    g = np.random.default_rng(3)
    A = np.ldexp(g.uniform(1, 2, (40, 6)) * g.choice([-1.0, 1.0], (40, 6)),
                 g.integers(-120, 120, (40, 6)))
    A = ff.cast(A, "fp32")
    for mode in MODES:
        for acc in ("fp32", "bf16"):
            r = ff.sum(A, "fp32", acc_fmt=acc, order=order, axis=1, rounding=mode, block=2)
            rows = [ff.sum(A[i], "fp32", acc_fmt=acc, order=order, rounding=mode, block=2)
                    for i in range(A.shape[0])]
            bad = [i for i in range(A.shape[0]) if not same(float(r[i]), rows[i])]
            assert not bad, f"{order} {mode} acc={acc}: rows {bad[:5]} differ"
