"""Exact sums, products, quotients and roots of float64 arrays as (t, class), written
once over the array namespace ``xp`` (numpy arrays and torch tensors of any device):
each exact result is located from its float64 approximation by the sign (or the
scaled value) of an exact residual, the TwoSum error of a sum, x - q y of a quotient,
x - t t of a root (Dekker's TwoProd).

``sum_sticky``      exact x + y (TwoSum to class / resid)
``sum_zero_signs``  IEEE's signs of exact zero sums
``product_parts``, ``fma_parts``  exact x y, x y + z of any magnitude
                    (``floatfmt.arith.limbs.exact_products``)
``quotient_sticky``, ``wide_quotient``  exact x / y (in range; any magnitude)
``root_sticky``, ``wide_root``          exact sqrt(x) (in range; any magnitude)

These are the namespace strategies of the rules that ``floatfmt.arith.eft`` computes
on numpy with float64 fast paths and exact ``fractions.Fraction`` slow paths
(``exact_sum``, ``exact_product``, ``exact_fma``, ``exact_quotient``,
``exact_sqrt``); tests/test_arith_strategies.py checks the two against each other on
numpy.  A result is (t, class) or, with ``fine``, (t, resid): t the exact value
truncated toward zero to float64, the class / resid as ``round_values``' ``sticky`` /
``resid``.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend.namespace import namespace
from .limbs import R_PAST, exact_products, limb_sum, resid_from, two_prod_error

__all__ = ["sum_sticky", "sum_zero_signs", "product_parts", "fma_parts", "quotient_sticky",
           "root_sticky", "wide_quotient", "wide_root", "STRATEGIES", "exact_quotient",
           "exact_root", "exact_product", "exact_fma"]


def sum_sticky(x: Any, y: Any, fine: bool = False) -> tuple[Any, Any]:
    """Exact x + y as (float64 truncated toward zero, uint8 remainder class 0..3) with
    TwoSum; the class is measured in the step above |s| (the sum lies beyond s) or
    below it (the sum lies short of s, where t is the next float64 toward zero).
    ``fine``: the int64 ``resid`` instead of the class (|e| scaled exactly to 2**54
    units of that step; ``limbs.resid_from``).  Finite operands whose float64
    sum overflows (fp64): +-Inf with class 3 (resid ``R_PAST``), a finite value past
    the float64 range, as ``eft.exact_sum``."""
    xp = namespace(x)
    with xp.quiet():
        return _sum_sticky(x, y, fine, xp)


def _sum_sticky(x: Any, y: Any, fine: bool, xp: Any) -> tuple[Any, Any]:
    s = x + y
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    nz = xp.isfinite(s) & (s != 0) & (e != 0)
    zero = xp.const(0.0, s)
    e = xp.where(nz, e, zero)
    a, ae2 = xp.abs(s), 2.0 * xp.abs(e)
    beyond = xp.sign(e) == xp.sign(s)
    up = xp.nextafter(a, math.inf) - a
    up = xp.where(xp.isinf(up), 2.0 ** 971, up)  # the step above the largest double
    c_beyond = xp.where_int(ae2 < up, 1, 2)
    tz = xp.nextafter(s, 0.0)
    d = a - xp.abs(tz)
    c_short = xp.where_int(ae2 > d, 1, xp.where_int(ae2 < d, 3, 2))
    v = xp.where(nz & ~beyond, tz, s)
    past = xp.isinf(s) & xp.isfinite(x) & xp.isfinite(y)  # past the float64 range
    if fine:
        unit = xp.where(beyond, up, d)
        one = xp.where(nz, unit, xp.ones_like(unit))  # a power of two, exactly
        W = xp.ldexp(xp.abs(e), 54 - (xp.frexp(one)[1] - 1))
        R = resid_from(W, xp.zeros_like(W), ~beyond)
        R = xp.where(nz, R, xp.zeros_like(R))
        return v, xp.where(past, R_PAST, R)
    cls = xp.tou8(xp.where(nz, xp.where(beyond, c_beyond, c_short), 0))
    return v, xp.tou8(xp.where(past, 3, cls))


def sum_zero_signs(v: Any, cls: Any, x: Any, y: Any, mode: str) -> Any:
    """IEEE signs of exact zero sums x + y (v, cls from ``sum_sticky``): +0, except -0
    for (-0) + (-0), or in mode ``down`` for any exact zero but (+0) + (+0)."""
    xp = namespace(v)
    exact_zero = (v == 0) & (cls == 0)
    xs, ys = xp.signbit(x), xp.signbit(y)
    if mode != "down":
        neg = (x == 0) & (y == 0) & xs & ys
    else:
        neg = ~(((x == 0) & ~xs) & ((y == 0) & ~ys))
    return xp.where(exact_zero, xp.where(neg, -0.0, 0.0), v)


def product_parts(x: Any, y: Any, mode: str, fine: bool = False) -> tuple[Any, Any]:
    """Exact x * y of float64 arrays of any magnitude as (t, class or resid):
    ``exact_products`` where both are finite and nonzero; elsewhere IEEE's product,
    which is exact (a signed zero, +-Inf, NaN)."""
    xp = namespace(x)
    with xp.quiet():
        x, y = xp.broadcast(x, y)
        fin = xp.isfinite(x) & xp.isfinite(y) & (x != 0) & (y != 0)
        one = xp.const(1.0, x)
        v, cls = exact_products(xp.where(fin, x, one), xp.where(fin, y, one), None, mode, fine)
        return xp.where(fin, v, x * y), xp.where(fin, cls, xp.zeros_like(cls))


def fma_parts(x: Any, y: Any, z: Any, mode: str, fine: bool = False) -> tuple[Any, Any]:
    """Exact x * y + z of float64 arrays of any magnitude as (t, class or resid):
    ``exact_products`` where x y is finite and nonzero and z finite; a finite nonzero
    product plus an infinite or NaN z gives z; a zero or non-finite product (exact in
    float64) plus z is the exact sum of the two, with IEEE's zero signs."""
    xp = namespace(x)
    with xp.quiet():
        x, y, z = xp.broadcast(x, y, z)
        fin = xp.isfinite(x) & xp.isfinite(y) & (x != 0) & (y != 0)
        one = xp.const(1.0, x)
        xs, ys = xp.where(fin, x, one), xp.where(fin, y, one)
        pz = xp.where(fin, xp.zeros_like(x), x * y)
        v0, c0 = sum_sticky(pz, z, fine)
        v0 = sum_zero_signs(v0, c0, x * y, z, mode)
        zf = xp.isfinite(z)
        v1, c1 = exact_products(xs, ys, xp.where(fin & zf, z, xp.zeros_like(z)), mode, fine)
        v = xp.where(fin, xp.where(zf, v1, z), v0)
        return v, xp.where(fin, xp.where(zf, c1, xp.zeros_like(c1)), c0)


