"""The exact sum of many float64 terms, and the exact dot product of values too wide for
float64 products: one rule each, with two named strategies.

``exact_sum_terms(T, mode, fine, strategy)``: the exact sum over axis 0 of T as
(t, class) -- t the sum truncated toward zero to float64, the class (``fine``: the
``resid``) what ``rounding.round_values`` takes as ``sticky`` (``resid``).  Specials:
NaN, or Inf and -Inf, give NaN; an Inf gives it; an exact zero sum is -0 when every
term is -0 and, in mode ``down``, unless every term is +0 (what any order of IEEE
additions gives); a finite sum past the float64 range is +-Inf with class 3.

``"bigint"``  (numpy arrays) every term m 2**q cut into 16-bit pieces added into
              16-bit limbs by float64 bincounts (exact: integers below 2**53), the
              carries propagated, each column's sum one Python integer
              (``eft.int_to_sticky``)
``"limbs"``   (written over the namespace: tensors of any device, and numpy) 32-bit
              pieces added into int64 limbs by a scatter-add, the top 53 bits and the
              next 54 read from the limbs (``limbs_sum``)

``exact_dot_terms(cols, rows, mode, fine, strategy)``: the exact sum of the products
of pairs of float64 values of any magnitude (fp64 dot products), as (t, class):

``"fraction"``  (numpy) per output element, the exact rational sum (``fractions``),
                IEEE's specials and zero signs
``"limbs"``     (namespace) each product as the two terms of ``product_terms``
                (the frexp mantissas' product and its TwoProd error, with the exponent
                sum), all summed once by ``"limbs"``

The strategy defaults to the namespace's: numpy arrays ``bigint`` / ``fraction`` (the
faster there), tensors ``limbs``; tests/test_accumulate_exact.py proves the strategies
equal on numpy.
"""

from __future__ import annotations

import builtins
import math
from fractions import Fraction
from typing import Any

import numpy as np

from . import eft
from ..backend.namespace import NUMPY, namespace
from ..core.names import unknown_name

__all__ = ["SUM_STRATEGIES", "DOT_STRATEGIES", "exact_sum_terms", "exact_dot_terms",
           "limbs_sum", "product_terms", "zero_sum_sign", "R_PAST"]

#: the resid of a finite value past the float64 range (class 3), with t = +-Inf
R_PAST = 3 << 52

SUM_STRATEGIES = ("bigint", "limbs")
DOT_STRATEGIES = ("fraction", "limbs")


def _strategy(strategy: str | None, xp: Any, names: tuple, host: str) -> str:
    if strategy is None:
        return host if xp is NUMPY else "limbs"
    if strategy not in names:
        raise unknown_name("strategy", strategy, names, n=2)
    if strategy != "limbs" and xp is not NUMPY:
        raise ValueError(f"the {strategy!r} strategy runs on numpy arrays only")
    return strategy


def exact_sum_terms(T: Any, mode: str, fine: bool = False, strategy: str | None = None) -> tuple[Any, Any]:
    """The exact sum over axis 0 of the float64 terms T as (t, class or resid), of shape
    T.shape[1:] (the module docstring)."""
    xp = namespace(T)
    how = _strategy(strategy, xp, SUM_STRATEGIES, "bigint")
    if how == "limbs":
        return limbs_sum(T, mode, fine)
    return _bigint_sum(T, mode, fine)


