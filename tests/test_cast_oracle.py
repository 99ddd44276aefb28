"""floatfmt's rounding against the independent MPFR oracle (tests/oracles/mpfr.py).

For every float format of the registry (plus a few custom ones), every
deterministic rounding mode and every overflow policy the format allows, at
least 20,000 float64 inputs: random values over the whole exponent range of
the format and far beyond it, every value of the format, every midpoint
between neighbours (all of them for 8-bit and smaller, and for fp16 / bf16;
a large sample for wider formats), each midpoint and value one float64 ulp
either side, the subnormal and overflow boundaries, +-0, +-Inf and NaN.

Exact inputs (Fractions, decimal strings, huge Python ints) test the sticky
path: exact midpoints, and points a hair (far below a float64 ulp) off them.

A mismatch is a different value, a different sign of zero, or NaN on one side
only.  The counts are printed (``pytest -s``) and must all be zero.
"""

from __future__ import annotations

import importlib
import math
import random
import zlib
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest

import floatfmt as ff
from tests.oracles.compare import mismatches
from floatfmt.core.intake import to_exact
from floatfmt.core.cast import round_exact
from conftest import mpfr as O

rounding = importlib.import_module("floatfmt.core.rounding")  # the module (ff.core.rounding is not public)

FLOAT_FORMATS = [n for n in ff.formats() if ff.get_format(n).kind == "float"]
INT_FORMATS = [n for n in ff.formats() if ff.get_format(n).kind == "int"]
# custom formats (not registered, so the registry seen by other tests is unchanged)
_UNSIGNED = {f.name: f for f in [
    ff.Format("ue4m3", ebits=4, mbits=3, signed=False, inf=False, nan="all_ones"),
    ff.Format("ue3m2", ebits=3, mbits=2, signed=False)]}
CUSTOM = ["e3m1", "e6m5", "e2m0", "e4m0", "e5m1fnuz", "e3m3fn", "e8m23b100", *_UNSIGNED]


def fmt_of(name):
    return _UNSIGNED.get(name) or ff.get_format(name)
MODES = O.MODES
MIN_INPUTS = 20_000


def policies(fmt) -> list[str]:
    f = fmt_of(fmt) if isinstance(fmt, str) else fmt
    out = ["saturate"]
    if f.inf:
        out.append("inf")
    if f.has_nan:
        out.append("nan")
    return out




def positive_values(f) -> np.ndarray:
    """Every positive finite value of f (formats <= 16 bits) or a sample of 4096."""
    if f.bits <= 16:
        v = ff.values(f)
        return v[v > 0]
    s = O.spec(f)
    rng = np.random.default_rng(7)
    # random significands and exponents inside the format, plus the binade edges
    m = rng.integers(0, 1 << min(f.mbits, 52), 4000, dtype=np.int64).astype(np.float64)
    e = rng.integers(s.emin, s.emax + 1, 4000)
    v = np.ldexp(1.0 + m / 2.0 ** f.mbits, e)
    sub = np.ldexp(rng.integers(1, 1 << min(f.mbits, 30), 96).astype(np.float64),
                   s.emin - f.mbits)
    return np.unique(np.concatenate([v[v <= s.fmax], sub, [s.fmax, s.min_pos, s.smallest_normal]]))


@lru_cache(maxsize=None)
def prepared(name: str):
    """float_inputs(name) converted once for the oracle."""
    return O.prepare(float_inputs(name))


