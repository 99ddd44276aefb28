"""IEEE exception flags (``ff.flags``) against MPFR's flags, element by element.

The oracle (nothing of floatfmt's rounding is used for the expected flags):

* MPFR's ``underflow`` flag is set when the result rounded to the target precision with
  an *unbounded* exponent range has an exponent below ``emin`` (MPFR manual, "Exceptions"),
  without regard to inexactness.  With a context of the format's precision, ``emin`` set
  to the format's smallest normal (MPFR writes numbers as 0.1xxx * 2**E, so smallest
  normal 2**emin is E = emin + 1), no subnormalize and a huge ``emax``, that flag is IEEE
  754's *tininess after rounding*.  IEEE's underflow is then tiny AND inexact.
* ``inexact``: MPFR's inexact flag in the format's own context (subnormal grid, as
  tests/oracles/mpfr.py builds it), or an overflow.
* ``overflow``: the MPFR rounding with unbounded exponent range (huge emin/emax, the
  format's precision) exceeds the format's max (computed from its raw fields by the
  oracle's Spec).  For IEEE-style formats MPFR's own overflow flag (emax one above the
  format's top binade) is checked to agree.
* modes MPFR lacks (nearest_away, odd) are rounded by choosing between RNDZ and RNDA as
  tests/oracles/mpfr.py defines them, and the flags are read from that rounding.
* ``invalid`` / ``saturated`` of specials follow the stated rules with the oracle's
  stored value (``mpfr.round_one``).
"""

from __future__ import annotations

import math
import zlib

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpfr as M

import floatfmt as ff
from floatfmt.core import flags as fpflags
from oracles import mpfr as O

FORMATS = ["fp8_e4m3", "fp8_e5m2", "bf16", "fp16", "fp4_e2m1", "fp6_e2m3"]
MODES = list(O.MODES)
_RND = {"nearest_even": gmpy2.RoundToNearest, "toward_zero": gmpy2.RoundToZero,
        "up": gmpy2.RoundUp, "down": gmpy2.RoundDown, "away": gmpy2.RoundAwayZero}


def edge_values(fmt) -> np.ndarray:
    """Values around max, the smallest normal and subnormal, 1, their midpoints and
    neighbours at a few distances, zeros, Inf and NaN, both signs."""
    s = O.spec(ff.get_format(fmt))
    m = s.mbits
    vals = {0.0, math.inf, math.nan}
    for base in (s.fmax, s.smallest_normal, s.min_pos, 1.0, 2 * s.fmax, s.fmax + s.fmax * 2.0 ** -m):
        for j in range(0, m + 4):
            d = base * 2.0 ** -(j + 1)
            for k in (-3, -2, -1, 1, 2, 3):
                vals.add(base + k * d)
            vals.add(base)
    vals |= {s.min_pos / 2, s.min_pos * 0.75, s.min_pos / 4, s.min_pos * 1.5, s.min_pos * 2.5,
             s.smallest_normal - s.min_pos / 2, s.smallest_normal - s.min_pos / 4, 1e-300, 1e300}
    v = np.array(sorted(x for x in vals if not math.isnan(x)) + [math.nan])
    v = v[(v >= 0) | np.isnan(v)]
    return np.concatenate([v, -v])


def _native(q, prec, rnd, ctx):
    """MPFR's rounding of q in mode rnd, and the flags it raised, in a fresh context."""
    with gmpy2.context(gmpy2.context(precision=prec, round=_RND[rnd], **ctx)) as lc:
        r = M(q)
    return r, lc


def _round(q, prec, mode, **ctx):
    """(value, flags context) of the rational q in an MPFR context with ``ctx``; modes
    MPFR lacks choose between RNDZ and RNDA as the oracle defines them, the choice made
    with an unbounded exponent range (a bounded one may already have flushed both)."""
    if mode in ("nearest_even", "toward_zero", "up", "down"):
        return _native(q, prec, mode, ctx)
    big = dict(emin=-100000, emax=100000)
    z, _ = _native(q, prec, "toward_zero", big)
    a, _ = _native(q, prec, "away", big)
    if z == a:
        return _native(q, prec, "toward_zero", ctx)
    mid = (gmpy2.mpq(z) + gmpy2.mpq(a)) / 2
    if mode == "nearest_away":
        pick = abs(q) >= abs(mid)
    else:  # odd: the neighbour whose last significand bit is odd (RNDN picks the even one)
        even, _ = _native(mid, prec, "nearest_even", big)
        pick = even == z
    return _native(q, prec, "away" if pick else "toward_zero", ctx)


