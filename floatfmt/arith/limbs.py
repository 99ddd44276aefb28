"""Exact sums of many float64 terms in integer limbs, written once over the array
namespace ``xp`` (numpy arrays and torch tensors of any device alike): the pieces of
the exact arithmetic that float64 error-free transformations cannot give alone.

``limb_sum``    the exact sum of many float64 terms (an integer superaccumulator in
                int64 limbs, each term optionally scaled by 2**scale), the integer-limb
                strategy of the exact sum of many terms (``accumulate``'s exact order
                on numpy uses ``eft.int_to_sticky`` on Python ints: the same rule)
``two_prod_error``, ``product_terms``, ``exact_products``  exact products of float64
                arrays of any magnitude (Dekker's TwoProd with Veltkamp's split of
                frexp mantissas, summed with their exponents by ``limb_sum``)
``resid_from``  the fine remainder ``resid`` of ``rounding.round_values`` from a
                remainder given as a float64 W plus a correction of known sign (the
                namespace form of the rule inside ``eft.to_sticky`` and
                ``eft.exact_quotient``)

A result is (t, class) or, with ``fine``, (t, resid): t the exact value truncated
toward zero to float64, the class / resid as ``round_values``' ``sticky`` / ``resid``.
Not the same rule as ``eft.exact_sum(a, b)``, the exact sum of two operands.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend.namespace import namespace

__all__ = ["limb_sum", "exact_sum_many", "SUM_STRATEGIES", "resid_from", "R_ONE", "R_PAST", "two_prod_error", "product_terms",
           "exact_products"]

#: resid units in one float64 ulp (``round_values``: resid = 2**54 remainder / ulp).
R_ONE = 1 << 54
#: the resid of a finite value past the float64 range (class 3), with t = +-Inf
R_PAST = 3 << 52


def resid_from(W: Any, dsign: Any, short: Any) -> Any:
    """``resid`` (int64 array) of nonzero remainders given as 2**54 rho = W + delta
    (``short`` False) or 2**54 - (W + delta) (``short``): W a float64 array >= 0,
    delta a correction smaller than W's last nonzero unit with the sign ``dsign``
    (-1, 0, +1; a float64 or integer array): floor(2**54 rho), made odd where rho
    is not a multiple of 2**-54 (rounded to odd, as ``eft.to_sticky``)."""
    xp = namespace(W)
    W = xp.where(W == 0, 0.5, W)  # nonzero but underflowed: a sliver in (0, 1)
    fl = xp.floor(W)
    whole = fl == W
    inexact = ~whole | (dsign != 0)
    below = xp.toint(fl) - xp.toint(whole & (dsign < 0))  # floor(W + delta)
    above = xp.toint(xp.ceil(W)) + xp.toint(whole & (dsign > 0))  # ceil(W + delta)
    R = xp.where(short, R_ONE - above, below)
    return R | xp.toint(inexact)


_LIMB = 32  # bits per int64 limb: n pieces below 2**32 add up exactly for n < 2**31
_MASK = (1 << _LIMB) - 1


def _carry(L: Any) -> Any:
    """Carries propagated upward (floor shifts): limbs 0..-2 in [0, 2**32), the top one
    holds the sign."""
    for i in range(L.shape[0] - 1):
        c = L[i] >> _LIMB
        L[i] -= c << _LIMB
        L[i + 1] += c
    return L


def _window(L: Any, lo: Any, width: Any, xp: Any) -> Any:
    """The integer of bits lo .. lo + width - 1 (width <= 54, per column) of the
    non-negative limbs L (nl, m), zero above the top limb."""
    k = lo // _LIMB
    off = lo - k * _LIMB
    nl = L.shape[0]

    def limb(i: Any) -> Any:
        return xp.take0(L, xp.clip(i, None, nl - 1)) * (i < nl)

    def mask(w: Any) -> Any:
        return (xp.ones_like(w) << xp.clip(w, 0, 62)) - 1

    v = limb(k) >> off
    v = v + ((limb(k + 1) & mask(width - (_LIMB - off))) << (_LIMB - off))
    v = v + ((limb(k + 2) & mask(width - (2 * _LIMB - off))) << (2 * _LIMB - off))
    return v & mask(width)


def _below(L: Any, lo: Any, xp: Any) -> Any:
    """Whether any bit below position lo (per column) of the limbs L is set."""
    k = lo // _LIMB
    off = lo - k * _LIMB
    nl = L.shape[0]
    nz = xp.cumsum0(xp.toint(L != 0))  # nonzero limbs up to and including each index
    whole = xp.take0(nz, xp.clip(k - 1, 0, nl - 1)) * (k > 0) > 0
    part = xp.take0(L, xp.clip(k, None, nl - 1)) & ((xp.ones_like(off) << off) - 1)
    return whole | ((part != 0) & (k < nl))


def limb_sum(T: Any, mode: str, fine: bool = False, scale: Any = None) -> tuple[Any, Any]:
    """The exact sum over axis 0 of the float64 array T as (t, class): t truncated
    toward zero to float64, the uint8 remainder class of ``round_values``' ``sticky``
    (``fine``: the int64 ``resid`` instead, what stochastic rounding needs).
    ``scale``: an int64 array of T's shape, the terms being T * 2**scale (finite
    terms; the exact products give mantissa products and their TwoProd errors with
    the operands' exponents here, as neither fits float64 alone).

    Each finite term m * 2**q (m a 53-bit integer) is cut into 32-bit pieces added
    (``scatter_add0``: integers, exact in any order) into int64 limbs of a fixed point
    anchored at the smallest q; carries are propagated, a negative sum negated, and
    the top 53 bits, the next 54 and whether any bit lies below give t and the class.
    Specials as ``accumulate``'s: NaN, or Inf and -Inf, give NaN; an Inf gives it; an
    exact zero sum is -0 when every term is -0 and, in mode ``down``, unless every
    term is +0.  A finite sum past the float64 range is +-Inf with class 3 (resid
    ``R_PAST``), as ``eft.int_to_sticky`` gives it; one below 2**-1022 is truncated to
    a multiple of 2**-1074 (a subnormal float64, the class measured in that unit).

    >>> import numpy as np
    >>> limb_sum(np.array([[1.0], [2.0 ** -60], [-1.0]]), "nearest_even")
    (array([8.67361738e-19]), array([0], dtype=uint8))
    """
    xp = namespace(T)
    with xp.quiet():
        return _limb_sum(T, mode, fine, scale, xp)


def _limb_sum(T: Any, mode: str, fine: bool, scale: Any, xp: Any) -> tuple[Any, Any]:
    n = T.shape[0]
    rest = tuple(T.shape[1:])
    X = T.reshape(n, -1)
    m = X.shape[1]
    fin = xp.isfinite(X)
    nan = xp.isnan(X).any(0) | ((X == math.inf).any(0) & (X == -math.inf).any(0))
    inf = xp.where((X == math.inf).any(0), math.inf,
                   xp.where((X == -math.inf).any(0), -math.inf, 0.0))
    Xf = xp.where(fin, X, xp.const(0.0, X))
    neg0 = ((Xf == 0) & xp.signbit(Xf)).all(0)
    pos0 = ((Xf == 0) & ~xp.signbit(Xf)).all(0)
    mant, ex = xp.frexp(Xf)
    M = xp.toint(mant * 2.0 ** 53)  # exact, |M| < 2**53
    q = ex - 53
    if scale is not None:
        q = q + scale.reshape(n, -1)
    nz = M != 0
    out = xp.zeros(m, X)
    cls = xp.zeros(m, X, "int64" if fine else "uint8")
    if xp.any(nz):
        qmin = int(q[nz].min())
        b = xp.where(nz, q - qmin, 0)
        limb, shift = b // _LIMB, b % _LIMB
        nl = int(limb.max()) + 5  # 53 + 31 bits span 3 limbs; one more for the carries of n
        A, sign = xp.abs(M), xp.sign(M)
        L = xp.zeros((nl, m), X, "int64")
        lo, hi = (A & _MASK) << shift, (A >> _LIMB) << shift  # < 2**63, < 2**52
        for piece, at in ((lo & _MASK, limb), (lo >> _LIMB, limb + 1),
                          (hi & _MASK, limb + 1), (hi >> _LIMB, limb + 2)):
            xp.scatter_add0(L, at, sign * piece)
        L = _carry(L)
        negative = L[-1] < 0
        L = _carry(xp.where(negative, -L, L))
        any_bit = (L != 0).any(0)
        top = xp.clip(xp.amax(xp.where(L != 0, xp.arange(nl, X)[:, None], -1), 0), 0, None)
        _, bl = xp.frexp(xp.tofloat(xp.take0(L, top)))  # bits of the top limb
        length = top * _LIMB + bl  # bits of the integer sum
        # its ulp's position: 53 bits below the top, but not below 2**-1074
        p = xp.clip(xp.maximum(length - 53, -1074 - xp.full_like(length, qmin)), 0, None)
        mant_i = _window(L, p, length - p, xp)
        # the 54 bits below the ulp (fewer below bit 0: shifted up), then a sticky bit
        r_lo = xp.clip(p - 54, 0, None)
        R = _window(L, r_lo, p - r_lo, xp) << (54 - (p - r_lo))
        R = R | xp.toint(_below(L, r_lo, xp))
        # exact: a normal float64, or a subnormal sum (then p = 0: every term is a
        # multiple of 2**-1074), or past the range: +-Inf, class 3
        val = xp.ldexp(xp.tofloat(mant_i), p + qmin)
        R = xp.where(xp.isinf(val), R_PAST, R)
        out = xp.where(any_bit, xp.where(negative, -val, val), out)
        if not fine:
            half = 1 << 53
            R = xp.tou8(xp.where_int(R == 0, 0, xp.where_int(R < half, 1, xp.where_int(
                R == half, 2, 3))))
        cls = xp.where(any_bit, R, xp.zeros_like(cls))
    zero = (out == 0) & (cls == 0)
    neg_zero = ~pos0 if mode == "down" else neg0
    out = xp.where(zero & neg_zero, -0.0, out)
    special = nan | (inf != 0)
    out = xp.where(nan, math.nan, xp.where(inf != 0, inf, out))
    cls = xp.where(special, xp.zeros_like(cls), cls)
    return out.reshape(rest), cls.reshape(rest)


_SPLITTER = 134217729.0  # 2**27 + 1, Veltkamp's splitter


def two_prod_error(a: Any, b: Any, p: Any) -> Any:
    """The exact error a * b - p of p = fl(a * b) (Dekker, Veltkamp's split; exact for
    the magnitudes of formats up to fp32 and their quotients and roots)."""
    def split(v: Any) -> tuple[Any, Any]:
        c = _SPLITTER * v
        hi = c - (c - v)
        return hi, v - hi
    ah, al = split(a)
    bh, bl = split(b)
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


def product_terms(x: Any, y: Any) -> tuple[Any, Any]:
    """Two float64 terms and their int64 exponents (stacked on a new axis 0) whose exact
    sum T[0] 2**S[0] + T[1] 2**S[1] is x * y, for float64 arrays of any magnitude: the
    frexp mantissas' product p and its TwoProd error e (exact: the mantissas lie in
    [1/2, 1)) with the exponent sum; a zero, infinite or NaN product (exact in float64)
    as itself twice with exponent 0 (so that a sum of them keeps IEEE's signs and
    specials in ``limb_sum``)."""
    xp = namespace(x)
    with xp.quiet():
        x, y = xp.broadcast(x, y)
        fin = xp.isfinite(x) & xp.isfinite(y) & (x != 0) & (y != 0)
        one = xp.const(1.0, x)
        mx, ex = xp.frexp(xp.where(fin, x, one))
        my, ey = xp.frexp(xp.where(fin, y, one))
        p = mx * my
        e = two_prod_error(mx, my, p)
        xy = x * y
        E = xp.where(fin, ex + ey, 0)
        return xp.stack([xp.where(fin, p, xy), xp.where(fin, e, xp.where(xy == 0, xy, 0.0))]), \
            xp.stack([E, E])


def exact_products(x: Any, y: Any, z: Any, mode: str, fine: bool = False) -> tuple[Any, Any]:
    """Exact x * y (+ z) of finite float64 arrays, x and y nonzero, as (t, class), or
    (t, resid) with ``fine``, for any magnitudes (fp64 and custom formats whose
    products do not fit float64): the two ``product_terms`` (+ z) summed exactly by
    ``limb_sum`` (its ``scale``), which also truncates subnormal results
    to 2**-1074 and carries a result past the float64 range as +-Inf with class 3.  An
    exact zero x y + z is +0, -0 in mode ``down`` (IEEE's sign of such a sum)."""
    xp = namespace(x)
    T, S = product_terms(x, y)
    if z is not None:
        z = xp.broadcast_to(z, T.shape[1:])
        T, S = xp.concatenate([T, z[None]]), xp.concatenate([S, xp.zeros_like(S[:1])])
    v, cls = limb_sum(T, mode, fine, S)
    return v.reshape(T.shape[1:]), cls.reshape(T.shape[1:])


#: the strategies of ``exact_sum_many``
SUM_STRATEGIES = ("limbs", "fraction")


def exact_sum_many(T: Any, mode: str, fine: bool = False, strategy: str = "limbs") -> tuple[Any, Any]:
    """The exact sum over axis 0 of the float64 array T as (t, class) (``fine``: (t,
    resid)), with ``limb_sum``'s specials and zero signs, by one of two strategies:

    ``"limbs"``     ``limb_sum``: integer limbs over the namespace (numpy or tensors)
    ``"fraction"``  numpy only: each column's exact ``fractions.Fraction`` sum, truncated
                    by ``eft.fraction_to_sticky`` (the reference the limbs are tested
                    against, tests/test_arith_strategies.py)

    >>> import numpy as np
    >>> T = np.array([[1.0, 3.0], [2.0 ** -53, -0.5], [2.0 ** -80, 0.0]])
    >>> [exact_sum_many(T, "nearest_even", strategy=s)[1].tolist() for s in SUM_STRATEGIES]
    [[3, 0], [3, 0]]
    """
    if strategy == "limbs":
        return limb_sum(T, mode, fine)
    if strategy != "fraction":
        raise ValueError(f"unknown strategy {strategy!r}; valid: {', '.join(SUM_STRATEGIES)}")
    import numpy as np
    from fractions import Fraction

    from .eft import fraction_to_sticky
    X = np.asarray(T, np.float64).reshape(T.shape[0], -1)
    out = np.zeros(X.shape[1])
    cls = np.zeros(X.shape[1], np.int64 if fine else np.uint8)
    for j in range(X.shape[1]):
        col = X[:, j]
        pinf, ninf = bool((col == math.inf).any()), bool((col == -math.inf).any())
        if np.isnan(col).any() or pinf and ninf:
            out[j] = math.nan
        elif pinf or ninf:
            out[j] = math.inf if pinf else -math.inf
        else:
            fr = sum((Fraction(float(v)) for v in col), Fraction(0))
            if fr != 0:
                out[j], cls[j] = fraction_to_sticky(fr, fine)
            elif mode == "down":
                out[j] = 0.0 if ((col == 0) & ~np.signbit(col)).all() else -0.0
            else:
                out[j] = -0.0 if ((col == 0) & np.signbit(col)).all() else 0.0
    return out.reshape(T.shape[1:]), cls.reshape(T.shape[1:])
