"""Exact quotients ``x / scale`` and products ``x * scale`` for the rounding routine.

Quantisation divides by a scale and rounds once.  These helpers hand the rounding
routine (``floatfmt.core.rounding.round_values``) a float64 value truncated toward zero
plus the remainder's class (or, for stochastic rounding, the remainder itself),
so the quotient or product is rounded exactly once, as if computed exactly.
Cheap cases (power-of-two scales, narrow inputs) skip the exact arithmetic.

A documented internal API of the lab layer (quantisation, block scaling, loss
scaling, integer matmul); not part of ``floatfmt``'s public names.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..core.formats import Format, get_format
from ..arith.eft import exact_product, exact_quotient
from ..core.intake import fraction_resid, fraction_rz, to_fraction
from ..core.rounding import round_values

__all__: list[str] = []


def scaled_product(a, b, fine=False):
    """(truncated float64, remainder class or None) of the exact products ``a * b``
    (``fine``: the int64 remainder itself, which stochastic rounding needs)."""
    t, cls = exact_product(a, b, fine=fine)
    return t, (cls if cls is not None and cls.any() else None)


def remainder_kwargs(st):
    """round_values keyword for a remainder from this module: an int64 array is a
    ``resid`` (stochastic rounding), a uint8 one a class."""
    if st is not None and st.dtype == np.int64:
        return {"resid": st}
    return {"sticky": st}


def _sig_bits_at_most(s, bits):
    """True when every finite value of s has at most ``bits`` significant bits."""
    s = np.asarray(s, np.float64)
    m, _ = np.frexp(s[np.isfinite(s)])
    return bool(np.all(np.ldexp(m, bits) == np.trunc(np.ldexp(m, bits))))


def scaled_quotient(v, exact, s, narrow, target: Format, fine=False):
    """(truncated float64, remainder class or None) of the exact quotients ``v / s``
    (``fine``: the int64 remainder itself instead of its class, for stochastic
    rounding, which also rules out the shortcut for narrow inputs).

    ``s > 0``.  Cases, cheapest first:

    * ``s`` a power of two: the float64 quotient is exact while it is a normal number.
    * ``v`` has at most 24 significant bits (fp32 and narrower inputs), ``s`` at most
      30 and the target at most 20 bits of precision: the float64 quotient is within
      2**-53 of the exact one, while the exact quotient is at least 2**-51 (relative)
      away from any tie or grid point of the target unless it lies on it, so rounding
      the float64 quotient once is the correct single rounding.
    * otherwise ``floatfmt.arith.eft.exact_quotient`` (the exact residual's sign gives the
      remainder class).
    The two shortcuts hold only where the float64 quotient is a normal number: a
    nonzero finite ``v`` whose quotient is at most 2**-1022 in magnitude (the
    division rounded into the subnormals, to zero, or up to 2**-1022) or overflows
    takes the exact path instead (``settle_quotients``), so that it is not rounded
    twice.
    ``exact``: None, or an object array of the inputs as ``Fraction`` when float64
    does not hold them (Fractions, decimal strings, huge integers): divided exactly.
    """
    src = getattr(v, "dtype", None)
    v = np.asarray(v, np.float64)
    s = np.asarray(s, np.float64)
    with np.errstate(all="ignore"):
        d = v / s
    if exact is not None:
        vals, cls = np.array(d, np.float64), np.zeros(d.shape, np.int64 if fine else np.uint8)
        fb, sb, vb = np.broadcast_arrays(exact, s, v)
        for i in np.ndindex(d.shape):
            if math.isfinite(vb[i]) and math.isfinite(sb[i]):
                fr = to_fraction(fb[i]) / Fraction(float(sb[i]))
                vals[i], cls[i] = fraction_rz(fr)
                if fine and cls[i]:
                    cls[i] = fraction_resid(fr, vals[i])
        return vals, (cls if cls.any() else None)
    m, _ = np.frexp(s)
    if np.all((m == 0.5) | ~np.isfinite(s)):
        return settle_quotients(v, s, d, fine, src)
    if narrow and not fine and target.precision_bits <= 20 and _sig_bits_at_most(s, 30):
        return settle_quotients(v, s, d, fine, src)
    t, cls = exact_quotient(v, s, fine=fine)
    return t, (cls if cls is not None and cls.any() else None)


def _narrow_inputs_stay_normal(src, s) -> bool:
    """Whether every quotient of a nonzero finite value of the float dtype ``src``
    (narrower than float64) by the positive scales ``s`` is a normal float64 number:
    then ``settle_quotients`` need not look at each element."""
    if src not in (np.float16, np.float32):
        return False
    fs = s[np.isfinite(s)]
    if fs.size == 0:
        return True
    info = np.finfo(src)
    tiny, big = float(info.smallest_subnormal), float(info.max)
    return bool(tiny / 2.0 ** -1022 > fs.max() and big / 2.0 ** 1022 < fs.min())


def settle_quotients(v, s, d, fine=False, src=None):
    """(d, None) when every float64 quotient ``d = v / s`` of a shortcut is exact, else
    d with its inexact elements recomputed by ``floatfmt.arith.eft.exact_quotient`` plus
    their remainder class (``fine``: int64 remainder).

    A shortcut's quotient is exact where it is a normal float64 number; a nonzero
    finite ``v`` over a finite ``s`` whose quotient is at most 2**-1022 in magnitude
    or infinite may have been rounded by the division (into the subnormals, to zero,
    up to 2**-1022 or to Inf): those go the exact way, so the quotient is rounded
    once, by the rounding routine.  ``src``: the dtype ``v`` came in (float16 / float32
    inputs skip the element check when the scales' range rules those cases out)."""
    if _narrow_inputs_stay_normal(src, np.asarray(s)):
        return d, None
    with np.errstate(all="ignore"):
        a = np.abs(d)
        bad = ((a <= 2.0 ** -1022) | (a == np.inf)) & np.isfinite(v) & (v != 0) & np.isfinite(s)
    if not bad.any():
        return d, None
    vb, sb = np.broadcast_arrays(v, s)
    vb, sb = np.broadcast_to(vb, d.shape), np.broadcast_to(sb, d.shape)
    t, c = exact_quotient(vb[bad], sb[bad], fine=fine)
    out = np.array(d, np.float64)
    out[bad] = t
    if c is None:
        return out, None
    cls = np.zeros(d.shape, np.int64 if fine else np.uint8)
    cls[bad] = c
    return out, (cls if cls.any() else None)


def _round_fp64(vals, sticky):
    return round_values(vals, get_format("fp64"), sticky=sticky)


def mul_fp64(a, b):
    """``a * b`` correctly rounded to float64 (one rounding, through the routine)."""
    a = np.asarray(a, np.float64)
    if np.ndim(b) == 0 and np.isfinite(b) and b != 0 and np.frexp(b)[0] == 0.5:
        # a power of two: the float64 product is exact unless it leaves the normal range
        with np.errstate(all="ignore"):
            p = a * b
            ap = np.abs(p)
        if not np.any((ap < 2.0 ** -1022) & (p != 0) | (np.isinf(ap) & np.isfinite(a))):
            return p
    p, st = scaled_product(a, b)
    return p if st is None else _round_fp64(p, st)
