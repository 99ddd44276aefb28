"""An independent rounding reference built on MPFR (through gmpy2).

Nothing here calls floatfmt's rounding.  A float format is described to MPFR
by a context: precision ``mbits + 1``, the exponent range, and
``subnormalize=True``.  MPFR writes a number as ``0.1xxx * 2**E``, so a format
whose smallest positive value is ``2**(emin - mbits)`` gets ``ctx.emin =
emin - mbits + 1``.  The context's ``emax`` is one binade *above* the format's
top binade, so a value that overflows is still rounded as if the exponent range
were unbounded; overflow is then judged on the rounded value (``|r| > max``),
as IEEE 754 does, and the policy is applied from its definition:

* ``inf``: finite values that round past max give +-Inf in the nearest modes
  and in the directed mode that points away from zero on that side (``up`` for
  positives, ``down`` for negatives); ``toward_zero``, ``odd`` and the other
  directed side give +-max.  Inf input stays Inf.
* ``nan``: the same, with NaN in place of Inf (Inf input gives NaN).
* ``saturate``: every overflow gives +-max, Inf input included; NaN stays NaN.

Modes MPFR has natively: ``nearest_even`` (RNDN), ``toward_zero`` (RNDZ),
``up`` (RNDU), ``down`` (RNDD).  The others are built from two of them:

* ``nearest_away``: z = RNDZ(x), a = RNDA(x); take a when |x| >= |(z+a)/2|.
* ``odd``: z = RNDZ(x); if inexact, of the two neighbours z and a = RNDA(x)
  exactly one has an odd last significand bit, and the even one is the one
  RNDN picks for their exact midpoint; return the other.

Format facts (max, exponent range) are derived here from the raw fields
(``ebits``, ``mbits``, ``bias``, NaN encoding), not taken from floatfmt.

Rules for formats without some values (documented choices, shared with
floatfmt): no -0 -> a zero result is +0; E8M0 (no zero, unsigned) -> 0,
negatives and NaN give NaN, positive values below 2**-127 give 2**-127 (as
ml_dtypes does); formats without NaN (fp6, fp4) return NaN for NaN input (the
caller cannot encode it).

Integers (``kind == "int"``) are rounded with exact rational arithmetic, then
saturated (default) or wrapped (``overflow="wrap"``, two's complement).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import gmpy2
import numpy as np
from gmpy2 import mpfr, mpq

__all__ = ["MODES", "Spec", "spec", "to_exact", "prepare", "raw_round", "round_one", "round_many",
           "round_finite", "neighbours"]

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
_NATIVE = {"nearest_even": gmpy2.RoundToNearest, "toward_zero": gmpy2.RoundToZero,
           "up": gmpy2.RoundUp, "down": gmpy2.RoundDown}


class Spec:
    """What the oracle needs to know about a format, computed from its raw fields."""

    def __init__(self, fmt):
        self.name = fmt.name
        self.is_int = fmt.kind == "int"
        self.bits = fmt.bits
        self.signed = bool(fmt.signed)
        if self.is_int:
            self.lo = -(1 << (fmt.bits - 1)) if self.signed else 0
            self.hi = (1 << (fmt.bits - 1)) - 1 if self.signed else (1 << fmt.bits) - 1
            self.max = Fraction(self.hi)
            self.fmax = float(self.hi)
            self.has_inf = self.has_nan = self.neg_zero = False
            self.zero = True
            return
        e, m, b = fmt.ebits, fmt.mbits, fmt.bias
        self.mbits = m
        self.has_inf = bool(fmt.inf)
        self.has_nan = fmt.nan != "none" and not (fmt.nan == "ieee" and m == 0)
        self.zero = bool(fmt.zero)
        self.neg_zero = self.signed and self.zero and fmt.nan != "negative_zero"
        # The top binade: exponent field all ones is reserved in IEEE encodings,
        # and in E8M0 (mbits 0, NaN = all ones) the all-ones code is the NaN itself.
        top_field = (1 << e) - 1
        if fmt.nan == "ieee" or (fmt.nan == "all_ones" and m == 0):
            top_field -= 1
        top_mant = (1 << m) - 1
        if fmt.nan == "all_ones" and m > 0:
            top_mant -= 1  # S.1111.111 is NaN, S.1111.110 the max
        self.emax = top_field - b
        self.emin = (1 if self.zero else 0) - b  # exponent of the smallest normal binade
        self.max = Fraction((1 << m) + top_mant, 1 << m) * Fraction(2) ** self.emax
        self.fmax = float(self.max)
        self.min_pos = float(Fraction(2) ** (self.emin - (m if self.zero else 0)))
        self.smallest_normal = float(Fraction(2) ** self.emin)
        # MPFR contexts; emax leaves one binade of headroom for overflow detection.
        self.prec = m + 1
        sub = self.zero  # only the zero-less E8M0 lacks subnormals
        mpfr_emin = (self.emin - m + 1) if sub else (self.emin + 1)
        self.ctx = {name: gmpy2.context(precision=m + 1, emin=mpfr_emin, emax=self.emax + 2,
                                        subnormalize=sub, round=rnd)
                    for name, rnd in [*_NATIVE.items(), ("away", gmpy2.RoundAwayZero)]}


_SPECS: dict = {}


def spec(fmt) -> Spec:
    """The (cached) Spec of a floatfmt Format."""
    s = _SPECS.get(fmt)
    if s is None:
        s = _SPECS[fmt] = Spec(fmt)
    return s


def to_exact(v):
    """Exact value of v as an mpq, or a float for +-0, +-Inf and NaN (keeps their sign)."""
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return v if (not math.isfinite(v) or v == 0) else mpq(v)
    if isinstance(v, str):
        v = Decimal(v)
    if isinstance(v, Decimal):
        if not v.is_finite() or v.is_zero():
            return float(v)
        v = Fraction(v)
    if isinstance(v, Fraction):
        q = mpq(v.numerator, v.denominator)
    elif type(v).__name__ == "mpfr":
        if not gmpy2.is_finite(v) or gmpy2.is_zero(v):
            return float(v)
        q = mpq(v)
    else:
        q = mpq(v)
    return 0.0 if q == 0 else q


def _mpfr(q, s: Spec, name):
    return mpfr(q, s.prec, s.ctx[name])


def raw_round(q, s: Spec, mode) -> float:
    """Round the finite nonzero rational q to the format's precision and lower exponent
    range, with no upper limit (the result may exceed max; past float64's range it is
    +-Inf)."""
    if mode in _NATIVE:
        return float(_mpfr(q, s, mode))
    z = _mpfr(q, s, "toward_zero")
    if z == q:
        return float(z)
    a = _mpfr(q, s, "away")
    if not gmpy2.is_finite(a):
        return float(a) if mode == "nearest_away" else float(z)
    mid = (mpq(z) + mpq(a)) / 2
    if mode == "nearest_away":
        return float(a if abs(q) >= abs(mid) else z)
    if mode == "odd":
        even = _mpfr(mid, s, "nearest_even")
        return float(a if even == z else z)
    raise ValueError(f"unknown mode {mode!r}")


def default_overflow(s: Spec) -> str:
    if s.is_int:
        return "saturate"
    if s.has_inf:
        return "inf"
    return "nan" if s.has_nan else "saturate"


def _overflowed(neg, s: Spec, mode, policy) -> float:
    away = mode in ("nearest_even", "nearest_away") or (mode == "up" and not neg) \
        or (mode == "down" and neg)
    if policy == "saturate" or not away:
        val = s.fmax
    else:
        val = math.inf if policy == "inf" else math.nan
    return -val if neg else val


def _special(x: float, s: Spec, policy) -> float:
    """Result for an input that is +-0, +-Inf or NaN."""
    if x != x:
        return math.nan
    neg = math.copysign(1.0, x) < 0
    if not s.signed and ((neg and x != 0) or (x == 0 and not s.zero)):
        return math.nan  # unsigned: no negatives (E8M0: no zero either)
    if not s.signed and x == 0:
        return 0.0
    if x == 0:
        return -0.0 if (neg and s.neg_zero) else 0.0
    if policy == "saturate":
        return -s.fmax if neg else s.fmax
    return x if policy == "inf" else math.nan


def round_one(v, fmt, mode="nearest_even", overflow=None, *, ftz=False) -> float:
    """The value (a Python float; NaN for NaN) of the exact number ``v`` rounded to ``fmt``.

    ``v``: float, int, Fraction, Decimal, decimal string, gmpy2 mpz / mpq / mpfr.
    ``overflow``: ``"inf"``, ``"nan"``, ``"saturate"`` (``"wrap"`` for integers)
    or None for the format's default.
    """
    s = spec(fmt)
    x = to_exact(v)
    return _finish(x, _raw(x, s, mode), s, mode, overflow or default_overflow(s), ftz)


class Exacts(list):
    """Inputs already converted by ``to_exact`` (reuse them across modes and formats)."""


def prepare(values) -> Exacts:
    """Convert inputs once (``to_exact`` each) for repeated ``round_many`` calls."""
    if isinstance(values, Exacts):
        return values
    if isinstance(values, np.ndarray):
        values = values.tolist()
    return Exacts(to_exact(v) for v in values)


def round_many(values, fmt, mode="nearest_even", overflow=None, *, ftz=False):
    """``round_one`` over an iterable (e.g. a float64 array, or ``prepare(...)``); a float64
    array back.

    ``overflow`` may be a list of policies: then a dict policy -> array is returned
    (the MPFR rounding is done once and shared; only the elements where the policy
    matters, specials and overflows, are finished again)."""
    s = spec(fmt)
    xs = prepare(values)
    raws = [_raw(x, s, mode) for x in xs]
    pols = list(overflow) if isinstance(overflow, (list, tuple)) else [overflow]
    first = pols[0] or default_overflow(s)
    base = np.array([_finish(x, r, s, mode, first, ftz) for x, r in zip(xs, raws)], np.float64)
    out = {pols[0]: base}
    if len(pols) > 1:
        matters = [i for i, (x, r) in enumerate(zip(xs, raws))
                   if s.is_int or r is None or not abs(r) <= s.fmax]
        for p in pols[1:]:
            arr = base.copy()
            for i in matters:
                arr[i] = _finish(xs[i], raws[i], s, mode, p or default_overflow(s), ftz)
            out[p] = arr
    return out if isinstance(overflow, (list, tuple)) else base


def round_finite(x, fmt, mode="nearest_even") -> np.ndarray:
    """Fast ``round_many`` for a float64 array of finite values whose results stay in range
    (checked), in a mode MPFR has natively; about 1 microsecond a value."""
    s = spec(fmt)
    if s.is_int or mode not in _NATIVE or not s.zero or not s.signed:
        raise ValueError("round_finite: native modes of signed float formats with zero only")
    x = np.asarray(x, np.float64)
    if not np.isfinite(x).all():
        raise ValueError("round_finite: finite inputs only")
    p, ctx = s.prec, s.ctx[mode]
    out = np.array([float(mpfr(v, p, ctx)) for v in x.tolist()], np.float64)
    if (np.abs(out) > s.fmax).any():
        raise ValueError("round_finite: a result overflows; use round_many")
    if not s.neg_zero:
        out += 0.0
    return out


def _raw(x, s: Spec, mode):
    """The rounding proper (no overflow policy); None where x is special or s is integer."""
    if isinstance(x, float) or s.is_int or (x < 0 and not s.signed):
        return None
    return raw_round(x, s, mode)


def _finish(x, r, s: Spec, mode, policy, ftz) -> float:
    if s.is_int:
        return _round_int(x, s, mode, policy)
    if isinstance(x, float):
        return _special(x, s, policy)
    neg = x < 0
    if neg and not s.signed:
        return math.nan
    if abs(r) > s.fmax:
        return _overflowed(neg, s, mode, policy)
    if r == 0:
        if not s.zero:
            return s.min_pos  # E8M0: the smallest scale stands in for zero
        return -0.0 if (neg and s.neg_zero) else 0.0
    if ftz and abs(r) < s.smallest_normal:
        return -0.0 if (neg and s.neg_zero) else 0.0
    return r


def neighbours(v, fmt, exact=False):
    """(lower, upper): the values of ``fmt`` bracketing the finite exact ``v`` (equal when
    v is in the format), with no upper exponent limit (so they may exceed max).
    Floats, or Fractions with ``exact=True``."""
    s = spec(fmt)
    x = to_exact(v)
    conv = (lambda r: Fraction(int(mpq(r).numerator), int(mpq(r).denominator))) if exact else float
    if isinstance(x, float):
        return x, x
    if s.is_int:
        lo = gmpy2.f_div(x.numerator, x.denominator)
        return conv(lo), conv(lo if x == lo else lo + 1)
    return conv(_mpfr(x, s, "down")), conv(_mpfr(x, s, "up"))


def _round_int(x, s: Spec, mode, policy) -> float:
    if isinstance(x, float):
        if x != x:
            return math.nan
        if x == 0:
            return 0.0
        return float(s.hi if x > 0 else s.lo)
    fl = gmpy2.f_div(x.numerator, x.denominator)  # floor
    frac = x - fl
    half = mpq(1, 2)
    if frac == 0:
        n = fl
    elif mode == "toward_zero":
        n = fl if x > 0 else fl + 1
    elif mode == "up":
        n = fl + 1
    elif mode == "down":
        n = fl
    elif mode == "nearest_away":
        n = (fl + 1 if x > 0 else fl) if frac == half else (fl if frac < half else fl + 1)
    elif mode == "nearest_even":
        n = fl if frac < half else fl + 1 if frac > half else (fl if fl % 2 == 0 else fl + 1)
    elif mode == "odd":
        n = fl if fl % 2 else fl + 1
    else:
        raise ValueError(f"unknown mode {mode!r}")
    n = int(n)
    if policy == "wrap":
        n = (n - s.lo) % (1 << s.bits) + s.lo
    else:
        n = min(max(n, s.lo), s.hi)
    return float(n)
