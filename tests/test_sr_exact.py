"""Issue 9, class 2: stochastic rounding follows its rule when float64 does not hold the value.

The rule (``ff.cast`` docstring): rounding moves away from zero with probability
p = |x - trunc_q(x)| / q, realised with 53 random bits u = k / 2**53 as "away iff
u < p" (so P = ceil(p 2**53) / 2**53, which is p whenever p has at most 53 fraction
bits), or with ``sr_bits = N`` and an integer r in [0, 2**N) as "away iff
r < floor(p 2**N)".  Before the fix the rounding routine saw only a 2-bit class of
what lies beyond the float64 working value, and fp64 results rounded up with
probability 0.25 / 0.5 / 0.75 (e.g. 1 + 2**-60 with p = 2**-8 went up a quarter of
the time); narrower formats were off by less than 2**-29.

Two kinds of test, both against p computed here with ``Fraction`` and the MPFR
neighbours of tests/oracles/mpfr.py (nothing from floatfmt's rounding):

* statistics: many draws of a few exact values per operation and format, the
  count of results away from zero within 6 sigma of n P;
* replay: the general rounding path draws one ``Generator.random()`` double
  (``Generator.integers(0, 2**N)`` with ``sr_bits=N``) per element in C order for a
  chunk holding an inexact value; drawing the same numbers from an equally seeded
  generator gives every element's exact expected result, so the threshold is
  checked to the last bit (differences far below what statistics can see).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from tests.oracles import mpfr as M

FMTS = ("fp64", "fp32", "bf16")
# residuals beyond 1 (fp64 quantum at 1 is 2**-52): p = residual / 2**-52
RESIDUALS = (2.0 ** -60, 3 * 2.0 ** -70, 2.0 ** -54 + 2.0 ** -100, 2.0 ** -53 + 2.0 ** -60,
             2.0 ** -52 - 2.0 ** -60, 2.0 ** -53, 2.0 ** -53 - 2.0 ** -105, 2.0 ** -75)


def neighbours(exact: Fraction, fmt):
    """(toward-zero neighbour, away neighbour) of a nonzero exact value, by MPFR."""
    f = ff.get_format(fmt)
    d, u = M.round_one(exact, f, "down"), M.round_one(exact, f, "up")
    return (d, u) if exact > 0 else (u, d)


def prob(exact: Fraction, fmt) -> Fraction:
    """p = |exact - tz| / |away - tz| (0 when exact is a value of fmt)."""
    tz, aw = neighbours(exact, fmt)
    if tz == aw:
        return Fraction(0)
    return abs(exact - Fraction(tz)) / abs(Fraction(aw) - Fraction(tz))


def p53(p: Fraction) -> Fraction:
    """P(u < p) for u = k / 2**53, k uniform in [0, 2**53)."""
    return Fraction(math.ceil(p * 2 ** 53), 2 ** 53)


def pbits(p: Fraction, n: int) -> Fraction:
    return Fraction(math.floor(p * 2 ** n), 2 ** n)


def check_counts(results, exact: Fraction, fmt, sr_bits=None):
    tz, aw = neighbours(exact, fmt)
    r = np.asarray(results, np.float64)
    assert np.all((r == tz) | (r == aw)), "stochastic result is not a neighbour"
    p = prob(exact, fmt)
    P = p53(p) if sr_bits is None else pbits(p, sr_bits)
    n, k = r.size, int(np.sum(r == aw)) if tz != aw else 0
    mean, sd = float(P) * n, math.sqrt(float(P * (1 - P)) * n)
    if P == 0 or P == 1:
        assert k == mean, (exact, fmt, k, mean)
    else:
        assert abs(k - mean) <= 6 * sd + 1, \
            f"{fmt} {float(exact)!r}: {k} of {n} away, expected {mean:.1f} +- {sd:.1f} " \
            f"(P = {float(P)})"


# ------------------------------------------------------------------ statistics
N = 100_000


@pytest.mark.parametrize("res", RESIDUALS)
@pytest.mark.parametrize("sign", (1.0, -1.0))
def test_add_sub_fp64_probability(res, sign):
    exact = Fraction(sign) * (1 + Fraction(res))
    a, b = np.full(N, sign), np.full(N, sign * res)
    check_counts(ff.add(a, b, "fp64", "sr", rng=1), exact, "fp64")
    check_counts(ff.sub(a, -b, "fp64", "sr", rng=2), exact, "fp64")


def test_issue_example():
    r = ff.add(np.ones(4000 * 50), np.full(4000 * 50, 2.0 ** -60), "fp64", "sr", rng=1)
    assert abs(np.mean(r > 1) - 2.0 ** -8) < 6 * math.sqrt(2.0 ** -8 / r.size)


MUL_CASES = [(1 + 2.0 ** -30, 1 + 2.0 ** -30), (1 + 2.0 ** -27 + 2.0 ** -52, 3 - 2.0 ** -40),
             (-(1 + 2.0 ** -26), 1 + 2.0 ** -26 + 2.0 ** -51), (0.1, 0.3), (1e-310, 3.3)]


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("a,b", MUL_CASES)
def test_mul_probability(fmt, a, b):
    a, b = ff.cast(a, fmt), ff.cast(b, fmt)  # operands of the format (nothing random there)
    exact = Fraction(a) * Fraction(b)
    n = N if abs(a) > 1e-300 else N // 10  # near the float64 range ends: Fractions (slow)
    check_counts(ff.mul(np.full(n, a), np.full(n, b), fmt, "sr", rng=3), exact, fmt)


FMA_CASES = [(1.0, 1.0, 2.0 ** -60), (1 + 2.0 ** -30, 1 - 2.0 ** -30, 2.0 ** -80),
             (3.0, 1 / 3, -1.0), (-1.5, 1 + 2.0 ** -40, 2.0 ** -70), (1.0, 2.0 ** -30, 2.0 ** 20)]


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("a,b,c", FMA_CASES)
def test_fma_probability(fmt, a, b, c):
    a, b, c = (ff.cast(v, fmt) for v in (a, b, c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        pytest.skip("exact zero")
    check_counts(ff.fma(np.full(N, a), np.full(N, b), np.full(N, c), fmt, "sr", rng=4), exact, fmt)


@pytest.mark.parametrize("fmt", FMTS)
def test_div_sqrt_probability(fmt):
    for a, b in [(1.0, 3.0), (2.0, 7.0), (-1.0, 10.0), (5.0, 7e-3)]:
        a, b = ff.cast(a, fmt), ff.cast(b, fmt)
        exact = Fraction(a) / Fraction(b)
        check_counts(ff.div(np.full(N, a), np.full(N, b), fmt, "sr", rng=5), exact, fmt)
    for a in (2.0, 3.0, 1e-300):
        a = ff.cast(a, fmt)
        r = ff.sqrt(np.full(N // 4, a), fmt, "sr", rng=6)
        # the root is irrational: p from a 200-bit MPFR root is exact enough for statistics
        import gmpy2
        with gmpy2.context(gmpy2.get_context(), precision=300):
            root = Fraction(gmpy2.mpq(gmpy2.sqrt(gmpy2.mpfr(a))))
        check_counts(r, root, fmt)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("res", RESIDUALS[:4:2] + RESIDUALS[4:5])
def test_fraction_and_decimal_string_casts(fmt, res):
    n = 10_000
    exact = 1 + Fraction(res) + Fraction(1, 3 * 2 ** 80)  # more bits than float64 holds
    check_counts(ff.cast([exact] * n, fmt, "sr", rng=7), exact, fmt)
    dec = "1.00000000000000000123"  # 1 + 1.23e-18: p = 0.0055... in fp64
    check_counts(ff.cast(np.array([dec] * n), fmt, "sr", rng=8), Fraction(dec), fmt)
    # a scalar Fraction: the same rule, one draw at a time
    got = [ff.cast(exact, fmt, "sr", rng=i) for i in range(200)]
    assert set(got) <= set(neighbours(exact, fmt))


@pytest.mark.parametrize("order", ["exact", "sequential", "pairwise", "kahan", "blocked"])
@pytest.mark.parametrize("fmt", ["fp64", "fp32"])
def test_sum_and_dot_probability(order, fmt):
    res = 2.0 ** -60 if fmt == "fp64" else 2.0 ** -30
    X = np.zeros((2, N))
    X[0], X[1] = 1.0, res
    exact = 1 + Fraction(res)
    check_counts(ff.sum(X, fmt, order=order, axis=0, rounding="sr", rng=9), exact, fmt)
    n = N // 10 if (fmt, order) == ("fp64", "exact") else N  # fp64 exact dot: Fractions
    check_counts(ff.dot(X.T[:n], np.ones((n, 2)), fmt, acc_fmt=fmt, order=order, rounding="sr",
                        rng=10), exact, fmt)


@pytest.mark.parametrize("sr_bits", [1, 3, 8, 20])
@pytest.mark.parametrize("res", [2.0 ** -60, 2.0 ** -54 + 2.0 ** -100, 2.0 ** -52 - 2.0 ** -60])
def test_sr_bits_probability_fp64(sr_bits, res):
    exact = 1 + Fraction(res)
    r = ff.add(np.ones(N), np.full(N, res), "fp64", "sr", rng=11, sr_bits=sr_bits)
    check_counts(r, exact, "fp64", sr_bits)
    r = ff.cast([exact] * 10_000, "fp64", "sr", rng=12, sr_bits=sr_bits)
    check_counts(r, exact, "fp64", sr_bits)


# ------------------------------------------------------------------ replay (exact threshold)
def _expected(exacts, fmt, draws, sr_bits):
    out = np.empty(len(exacts))
    for i, e in enumerate(exacts):
        if e == 0:
            out[i] = 0.0
            continue
        tz, aw = neighbours(e, fmt)
        p = prob(e, fmt)
        if sr_bits is None:
            away = Fraction(float(draws[i])) < p  # u = k / 2**53, exact as a float
        else:
            away = int(draws[i]) < math.floor(p * 2 ** sr_bits)
        out[i] = aw if away else tz
    return out


def _draws(seed, n, sr_bits):
    g = np.random.default_rng(seed)
    return g.random(n) if sr_bits is None else g.integers(0, 1 << sr_bits, size=n)


def _operands(fmt, n, seed, spread=40):
    g = np.random.default_rng(seed)
    v = np.ldexp(g.uniform(1, 2, n) * g.choice([-1.0, 1.0], n), g.integers(-spread, spread, n))
    return ff.cast(v, fmt)  # values of fmt (RNE), so the ops cast nothing (no draws)


@pytest.mark.parametrize("sr_bits", [None, 1, 5, 23, 52])
@pytest.mark.parametrize("fmt", FMTS)
def test_replay_every_element_follows_the_rule(fmt, sr_bits):
    n = 1200
    a, b, c = (_operands(fmt, n, s) for s in (1, 2, 3))
    a[0], b[0], c[0] = ff.cast(1.0, fmt), ff.cast(2.0 ** -20, fmt), ff.cast(2.0 ** -70, fmt)
    checks = {
        "mul": (lambda s: ff.mul(a, b, fmt, "sr", rng=s, sr_bits=sr_bits),
                [Fraction(x) * Fraction(y) for x, y in zip(a, b)]),
        "fma": (lambda s: ff.fma(a, b, c, fmt, "sr", rng=s, sr_bits=sr_bits),
                [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a, b, c)]),
        "div": (lambda s: ff.div(a, b, fmt, "sr", rng=s, sr_bits=sr_bits),
                [Fraction(x) / Fraction(y) for x, y in zip(a, b)]),
        "sum exact": (lambda s: ff.sum(np.stack([a, c, b]), fmt, order="exact", axis=0,
                                       rounding="sr", rng=s, sr_bits=sr_bits),
                      [Fraction(x) + Fraction(z) + Fraction(y) for x, y, z in zip(a, b, c)]),
        "dot exact": (lambda s: ff.dot(np.stack([a, c], -1), np.stack([b, c], -1), fmt,
                                       acc_fmt=fmt, order="exact", rounding="sr", rng=s,
                                       sr_bits=sr_bits),
                      [Fraction(x) * Fraction(y) + Fraction(z) ** 2 for x, y, z in zip(a, b, c)]),
        "cast Fraction": (lambda s: ff.cast(frs, fmt, "sr", rng=s, sr_bits=sr_bits), None),
    }
    g = np.random.default_rng(5)
    frs = [Fraction(float(x)) * (1 + Fraction(int(g.integers(1, 2 ** 62)), 2 ** 61 * 3 ** 40))
           for x in a]
    frs[0] = 1 + Fraction(1, 2 ** 60)
    checks["cast Fraction"] = (checks["cast Fraction"][0], frs)
    if fmt != "fp64":  # add/sub of values of a narrow format are exact in float64 (fast path)
        del checks["mul"]
    bad = {}
    for name, (fn, exacts) in checks.items():
        got = fn(17)
        want = _expected(exacts, fmt, _draws(17, n, sr_bits), sr_bits)
        miss = int(np.sum(~((got == want) & (np.signbit(got) == np.signbit(want)))))
        if miss:
            bad[name] = miss
    assert not bad, f"mismatches per operation (of {n}): {bad}"


# ------------------------------------------------------------------ adversarial replay
@pytest.mark.parametrize("sr_bits", [None, 8, 40])
@pytest.mark.parametrize("fmt", FMTS)
def test_replay_thresholds_just_beyond_float64(fmt, sr_bits):
    """Exact values placed on, just below and just above each element's own threshold
    (known from the replayed draws), with the deciding bits 2**-70 of a quantum away:
    beyond what float64 holds even for fp32 / bf16 targets, where the class-only
    rounding was off by less than 2**-29 and no statistics could see it."""
    n = 900
    seed = 23
    draws = _draws(seed, n, sr_bits)
    q = Fraction(2) ** -ff.get_format(fmt).mbits  # quantum at 1
    tiny = Fraction(1, 2 ** 70)
    exacts = []
    for i in range(n):
        if sr_bits is None:
            thr = Fraction(float(draws[i]))  # away iff u < p
        else:
            thr = Fraction(int(draws[i]) + 1, 2 ** sr_bits)  # away iff r < floor(p 2**N)
        side = i % 3 - 1  # -1 just below, 0 on, +1 just above the threshold
        p = thr + side * tiny
        if not 0 < p < 1:
            p = Fraction(1, 2)
        exacts.append(1 + p * q)
    want = _expected(exacts, fmt, draws, sr_bits)
    got = ff.cast(exacts, fmt, "sr", rng=seed, sr_bits=sr_bits)
    miss = int(np.sum(got != want))
    # the same values as an exact sum of float64 terms 1 + a + b (order='exact', rounded to fmt)
    grid = Fraction(1, 2 ** (ff.get_format(fmt).mbits + 48))  # a: 48 bits, b: the rest
    a = np.array([float((e - 1) - (e - 1) % grid) for e in exacts])
    b = np.array([float((e - 1) % grid) for e in exacts])
    assert all(1 + Fraction(x) + Fraction(y) == e for x, y, e in zip(a, b, exacts))
    X = np.stack([np.ones(n), a, b])
    got_sum = ff.sum(X, "fp64", acc_fmt=fmt, order="exact", axis=0, rounding="sr", rng=seed,
                     sr_bits=sr_bits)
    miss_sum = int(np.sum(got_sum != want))
    assert (miss, miss_sum) == (0, 0), f"cast: {miss}, exact sum: {miss_sum} of {n} wrong"


# ------------------------------------------------------------------ the remainder itself
def resid_oracle(exact: Fraction, t: float) -> int:
    """2**54 (|exact| - |t|) / ulp(t) rounded to odd, from the definition (t = exact
    truncated toward zero to float64)."""
    assert abs(Fraction(t)) <= abs(exact) < abs(Fraction(t)) + Fraction(math.ulp(t))
    v = (abs(exact) - abs(Fraction(t))) / Fraction(math.ulp(t)) * 2 ** 54
    fl = math.floor(v)
    return fl | (1 if v != fl else 0)


def _edge_values(n, seed):
    g = np.random.default_rng(seed)
    v = np.ldexp(g.uniform(1, 2, n) * g.choice([-1.0, 1.0], n), g.integers(-80, 80, n))
    edges = [1.0, -1.0, 2.0 ** -1022, 5e-324, 1.5e-320, 2.0 ** 52, 1 - 2.0 ** -53, 3.0,
             1 + 2.0 ** -52, 2.0 ** 1000, -(2.0 ** -1000), 0.1]
    v[:len(edges)] = edges
    return v


@pytest.mark.parametrize("op", ["sum", "product", "fma", "quotient", "sqrt"])
def test_eft_resid_is_exact(op):
    from floatfmt.arith import eft
    from floatfmt.core.rounding import resid_class
    n = 4000
    a, b, c = _edge_values(n, 1), _edge_values(n, 2), _edge_values(n, 3)
    b[::7] = -a[::7] * (1 + 2.0 ** -52)  # cancellations and binade crossings
    c[::5] = -np.ldexp(np.trunc(np.ldexp(a[::5] * b[::5], 20)), -20)
    fn = {"sum": lambda f: eft.exact_sum(a, b, fine=f),
          "product": lambda f: eft.exact_product(a, b, fine=f),
          "fma": lambda f: eft.exact_fma(a, b, c, fine=f),
          "quotient": lambda f: eft.exact_quotient(a, b, fine=f),
          "sqrt": lambda f: eft.exact_sqrt(np.abs(a), fine=f)}[op]
    t, R = fn(True)
    t0, cls = fn(False)
    assert np.array_equal(t, t0)
    assert R is not None and R.dtype == np.int64
    assert np.array_equal(resid_class(R), cls)
    bad = 0
    for i in range(n):
        if not math.isfinite(t[i]):
            continue
        if op == "sqrt":
            if R[i] == 0:
                continue
            import gmpy2
            with gmpy2.context(gmpy2.get_context(), precision=400):
                v = (gmpy2.sqrt(gmpy2.mpfr(abs(a[i]))) - gmpy2.mpfr(t[i])) \
                    / gmpy2.mpfr(math.ulp(t[i])) * gmpy2.mpfr(2) ** 54
                want = int(gmpy2.floor(v)) | 1
        else:
            x, y, z = Fraction(a[i]), Fraction(b[i]), Fraction(c[i])
            exact = {"sum": x + y, "product": x * y, "fma": x * y + z, "quotient": x / y}[op]
            if exact == 0:
                continue
            want = resid_oracle(exact, float(t[i]))
        bad += want != int(R[i])
    assert bad == 0, f"{bad} of {n} resid values differ from the exact remainder"


def test_int_and_fraction_resid_are_exact():
    from floatfmt.arith import eft
    g = np.random.default_rng(9)
    bad = 0
    for _ in range(3000):
        nbits = int(g.integers(1, 200))
        m = int(g.integers(1, 2 ** 62)) << max(0, nbits - 62) | int(g.integers(0, 2 ** 20))
        k = int(g.integers(-1200, 900))
        m = -m if g.random() < 0.5 else m
        exact = Fraction(m) * Fraction(2) ** k
        t, R = eft.int_to_sticky(m, k, fine=True)
        if math.isfinite(t) and exact != 0:
            bad += R != resid_oracle(exact, t)
        fr = exact / int(g.integers(1, 10 ** 6))
        t2, R2 = eft.fraction_to_sticky(fr, fine=True)
        if math.isfinite(t2) and fr != 0:
            bad += R2 != resid_oracle(fr, t2)
    assert bad == 0


@pytest.mark.parametrize("fmt", ["fp32", "bf16", "fp16", "fp8_e4m3", "int8", "tf32"])
def test_sqrt_coarse_resid_agrees_with_the_integer_root(fmt):
    """exact_sqrt(slack=g) reads resid from a float64 estimate where that is safe: it must
    agree with the integer square root on every bit above the g low ones, and the
    stochastic results it gives must be the replayed rule's."""
    from floatfmt.arith import eft
    f = ff.get_format(fmt)
    g = eft.resid_slack(f)
    x = np.abs(_edge_values(20000, 4))
    x[:2000] = np.ldexp(np.arange(1, 2001, dtype=np.float64) ** 2 + 1, -10)  # near squares
    _, exact = eft.exact_sqrt(x, fine=True)
    _, coarse = eft.exact_sqrt(x, fine=True, slack=g)
    assert np.array_equal(exact >> g, coarse >> g)
    if f.kind == "float":
        a = ff.cast(np.abs(_operands(fmt, 1500, 7, spread=5)), fmt)
        got = ff.sqrt(a, fmt, "sr", rng=31)
        import gmpy2
        with gmpy2.context(gmpy2.get_context(), precision=300):
            roots = [Fraction(gmpy2.mpq(gmpy2.sqrt(gmpy2.mpfr(v)))) for v in a]
        want = _expected(roots, fmt, _draws(31, a.size, None), None)
        assert int(np.sum(got != want)) == 0
