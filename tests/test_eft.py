"""Error-free transformations: exactness against rationals, and the (t, class) hand-over
checked against an independent classification built on gmpy2."""

from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpfr

from floatfmt.arith import eft

_RZ64 = gmpy2.ieee(64)
_RZ64.round = gmpy2.RoundToZero


def ref_sticky(fr: Fraction):
    """(t, cls) of an exact rational, independently: t = RZ to binary64 by MPFR, cls from
    the remainder measured in units of numpy.spacing(|t|)."""
    if fr == 0:
        return 0.0, 0
    if abs(fr) >= 2 ** 1024:  # past the float64 range: the convention is +-Inf, class 3
        return (math.inf if fr > 0 else -math.inf), 3
    with gmpy2.context(_RZ64):
        t = float(mpfr(gmpy2.mpq(fr.numerator, fr.denominator)))
    if math.isinf(t):
        return t, 3
    step = Fraction(2) ** 971 if abs(t) == np.finfo(float).max else Fraction(float(np.spacing(abs(t))))
    rem = abs(fr - Fraction(t)) / step
    assert 0 <= rem < 1
    cls = 0 if rem == 0 else 1 if rem < Fraction(1, 2) else 2 if rem == Fraction(1, 2) else 3
    return t, cls


def _rand(rng, n, lo=-80, hi=80):
    return np.ldexp(rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n), rng.integers(lo, hi, n))


def _check(t, cls, exact_values):
    cls = np.zeros(np.shape(t), np.uint8) if cls is None else cls
    for ti, ci, fr in zip(np.ravel(t), np.ravel(cls), exact_values):
        rt, rc = ref_sticky(fr)
        assert (ti, int(ci)) == (rt, rc), (fr, ti, ci, rt, rc)
        if ti == 0 and fr != 0:
            assert math.copysign(1.0, ti) == (1.0 if fr > 0 else -1.0)


# ----------------------------------------------------------------------------- primitives
def test_two_sum_is_exact():
    rng = np.random.default_rng(0)
    a, b = _rand(rng, 3000), _rand(rng, 3000)
    b[:1000] = -a[:1000] * (1 + np.ldexp(1.0, -rng.integers(1, 60, 1000)))
    s, e = eft.two_sum(a, b)
    assert np.array_equal(s, a + b)
    for x, y, u, v in zip(a, b, s, e):
        assert Fraction(u) + Fraction(v) == Fraction(x) + Fraction(y)
        assert abs(v) <= np.spacing(abs(u)) / 2


def test_two_prod_is_exact():
    rng = np.random.default_rng(1)
    a, b = _rand(rng, 3000, -400, 400), _rand(rng, 3000, -400, 400)
    p, e = eft.two_prod(a, b)
    assert np.array_equal(p, a * b)
    for x, y, u, v in zip(a, b, p, e):
        assert Fraction(u) + Fraction(v) == Fraction(x) * Fraction(y)
    hi, lo = eft.split(np.array([1 + 2.0 ** -52, 3.0, -(2 - 2.0 ** -52)]))
    assert np.array_equal(hi + lo, [1 + 2.0 ** -52, 3.0, -(2 - 2.0 ** -52)])


def test_scalars_give_floats():
    assert eft.two_sum(1.0, 2.0 ** -60) == (1.0, 2.0 ** -60)
    assert eft.two_prod(3.0, 5.0) == (15.0, 0.0)
    assert eft.to_sticky(1.0, 0.0) == (1.0, 0)