def _placed(q: Any, side: Any, inexact: Any, xp: Any) -> tuple[Any, Any]:
    """(t, class) from a float64 result q and the side of it where the exact value lies
    (``side`` > 0: beyond q, away from zero): beyond, t = q and class 1; short, t is the
    next float64 toward zero and class 3 (a quotient or root of float64 numbers is never
    a float64 midpoint, so these are the only classes)."""
    beyond = side > 0
    v = xp.where(inexact & ~beyond, xp.nextafter(q, 0.0), q)
    cls = xp.tou8(xp.where(inexact, xp.where_int(beyond, 1, 3), 0))
    return v, cls


def quotient_sticky(x: Any, y: Any, fine: bool = False) -> tuple[Any, Any]:
    """Exact x / y of float64 arrays as (t, class), t truncated toward zero (as
    ``eft.exact_quotient``, for |x|, |y|, |x / y| within 2**-900 .. 2**900): q = fl(x / y)
    and the sign of the exact residual x - q y (TwoProd) place the quotient.

    ``fine``: (t, resid), the remainder |r / y| taken as w + delta, w = fl(|r| / |y|),
    the sign of delta from the exact residual |r| - w |y| (TwoProd again), scaled to
    2**54 units of the step beyond or below q (``limbs.resid_from``)."""
    xp = namespace(x)
    with xp.quiet():
        return _quotient_sticky(x, y, fine, xp)