def _bigint_sum(T, mode, fine):
    """``exact_sum_terms``'s ``bigint`` strategy (numpy)."""
    n = T.shape[0]
    rest = T.shape[1:]
    X = T.reshape(n, -1)
    m = X.shape[1]
    with np.errstate(invalid="ignore"):
        fin = np.isfinite(X)
        has_nan = np.isnan(X).any(0) | (np.isposinf(X).any(0) & np.isneginf(X).any(0))
        inf_val = np.where(np.isposinf(X).any(0), np.inf, np.where(np.isneginf(X).any(0), -np.inf, 0.0))
    Xf = np.where(fin, X, 0.0)
    all_negzero = ((Xf == 0) & np.signbit(Xf)).all(0)
    all_poszero = ((Xf == 0) & ~np.signbit(Xf)).all(0)
    mant, ex = np.frexp(Xf)
    M = (mant * 2.0 ** 53).astype(np.int64)  # exact, |M| < 2**53
    q = ex.astype(np.int64) - 53
    nz = M != 0
    out = np.zeros(m)
    cls = np.zeros(m, np.int64 if fine else np.uint8)
    if nz.any():
        qmin = int(q[nz].min())
        b = np.where(nz, q - qmin, 0)
        limb, shift = b // 16, b % 16
        nl = int(limb.max()) + 6
        sign = np.sign(M)
        A = np.abs(M)
        cols = np.broadcast_to(np.arange(m), X.shape)
        S = np.zeros(nl * m)
        for j in range(4):
            chunk = ((A >> (16 * j)) & 0xFFFF) << shift  # < 2**32
            for part, off in ((chunk & 0xFFFF, 0), (chunk >> 16, 1)):
                idx = ((limb + j + off) * m + cols)[nz]
                S += np.bincount(idx, weights=(sign * part)[nz].astype(np.float64), minlength=nl * m)
        L = S.reshape(nl, m).astype(np.int64)
        for i in range(nl - 1):  # carry propagation (floor division keeps limbs in 0..65535)
            carry = L[i] >> 16
            L[i] -= carry << 16
            L[i + 1] += carry
        neg = L[nl - 1] < 0
        if neg.any():
            L[:, neg] = -L[:, neg]
            for i in range(nl - 1):
                carry = L[i, neg] >> 16
                L[i, neg] -= carry << 16
                L[i + 1, neg] += carry
        limbs16 = L.astype(np.uint16)  # every limb now in 0..65535
        for j in np.flatnonzero(L.any(0)):
            N = int.from_bytes(limbs16[:, j].tobytes(), "little")
            out[j], cls[j] = eft.int_to_sticky(-N if neg[j] else N, qmin, fine)
    zero = out == 0
    zero &= cls == 0
    neg_zero = ~all_poszero if mode == "down" else all_negzero
    out[zero] = np.where(neg_zero[zero], -0.0, 0.0)
    out = np.where(has_nan, np.nan, np.where(inf_val != 0, inf_val, out))
    # Inf / NaN terms give exact specials; an Inf from int_to_sticky is a finite sum past
    # the float64 range and keeps its class (so toward_zero etc. can give max)
    cls = np.where(has_nan | (inf_val != 0), 0, cls).astype(cls.dtype)
    return out.reshape(rest), cls.reshape(rest)


# ------------------------------------------------------------------ wide dot products
def exact_dot_terms(cols: list, rows: list, mode: str, fine: bool = False,
                    strategy: str | None = None) -> tuple[Any, Any]:
    """The exact sum over k of cols[k] * rows[k] (float64 arrays of one shape, any
    magnitude) as (t, class or resid) of that shape (the module docstring)."""
    n = len(cols)
    xp = namespace(cols[0]) if n else NUMPY
    how = _strategy(strategy, xp, DOT_STRATEGIES, "fraction")
    if how == "limbs":
        parts = [product_terms(x, y) for x, y in zip(cols, rows)]
        return limbs_sum(xp.concat([T for T, _ in parts]), mode, fine,
                         xp.concat([S for _, S in parts]))
    shape = cols[0].shape if n else ()
    cf = [np.asarray(c).reshape(-1) for c in cols]
    rf = [np.asarray(r).reshape(-1) for r in rows]
    m = cf[0].size if n else 0
    out = np.zeros(m)
    cls = np.zeros(m, np.int64 if fine else np.uint8)
    for j in range(m):
        pairs = [(float(cf[k][j]), float(rf[k][j])) for k in range(n)]
        special = _special_dot(pairs)
        if special is not None:
            out[j] = special
            continue
        fr = builtins.sum((Fraction(a) * Fraction(b) for a, b in pairs), Fraction(0))
        if fr == 0:
            zeros = [math.copysign(0.0, a) * math.copysign(1.0, b) if a == 0 or b == 0 else 1.0
                     for a, b in pairs]
            out[j] = zero_sum_sign(zeros, mode)
        else:
            out[j], cls[j] = eft.fraction_to_sticky(fr, fine)
    return out.reshape(shape), cls.reshape(shape)


def _special_dot(pairs):
    """IEEE result of sum(a*b) over exact products when an operand is Inf or NaN, else None.

    A product of finite operands is finite (even where float64 ``a * b`` would
    overflow), so only products with an Inf or NaN factor are special."""
    infs = set()
    for a, b in pairs:
        if math.isfinite(a) and math.isfinite(b):
            continue
        if math.isnan(a) or math.isnan(b) or a == 0 or b == 0:
            return math.nan  # NaN operand, or Inf * 0
        infs.add(math.copysign(1.0, a) * math.copysign(1.0, b))
    if not infs:
        return None
    return math.nan if len(infs) == 2 else math.copysign(math.inf, infs.pop())