# ----------------------------------------------------------------------------- to_sticky
@pytest.mark.parametrize("hi,lo,tail,want", [
    (1.0, 2.0 ** -60, None, (1.0, 1)),
    (1.0, 2.0 ** -53, None, (1.0, 2)),                       # half of the ulp above 1
    (1.0, -(2.0 ** -60), None, (1 - 2.0 ** -53, 3)),          # binade below: smaller ulp
    (1.0, -(2.0 ** -54), None, (1 - 2.0 ** -53, 2)),          # half of the ulp below 1
    (-1.0, 2.0 ** -60, None, (-(1 - 2.0 ** -53), 3)),         # toward zero for negatives
    (-1.0, -(2.0 ** -60), None, (-1.0, 1)),
    (1.5, -(2.0 ** -53), None, (1.5 - 2.0 ** -52, 2)),
    (1.0, 2.0 ** -53, 2.0 ** -200, (1.0, 3)),                 # tail breaks the tie upward
    (1.0, 2.0 ** -53, -(2.0 ** -200), (1.0, 1)),
    (1.0, -(2.0 ** -54), -(2.0 ** -200), (1 - 2.0 ** -53, 1)),
    (1.0, -(2.0 ** -54), 2.0 ** -200, (1 - 2.0 ** -53, 3)),
    (1.0, 0.0, 2.0 ** -200, (1.0, 1)),
    (1.0, 0.0, -(2.0 ** -200), (1 - 2.0 ** -53, 3)),
    (0.0, 0.0, 2.0 ** -300, (2.0 ** -300, 0)),
    (5e-324, -0.0, None, (5e-324, 0)),
    (np.inf, 0.0, None, (np.inf, 0)),
])
def test_to_sticky_cases(hi, lo, tail, want):
    t, c = eft.to_sticky(np.array([hi]), np.array([lo]), None if tail is None else np.array([tail]))
    c = 0 if c is None else int(c[0])
    assert (float(t[0]), c) == want
    if tail is None and np.isfinite(hi):
        assert (float(t[0]), c) == ref_sticky(Fraction(hi) + Fraction(lo))


def test_to_sticky_random_pairs_at_binade_boundaries():
    rng = np.random.default_rng(2)
    n = 4000
    hi = np.ldexp(1.0, rng.integers(-1000, 1000, n)) * rng.choice([-1.0, 1.0], n)
    hi[::3] = _rand(rng, hi[::3].size)
    ulp = np.spacing(np.abs(hi))
    lo = np.ldexp(rng.integers(-8, 9, n).astype(float), rng.integers(-5, 0, n)) * ulp / 2
    lo = np.where(np.abs(lo) <= ulp / 2, lo, 0.0)
    s, e = eft.two_sum(hi, lo)  # normalise into a valid (fl, error) pair
    t, c = eft.to_sticky(s, e)
    _check(t, c, [Fraction(x) + Fraction(y) for x, y in zip(hi, lo)])


# ----------------------------------------------------------------------------- exact_*
def test_exact_sum_and_overflow():
    rng = np.random.default_rng(3)
    a, b = _rand(rng, 2000, -1074, 1023), _rand(rng, 2000, -1074, 1023)
    b[:700] = -a[:700] + _rand(rng, 700, -1074, -900)
    t, c = eft.exact_sum(a, b)
    _check(t, c, [Fraction(x) + Fraction(y) for x, y in zip(a, b)])
    big = np.finfo(float).max
    t, c = eft.exact_sum(np.array([big, -big]), np.array([big, -big]))
    assert t.tolist() == [np.inf, -np.inf] and c.tolist() == [3, 3]


def _extreme_pairs(rng, n):
    a, b = _rand(rng, n, -1074, 1023), _rand(rng, n, -200, 200)
    k = n // 3
    a[:k] = _rand(rng, k, -1074, -950)  # products near the bottom of the range
    a[k:2 * k] = _rand(rng, k, 900, 1023)  # and past the top
    return a, b


def test_exact_product_including_range_ends():
    rng = np.random.default_rng(4)
    a, b = _extreme_pairs(rng, 2400)
    t, c = eft.exact_product(a, b)
    _check(t, c, [Fraction(x) * Fraction(y) for x, y in zip(a, b)])
    # fp32 values: the float64 product is exact
    x = np.float32(rng.standard_normal(100)).astype(float)
    t, c = eft.exact_product(x, x[::-1], exact_in_float64=True)
    assert c is None and np.array_equal(t, x * x[::-1])