@lru_cache(maxsize=None)
def float_inputs(name: str) -> np.ndarray:
    """The float64 test inputs for one format (see module docstring)."""
    f = fmt_of(name)
    s = O.spec(f)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    vals = positive_values(f)
    nxt = np.append(vals[1:], 2.0 * s.fmax if s.fmax < 1e308 else np.inf)
    gap = nxt - vals
    mids = vals + gap / 2  # exact: at most 52 bits of significand
    lowest = np.array([s.min_pos / 2]) if s.zero else np.array([])
    mids = np.concatenate([mids[np.isfinite(mids)], lowest])
    structured = [vals, mids]
    with np.errstate(over="ignore"):
        for pts in (vals, mids):
            structured += [np.nextafter(pts, np.inf), np.nextafter(pts, -np.inf)]
    edges = np.array([s.min_pos, s.min_pos / 2, s.min_pos / 4, s.min_pos * 0.75, s.min_pos * 1.5,
                      s.smallest_normal, s.fmax, s.fmax * 2, 1e300, 5e-324, 2.2250738585072014e-308,
                      1.7976931348623157e308, 1.0, math.ldexp(1.0, min(s.emax + 1, 1023))])
    edges = edges[np.isfinite(edges)]
    with np.errstate(over="ignore"):
        structured += [edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)]
    if f.bits > 8:  # fp16 / bf16: every midpoint (and +-1 ulp), a sample of the rest
        def sample(a):
            return rng.choice(a, min(4000, a.size), replace=False)
        v, m, v_up, v_dn, m_up, m_dn, *rest = structured
        structured = [m, m_up, m_dn, sample(v), sample(v_up), sample(v_dn), *rest]
    x = np.concatenate(structured)
    x = x[np.isfinite(x)]
    if f.bits > 8:  # large sets: one random sign each
        x = x * np.where(rng.random(x.size) < 0.5, -1.0, 1.0)
    else:
        x = np.concatenate([x, -x])
    # random values over the format's range and 8 binades beyond, then the whole float64 range
    lo, hi = max(s.emin - f.mbits - 8, -1074), min(s.emax + 8, 1023)
    n_rand = max(12_000, MIN_INPUTS - x.size + 4000)
    r = np.ldexp(rng.uniform(1.0, 2.0, n_rand), rng.integers(lo, hi + 1, n_rand))
    r *= np.where(rng.random(n_rand) < 0.5, -1.0, 1.0)
    bits = rng.integers(0, 2**63, 2000, dtype=np.int64) | (rng.integers(0, 2, 2000) << 63)
    anywhere = bits.view(np.float64)
    anywhere = anywhere[np.isfinite(anywhere)]
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    out = np.concatenate([x, r, anywhere, specials])
    assert out.size >= MIN_INPUTS
    return out


def _report(label, n, bad, x, got, want):
    print(f"{label}: {n} inputs, {int(bad.sum())} mismatches")
    if bad.any():
        i = np.flatnonzero(bad)[:5]
        return (f"{label}: {int(bad.sum())} of {n} differ, e.g. x={x[i].tolist()} "
                f"floatfmt={np.asarray(got)[i].tolist()} mpfr={np.asarray(want)[i].tolist()}")
    return None


@pytest.mark.parametrize("name", FLOAT_FORMATS + CUSTOM)
def test_float64_inputs_match_mpfr(name, monkeypatch):
    """Three runs of floatfmt per combination, each against the oracle: all inputs, the
    finite ones only (chunks without Inf take the fast path in every mode), and all inputs
    with the fast path switched off (the general path that also serves sticky inputs)."""
    f = fmt_of(name)
    x = float_inputs(name)
    fin = np.isfinite(x)
    pols = policies(f)
    errors = []
    px = prepared(name)
    for mode in MODES:
        want = O.round_many(px, f, mode, overflow=pols)
        for pol in pols:
            runs = [("", x, ff.cast(x, f, mode, overflow=pol), want[pol]),
                    (" finite", x[fin], ff.cast(x[fin], f, mode, overflow=pol), want[pol][fin])]
            with monkeypatch.context() as mp:
                mp.setattr(rounding, "_plan", lambda *a: None)
                runs.append((" general", x, ff.cast(x, f, mode, overflow=pol), want[pol]))
            for label, xs, got, exp in runs:
                bad = mismatches(got, exp)
                msg = _report(f"{name} {mode} overflow={pol}{label}", xs.size, bad, xs, got, exp)
                if msg:
                    errors.append(msg)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_default_overflow_is_the_formats_own(name):
    """overflow=None means inf for IEEE-like formats, nan for fn/fnuz ones, saturate for
    fp6/fp4 (the oracle derives the default from the fields alone)."""
    f = ff.get_format(name)
    x = float_inputs(name)[-3000:]
    for mode in MODES:
        bad = mismatches(ff.cast(x, f, mode), O.round_many(x, f, mode))
        assert not bad.any(), (name, mode, x[bad][:5])


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2fnuz", "fp6_e3m2",
                                  "fp4_e2m1", "fp32", "e8m0"])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up", "odd"])
