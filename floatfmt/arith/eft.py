"""Error-free transformations: exact results handed to the rounding routine.

float64 holds every value of every format up to fp32, but not always the exact
result of an operation on them.  The functions here compute that exact result
as a float64 ``t`` truncated toward zero plus a *remainder class* (the
``sticky`` argument of ``floatfmt.core.rounding.round_values``): 0 when ``t`` is
exact, else 1 / 2 / 3 when what lies beyond ``t`` is below / exactly / above
half of ``t``'s float64 ulp (``numpy.spacing(|t|)``).  That is all one correct
rounding needs, so no result is rounded twice.

Building blocks (float64, vectorised, IEEE round-to-nearest):

``two_sum(a, b)``   s + e == a + b exactly, s = fl(a + b)        (Knuth)
``two_prod(a, b)``  p + e == a * b exactly, p = fl(a * b)        (Veltkamp / Dekker)
``to_sticky(hi, lo, tail)``  the exact hi + lo (+ tail) as (t, class)

``two_prod`` needs |a|, |b| < 2**995 and a product above about 2**-969 (else
its error is not a float64); the ``exact_*`` functions below check those
conditions and send the rare elements outside them through exact rational
arithmetic (``fractions.Fraction``), so every result is exact for every input.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..core.intake import fraction_rz, fraction_resid

__all__ = ["two_sum", "split", "two_prod", "to_sticky", "exact_sum", "exact_product",
           "exact_fma", "exact_quotient", "exact_sqrt", "fraction_to_sticky", "int_to_sticky",
           "product_is_exact", "resid_slack"]

_SPLITTER = 134217729.0  # 2**27 + 1
_BIG = 2.0 ** 995  # above this Veltkamp's split can overflow
_TINY = 2.0 ** -969  # below this a product's rounding error may not be a float64


def two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e == a + b`` exactly.

    Knuth's branch-free TwoSum; exact for all finite a, b whose sum does not
    overflow (e is NaN where s is infinite).

    >>> two_sum(1.0, 2.0**-60)
    (1.0, 8.673617379884035e-19)
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)
    if s.ndim == 0:
        return float(s), float(e)
    return s, e


def split(a):
    """Veltkamp split: ``a == hi + lo`` with hi, lo of at most 26 significant bits."""
    a = np.asarray(a, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        c = _SPLITTER * a
        hi = c - (c - a)
        lo = a - hi
    return hi, lo


def two_prod(a, b):
    """``(p, e)`` with ``p = fl(a * b)`` and ``p + e == a * b`` exactly.

    Dekker's product with Veltkamp splitting (float64 only, no FMA needed).
    Exact when |a|, |b| < 2**995 and |a * b| >= 2**-969 (or a * b == 0).

    >>> two_prod(1.0 + 2.0**-30, 1.0 + 2.0**-30)
    (1.0000000018626451, 8.673617379884035e-19)
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        p = a * b
        ah, al = split(a)
        bh, bl = split(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    if p.ndim == 0:
        return float(p), float(e)
    return p, e


_R_ONE = 1 << 54  # resid units in one float64 ulp
_R_PAST = 3 << 52  # resid of a finite value past the float64 range (class 3)


def _resid_from(W, dsign, short, nonzero):
    """``resid`` (int64, see ``rounding.round_values``) of remainders given as
    2**54 rho = W + delta (``short`` False) or 2**54 - (W + delta) (``short``):
    W a float64 >= 0, delta a correction smaller than W's last nonzero unit
    with sign ``dsign``; ``nonzero``: the remainder is not zero (W may have
    underflowed to 0)."""
    W = np.where((W == 0) & nonzero, 0.5, W)  # underflowed: some sliver in (0, 1)
    fl = np.floor(W)
    whole = fl == W
    inexact = ~whole | (dsign != 0)
    fl_i = fl.astype(np.int64)
    beyond = fl_i - (whole & (dsign < 0))  # floor(W + delta)
    ceil_v = np.ceil(W).astype(np.int64) + (whole & (dsign > 0))  # ceil(W + delta)
    R = np.where(short, _R_ONE - ceil_v, beyond)
    return R | inexact


def to_sticky(hi, lo, tail=None, fine=False):
    """Exact ``hi + lo (+ tail)`` as ``(t, cls)``: t truncated toward zero, cls the remainder class.

    Preconditions: ``|lo| <= ulp(hi) / 2`` (as ``two_sum`` / ``two_prod``
    give), and ``tail`` is small enough to decide only exact ties of ``lo``
    (``|tail|`` below the last unit of ``lo``; the three-term sums built in
    ``exact_fma`` meet this).  Where hi is zero, lo must be zero too.
    Non-finite hi passes through with class 0.

    Returns float64 ``t`` and uint8 ``cls``, or ``cls = None`` when everything
    is exact.  With ``fine``, the second array is instead the int64 ``resid``
    (the remainder itself, 2**54 times its share of t's ulp, rounded to odd),
    which stochastic rounding needs.

    At a binade boundary the step below |hi| is half the step above it, so
    "short" results (|exact| < |hi|) are measured against the step below.

    >>> to_sticky(1.0, -2.0**-60)  # just below 1: t is the float64 below 1, remainder > half
    (0.9999999999999999, 3)
    >>> to_sticky(1.0, 2.0**-53)   # exactly half an ulp above 1
    (1.0, 2)
    """
    hi = np.asarray(hi, np.float64)
    lo = np.asarray(lo, np.float64)
    scalar = hi.ndim == 0 and lo.ndim == 0 and (tail is None or np.ndim(tail) == 0)
    if tail is not None:
        tail = np.asarray(tail, np.float64)
        hi, lo, tail = np.broadcast_arrays(hi, lo, tail)
    else:
        hi, lo = np.broadcast_arrays(hi, lo)
    fin = np.isfinite(hi) & (hi != 0)
    if tail is None:
        nz = fin & (lo != 0)
    else:
        nz = fin & ((lo != 0) | (tail != 0))
    t = np.array(hi, dtype=np.float64, copy=True)
    if tail is not None:
        zero_hi = (hi == 0) & (tail != 0)
        t[zero_hi] = tail[zero_hi]  # hi == lo == 0: the value is the tail itself
    if not nz.any():
        return (float(t), 0) if scalar else (t, None)
    dtype = np.int64 if fine else np.uint8
    t[nz], cls = _sticky_parts(hi[nz], lo[nz], None if tail is None else tail[nz], fine)
    out_cls = np.zeros(hi.shape, dtype)
    out_cls[nz] = cls
    if scalar:
        return float(t), int(out_cls)
    return t, out_cls


def _sticky_parts(h, low, tl, fine):
    """``to_sticky`` on its nonzero finite entries: (t, class or resid) for hi = h, lo = low,
    tail = tl (None when there is no tail)."""
    ah, al2 = np.abs(h), 2.0 * np.abs(low)
    # direction of the part beyond hi (+1 away from zero, -1 toward zero)
    sgn = np.sign(low)
    if tl is not None:
        sgn = np.where(low == 0, np.sign(tl), sgn)
        # tail relative to lo: +1 makes |lo + tail| bigger, -1 smaller, 0 none
        tdir = np.where(low == 0, 0.0, np.sign(tl) * np.sign(low))
    else:
        tdir = np.zeros(h.shape)
    beyond = sgn == np.sign(h)
    # |exact| > |hi|: t = hi, remainder |lo + tail| in units U = spacing(|hi|)
    with np.errstate(over="ignore"):
        up = np.spacing(ah)
    up[np.isinf(up)] = 2.0 ** 971  # the step above the largest double (numpy says inf)
    c_beyond = np.where(al2 < up, 1, np.where(tdir > 0, 3, np.where(tdir < 0, 1, 2)))
    # |exact| < |hi|: t = next float64 toward zero, D its spacing, remainder D - |lo + tail|
    tz = np.nextafter(h, 0.0)
    d = ah - np.abs(tz)
    c_short = np.where(al2 > d, 1, np.where(al2 < d, 3,
                                            np.where(tdir > 0, 1, np.where(tdir < 0, 3, 2))))
    t_nz = np.where(beyond, h, tz)
    if not fine:
        return t_nz, np.where(beyond, c_beyond, c_short).astype(np.uint8)
    # |lo + tail| as W (exact scaling of |lo|, or of |tail| where lo is 0) plus the
    # tail's direction; measured in units of the step above (beyond) or below (short)
    a_eff = np.where(low == 0, np.abs(tl) if tl is not None else 0.0, np.abs(low))
    unit = np.where(beyond, up, d)
    W = np.ldexp(a_eff, 54 - (np.frexp(unit)[1] - 1))
    return t_nz, _resid_from(W, tdir, ~beyond, a_eff != 0)


def int_to_sticky(n: int, k: int, fine=False) -> tuple[float, int]:
    """``(t, cls)`` of the exact value ``n * 2**k`` (Python ints), with integer arithmetic only
    (``fine``: ``(t, resid)``, see ``to_sticky``).

    >>> int_to_sticky(2**53 + 1, 0), int_to_sticky(-3, -1075)
    ((9007199254740992.0, 2), (-5e-324, 2))
    """
    if n == 0:
        return 0.0, 0
    neg = n < 0
    a = -n if neg else n
    e = a.bit_length() - 1 + k  # floor(log2 |value|)
    if e >= 1024:
        return (-math.inf if neg else math.inf), (_R_PAST if fine else 3)
    qe = max(e, -1022) - 52  # exponent of the float64 quantum at this value
    shift = qe - k
    if shift <= 0:
        t, cls = math.ldexp(a, k), 0
    else:
        m = a >> shift
        rem = a - (m << shift)
        half = 1 << (shift - 1)
        if fine:  # rem / 2**shift ulps, in units of 2**-54 ulp, rounded to odd
            cls = rem << (54 - shift) if shift <= 54 else \
                (rem >> (shift - 54)) | int(rem & ((1 << (shift - 54)) - 1) != 0)
        else:
            cls = 0 if rem == 0 else 1 if rem < half else 2 if rem == half else 3
        t = math.ldexp(m, qe)
    return (-t if neg else t), cls


def fraction_to_sticky(fr, fine=False) -> tuple[float, int]:
    """``(t, cls)`` of one exact rational (Fraction or int); +-Inf with class 3 past float64
    (``fine``: ``(t, resid)``, see ``to_sticky``)."""
    fr = Fraction(fr)
    t, cls = fraction_rz(fr)
    return (t, fraction_resid(fr, t)) if fine and cls else (t, cls)


def _fix_slow(t, cls, mask, fn, *args, fine=False):
    """Recompute the elements in ``mask`` exactly with Fractions via ``fn`` (which takes
    ``fine`` as its last argument)."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return t, cls
    if cls is None:
        cls = np.zeros(t.shape, np.int64 if fine else np.uint8)
    flat_args = [np.broadcast_to(a, t.shape).reshape(-1) for a in args]
    tf, cf = t.reshape(-1), cls.reshape(-1)
    for i in idx:
        tf[i], cf[i] = fn(*(float(a[i]) for a in flat_args), fine)
    return t, cls


def exact_sum(a, b, fine=False):
    """Exact ``a + b`` as ``(t, cls)`` (float64 arrays; cls None when all exact).

    Specials follow numpy (NaN, +-Inf, Inf - Inf = NaN); an exact zero from
    nonzero operands is +0.  A sum beyond the float64 range is +-Inf with class 3.
    Only the elements whose float64 sum is inexact are classified (usually few).
    ``fine``: the second array is the int64 ``resid`` (see ``to_sticky``).
    """
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    shape = a.shape
    if a.ndim == 0:
        t, cls = exact_sum(a.reshape(1), b.reshape(1), fine)
        return t.reshape(()), (None if cls is None else cls.reshape(()))
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.add(a, b)
        bb = s - a
        e = s - bb
        np.subtract(a, e, out=e)
        np.subtract(b, bb, out=bb)
        e += bb
    idx = np.flatnonzero(e)  # inexact sums, plus NaN errors where s is not finite
    if idx.size == 0:
        return s, None
    pos = np.unravel_index(idx, shape)
    ss, es = s[pos], e[pos]
    fin = np.isfinite(ss)
    t_sub, c_sub = to_sticky(ss, np.where(fin, es, 0.0), fine=fine)
    dtype = np.int64 if fine else np.uint8
    c_sub = np.zeros(ss.shape, dtype) if c_sub is None else c_sub
    over = ~fin & np.isfinite(a[pos]) & np.isfinite(b[pos])
    c_sub[over] = _R_PAST if fine else 3  # finite operands, infinite float64 sum: past the range
    s = np.array(s, copy=True)
    s[pos] = t_sub
    cls = np.zeros(shape, dtype)
    cls[pos] = c_sub
    return s, cls


def product_is_exact(fmt) -> bool:
    """True when the product of two values of ``fmt`` is always exact in float64."""
    if fmt.kind == "int":
        return 2 * fmt.bits <= 53
    p = fmt.mbits + 1
    return 2 * p <= 53 and 2 * (fmt.emin - fmt.mbits) >= -1074 and 2 * (fmt.emax + 1) <= 1023


def _slow_mul(a, b, fine=False):
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
        return a * b, 0
    return fraction_to_sticky(Fraction(a) * Fraction(b), fine)


def exact_product(a, b, exact_in_float64=False, fine=False):
    """Exact ``a * b`` as ``(t, cls)``.  With ``exact_in_float64`` (every format up to
    fp32) the float64 product itself is exact and cls is None.  ``fine``: the second
    array is the int64 ``resid`` (see ``to_sticky``)."""
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        if exact_in_float64:
            return a * b, None
        p, e = two_prod(a, b)
        p, e = np.atleast_1d(p), np.atleast_1d(e)
        fin = np.isfinite(p)
        t, cls = to_sticky(p, np.where(fin, e, 0.0), fine=fine)
        aa, ab = np.abs(a).reshape(t.shape), np.abs(b).reshape(t.shape)
        hazard = (np.isfinite(aa) & np.isfinite(ab) & (aa != 0) & (ab != 0)
                  & ((np.abs(p) < _TINY) | ~fin | (aa >= _BIG) | (ab >= _BIG)))
    t, cls = _fix_slow(t, cls, hazard, _slow_mul, a.reshape(t.shape), b.reshape(t.shape),
                       fine=fine)
    return t.reshape(a.shape), (None if cls is None else cls.reshape(a.shape))


def _slow_fma(a, b, c, fine=False):
    if math.isfinite(a) and math.isfinite(b) and not math.isfinite(c):
        return c, 0  # the exact product is finite, however large: c decides
    if not all(math.isfinite(v) for v in (a, b, c)):
        with np.errstate(invalid="ignore"):
            return float(np.float64(a) * b + c), 0
    fr = Fraction(a) * Fraction(b) + Fraction(c)
    if fr == 0:
        return 0.0, 0
    return fraction_to_sticky(fr, fine)


def exact_fma(a, b, c, exact_product_in_float64=False, fine=False):
    """Exact ``a * b + c`` as ``(t, cls)``.

    Formats up to fp32: the product is exact, so this is one ``two_sum``.
    Wider formats (fp64): TwoProd + TwoSum give ``hi + m + l`` with the tail
    l deciding ties only; elements where Dekker's product is not exact go
    through Fractions.  Zero results are +0 here (the caller fixes signs).

    Special values follow IEEE 754 for the exact product: with finite a and b
    the product is finite (even where ``a * b`` overflows float64), so an
    infinite or NaN c is the result; Inf * 0 is NaN.  ``fine``: the second array
    is the int64 ``resid`` (see ``to_sticky``).
    """
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    shape = a.shape
    a, b, c = (np.atleast_1d(v).reshape(-1) for v in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        if exact_product_in_float64:
            t, cls = exact_sum(a * b, c, fine)
            return t.reshape(shape), (None if cls is None else cls.reshape(shape))
        p, pe = two_prod(a, b)
        h, e2 = two_sum(p, c)
        m, l = two_sum(pe, e2)
        h2, m2 = two_sum(h, m)
        fin = np.isfinite(h2)
        t, cls = to_sticky(h2, np.where(fin, m2, 0.0), np.where(fin, l, 0.0), fine=fine)
        aa, ab, ac = np.abs(a), np.abs(b), np.abs(c)
        finite_in = np.isfinite(aa) & np.isfinite(ab) & np.isfinite(ac)
        hazard = finite_in & (((aa != 0) & (ab != 0) & ((np.abs(p) < _TINY) | (aa >= _BIG)
                                                         | (ab >= _BIG)))
                              | ~fin | (ac >= _BIG) | ~np.isfinite(p))
        # Inf / NaN operands: a finite a*b (exact, whatever fl(a*b) did) plus an infinite
        # or NaN c is c; an Inf factor makes a*b exact in float64 (Inf, or NaN for Inf * 0)
        special = ~finite_in
        if special.any():
            c_only = np.isfinite(aa) & np.isfinite(ab)
            t = np.where(special, np.where(c_only, c, a * b + c), t)
            if cls is not None:
                cls = np.where(special, 0, cls).astype(cls.dtype)
    t, cls = _fix_slow(t, cls, hazard, _slow_fma, a, b, c, fine=fine)
    return t.reshape(shape), (None if cls is None else cls.reshape(shape))


def _slow_div(a, b, fine=False):
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
        with np.errstate(all="ignore"):
            return float(np.float64(a) / b), 0
    return fraction_to_sticky(Fraction(a) / Fraction(b), fine)


def exact_quotient(a, b, fine=False):
    """Exact ``a / b`` as ``(t, cls)``.

    q = fl(a / b); the residual r = a - q*b is a float64 computed exactly
    (TwoProd, then a - p exact by Sterbenz), and its sign says on which side
    of q the quotient lies.  A quotient of two float64 numbers is never
    exactly halfway between two float64 numbers, so the class is 1 (beyond q)
    or 3 (just short of q: t is the next float64 toward zero).  Elements near
    the float64 range limits go through Fractions.  Specials follow IEEE via
    numpy (x/0 = signed Inf, 0/0 and Inf/Inf = NaN).

    ``fine``: the second array is the int64 ``resid`` (see ``to_sticky``).  The
    remainder |r / b| is then taken as w + delta with w = fl(|r| / |b|) and the
    sign of delta from the exact residual |r| - w |b| (TwoProd again); elements
    with |r| below 2**-900 (where that residual may not be a float64) go through
    Fractions.
    """
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    shape = a.shape
    a, b = np.atleast_1d(a).reshape(-1), np.atleast_1d(b).reshape(-1)
    with np.errstate(all="ignore"):
        q = a / b
        p, pe = two_prod(q, b)
        r = (a - p) - pe
        ok = np.isfinite(q) & (q != 0) & np.isfinite(a) & np.isfinite(b)
        aa, ab, aq = np.abs(a), np.abs(b), np.abs(q)
        hazard = (np.isfinite(a) & np.isfinite(b) & (a != 0) & (b != 0)
                  & ((aq < 2.0 ** -960) | (aa < 2.0 ** -960) | (aq >= _BIG) | (ab >= _BIG)
                     | (aa >= _BIG) | ~np.isfinite(q) | (q == 0)))
        if fine:
            hazard |= ok & (r != 0) & (np.abs(r) < 2.0 ** -900)
        inexact = ok & ~hazard & (r != 0)
    cls = None
    t = q.copy()
    if inexact.any():
        cls = np.zeros(q.shape, np.int64 if fine else np.uint8)
        beyond = np.sign(r) * np.sign(b) * np.sign(q) > 0
        short = inexact & ~beyond
        t[short] = np.nextafter(q[short], 0.0)
        if not fine:
            cls[inexact] = np.where(beyond[inexact], 1, 3)
        else:
            i = np.flatnonzero(inexact)
            ar, ab_, bi = np.abs(r[i]), np.abs(b[i]), beyond[i]
            with np.errstate(all="ignore"):
                w = ar / ab_
                p2, pe2 = two_prod(w, ab_)
                d_sign = np.sign((ar - p2) - pe2)
                qa = np.abs(q[i])
                unit = np.where(bi, np.spacing(qa), qa - np.abs(t[i]))
            W = np.ldexp(w, 54 - (np.frexp(unit)[1] - 1))
            cls[i] = _resid_from(W, d_sign, ~bi, np.ones(i.shape, bool))
    t, cls = _fix_slow(t, cls, hazard, _slow_div, a, b, fine=fine)
    return t.reshape(shape), (None if cls is None else cls.reshape(shape))


def _sqrt_resid(x: float, t: float) -> int:
    """``resid`` of sqrt(x) truncated to the float64 t (t < sqrt(x)), by integer square root:
    floor(2**54 (sqrt(x) - t) / ulp(t)), made odd (such a root is irrational)."""
    eu = math.frexp(math.ulp(t))[1] - 1  # ulp(t) = 2**eu
    n, d = x.as_integer_ratio()
    e = 108 - 2 * eu - (d.bit_length() - 1)  # sqrt(x) 2**(54 - eu) = sqrt(n 2**e)
    if e >= 0:
        root = math.isqrt(n << e)
    elif e % 2 == 0:
        root = math.isqrt(n) >> (-e // 2)
    else:
        root = math.isqrt(2 * n) >> ((1 - e) // 2)
    tn, td = t.as_integer_ratio()  # t 2**(54 - eu) is an integer (t is a multiple of ulp(t))
    k = 54 - eu
    tscaled = (tn << k) // td if k >= 0 else tn // (td << -k)
    return (root - tscaled) | 1


def resid_slack(fmt) -> int:
    """How many low bits of a ``resid`` rounding to ``fmt`` never reads.

    ``round_values`` reads resid only through ``R >> (shift + 1)`` (rounded up)
    and ``R >> (54 - N + shift)`` (``sr_bits = N <= 52``), where shift =
    log2(quantum / float64 ulp) is at least 52 - mbits for a float format (the
    quantum of a value is at least 2**(52 - mbits) of its float64 ulp) and at
    least 53 - bits for an integer format of up to 53 bits.  A resid known only
    to a multiple of 2**g, with g at most this, rounds the same."""
    if fmt.kind == "int":
        return max(0, 53 - fmt.bits)
    return max(0, 52 - fmt.mbits)


def exact_sqrt(x, fine=False, slack=0):
    """Exact ``sqrt(x)`` as ``(t, cls)`` for float64 x.

    q = fl(sqrt(x)); the residual x - q*q is computed exactly (TwoProd), its
    sign places the root; a square root is never a float64 midpoint, so the
    class is 1 or 3.  Inputs outside [2**-960, 2**990] are scaled by an even
    power of two first (exact for square roots).  sqrt(-0) = -0,
    sqrt(negative) = NaN, sqrt(+Inf) = +Inf.  ``fine``: the second array is the
    int64 ``resid`` (see ``to_sticky``), from an integer square root per inexact
    element (exact, slower).  ``slack = g >= 6`` (see ``resid_slack``) asks for
    resid only to a multiple of 2**g, for rounding to a narrower format: it is
    then read from the float64 estimate 2**54 (|r| / 2q) / ulp(t) (error below 16
    units of 2**-54 ulp), as the midpoint of its 2**g-cell, wherever the estimate
    is farther than 16 units from the cell's edges; the other elements (and
    ``g < 6``) take the integer square root.
    """
    x = np.asarray(x, np.float64)
    shape = x.shape
    x = np.atleast_1d(x).reshape(-1)
    with np.errstate(all="ignore"):
        ok = np.isfinite(x) & (x > 0)
        small = ok & (x < 2.0 ** -960)
        large = ok & (x > 2.0 ** 990)
        xs = np.where(small, x * 2.0 ** 1000, np.where(large, x * 2.0 ** -100, x))
        q = np.sqrt(xs)
        p, pe = two_prod(q, q)
        r = (xs - p) - pe
        inexact = ok & (r != 0)
    t = q.copy()
    cls = None
    if inexact.any():
        cls = np.zeros(x.shape, np.uint8)
        short = inexact & (r < 0)
        t[short] = np.nextafter(q[short], 0.0)
        cls[inexact] = np.where(r[inexact] > 0, 1, 3)
    # undo the scaling: multiplying by a power of two is exact (results stay normal)
    t = np.where(small, t * 2.0 ** -500, np.where(large, t * 2.0 ** 50, t))
    if fine and cls is not None:
        cls = cls.astype(np.int64)
        slow = inexact
        if slack >= 6:
            i = np.flatnonzero(inexact)
            qi, ri = q[i], r[i]
            with np.errstate(all="ignore"):
                h = np.abs(ri) / (2.0 * qi)  # sqrt(xs) - q = r / (sqrt(xs) + q), ~ r / 2q
                beyond = ri > 0
                unit = np.where(beyond, np.spacing(qi), qi - np.nextafter(qi, 0.0))
                W = np.ldexp(h, 54 - (np.frexp(unit)[1] - 1))
                W = np.where(beyond, W, 2.0 ** 54 - W)  # short: the root is t + unit - h
                cell = float(1 << slack)
                off = np.fmod(W, cell)
                sure = (off > 16.0) & (off < cell - 16.0)
            ks = i[sure]
            cls[ks] = (np.floor(W[sure] / cell).astype(np.int64) << slack) + (1 << (slack - 1))
            slow = np.zeros(x.shape, bool)
            slow[i[~sure]] = True
        for i in np.flatnonzero(slow):
            cls[i] = _sqrt_resid(float(x[i]), float(t[i]))
    return t.reshape(shape), (None if cls is None else cls.reshape(shape))