def _quotient_sticky(x: Any, y: Any, fine: bool, xp: Any) -> tuple[Any, Any]:
    q = x / y
    ok = xp.isfinite(q) & (q != 0) & xp.isfinite(x) & xp.isfinite(y)
    zero = xp.const(0.0, q)
    qs, ys = xp.where(ok, q, zero), xp.where(ok, y, zero)
    p = qs * ys
    r = (xp.where(ok, x, zero) - p) - two_prod_error(qs, ys, p)
    side, inexact = xp.sign(r) * xp.sign(y) * xp.sign(q), ok & (r != 0)
    v, cls = _placed(q, side, inexact, xp)
    if not fine:
        return v, cls
    one = xp.const(1.0, q)
    ar, ab = xp.abs(r), xp.where(inexact, xp.abs(ys), one)
    w = ar / ab
    p2 = w * ab
    d_sign = xp.sign((ar - p2) - two_prod_error(w, ab, p2))
    qa = xp.abs(q)
    beyond = side > 0
    unit = xp.where(beyond, xp.nextafter(qa, math.inf) - qa, qa - xp.abs(v))
    unit = xp.where(inexact, unit, one)  # a power of two
    W = xp.ldexp(w, 54 - (xp.frexp(unit)[1] - 1))
    R = resid_from(W, d_sign, ~beyond)
    return v, xp.where(inexact, R, xp.zeros_like(R))


def root_sticky(x: Any, fine: bool = False, slack: int = 0) -> tuple[Any, Any]:
    """Exact sqrt(x) of a float64 array as (t, class) (as ``eft.exact_sqrt``, for x
    within 2**-900 .. 2**900): t is the largest float64 with t * t <= x, found from
    q = sqrt(x) and its neighbours by the sign of the exact residual x - t t (TwoProd),
    so that a device sqrt off by one ulp (torch's CPU float64 sqrt is, for some inputs)
    changes nothing; the class is 3 where the residual exceeds t * ulp(t) (the root is
    past the midpoint t + ulp / 2), else 1 (a root is never a midpoint), 0 where exact.

    ``fine`` (with ``slack = g``, 0 <= g <= 52, see ``eft.resid_slack``): (t, resid).
    For g >= 6, resid is the middle of the 2**g-cell of 2**54 (root - t) / ulp(t) (as
    ``eft.exact_sqrt`` gives it; a format with that slack never reads the low g bits);
    for g < 6 (fp64 and custom formats of 47 or more mantissa bits) the exact resid,
    floor(2**54 (root - t) / ulp(t)) made odd, as ``eft.exact_sqrt``'s integer square
    root gives it.  Both come from the estimate 2**54 (r / 2t) / ulp and, where that is
    within 16 units of a cell edge, exact side tests (``_root_resid``)."""
    xp = namespace(x)
    with xp.quiet():
        return _root_sticky(x, fine, slack, xp)


def _root_sticky(x: Any, fine: bool, slack: int, xp: Any) -> tuple[Any, Any]:
    ok = xp.isfinite(x) & (x > 0)
    zero = xp.const(0.0, x)
    xs = xp.where(ok, x, zero)

    def resid(v: Any) -> Any:
        p = v * v
        return (xs - p) - two_prod_error(v, v, p)

    q = xp.sqrt(xs)
    r = resid(q)
    low = xp.where(r < 0, xp.nextafter(q, 0.0), q)  # at most one ulp below the root
    up = xp.nextafter(low, math.inf)
    r_up = resid(up)
    tt = xp.where(r_up >= 0, up, low)
    rt = xp.where(r_up >= 0, r_up, resid(low))
    ulp = xp.nextafter(tt, math.inf) - tt
    v = xp.where(ok, tt, xp.sqrt(x))
    if fine:
        return v, _root_resid(xs, tt, rt, ulp, ok & (rt != 0), slack, xp)
    cls = xp.tou8(xp.where(ok & (rt != 0), xp.where_int(rt > tt * ulp, 3, 1), 0))
    return v, cls