def zero_sum_sign(terms, mode):
    """The IEEE zero of an exact zero sum: -0 when every term is -0, and in mode
    ``down`` unless every term is +0 (what any order of IEEE additions gives)."""
    neg = [t == 0 and math.copysign(1.0, t) < 0 for t in terms]
    pos = [t == 0 and math.copysign(1.0, t) > 0 for t in terms]
    if mode == "down":
        return 0.0 if builtins.all(pos) else -0.0
    return -0.0 if builtins.all(neg) else 0.0


# ------------------------------------------------------------------ the limbs strategy
_LIMB = 32  # bits per int64 limb: n pieces below 2**32 add up exactly for n < 2**31
_MASK = (1 << _LIMB) - 1


def _carry(L):
    """Carries propagated upward (floor shifts): limbs 0..-2 in [0, 2**32), the top one
    holds the sign."""
    for i in range(L.shape[0] - 1):
        c = L[i] >> _LIMB
        L[i] -= c << _LIMB
        L[i + 1] += c
    return L


def _ones_shifted(w, xp):
    """2**w - 1 per element of the int64 array w (w clipped to 0..62)."""
    return ((w * 0 + 1) << xp.clip(w, 0, 62)) - 1


def _window(L, lo, width, xp):
    """The integer of bits lo .. lo + width - 1 (width <= 54, per column) of the
    non-negative limbs L (nl, m), zero above the top limb."""
    k = lo // _LIMB
    off = lo - k * _LIMB
    nl = L.shape[0]

    def limb(i):
        return xp.take0(L, xp.clip(i, None, nl - 1)) * (i < nl)

    v = limb(k) >> off
    v = v + ((limb(k + 1) & _ones_shifted(width - (_LIMB - off), xp)) << (_LIMB - off))
    v = v + ((limb(k + 2) & _ones_shifted(width - (2 * _LIMB - off), xp)) << (2 * _LIMB - off))
    return v & _ones_shifted(width, xp)


def _below(L, lo, xp):
    """Whether any bit below position lo (per column) of the limbs L is set."""
    k = lo // _LIMB
    off = lo - k * _LIMB
    nl = L.shape[0]
    nz = xp.as_dtype(L != 0, "int64").cumsum(0)  # nonzero limbs up to and including each index
    whole = xp.take0(nz, xp.clip(k - 1, 0, nl - 1)) * (k > 0) > 0
    part = xp.take0(L, xp.clip(k, None, nl - 1)) & _ones_shifted(off, xp)
    return whole | ((part != 0) & (k < nl))