def oracle_flags(x: float, fmt, mode: str, policy: str | None) -> dict[str, bool]:
    f = ff.get_format(fmt)
    s = O.spec(f)
    out = dict.fromkeys(fpflags.FLAGS, False)
    stored = O.round_one(x, f, mode, policy)
    pol = policy or O.default_overflow(s)
    if isinstance(x, float) and math.isnan(x):
        out["invalid"] = not s.has_nan
        out["saturated"] = math.isfinite(stored)
        return out
    if isinstance(x, float) and math.isinf(x):
        out["invalid"] = math.isnan(stored)
        out["saturated"] = math.isfinite(stored)
        return out
    if x == 0:
        return out
    q = gmpy2.mpq(x)
    big = dict(emin=-100000, emax=100000)
    u, _ = _round(q, s.prec, mode, **big)
    overflow = abs(u) > s.max
    _, lt = _round(q, s.prec, mode, emin=s.emin + 1, emax=100000)
    tiny = bool(lt.underflow)
    _, lg = _round(q, s.prec, "nearest_even", emin=s.ctx["nearest_even"].emin, emax=100000,
                   subnormalize=True)
    inexact = bool(lg.inexact) or overflow
    if s.max == 2 ** (s.emax + 1) - 2 ** (s.emax - s.mbits) and mode in ("nearest_even", "toward_zero", "up", "down"):
        _, lo = _round(q, s.prec, mode, emin=-100000, emax=s.emax + 1)
        assert bool(lo.overflow) == overflow, (x, fmt, mode)
    out.update(inexact=inexact, overflow=bool(overflow), underflow=tiny and inexact,
               saturated=bool(overflow) and math.isfinite(stored))
    assert pol in ("inf", "nan", "saturate")
    return out


def got_flags(v: np.ndarray, fmt, mode, policy):
    with ff.flags(masks=True) as fl:
        ff.cast(v, fmt, mode, policy)
    assert len(fl.masks) == 1
    return fl, fl.masks[0]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", [None, "saturate"])
def test_cast_flags_match_mpfr(fmt, mode, policy):
    v = edge_values(fmt)
    fl, masks = got_flags(v, fmt, mode, policy)
    bad = []
    for i, x in enumerate(v.tolist()):
        want = oracle_flags(x, fmt, mode, policy)
        for name in fpflags.FLAGS:
            if bool(masks[name][i]) != want[name]:
                bad.append((x, name, bool(masks[name][i]), want[name]))
    assert bad == [], f"{len(bad)} mismatches, e.g. {bad[:5]}"
    assert fl.counts() == {k: int(np.count_nonzero(masks[k])) for k in fpflags.FLAGS}
    assert fl.overflow > 0 and fl.inexact > 0 and fl.underflow > 0  # the edge set reaches them


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "bf16", "fp4_e2m1"])
@pytest.mark.parametrize("mode", MODES)
def test_cast_flags_of_values_float64_does_not_hold(fmt, mode):
    """Exact inputs with a remainder beyond float64 (the routine's sticky class): a hair
    off the midpoints and edges near max, the smallest normal and 1, and past float64."""
    from fractions import Fraction
    s = O.spec(ff.get_format(fmt))
    h = Fraction(1, 2 ** 90)
    vals = []
    for base in (s.max, s.smallest_normal, s.min_pos, Fraction(1)):
        step = Fraction(base) * Fraction(1, 2 ** (s.mbits + 1))
        for k in (-3, -1, 1, 2, 3):
            for eps in (-h, h):
                vals.append(Fraction(base) + k * step / 2 + eps * Fraction(base))
    vals += [Fraction(10) ** 400, -Fraction(10) ** 400, Fraction(1, 3), Fraction(1, 10 ** 400)]
    with ff.flags(masks=True) as fl:
        ff.cast(vals, fmt, mode)
    m = fl.masks[-1]
    bad = [(v, n) for i, v in enumerate(vals) for n, w in oracle_flags(v, fmt, mode, None).items()
           if bool(m[n][i]) != w]
    assert bad == [], f"{len(bad)} mismatches, e.g. {bad[:4]}"


def test_stochastic_and_tensor_flags():
    v = np.array([0.1, 1e6, 1.0, 2.0 ** -12, 448.0])
    with ff.flags() as fl:
        ff.cast(v, "fp8_e4m3", "stochastic", rng=1)
    # stochastic: overflow when |exact| > max, tiny when 0 < |exact| < smallest normal
    assert (fl.overflow, fl.underflow, fl.inexact) == (1, 1, 3)
    torch = pytest.importorskip("torch")
    with ff.flags() as fl:
        ff.cast(torch.tensor(v), "fp8_e4m3")
    with ff.flags() as fn:
        ff.cast(v, "fp8_e4m3")
    assert fl.counts() == fn.counts() and fl.overflow == 1