def test_ftz_matches_mpfr(name, mode):
    """ftz=True: results that are subnormal in the format become zero of the same sign."""
    f = ff.get_format(name)
    x = float_inputs(name)[::4]
    want = O.round_many(x, f, mode, ftz=True)
    got = ff.cast(x, f, mode, ftz=True)
    bad = mismatches(got, want)
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
    s = O.spec(f)
    fin = np.isfinite(got) & (got != 0)
    assert np.all(np.abs(got[fin]) >= s.smallest_normal)


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp6_e2m3", "fp32"])
def test_daz_treats_subnormal_inputs_as_zero(name):
    """daz=True: inputs that are subnormal in their own dtype count as signed zero."""
    f = ff.get_format(name)
    x32 = np.array([1e-40, -1e-40, 1.5e-45, 1.17549435e-38, -3e-39, 1.0, -0.0], np.float32)
    got = ff.cast(x32, f, daz=True, dtype=np.float64)
    sub = (np.abs(x32) < np.finfo(np.float32).tiny) & (x32 != 0)
    want = np.where(sub, np.copysign(0.0, x32), x32).astype(np.float64)
    exp = O.round_many(want, f)
    assert not mismatches(got, exp).any(), (got, exp)
    # float64 inputs: the float64 subnormals
    x = np.array([5e-324, -1e-310, 2.2250738585072014e-308], np.float64)
    got = ff.cast(x, f, rounding="up", daz=True)
    exp = O.round_many(np.array([0.0, -0.0, x[2]]), f, "up")
    assert not mismatches(got, exp).any()


@pytest.mark.parametrize("name", INT_FORMATS)
@pytest.mark.parametrize("pol", ["saturate", "wrap"])
def test_integer_formats_match_exact_rounding(name, pol, monkeypatch):
    f = ff.get_format(name)
    rng = np.random.default_rng(3)
    span = 1 << f.bits
    x = np.concatenate([np.arange(-3 * span, 3 * span) / 4.0,      # every quarter: ties and not
                        rng.uniform(-40 * span, 40 * span, 20_000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 2.0**62 + 2.0**10]])
    fin = np.isfinite(x)
    for mode in MODES:
        want = O.round_many(x, f, mode, overflow=pol)
        with monkeypatch.context() as mp:
            mp.setattr(rounding, "_plan", lambda *a: None)
            general = ff.cast(x, f, mode, overflow=pol)
        for label, got, exp, xs in [("all", ff.cast(x, f, mode, overflow=pol), want, x),
                                    ("finite", ff.cast(x[fin], f, mode, overflow=pol), want[fin], x[fin]),
                                    ("general", general, want, x)]:
            bad = mismatches(got, exp)
            assert not bad.any(), (name, mode, pol, label, xs[bad][:5], got[bad][:5], exp[bad][:5])
    # huge Python ints wrap by their low bits
    big = [2**70 + 5, -(2**70) - 5, 10**30 + 1, 3 * 2**64 + 129]
    got = ff.cast(big, f, overflow=pol)
    want = [O.round_one(v, f, overflow=pol) for v in big]
    assert not mismatches(got, want).any(), (got, want)


