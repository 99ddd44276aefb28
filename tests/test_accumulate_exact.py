"""The two strategies of the exact sum of many terms (``accumulate_exact``): ``bigint``
(numpy's: 16-bit limbs by bincounts, one Python integer per sum) and ``limbs`` (the
device's: int64 limbs), proven equal on the same float64 data (the limbs run on CPU
tensors until they are written over the namespace), and the exact sums of wide products
(``fraction`` against ``limbs``); the classes against Fraction sums."""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from floatfmt.arith.accumulate_exact import (DOT_STRATEGIES, SUM_STRATEGIES, exact_dot_terms,
                                             exact_sum_terms)


def _host(r):
    return tuple(x.numpy() for x in r)


def _bits(a):
    return np.asarray(a, np.float64).view(np.int64)


def _terms(rng, shape, lo, hi):
    T = rng.standard_normal(shape) * 2.0 ** rng.integers(lo, hi, shape)
    return T


def _check_class(T, t, cls):
    """The class of each column against the exact Fraction sum (finite columns)."""
    for j in range(T.shape[1]):
        col = T[:, j]
        if not np.isfinite(col).all():
            continue
        s = sum((Fraction(float(x)) for x in col), Fraction(0))
        tj, cj = float(t[j]), int(cls[j])
        if math.isinf(tj):
            assert cj == 3
            continue
        if cj == 0:
            assert Fraction(tj) == s
            continue
        ulp = Fraction(math.ulp(abs(tj))) if tj != 0 else Fraction(2) ** -1074
        frac = abs(s - Fraction(tj)) / ulp
        assert 0 < frac < 1 and abs(s) > abs(Fraction(tj))
        assert cj == (1 if frac < Fraction(1, 2) else 2 if frac == Fraction(1, 2) else 3)


@pytest.mark.parametrize("mode", ["nearest_even", "down", "stochastic"])
def test_sum_strategies_agree_on_numpy(mode):
    fine = mode == "stochastic"
    rng = np.random.default_rng(zlib.crc32(mode.encode()))
    T = _terms(rng, (40, 24), -1074, 1000)
    T[:, 0] = 1e308  # past the float64 range
    T[:, 1] = -0.0
    T[:, 2] = 0.0
    T[:20, 3], T[20:, 3] = 1.5, -1.5  # exact cancellation
    T[5, 4] = np.inf
    T[6, 5], T[7, 5] = np.inf, -np.inf
    T[8, 6] = np.nan
    T[:, 7] = _terms(rng, (40,), -1074, -1000)  # subnormal sums
    T[:, 8] = np.where(np.arange(40) % 2, 2.0 ** -1074, -(2.0 ** -1074))
    T[:, 9] = 2.0 ** rng.integers(-200, 200, 40) * np.where(np.arange(40) < 39, 1.0, -1.0)
    assert SUM_STRATEGIES == ("bigint", "limbs")
    t0, c0 = exact_sum_terms(T, mode, fine, strategy="bigint")
    t1, c1 = _host(exact_sum_terms(torch.from_numpy(T), mode, fine, strategy="limbs"))
    same = ~np.isnan(t0)
    assert np.array_equal(_bits(t0[same]), _bits(t1[same])) and np.isnan(t1[~same]).all()
    assert np.array_equal(c0, c1) and c0.dtype == c1.dtype
    if not fine:
        _check_class(T, t1, c1)
    assert math.copysign(1, t1[1]) < 0 and math.copysign(1, t1[2]) > 0
    assert (math.copysign(1, t1[3]) < 0) == (mode == "down")
    assert math.isinf(t1[4]) and math.isnan(t1[5]) and math.isnan(t1[6])


def test_sum_strategies_on_shapes_and_one_term():
    rng = np.random.default_rng(1)
    T = _terms(rng, (7, 3, 4), -30, 30)
    a = exact_sum_terms(T, "nearest_even")  # numpy: bigint
    b = _host(exact_sum_terms(torch.from_numpy(T), "nearest_even"))  # tensors: limbs
    assert a[0].shape == b[0].shape == (3, 4) and np.array_equal(_bits(a[0]), _bits(b[0]))
    assert np.array_equal(a[1], b[1])
    one = T[:1]
    assert np.array_equal(_bits(exact_sum_terms(one, "up")[0]), _bits(one[0]))


@pytest.mark.parametrize("mode", ["nearest_even", "down"])
def test_dot_strategies_agree_on_numpy(mode):
    """Wide (fp64) products: Fraction sums against the TwoProd terms summed in limbs."""
    rng = np.random.default_rng(zlib.crc32(("dot " + mode).encode()))
    n, m = 9, 16
    X = [_terms(rng, (m,), -540, 500) for _ in range(n)]
    Y = [_terms(rng, (m,), -540, 500) for _ in range(n)]
    X[0][0], Y[0][0] = np.inf, 2.0  # an Inf product
    X[1][1], Y[1][1] = np.inf, 0.0  # Inf * 0: NaN
    for k in range(n):  # an exact zero sum of signed zero products
        X[k][2], Y[k][2] = -0.0, 1.0
        X[k][3] = 0.0
    X[0][4], Y[0][4], X[1][4], Y[1][4] = 3.0, 2.0 ** 600, -3.0, 2.0 ** 600  # cancel past 2**1023
    for k in range(2, n):
        X[k][4] = 0.0
    assert DOT_STRATEGIES == ("fraction", "limbs")
    t0, c0 = exact_dot_terms(X, Y, mode, strategy="fraction")
    t1, c1 = _host(exact_dot_terms([torch.from_numpy(x) for x in X], [torch.from_numpy(y) for y in Y],
                                   mode, strategy="limbs"))
    nan = np.isnan(t0)
    assert np.array_equal(nan, np.isnan(t1))
    assert np.array_equal(_bits(t0[~nan]), _bits(t1[~nan])) and np.array_equal(c0, c1)
    assert math.isinf(t1[0]) and math.isnan(t1[1]) and t1[2] == 0 and t1[4] == 0


def test_unknown_strategy_names_the_valid_ones():
    with pytest.raises(ValueError, match="bigint"):
        exact_sum_terms(np.zeros((2, 1)), "nearest_even", strategy="bignum")
    with pytest.raises(ValueError, match="tensors only"):
        exact_sum_terms(np.zeros((2, 1)), "nearest_even", strategy="limbs")