def test_exact_quotient_including_range_ends():
    rng = np.random.default_rng(5)
    a, b = _extreme_pairs(rng, 2400)
    b[::5] = _rand(rng, b[::5].size, -1074, 1023)
    t, c = eft.exact_quotient(a, b)
    _check(t, c, [Fraction(x) / Fraction(y) for x, y in zip(a, b)])
    with np.errstate(all="ignore"):
        t, _ = eft.exact_quotient(np.array([1.0, -1.0, 0.0, np.inf, 1.0]),
                                  np.array([0.0, 0.0, 0.0, np.inf, -0.0]))
    assert t[0] == np.inf and t[1] == -np.inf and np.isnan(t[2]) and np.isnan(t[3])
    assert t[4] == -np.inf


def _sqrt_ref(x: float):
    """(t, cls) of sqrt(x) with integers only."""
    fr = Fraction(x)
    # scale to an integer N with sqrt(N) having > 80 bits: sqrt(x) = sqrt(N) / 2**k
    k = 600
    N = fr * 4 ** k
    assert N.denominator == 1
    r = math.isqrt(N.numerator)
    exact = r * r == N.numerator
    t, cls = ref_sticky(Fraction(r, 2 ** k))
    if not exact:
        cls = 1 if cls in (0, 1) else 3
    return t, cls


def test_exact_sqrt():
    rng = np.random.default_rng(6)
    x = np.abs(_rand(rng, 3000, -1074, 1024))
    x[:10] = [4.0, 2.0, 5e-324, 2.0 ** -1022, np.finfo(float).max, 0.25, 9.0, 1 + 2.0 ** -52,
              2.0 ** -1000, 2.0 ** 1000]
    t, c = eft.exact_sqrt(x)
    c = np.zeros(x.shape, np.uint8) if c is None else c
    for xi, ti, ci in zip(x, t, c):
        assert (ti, int(ci)) == _sqrt_ref(float(xi)), xi
    with np.errstate(invalid="ignore"):
        t, _ = eft.exact_sqrt(np.array([-1.0, -0.0, np.inf]))
    assert np.isnan(t[0]) and t[1] == 0 and np.signbit(t[1]) and t[2] == np.inf


def test_exact_fma_three_terms():
    rng = np.random.default_rng(7)
    n = 3000
    a, b = _rand(rng, n, -300, 300), _rand(rng, n, -300, 300)
    c = _rand(rng, n, -600, 600)
    # massive cancellation: c is a*b rounded, nudged by a few ulps
    m = n // 2
    p = a[:m] * b[:m]
    c[:m] = -(p + np.spacing(np.abs(p)) * rng.integers(-3, 4, m))
    # ties: c cancels the high part, leaving exactly half an ulp patterns
    a[m:m + 200] = 1 + np.ldexp(rng.integers(0, 2 ** 20, 200).astype(float), -52)
    b[m:m + 200] = 1 + np.ldexp(rng.integers(0, 2 ** 20, 200).astype(float), -40)
    c[m:m + 200] = _rand(rng, 200, -60, 2)
    # range ends (slow exact path)
    a[-200:] = _rand(rng, 200, -1074, -960)
    t, cl = eft.exact_fma(a, b, c)
    _check(t, cl, [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a, b, c)])


def test_product_is_exact_table():
    import floatfmt as ff
    for name in ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp4_e2m1", "int8"):
        assert eft.product_is_exact(ff.get_format(name)), name
    for name in ("fp64", "e8m30"):
        assert not eft.product_is_exact(ff.get_format(name)), name


def test_int_to_sticky():
    rng = np.random.default_rng(8)
    cases = [(0, 0), (1, 0), (2 ** 53 + 1, 0), (-3, -1075), (2 ** 60 - 1, 964), (1, 1024), (5, -1080)]
    for _ in range(2000):
        n = int(rng.integers(1, 2 ** 62)) * int(rng.choice([-1, 1])) >> int(rng.integers(0, 60))
        cases.append((n, int(rng.integers(-1150, 1000))))
    for n, k in cases:
        fr = Fraction(n) * Fraction(2) ** k
        assert eft.int_to_sticky(n, k) == ref_sticky(fr), (n, k)