# ------------------------------------------------------------------------------- exact inputs
def _exact_points(name, n_pairs, rng) -> list:
    """Exact midpoints of neighbouring values, the same a hair (2**-80 of a gap) either side,
    the values themselves a hair off, and random rationals near the format's range."""
    f = ff.get_format(name)
    s = O.spec(f)
    vals = positive_values(f).tolist()
    if len(vals) > n_pairs:
        vals = rng.sample(vals, n_pairs)
    out = []
    for v in vals:
        fv = Fraction(v)
        up = O.neighbours(fv + Fraction(1, 2**1200), f, exact=True)[1]
        gap = up - fv
        mid = fv + gap / 2
        hair = gap / 2**80
        out += [mid, mid + hair, mid - hair, fv + hair, fv - hair]
    out += [Fraction(s.min_pos) / 2, Fraction(s.min_pos) / 2 + Fraction(s.min_pos) / 2**90,
            s.max * 2, Fraction(10) ** 400, Fraction(1, 10**400)]
    for _ in range(n_pairs):
        e = rng.randint(max(s.emin - s.mbits - 4, -1100), min(s.emax + 4, 1030))
        out.append(Fraction(rng.randint(1, 10**30), rng.randint(1, 10**30)) * Fraction(2) ** e)
    out = [v for v in out if v != 0]
    return out + [-v for v in out[::2]]


@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_exact_fractions_match_mpfr(name, monkeypatch):
    """Fractions at exact midpoints and a hair off them: one rounding, from the exact value.
    Checked on all points, on the points with a finite float64 part (chunks the fast path
    takes, sticky part and all) and with the fast path switched off."""
    rng = random.Random(11)
    f = ff.get_format(name)
    n = 2000 if name == "fp64" else 400
    pts = _exact_points(name, n, rng)
    ex = to_exact(np.array(pts, dtype=object))
    if name == "fp64":
        assert len(pts) >= MIN_INPUTS // 2
    assert ex.sticky is not None and ex.sticky.any()
    fin = np.isfinite(ex.values)
    ex_fin = to_exact(np.array([p for p, k in zip(pts, fin) if k], dtype=object))
    errors = []
    for mode in MODES:
        want = O.round_many(pts, f, mode, overflow=policies(f))
        for pol in policies(f):
            with monkeypatch.context() as mp:
                mp.setattr(rounding, "_plan", lambda *a: None)
                general = round_exact(ex, f, mode, pol)
            for label, got, exp in [("all", round_exact(ex, f, mode, pol), want[pol]),
                                    ("finite", round_exact(ex_fin, f, mode, pol), want[pol][fin]),
                                    ("general", general, want[pol])]:
                bad = mismatches(got, exp)
                if bad.any():
                    i = np.flatnonzero(bad)[:3]
                    errors.append(f"{name} {mode} {pol} {label}: {int(bad.sum())}/{len(got)} "
                                  f"differ, e.g. {got[i]} vs {exp[i]}")
    assert not errors, "\n".join(errors)
    # cast() takes the same route from a list of Fractions
    sub = pts[:200]
    assert not mismatches(ff.cast(sub, f), O.round_many(sub, f)).any()


def test_fp64_target_with_many_exact_inputs():
    """fp64 as the target: 20,000 exact rationals at / near float64 midpoints, every mode."""
    rng = np.random.default_rng(5)
    a = np.ldexp(rng.uniform(1, 2, 10_000), rng.integers(-1074, 1024, 10_000))
    a = a[np.isfinite(a)]
    b = np.nextafter(a, np.inf)
    pts = []
    for lo, hi in zip(a.tolist(), b.tolist()):
        mid = (Fraction(lo) + Fraction(hi)) / 2
        pts.append(mid)
        pts.append(mid + (Fraction(hi) - Fraction(lo)) / 2**70 * (1 if len(pts) % 3 else -1))
    ex = to_exact(np.array(pts, dtype=object))
    f = ff.get_format("fp64")
    for mode in MODES:
        want = O.round_many(pts, f, mode)
        bad = mismatches(round_exact(ex, f, mode), want)
        assert not bad.any(), (mode, int(bad.sum()), [pts[i] for i in np.flatnonzero(bad)[:3]])


