"""Two algorithms for one exact rule, checked against each other on numpy (issue 26):
the namespace strategies (integer limbs, residual signs: what tensors on a device run)
against the numpy ones (``fractions.Fraction``, ``eft``'s float64 fast paths with exact
slow paths), for the exact sum of many terms, products, fma, quotients and roots, in
class and in fine remainder (``resid``, what stochastic rounding reads)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from floatfmt.arith import limbs, residuals
from conftest import all_same


def wide(n: int, seed: int, lo: int = -1074, hi: int = 1023) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * np.exp2(rng.integers(lo, hi, n).astype(float))
    v[:8] = [0.0, -0.0, 1.0, -1.0, 2.0 ** -1074, -2.0 ** -1073, 1.7e308, -1.5e308]
    return v


def check(a, b):
    (t1, c1), (t2, c2) = a, b
    assert all_same(t1, t2), int((t1 != t2).sum())
    assert np.array_equal(np.asarray(c1, np.int64), np.asarray(c2, np.int64)), \
        int((np.asarray(c1) != np.asarray(c2)).sum())


@pytest.mark.parametrize("fine", (False, True))
@pytest.mark.parametrize("mode", ("nearest_even", "down"))
def test_many_term_sum_limbs_equal_fractions(fine, mode):
    rng = np.random.default_rng(1)
    T = rng.standard_normal((5, 400)) * np.exp2(rng.integers(-1074, 1000, (5, 400)).astype(float))
    T[:, 0] = [1.0, 2.0 ** -53, 0, 0, 0]  # a tie
    T[:, 1] = [1.0, 2.0 ** -53, 2.0 ** -1074, 0, 0]  # just past it
    T[:, 2] = [1.7e308, 1.7e308, 0, 0, 0]  # past the float64 range
    T[:, 3] = [-0.0, -0.0, -0.0, -0.0, -0.0]
    T[:, 4] = [1.0, -1.0, 0, 0, 0]  # an exact zero of nonzero terms
    T[:, 5] = [np.inf, 1, 0, 0, 0]
    T[:, 6] = [np.inf, -np.inf, 0, 0, 0]
    T[:, 7] = [2.0 ** -1074, 2.0 ** -1074, -2.0 ** -1073, 2.0 ** -1070, 0]  # subnormal
    T[:, 8:40] = T[:, 8:40] * 2.0 ** -900  # subnormal results with remainders
    check(limbs.exact_sum_many(T, mode, fine, "limbs"), limbs.exact_sum_many(T, mode, fine, "fraction"))


@pytest.mark.parametrize("fine", (False, True))
def test_products_limbs_equal_fractions(fine):
    x, y = wide(3000, 2, -600, 600), wide(3000, 3, -600, 600)
    x[8:16], y[8:16] = 2.0 ** -540, 2.0 ** -540  # underflow: subnormal and zero products
    x[16:20], y[16:20] = 2.0 ** 520, 1.5 * 2.0 ** 503  # past the range
    check(residuals.exact_product(x, y, fine=fine, strategy="residual"),
          residuals.exact_product(x, y, fine=fine, strategy="fraction"))


@pytest.mark.parametrize("fine", (False, True))
@pytest.mark.parametrize("mode", ("nearest_even", "down"))
def test_fma_limbs_equal_fractions(fine, mode):
    x, y, z = wide(3000, 4, -600, 600), wide(3000, 5, -600, 600), wide(3000, 6)
    with np.errstate(over="ignore"):
        z[100:400] = -(x[100:400] * y[100:400])  # near cancellation (the error term decides)
    z[400:420] = 0.0
    z[420:430] = np.inf
    x[430:440] = np.nan
    check(residuals.exact_fma(x, y, z, mode, fine, "residual"),
          residuals.exact_fma(x, y, z, mode, fine, "fraction"))


@pytest.mark.parametrize("fine", (False, True))
def test_quotients_residual_equal_fractions(fine):
    x, y = wide(4000, 7), wide(4000, 8)
    y[8:12] = [0.0, -0.0, np.inf, 3.0]
    x[12:20], y[12:20] = 2.0 ** -1000, 2.0 ** 60  # subnormal quotients
    x[20:24], y[20:24] = 2.0 ** 1000, 2.0 ** -60  # past the range
    check(residuals.exact_quotient(x, y, fine, "residual"),
          residuals.exact_quotient(x, y, fine, "fraction"))
    # in range, the namespace's quotient_sticky is the same rule
    xi, yi = wide(4000, 9, -300, 300)[4:], wide(4000, 10, -300, 300)[4:]
    xi[:4], yi[:4] = [3.0, 1.0, -1.0, 1.0], [1.0, 3.0, 3.0, -7.0]  # (the range ends out)
    check(residuals.quotient_sticky(xi, yi, fine), residuals.exact_quotient(xi, yi, fine, "fraction"))


@pytest.mark.parametrize("slack", (0, 29))
def test_roots_residual_equal_fractions(slack):
    x = np.abs(wide(4000, 11))
    x[8:12] = [np.inf, -4.0, -0.0, 2.0]
    check(residuals.exact_root(x, False, 0, "residual"), residuals.exact_root(x, False, 0, "fraction"))
    t1, r1 = residuals.exact_root(x, True, slack, "residual")
    t2, r2 = residuals.exact_root(x, True, slack, "fraction")
    assert all_same(t1, t2)
    assert np.array_equal(np.asarray(r1) >> slack, np.asarray(r2) >> slack)


def test_remainders_are_exact():
    """A spot check of both against the exact rational remainder (the oracle of both)."""
    x, y = wide(200, 12, -50, 50), wide(200, 13, -50, 50)
    t, R = residuals.exact_quotient(x, y, True)
    for i in range(8, 200):
        fr = Fraction(float(x[i])) / Fraction(float(y[i]))
        assert abs(Fraction(float(t[i]))) <= abs(fr)
        assert (R[i] == 0) == (Fraction(float(t[i])) == fr)


def test_unknown_strategy_lists_the_valid_ones():
    with pytest.raises(ValueError, match="residual, fraction"):
        residuals.exact_quotient(np.ones(2), np.ones(2), strategy="limb")
    with pytest.raises(ValueError, match="limbs, fraction"):
        limbs.exact_sum_many(np.ones((2, 2)), "nearest_even", strategy="frac")