@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up", "down", "nearest_away"])
def test_int8_flags_match_exact(mode):
    """int8 (IEEE 754 5.8): NaN / Inf / out-of-range -> invalid; inexact only in range."""
    from fractions import Fraction
    v = np.array([0.0, 0.5, 1.5, 2.5, -2.5, 126.5, 127.0, 127.4, 127.5, 128.0, -128.0, -128.5,
                  -129.0, 1e10, math.inf, -math.inf, math.nan, -0.25, 3.0])
    with ff.flags(masks=True) as fl:
        ff.cast(v, "int8", mode)
    m = fl.masks[0]
    for i, x in enumerate(v.tolist()):
        if math.isnan(x) or math.isinf(x):
            want_invalid, want_inexact = True, False
        else:
            r = int(O.round_one(Fraction(x), ff.get_format("int32"), mode))
            want_invalid = not -128 <= r <= 127
            want_inexact = not want_invalid and Fraction(r) != Fraction(x)
        assert bool(m["invalid"][i]) == want_invalid, (x, mode)
        assert bool(m["inexact"][i]) == want_inexact, (x, mode)
        assert not m["overflow"][i] and not m["underflow"][i]


def test_arithmetic_invalid_and_divide_by_zero():
    inf, nan = math.inf, math.nan
    with ff.flags(masks=True) as fl:
        ff.sub([inf, 1.0, nan], [inf, 1.0, 1.0], "fp16")
    assert fl.invalid == 1 and fl.inexact == 0
    with ff.flags() as fl:
        ff.mul([0.0, 2.0], [inf, inf], "bf16")
    assert fl.invalid == 1
    with ff.flags() as fl:
        ff.sqrt([-1.0, 4.0, -0.0], "fp16")
    assert fl.invalid == 1
    with ff.flags() as fl:
        ff.div([1.0, 0.0, -3.0, inf, nan], [0.0, 0.0, 0.0, 0.0, 0.0], "fp16")
    assert (fl.divide_by_zero, fl.invalid) == (2, 1)
    with ff.flags() as fl:
        ff.fma(0.0, inf, 1.0, "fp16")
    assert fl.invalid == 1
    with ff.flags() as fl:  # 1/3 inexact, 60000*2 overflows fp16
        ff.div(1.0, 3.0, "fp16")
        ff.mul(60000.0, 2.0, "fp16")
    assert (fl.inexact, fl.overflow) == (2, 1)


def test_reductions_count_every_step():
    with ff.flags() as fl:
        ff.sum(np.array([1.0, 2.0 ** -11, 2.0 ** -11]), "fp16", acc_fmt="fp16")
    assert fl.inexact == 2  # 1 + 2**-11 ties to 1, twice
    with ff.flags() as fl:
        ff.sum(np.array([math.inf, -math.inf]), "fp16", acc_fmt="fp32")
    assert fl.invalid == 1
    for order in ("sequential", "pairwise", "kahan", "exact"):
        with ff.flags() as fl:
            ff.dot(np.array([0.0, 1.0, math.inf]), np.array([math.inf, 1.0, -1.0]), "fp16",
                   order=order)
        assert fl.invalid == 1, order  # 0 * Inf (then NaN + ... is quiet)
        with ff.flags() as fl:
            ff.dot(np.array([math.inf, 1.0]), np.array([1.0, -math.inf]), "fp16", order=order)
        assert fl.invalid == 1, order  # Inf + (-Inf)
    with ff.flags() as fl:
        ff.matmul(np.array([[0.0, 1.0], [1.0, 1.0]]), np.array([[math.inf, 1.0], [1.0, 1.0]]),
                  "bf16")
    assert fl.invalid == 1
    with ff.flags() as fl:
        ff.dot(np.array([60000.0, 60000.0]), np.array([2.0, 2.0]), "fp16", acc_fmt="fp16")
    assert fl.overflow >= 1