HARD_DECIMALS = [
    "0.1", "0.2", "0.3", "1e23", "9007199254740993", "9007199254740995", "2.2250738585072011e-308",
    "2.2250738585072012e-308", "4.9406564584124654e-324", "2.4703282292062327e-324",
    "2.4703282292062328e-324", "1.7976931348623157e308", "1.7976931348623158e308",
    "1.7976931348623159e308", "179769313486231580793728971405301e276", "8.98846567431158e307",
    "0.500000000000000166533453693773481063544750213623046875",
    "0.5000000000000001665334536937734810635447502136230468749",
    "0.5000000000000001665334536937734810635447502136230468751",
    "123456789012345678901234567890e-40", "-0.0", "1e-400", "-1e400",
]


def test_decimal_strings_to_fp64_equal_python_float():
    """Python's float() is correctly rounded (RNE); so must be cast(str, 'fp64')."""
    rng = random.Random(2)
    strings = list(HARD_DECIMALS)
    for _ in range(3000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40)))
        point = rng.randint(0, len(digits))
        s = f"{'-' if rng.random() < 0.5 else ''}{digits[:point]}.{digits[point:]}e{rng.randint(-330, 310)}"
        strings.append(s.replace(".e", "e") if point == len(digits) else s)
    for _ in range(500):  # halfway cases: a double's exact midpoint written out in decimal
        v = rng.uniform(1, 2) * 2.0 ** rng.randint(-1070, 1020)
        mid = (Fraction(v) + Fraction(math.nextafter(v, math.inf))) / 2
        d = Decimal(mid.numerator) / Decimal(mid.denominator)  # 28 digits: near, not at, the tie
        strings.append(str(d))
    got = ff.cast(strings, "fp64")
    want = np.array([float(s) for s in strings])
    bad = mismatches(got, want)
    assert not bad.any(), [strings[i] for i in np.flatnonzero(bad)[:5]]
    # and the oracle agrees with Python on the same strings (a check of the oracle itself)
    f64 = ff.get_format("fp64")
    assert not mismatches(O.round_many(strings, f64), want).any()


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16", "fp8_e4m3", "fp4_e2m1", "fp64", "tf32"])
def test_decimal_strings_every_mode(name):
    """Decimal strings are rounded as decimals: '0.1' is 1/10, not the double nearest it."""
    rng = random.Random(4)
    f = ff.get_format(name)
    strings = [s for s in HARD_DECIMALS]
    vals = positive_values(f).tolist()
    for v in rng.sample(vals, min(300, len(vals) - 1)):
        up = O.neighbours(Fraction(v) + Fraction(1, 2**1200), f, exact=True)[1]
        mid = (Fraction(v) + up) / 2
        exact = Decimal(mid.numerator) / Decimal(mid.denominator)
        strings.append(str(exact))  # 28 significant digits: near the tie, not at it
        strings.append(_exact_decimal(mid))  # the tie itself, every digit written out
        strings.append(_exact_decimal(mid) + "0000000001")  # a hair above the tie
    for mode in MODES:
        got = ff.cast(strings, f, mode)
        want = O.round_many(strings, f, mode)
        bad = mismatches(got, want)
        assert not bad.any(), (mode, [strings[i] for i in np.flatnonzero(bad)[:3]])


def _exact_decimal(fr: Fraction) -> str:
    """Every decimal digit of a dyadic rational."""
    num, den = fr.numerator, fr.denominator
    k = den.bit_length() - 1
    assert den == 1 << k
    digits = str(num * 5**k)
    if k == 0:
        return digits
    digits = digits.rjust(k + 1, "0")
    return f"{digits[:-k]}.{digits[-k:]}"


