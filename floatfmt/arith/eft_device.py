"""Exact float64 results on tensors of any device, written over the array namespace
(torch ops on the tensor's device; torch is never imported here): the pieces of
``floatfmt.arith.eft`` that the device arithmetic (``floatfmt.arith.ops_device``,
``floatfmt.arith.accumulate_device``) needs beyond TwoSum and TwoProd.

``exact_sum``   the exact sum of many float64 terms (an integer superaccumulator in
                int64 limbs), as ``accumulate``'s exact order computes it on numpy
``two_prod_error``, ``product_terms``, ``exact_products``  exact products of float64
                tensors of any magnitude (Dekker's TwoProd with Veltkamp's split of
                frexp mantissas, summed with their exponents by ``exact_sum``)
``resid_from``  the fine remainder ``resid`` of ``rounding.round_values`` from a
                remainder given as a float64 W plus a correction of known sign (the
                namespace form of the rule inside ``eft.to_sticky`` and
                ``eft.exact_quotient``)

A result is (t, class) or, with ``fine``, (t, resid): t the exact value truncated
toward zero to float64, the class / resid as ``round_values``' ``sticky`` / ``resid``.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend.namespace import namespace

__all__ = ["exact_sum", "resid_from", "R_ONE", "R_PAST", "two_prod_error", "product_terms",
           "exact_products"]

#: resid units in one float64 ulp (``round_values``: resid = 2**54 remainder / ulp).
R_ONE = 1 << 54
#: the resid of a finite value past the float64 range (class 3), with t = +-Inf
R_PAST = 3 << 52


def resid_from(W: Any, dsign: Any, short: Any) -> Any:
    """``resid`` (int64 tensor) of nonzero remainders given as 2**54 rho = W + delta
    (``short`` False) or 2**54 - (W + delta) (``short``): W a float64 tensor >= 0,
    delta a correction smaller than W's last nonzero unit with the sign ``dsign``
    (-1, 0, +1; a float64 or integer tensor): floor(2**54 rho), made odd where rho
    is not a multiple of 2**-54 (rounded to odd, as ``eft.to_sticky``)."""
    t = namespace(W).t
    W = t.where(W == 0, 0.5, W)  # nonzero but underflowed: a sliver in (0, 1)
    fl = t.floor(W)
    whole = fl == W
    inexact = ~whole | (dsign != 0)
    below = fl.to(t.int64) - (whole & (dsign < 0)).to(t.int64)  # floor(W + delta)
    above = t.ceil(W).to(t.int64) + (whole & (dsign > 0)).to(t.int64)  # ceil(W + delta)
    R = t.where(short, R_ONE - above, below)
    return R | inexact.to(t.int64)

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


def _window(L: Any, lo: Any, width: Any, t: Any) -> Any:
    """The integer of bits lo .. lo + width - 1 (width <= 54, per column) of the
    non-negative limbs L (nl, m), zero above the top limb."""
    k = lo // _LIMB
    off = lo - k * _LIMB
    nl = L.shape[0]

    def limb(i: Any) -> Any:
        return t.gather(L, 0, i.clamp(max=nl - 1)[None])[0] * (i < nl)

    def mask(w: Any) -> Any:
        return (t.ones_like(w) << w.clamp(min=0, max=62)) - 1

    v = limb(k) >> off
    v = v + ((limb(k + 1) & mask(width - (_LIMB - off))) << (_LIMB - off))
    v = v + ((limb(k + 2) & mask(width - (2 * _LIMB - off))) << (2 * _LIMB - off))
    return v & mask(width)


def _below(L: Any, lo: Any, t: Any) -> Any:
    """Whether any bit below position lo (per column) of the limbs L is set."""
    k = lo // _LIMB
    off = lo - k * _LIMB
    nl = L.shape[0]
    nz = (L != 0).to(t.int64).cumsum(0)  # nonzero limbs up to and including each index
    whole = t.gather(nz, 0, (k - 1).clamp(min=0, max=nl - 1)[None])[0] * (k > 0) > 0
    part = t.gather(L, 0, k.clamp(max=nl - 1)[None])[0] & ((t.ones_like(off) << off) - 1)
    return whole | ((part != 0) & (k < nl))


def exact_sum(T: Any, mode: str, fine: bool = False, scale: Any = None) -> tuple[Any, Any]:
    """The exact sum over axis 0 of the float64 tensor T as (t, class): t truncated
    toward zero to float64, the uint8 remainder class of ``round_values``' ``sticky``
    (``fine``: the int64 ``resid`` instead, what stochastic rounding needs).
    ``scale``: an int64 tensor of T's shape, the terms being T * 2**scale (finite
    terms; the exact products of ``ops_device`` give mantissa products and their
    TwoProd errors with the operands' exponents here, as neither fits float64 alone).

    Each finite term m * 2**q (m a 53-bit integer) is cut into 32-bit pieces added
    (``scatter_add``: integers, exact in any order) into int64 limbs of a fixed point
    anchored at the smallest q; carries are propagated, a negative sum negated, and
    the top 53 bits, the next 54 and whether any bit lies below give t and the class.
    Specials as ``accumulate``'s: NaN, or Inf and -Inf, give NaN; an Inf gives it; an
    exact zero sum is -0 when every term is -0 and, in mode ``down``, unless every
    term is +0.  A finite sum past the float64 range is +-Inf with class 3 (resid
    ``R_PAST``), as ``eft.int_to_sticky`` gives it; one below 2**-1022 is truncated to
    a multiple of 2**-1074 (a subnormal float64, the class measured in that unit)."""
    xp = namespace(T)
    t = xp.t
    n = T.shape[0]
    rest = tuple(T.shape[1:])
    X = T.reshape(n, -1)
    m = X.shape[1]
    dev = X.device
    fin = t.isfinite(X)
    nan = t.isnan(X).any(0) | ((X == math.inf).any(0) & (X == -math.inf).any(0))
    inf = t.where((X == math.inf).any(0), math.inf, t.where((X == -math.inf).any(0), -math.inf, 0.0))
    Xf = t.where(fin, X, t.zeros((), dtype=X.dtype, device=dev))
    neg0 = ((Xf == 0) & t.signbit(Xf)).all(0)
    pos0 = ((Xf == 0) & ~t.signbit(Xf)).all(0)
    mant, ex = t.frexp(Xf)
    M = (mant * 2.0 ** 53).to(t.int64)  # exact, |M| < 2**53
    q = ex.to(t.int64) - 53
    if scale is not None:
        q = q + scale.reshape(n, -1)
    nz = M != 0
    out = t.zeros(m, dtype=t.float64, device=dev)
    cls = t.zeros(m, dtype=t.int64 if fine else t.uint8, device=dev)
    if bool(nz.any()):
        qmin = int(q[nz].min())
        b = t.where(nz, q - qmin, 0)
        limb, shift = b // _LIMB, b % _LIMB
        nl = int(limb.max()) + 5  # 53 + 31 bits span 3 limbs; one more for the carries of n
        A, sign = M.abs(), t.sign(M)
        L = t.zeros((nl, m), dtype=t.int64, device=dev)
        lo, hi = (A & _MASK) << shift, (A >> _LIMB) << shift  # < 2**63, < 2**52
        for piece, at in ((lo & _MASK, limb), (lo >> _LIMB, limb + 1),
                          (hi & _MASK, limb + 1), (hi >> _LIMB, limb + 2)):
            L.scatter_add_(0, at, sign * piece)
        L = _carry(L)
        negative = L[-1] < 0
        L = _carry(t.where(negative, -L, L))
        any_bit = (L != 0).any(0)
        top = t.where(L != 0, t.arange(nl, device=dev)[:, None], -1).amax(0).clamp(min=0)
        _, bl = t.frexp(t.gather(L, 0, top[None])[0].to(t.float64))  # bits of the top limb
        length = top * _LIMB + bl.to(t.int64)  # bits of the integer sum
        # its ulp's position: 53 bits below the top, but not below 2**-1074
        p = t.maximum(length - 53, -1074 - t.full_like(length, qmin)).clamp(min=0)
        mant_i = _window(L, p, length - p, t)
        # the 54 bits below the ulp (fewer below bit 0: shifted up), then a sticky bit
        r_lo = (p - 54).clamp(min=0)
        R = _window(L, r_lo, p - r_lo, t) << (54 - (p - r_lo))
        R = R | _below(L, r_lo, t).to(t.int64)
        # exact: a normal float64, or a subnormal sum (then p = 0: every term is a
        # multiple of 2**-1074), or past the range: +-Inf, class 3
        val = xp.ldexp(mant_i.to(t.float64), p + qmin)
        R = t.where(t.isinf(val), R_PAST, R)
        out = t.where(any_bit, t.where(negative, -val, val), out)
        if not fine:
            half = 1 << 53
            R = t.where(R == 0, 0, t.where(R < half, 1, t.where(R == half, 2, 3))).to(t.uint8)
        cls = t.where(any_bit, R, t.zeros_like(cls))
    zero = (out == 0) & (cls == 0)
    neg_zero = ~pos0 if mode == "down" else neg0
    out = t.where(zero & neg_zero, -0.0, out)
    special = nan | (inf != 0)
    out = t.where(nan, math.nan, t.where(inf != 0, inf, out))
    cls = t.where(special, t.zeros_like(cls), cls)
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
    sum T[0] 2**S[0] + T[1] 2**S[1] is x * y, for float64 tensors of any magnitude: the
    frexp mantissas' product p and its TwoProd error e (exact: the mantissas lie in
    [1/2, 1)) with the exponent sum; a zero, infinite or NaN product (exact in float64)
    as itself twice with exponent 0 (so that a sum of them keeps IEEE's signs and
    specials in ``exact_sum``)."""
    t = namespace(x).t
    x, y = t.broadcast_tensors(x, y)
    fin = t.isfinite(x) & t.isfinite(y) & (x != 0) & (y != 0)
    one = t.ones((), dtype=x.dtype, device=x.device)
    mx, ex = t.frexp(t.where(fin, x, one))
    my, ey = t.frexp(t.where(fin, y, one))
    p = mx * my
    e = two_prod_error(mx, my, p)
    xy = x * y
    E = t.where(fin, (ex + ey).to(t.int64), 0)
    return t.stack([t.where(fin, p, xy), t.where(fin, e, t.where(xy == 0, xy, 0.0))]), \
        t.stack([E, E])


def exact_products(x: Any, y: Any, z: Any, mode: str, fine: bool = False) -> tuple[Any, Any]:
    """Exact x * y (+ z) of finite float64 tensors, x and y nonzero, as (t, class), or
    (t, resid) with ``fine``, for any magnitudes (fp64 and custom formats whose
    products do not fit float64): the two ``product_terms`` (+ z) summed exactly by
    ``exact_sum`` (its ``scale``), which also truncates subnormal results
    to 2**-1074 and carries a result past the float64 range as +-Inf with class 3.  An
    exact zero x y + z is +0, -0 in mode ``down`` (IEEE's sign of such a sum)."""
    t = namespace(x).t
    T, S = product_terms(x, y)
    if z is not None:
        z = t.broadcast_to(z, T.shape[1:])
        T, S = t.cat([T, z[None]]), t.cat([S, t.zeros_like(S[:1])])
    v, cls = exact_sum(T, mode, fine, S)
    return v.reshape(T.shape[1:]), cls.reshape(T.shape[1:])