def test_flushed_and_saturated():
    sn = ff.info("fp16").smallest_normal
    with ff.flags() as fl:
        ff.cast([sn / 4, sn, 0.0], "fp16", ftz=True)
    # sn/4 is a subnormal of fp16: tiny; ftz stores 0, so it is also inexact (underflow)
    assert (fl.flushed, fl.underflow, fl.inexact) == (1, 1, 1)
    with ff.flags() as fl:
        ff.cast([sn / 4], "fp16")
    assert (fl.flushed, fl.underflow, fl.inexact) == (0, 0, 0)  # exact subnormal: no underflow
    x = np.array([2.0 ** -20, 1.0], np.float16)  # a float16 subnormal input
    with ff.flags() as fl:
        ff.cast(x, "fp32", daz=True)
    assert fl.flushed == 1 and fl.inexact == 0
    with ff.flags() as fl:
        ff.cast([1e6, math.inf, 448.0], "fp8_e4m3", overflow="saturate")
    assert (fl.saturated, fl.overflow) == (2, 1)


def test_no_observer_outside_block_and_nesting():
    from floatfmt.core.rounding import OBSERVER
    assert OBSERVER.get() is None and not fpflags.active()
    with ff.flags() as outer:
        ff.cast(0.1, "bf16")
        with ff.flags() as inner:
            ff.cast(0.1, "bf16")
        assert fpflags.active()
    assert OBSERVER.get() is None and not fpflags.active()
    assert (outer.inexact, inner.inexact) == (2, 1)


def test_raise_on_and_bad_names():
    with pytest.raises(FloatingPointError, match="overflow"):
        with ff.flags(raise_on="overflow"):
            ff.cast(1e9, "fp16")
    with pytest.raises(ValueError, match="overflw") as e:
        with ff.flags(raise_on=("overflw",)):
            pass
    assert "overflow" in str(e.value)
    with ff.flags() as fl:
        pass
    with pytest.raises(ValueError, match="inexakt"):
        fl.count("inexakt")
    with pytest.raises(TypeError):
        with ff.flags(masks="yes"):  # type: ignore[arg-type]
            pass


def test_large_arrays_on_threads_are_counted():
    """Arrays of several thread blocks: every block's roundings are counted."""
    from floatfmt.core import threads
    n = 3 * threads.BLOCK + 5
    x = ff.cast(np.full(n, 0.1), "fp16")  # 11 significant bits: exact operands in fp16
    with threads.limit_threads(4):
        with ff.flags() as fl:
            ff.cast(x, "bf16")  # inexact
            ff.mul(x, x, "fp16")  # inexact
            ff.add(x, x, "fp16")  # exact
            ff.div(x, np.zeros(n), "fp16")  # divide by zero
    assert (fl.inexact, fl.divide_by_zero) == (2 * n, n)


def _operands(fmt, n, seed):
    """n random finite values of fmt (every code equally likely)."""
    v = ff.values(fmt)
    v = v[np.isfinite(v)]
    rng = np.random.default_rng(seed)
    return rng.choice(v, n), rng.choice(v, n), rng.choice(v, n)


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "fma"])
def test_arithmetic_flags_match_mpfr(fmt, mode, op):
    """The flags of add/sub/mul/div/fma: the exact result (Fraction) through the MPFR
    oracle, for random operands of the format (products and quotients reach past max
    and below the smallest subnormal)."""
    from fractions import Fraction
    a, b, c = _operands(fmt, 300, zlib.crc32(f"{fmt} {op}".encode()))
    if op == "div":
        b = np.where(b == 0, 1.0, b)
    fn = {"add": lambda x, y, z: x + y, "sub": lambda x, y, z: x - y,
          "mul": lambda x, y, z: x * y, "div": lambda x, y, z: x / y,
          "fma": lambda x, y, z: x * y + z}[op]
    args = (a, b, c) if op == "fma" else (a, b)
    with ff.flags(masks=True) as fl:
        getattr(ff, op)(*args, fmt, mode)
    m = fl.masks[-1]  # the rounding of the result (operands are in the format: exact)
    assert sum(fl.counts().values()) == sum(int(v.sum()) for v in m.values())
    bad = []
    for i in range(a.size):
        q = fn(Fraction(float(a[i])), Fraction(float(b[i])), Fraction(float(c[i])))
        for name, want in oracle_flags(q, fmt, mode, None).items():
            if bool(m[name][i]) != want:
                bad.append((float(a[i]), float(b[i]), name))
    assert bad == [], f"{len(bad)} mismatches, e.g. {bad[:4]}"


@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up"])
def test_sqrt_inexact_iff_not_a_square(mode):
    from fractions import Fraction
    x = ff.values("fp16")
    x = x[np.isfinite(x) & (x > 0)][::7]
    with ff.flags(masks=True) as fl:
        r = ff.sqrt(x, "fp16", mode)
    m = fl.masks[-1]
    want = np.array([Fraction(float(v)) ** 2 != Fraction(float(u)) for u, v in zip(x, r)])
    assert (m["inexact"] == want).all() and want.any() and (~want).any()