def test_huge_python_ints():
    """Python ints past 2**53 (and past float64's range) are rounded once, exactly."""
    ints = [2**53 + 1, 2**53 + 3, -(2**53) - 1, 2**64 + 2**11, 2**64 + 2**11 + 1, 2**64 - 1,
            2**1024, 2**1024 - 2**970, 2**1024 - 2**970 - 1, -(2**1100), 10**400, 3**700,
            2**128 - 2**103, 2**128 - 2**104 + 1, 2**128 - 2**103 - 1, 65520, 65519, 464, 465]
    for name in ["fp64", "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "tf32"]:
        f = ff.get_format(name)
        for mode in MODES:
            for pol in policies(f):
                got = ff.cast(ints, f, mode, overflow=pol)
                want = O.round_many(ints, f, mode, overflow=pol)
                bad = mismatches(got, want)
                assert not bad.any(), (name, mode, pol, [ints[i] for i in np.flatnonzero(bad)])
                one = ff.cast(ints[0], f, mode, overflow=pol)
                assert not mismatches([one], want[:1]).any()


def test_decimal_objects_and_numpy_ints():
    f = ff.get_format("bf16")
    xs = [Decimal("0.1"), Decimal("-1e-45"), Decimal("3.4e38"), Decimal("Infinity"), Decimal("-0")]
    got = ff.cast(xs, f)
    want = O.round_many(xs, f)
    assert not mismatches(got, want).any()
    big = np.array([2**62 + 1, -(2**62) - 2**40 - 1, 2**53 + 1], np.int64)
    for name in ["fp64", "fp32", "bf16"]:
        g = ff.get_format(name)
        for mode in MODES:
            assert not mismatches(ff.cast(big, g, mode),
                                  O.round_many([int(v) for v in big], g, mode)).any()


def test_the_oracle_itself_agrees_with_numpy_float16():
    """numpy's float64 -> float16 conversion is a direct, correctly rounded one: it and the
    oracle must agree, which checks the oracle's context set-up (subnormals, overflow)."""
    x = float_inputs("fp16")
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float64)
    got = O.round_many(x, ff.get_format("fp16"))
    assert not mismatches(got, want).any()


def test_decimal_strings_far_outside_float64():
    """Exponents past float64's range are decided without huge rationals (fast), and agree
    with the oracle where the oracle can still build the rational."""
    f = ff.get_format("fp64")
    for s in ["1e-400", "-1e-400", "1e-500", "1e309", "-1e400", "9.99e308", "1e-399"]:
        for mode in MODES:
            assert not mismatches([ff.cast(s, f, mode)], [O.round_one(s, f, mode)]).any(), (s, mode)
    assert ff.cast("1e1000000000", "bf16") == math.inf
    assert ff.cast("-1e-1000000000", "fp64", "down") == -5e-324
    assert ff.cast("1e1000000000", "e4m3", "toward_zero") == 448


@pytest.mark.parametrize("name", FLOAT_FORMATS + ["int8", "uint4", "e3m1", "e5m1fnuz"])
def test_sticky_inputs_fast_path_equals_general_path(name, monkeypatch):
    """Random remainder classes on values at, between and around the format's values (ties
    and integers included): the fast path with its sticky fix-ups agrees with the general
    path everywhere; on a sample, both agree with the oracle fed the exact values."""
    f = ff.get_format(name)
    if f.kind == "int":
        x = np.concatenate([np.arange(-300, 300) / 4.0, np.arange(-40, 40) / 2.0])
    else:
        x = float_inputs(name)
        x = x[np.isfinite(x)]
    rng = np.random.default_rng(12)
    sticky = rng.integers(0, 4, x.size).astype(np.uint8)
    for mode in ["nearest_even", "nearest_away", "toward_zero", "up", "down", "odd"]:
        for pol in (["saturate", "wrap"] if f.kind == "int" else policies(f)):
            fast = rounding.round_values(x, f, mode, pol, sticky=sticky)
            with monkeypatch.context() as mp:
                mp.setattr(rounding, "_plan", lambda *a: None)
                ref = rounding.round_values(x, f, mode, pol, sticky=sticky)
            bad = mismatches(fast, ref)
            assert not bad.any(), (name, mode, pol, x[bad][:4], sticky[bad][:4], fast[bad][:4], ref[bad][:4])
    # the exact values behind a sample, through the oracle
    idx = rng.choice(x.size, 300, replace=False)
    exact = []
    for v, c in zip(x[idx].tolist(), sticky[idx].tolist()):
        ulp = Fraction(math.ulp(v)) if v != 0 else Fraction(2) ** -1074
        sign = -1 if math.copysign(1.0, v) < 0 else 1
        exact.append(v if c == 0 else Fraction(v) + sign * ulp * c / 4)
    for mode in ["nearest_even", "up", "odd"]:
        got = rounding.round_values(x[idx], f, mode, sticky=sticky[idx])
        assert not mismatches(got, O.round_many(exact, f, mode)).any(), mode