def _root_resid(xs: Any, tt: Any, rt: Any, ulp: Any, inexact: Any, g: int, xp: Any) -> Any:
    """The resid of ``root_sticky`` (fine): 2**54 (root - t) / ulp known to its 2**h
    cell (h = g for g >= 6, else h = 1), given as the cell's midpoint: for h = 1 that is
    floor(2**54 (root - t) / ulp) | 1, the exact resid (a root that is not a float64 is
    irrational: never on an edge).  The estimate W = 2**54 (r / 2t) / ulp is within 16
    units of the exact value (r = x - t t, relative errors of 2**-52 on a value below
    2**54), so the cell index lies in [floor((W - 16) / 2**h), floor((W + 16) / 2**h)];
    where those differ a binary search settles it, each step asking on which side of the
    edge t + delta (delta = E 2**(h - 54) ulp, at most 53 significant bits as h >= 1)
    the root lies: the sign of the exact x - t t - 2 t delta - delta delta (TwoProd
    terms summed by ``limbs.limb_sum``)."""
    if not 0 <= g <= 52:
        raise ValueError(f"slack must be 0..52 for roots on a device, not {g}")
    h = g if g >= 6 else 1
    one = xp.const(1.0, tt)
    eu = xp.frexp(xp.where(inexact, ulp, one))[1] - 1  # ulp = 2**eu
    W = xp.ldexp(rt / xp.where(inexact, 2.0 * tt, one), 54 - eu)  # estimate, error < 16 units
    cell, top = float(1 << h), float((1 << (54 - h)) - 1)
    lo = xp.clip(xp.floor((W - 16.0) / cell), 0.0, top)
    hi = xp.clip(xp.floor((W + 16.0) / cell), 0.0, top)
    sel = inexact & (lo < hi)  # any shape: boolean indexing flattens alike
    if xp.any(sel):
        L, H = lo[sel], hi[sel]
        xu, tu, eu_u = xs[sel], tt[sel], eu[sel]
        while True:
            todo = L < H
            if not xp.any(todo):
                break
            M = L + xp.floor((H - L + 1.0) / 2.0)  # exact: H - L is small
            above = _root_above(xu, tu, xp.ldexp(M, h + eu_u - 54), xp)
            L = xp.where(todo & above, M, L)
            H = xp.where(todo & ~above, M - 1.0, H)
        lo[sel] = L
    R = (xp.toint(lo) << h) + (1 << (h - 1))
    return xp.where(inexact, R, xp.zeros_like(R))


def _root_above(x: Any, r: Any, delta: Any, xp: Any) -> Any:
    """Whether sqrt(x) > r + delta (float64 arrays; r, delta >= 0 and r + delta below the
    root's float64 successor; its square never equals x here): the sign of the exact
    x - r r - 2 r delta - delta delta, each product as TwoProd's two terms."""
    d2 = 2.0 * delta
    p1, p2, p3 = r * r, r * d2, delta * delta
    terms = xp.stack([x, -p1, -two_prod_error(r, r, p1), -p2, -two_prod_error(r, d2, p2),
                      -p3, -two_prod_error(delta, delta, p3)])
    return limb_sum(terms, "nearest_even")[0] > 0


