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
``"limbs"``   (tensors of any device) 32-bit pieces added into int64 limbs by a
              scatter-add, the top 53 bits and the next 54 read from the limbs
              (``limbs.limb_sum``)

``exact_dot_terms(cols, rows, mode, fine, strategy)``: the exact sum of the products
of pairs of float64 values of any magnitude (fp64 dot products), as (t, class):

``"fraction"``  (numpy) per output element, the exact rational sum (``fractions``),
                IEEE's specials and zero signs
``"limbs"``     (tensors) each product as the two terms of ``limbs.product_terms``
                (the frexp mantissas' product and its TwoProd error, with the exponent
                sum), all summed once by ``"limbs"``

The strategy defaults to the namespace's: numpy arrays ``bigint`` / ``fraction`` (the
faster there), tensors ``limbs``; tests/test_accumulate_exact.py proves the strategies
equal on the same data (the limbs on CPU tensors; on numpy arrays once the limbs are
written over the namespace).
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
from .limbs import limb_sum as limbs_sum, product_terms

__all__ = ["SUM_STRATEGIES", "DOT_STRATEGIES", "exact_sum_terms", "exact_dot_terms",
           "zero_sum_sign"]

SUM_STRATEGIES = ("bigint", "limbs")
DOT_STRATEGIES = ("fraction", "limbs")


def _strategy(strategy: str | None, xp: Any, names: tuple, host: str) -> str:
    if strategy is None:
        return host if xp is NUMPY else "limbs"
    if strategy not in names:
        raise unknown_name("strategy", strategy, names, n=2)
    if (strategy == "limbs") != (xp is not NUMPY):
        where = "tensors" if strategy == "limbs" else "numpy arrays"
        raise ValueError(f"the {strategy!r} strategy runs on {where} only")
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
        return limbs_sum(xp.concatenate([T for T, _ in parts], 0), mode, fine,
                         xp.concatenate([S for _, S in parts], 0))
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