def limbs_sum(T, mode: str, fine: bool = False, scale=None):
    """``exact_sum_terms``' ``limbs`` strategy, over the namespace of T.  ``scale``: an
    int64 array of T's shape, the terms being T * 2**scale (finite terms; the exact
    products of ``product_terms`` give mantissa products and their TwoProd errors with
    the operands' exponents here, as neither fits float64 alone).

    Each finite term m * 2**q (m a 53-bit integer) is cut into 32-bit pieces added
    (integers, exact in any order) into int64 limbs of a fixed point anchored at the
    smallest q; carries are propagated, a negative sum negated, and the top 53 bits,
    the next 54 and whether any bit lies below give t and the class.  A sum below
    2**-1022 is truncated to a multiple of 2**-1074 (a subnormal float64, the class
    measured in that unit)."""
    xp = namespace(T)
    n = T.shape[0]
    rest = tuple(T.shape[1:])
    X = T.reshape(n, -1)
    m = X.shape[1]
    with np.errstate(invalid="ignore"):
        fin = xp.isfinite(X)
        nan = xp.isnan(X).any(0) | ((X == math.inf).any(0) & (X == -math.inf).any(0))
    inf = xp.where((X == math.inf).any(0), math.inf, xp.where((X == -math.inf).any(0), -math.inf, 0.0))
    Xf = xp.where(fin, X, xp.zeros((), X))
    neg0 = ((Xf == 0) & xp.signbit(Xf)).all(0)
    pos0 = ((Xf == 0) & ~xp.signbit(Xf)).all(0)
    mant, ex = xp.frexp(Xf)
    M = xp.as_dtype(mant * 2.0 ** 53, "int64")  # exact, |M| < 2**53
    q = xp.as_dtype(ex, "int64") - 53
    if scale is not None:
        q = q + scale.reshape(n, -1)
    nz = M != 0
    out = xp.zeros((m,), X)
    cls = xp.zeros_of((m,), X, "int64" if fine else "uint8")
    if bool(nz.any()):
        qmin = int(q[nz].min())
        b = xp.where(nz, q - qmin, q * 0)
        limb, shift = b // _LIMB, b % _LIMB
        nl = int(limb.max()) + 5  # 53 + 31 bits span 3 limbs; one more for the carries of n
        A, sign = xp.abs(M), xp.sign(M)
        L = xp.zeros_of((nl, m), X, "int64")
        lo, hi = (A & _MASK) << shift, (A >> _LIMB) << shift  # < 2**63, < 2**52
        for piece, at in ((lo & _MASK, limb), (lo >> _LIMB, limb + 1),
                          (hi & _MASK, limb + 1), (hi >> _LIMB, limb + 2)):
            L = xp.scatter_add0(L, at, sign * piece)
        L = _carry(L)
        negative = L[-1] < 0
        L = _carry(xp.where(negative, -L, L))
        any_bit = (L != 0).any(0)
        top = xp.clip(xp.amax(xp.where(L != 0, xp.arange(nl, X)[:, None], L * 0 - 1), 0), 0, None)
        _, bl = xp.frexp(xp.as_dtype(xp.take0(L, top), "float64"))  # bits of the top limb
        length = top * _LIMB + xp.as_dtype(bl, "int64")  # bits of the integer sum
        # its ulp's position: 53 bits below the top, but not below 2**-1074
        p = xp.clip(xp.clip(length - 53, -1074 - qmin, None), 0, None)
        mant_i = _window(L, p, length - p, xp)
        # the 54 bits below the ulp (fewer below bit 0: shifted up), then a sticky bit
        r_lo = xp.clip(p - 54, 0, None)
        R = _window(L, r_lo, p - r_lo, xp) << (54 - (p - r_lo))
        R = R | xp.as_dtype(_below(L, r_lo, xp), "int64")
        # exact: a normal float64, or a subnormal sum (then p = 0: every term is a
        # multiple of 2**-1074), or past the range: +-Inf, class 3
        with np.errstate(over="ignore"):
            val = xp.ldexp(xp.as_dtype(mant_i, "float64"), p + qmin)
        R = xp.where(xp.isinf(val), R * 0 + R_PAST, R)
        out = xp.where(any_bit, xp.where(negative, -val, val), out)
        if not fine:
            half = 1 << 53
            R = xp.as_dtype(xp.where(R == 0, R * 0, xp.where(R < half, R * 0 + 1, xp.where(
                R == half, R * 0 + 2, R * 0 + 3))), "uint8")
        cls = xp.where(any_bit, R, cls * 0)
    zero = (out == 0) & (cls == 0)
    neg_zero = ~pos0 if mode == "down" else neg0
    out = xp.where(zero & neg_zero, -0.0, out)
    special = nan | (inf != 0)
    out = xp.where(nan, math.nan, xp.where(inf != 0, inf, out))
    cls = xp.where(special, cls * 0, cls)
    return out.reshape(rest), cls.reshape(rest)


_SPLITTER = 134217729.0  # 2**27 + 1, Veltkamp's splitter


def _two_prod_error(a, b, p):
    """The exact error a * b - p of p = fl(a * b) (Dekker, Veltkamp's split; exact for
    frexp mantissas)."""
    def split(v):
        c = _SPLITTER * v
        hi = c - (c - v)
        return hi, v - hi
    ah, al = split(a)
    bh, bl = split(b)
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


def product_terms(x, y):
    """Two float64 terms and their int64 exponents (stacked on a new axis 0) whose exact
    sum T[0] 2**S[0] + T[1] 2**S[1] is x * y, for float64 arrays of one shape and any
    magnitude: the frexp mantissas' product p and its TwoProd error e (exact: the
    mantissas lie in [1/2, 1)) with the exponent sum; a zero, infinite or NaN product
    (exact in float64) as itself twice with exponent 0 (so that a sum of them keeps
    IEEE's signs and specials in ``limbs_sum``)."""
    xp = namespace(x)
    with np.errstate(invalid="ignore", over="ignore"):
        fin = xp.isfinite(x) & xp.isfinite(y) & (x != 0) & (y != 0)
        one = xp.zeros((), x) + 1.0
        mx, ex = xp.frexp(xp.where(fin, x, one))
        my, ey = xp.frexp(xp.where(fin, y, one))
        p = mx * my
        e = _two_prod_error(mx, my, p)
        xy = x * y
    E = xp.where(fin, xp.as_dtype(ex, "int64") + xp.as_dtype(ey, "int64"), xp.as_dtype(ex, "int64") * 0)
    return xp.stack([xp.where(fin, p, xy), xp.where(fin, e, xp.where(xy == 0, xy, 0.0))]), \
        xp.stack([E, E])