def wide_root(x: Any, fine: bool = False, slack: int = 0) -> tuple[Any, Any]:
    """Exact sqrt(x) of a float64 array of any magnitude as (t, class), or with ``fine``
    (t, resid) as ``root_sticky`` gives it for ``slack``: x = m 2**(2k) with m in
    [1/2, 2) (frexp, one exponent moved to m when odd), ``root_sticky(m)`` scaled back by
    2**k (exact: a root of a float64 is a normal float64; the class and the resid are
    relative to the ulp, which scales alike)."""
    xp = namespace(x)
    with xp.quiet():
        ok = xp.isfinite(x) & (x > 0)
        m, e = xp.frexp(xp.where(ok, x, xp.const(1.0, x)))
        odd = (e & 1) == 1
        tt, cls = root_sticky(xp.where(odd, 2.0 * m, m), fine, slack)
        v = xp.ldexp(tt, (e - xp.toint(odd)) // 2)
        return xp.where(ok, v, xp.sqrt(x)), xp.where(ok, cls, xp.zeros_like(cls))


def wide_quotient(x: Any, y: Any, fine: bool = False) -> tuple[Any, Any]:
    """Exact x / y of float64 arrays of any magnitude as (t, class), or (t, resid) with
    ``fine``: the quotient q' of the frexp mantissas (``quotient_sticky``, in range)
    scaled by 2**(ex - ey); a result past the float64 range is +-Inf with class 3; a
    subnormal one is truncated to a multiple of 2**-1074 (k = log2(2**-1074 / ulp) bits
    of q''s 53-bit integer dropped), its remainder being those bits D plus q''s own
    remainder rho (never a multiple of the unit when nonzero): class from D against
    half the unit, resid 2**(54 - k) D + (rho's resid >> k) (k <= 54) or D >> (k - 54),
    made odd when inexact.  Zeros, Inf and NaN: IEEE's x / y, exact."""
    xp = namespace(x)
    with xp.quiet():
        return _wide_quotient(x, y, fine, xp)


def _wide_quotient(x: Any, y: Any, fine: bool, xp: Any) -> tuple[Any, Any]:
    x, y = xp.broadcast(x, y)
    ok = xp.isfinite(x) & xp.isfinite(y) & (x != 0) & (y != 0)
    one = xp.const(1.0, x)
    mx, ex = xp.frexp(xp.where(ok, x, one))
    my, ey = xp.frexp(xp.where(ok, y, one))
    tq, cq = quotient_sticky(mx, my, fine)
    cq = xp.toint(cq)
    E = ex - ey
    eq = xp.frexp(tq)[1] - 1  # floor(log2 |tq|)
    top = E + eq
    v = xp.ldexp(tq, E)  # exact in the normal range
    past = top >= 1024
    v = xp.where(past, xp.copysign(math.inf, tq), v)
    cls = xp.where(past, R_PAST if fine else 3, cq)
    sub = ok & (top < -1022)
    if xp.any(sub):  # subnormal quotients (rare): on their own
        v[sub], cls[sub] = _subnormal_quotients(tq[sub], cq[sub], top[sub], eq[sub], fine, xp)
    v = xp.where(ok, v, x / y)
    cls = xp.where(ok, cls, xp.zeros_like(cls))
    return v, cls if fine else xp.tou8(cls)


def _subnormal_quotients(tq: Any, cq: Any, top: Any, eq: Any, fine: bool,
                         xp: Any) -> tuple[Any, Any]:
    """``wide_quotient``'s subnormal results: q' (``tq``, remainder ``cq``) of exponent
    ``top`` < -1022 truncated to a multiple of 2**-1074, with the class or resid of the
    dropped bits D and q''s own remainder (see ``wide_quotient``)."""
    k_all = -1022 - top  # bits of q' below the subnormal unit (>= 1)
    k = xp.clip(k_all, 1, 62)  # for shifts of the 53-bit integer (62: all of it)
    Mi = xp.toint(xp.ldexp(xp.abs(tq), 52 - eq))  # q' as a 53-bit integer
    K = Mi >> k
    D = Mi - (K << k)
    vs = xp.copysign(xp.ldexp(xp.tofloat(K), xp.full_like(K, -1074)), tq)
    if fine:
        j = xp.clip(k_all - 54, 0, 62)
        low = xp.where(k <= 54, (D << xp.clip(54 - k, 0, None)) + (cq >> k), D >> j)
        lost = xp.where(k <= 54, cq != 0, ((D & ((1 << j) - 1)) != 0) | (cq != 0))
        return vs, low | xp.toint(lost)
    half = 1 << (k - 1)
    inexact = cq != 0
    return vs, xp.where_int((D == 0) & ~inexact, 0, xp.where_int(D < half, 1, xp.where_int(
        (D == half) & ~inexact, 2, 3)))


# ------------------------------------------------------------------ strategies of one rule
#: the strategies of ``exact_quotient``, ``exact_root``, ``exact_product``, ``exact_fma``
STRATEGIES = ("residual", "fraction")


def _strategy(strategy: str) -> bool:
    """True for the namespace strategy; ValueError naming the valid ones otherwise."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
    return strategy == "residual"


def _filled(r: tuple[Any, Any], fine: bool) -> tuple[Any, Any]:
    """``eft``'s (t, cls) with cls None (every element exact) as zeros of its dtype."""
    import numpy as np
    t, cls = r
    return t, (np.zeros(np.shape(t), np.int64 if fine else np.uint8) if cls is None else cls)


def exact_quotient(x: Any, y: Any, fine: bool = False, strategy: str = "residual") -> tuple[Any, Any]:
    """Exact x / y of float64 arrays of any magnitude as (t, class), or (t, resid) with
    ``fine``, by one of two strategies: ``"residual"`` (``wide_quotient``, over the
    namespace) or ``"fraction"`` (numpy only: ``eft.exact_quotient``, float64 residuals
    with ``fractions.Fraction`` near the ends of the range).

    >>> import numpy as np
    >>> x, y = np.array([1.0, 1.0, 2.0 ** -1070]), np.array([3.0, 10.0, 3.0])
    >>> [exact_quotient(x, y, strategy=s)[1].tolist() for s in STRATEGIES]  # 1/10 lies short
    [[1, 3, 1], [1, 3, 1]]
    """
    if _strategy(strategy):
        return wide_quotient(x, y, fine)
    from . import eft
    return _filled(eft.exact_quotient(x, y, fine), fine)


def exact_root(x: Any, fine: bool = False, slack: int = 0, strategy: str = "residual") -> tuple[Any, Any]:
    """Exact sqrt(x) of a float64 array as (t, class), or (t, resid) with ``fine`` (known
    to its 2**slack cell, see ``eft.resid_slack``), by ``"residual"`` (``wide_root``,
    over the namespace) or ``"fraction"`` (numpy only: ``eft.exact_sqrt``, integer
    square roots where the estimate does not settle the cell)."""
    if _strategy(strategy):
        return wide_root(x, fine, slack)
    from . import eft
    return _filled(eft.exact_sqrt(x, fine, slack), fine)


def exact_product(x: Any, y: Any, mode: str = "nearest_even", fine: bool = False,
                  strategy: str = "residual") -> tuple[Any, Any]:
    """Exact x * y of float64 arrays of any magnitude as (t, class or resid), by
    ``"residual"`` (``product_parts``: integer limbs over the namespace) or
    ``"fraction"`` (numpy only: ``eft.exact_product``, TwoProd with ``Fraction`` near the
    ends of the range)."""
    if _strategy(strategy):
        return product_parts(x, y, mode, fine)
    from . import eft
    return _filled(eft.exact_product(x, y, False, fine), fine)


def exact_fma(x: Any, y: Any, z: Any, mode: str = "nearest_even", fine: bool = False,
              strategy: str = "residual") -> tuple[Any, Any]:
    """Exact x * y + z of float64 arrays of any magnitude as (t, class or resid), with
    IEEE's signs of exact zero results in ``mode``, by ``"residual"`` (``fma_parts``:
    integer limbs over the namespace) or ``"fraction"`` (numpy only: ``eft.exact_fma``,
    TwoProd and TwoSum with ``Fraction`` where Dekker's product is not exact, then the
    zero signs of the exact product's sign plus z)."""
    if _strategy(strategy):
        return fma_parts(x, y, z, mode, fine)
    import numpy as np

    from . import eft
    x, y, z = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (x, y, z)))
    t, cls = _filled(eft.exact_fma(x, y, z, False, fine), fine)
    # stand-in for the exact product: a signed zero where it is zero, else 1
    p = np.where((x == 0) | (y == 0), np.where(np.signbit(x) ^ np.signbit(y), -0.0, 0.0), 1.0)
    return sum_zero_signs(t, cls, p, z, mode), cls