def _past_max_inputs(f) -> np.ndarray:
    """Inputs at and past the format's largest finite value, both signs: max, the next
    float64 up, the tie above max, values between max and the next binade, that binade,
    far beyond, the float64 maximum and Inf; plus a few in-range values in each chunk."""
    s = O.spec(f)
    top = math.ldexp(1.0, min(s.emax + 1, 1023))
    q = math.ldexp(1.0, s.emax - f.mbits)  # the quantum at max
    pts = [s.fmax, math.nextafter(s.fmax, math.inf), s.fmax + q / 2, s.fmax + q / 2 + q / 8,
           s.fmax + q, (s.fmax + top) / 2, top, top * 1.5, 1e300, 1.7976931348623157e308,
           math.inf, 1.0, 0.5]
    x = np.array([p for p in pts if p == p and p <= 1.7976931348623157e308 or p == math.inf])
    return np.concatenate([x, -x])


# formats with more mantissa bits than their top exponent: scaling an input near the
# double's top to their quantum overflows float64 (1.8e308 * 2**(mbits - emax) is Inf),
# which the overflow step must tell apart from an Inf input (P3109's such formats:
# tests/test_p3109.py against the report's tables)
_SCALE_OVERFLOWS = ["e2m5", "e3m6", "e2m7", "e3m4fnuz", "e3m5fn"]


@pytest.mark.parametrize("name", FLOAT_FORMATS + CUSTOM + _SCALE_OVERFLOWS)
def test_overflow_signs_every_policy_and_mode(name, monkeypatch):
    """Values past max, every overflow policy and rounding mode (stochastic included): the
    results are the oracle's, every result (+-max, +-Inf or NaN) carries the sign of its
    input, NaN's sign included (encode writes it into the code: e4m3fn 0x7F / 0xFF), and
    the fast path gives the general path's bit patterns and codes."""
    f = fmt_of(name)
    x = _past_max_inputs(f)
    px = O.prepare(x)
    errors = []
    for mode in (*MODES, "stochastic"):
        want = None if mode == "stochastic" else O.round_many(px, f, mode, overflow=policies(f))
        for pol in policies(f):
            got = ff.cast(x, f, mode, overflow=pol, rng=3)
            codes = ff.encode(x, f, mode, overflow=pol, rng=3) if f.signed else None
            with monkeypatch.context() as mp:
                mp.setattr(rounding, "_plan", lambda *a: None)
                ref = ff.cast(x, f, mode, overflow=pol, rng=3)
                ref_codes = ff.encode(x, f, mode, overflow=pol, rng=3) if f.signed else None
            label = f"{name} {mode} overflow={pol}"
            if want is not None and mismatches(got, want[pol]).any():
                errors.append(f"{label}: values differ from the oracle")
            if f.signed and not np.array_equal(np.signbit(got), np.signbit(x)):
                bad = np.signbit(got) != np.signbit(x)
                errors.append(f"{label}: sign of {x[bad][:4]} -> {got[bad][:4]}")
            if not np.array_equal(got.view(np.int64), ref.view(np.int64)) and not (
                    np.array_equal(np.isnan(got), np.isnan(ref))
                    and np.array_equal(np.signbit(got), np.signbit(ref))
                    and np.array_equal(got[~np.isnan(got)], ref[~np.isnan(ref)])):
                errors.append(f"{label}: fast path {got} != general path {ref}")
            if codes is not None and not np.array_equal(codes, ref_codes):
                errors.append(f"{label}: codes {codes} != general path {ref_codes}")
    assert not errors, "\n".join(errors[:20])
