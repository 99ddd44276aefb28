"""The arithmetic of ``floatfmt.arith.ops`` on tensors of any device (CUDA): ``add``, ``sub``,
``mul``, ``fma``, ``div``, ``sqrt``, ``neg``, ``abs``, ``minimum``, ``maximum``, written
over the array namespace (torch ops on the tensor's device; torch is never imported here).

``floatfmt.backend.dispatch`` calls these for tensors that are not computed by the numpy
kernels (CUDA tensors, or CPU tensors under ``force_namespace``, which the tests
use to prove them equal to the numpy path).  The rule is the one of ``ops``:
operands are cast to ``fmt`` (``ff.cast`` on the device, with ``daz`` then
flushing operands that are subnormal in ``fmt``), the exact result is formed and
rounded once by the one rounding routine:

* products of two values of a format of at most 26 significant bits (every format
  up to fp32) are exact in float64;
* a sum s = fl(x + y) has the exact error e (Knuth's TwoSum), and the exact value
  s + e is handed to the routine as the float64 truncated toward zero plus its
  remainder class (``rounding.round_values``' ``sticky``), as
  ``floatfmt.arith.eft.to_sticky`` does on numpy;
* a quotient q = fl(x / y) or root q = fl(sqrt(x)) has an exact residual
  (x - q y, x - q q: Dekker's TwoProd) whose sign says on which side of q the exact
  value lies; it is never a float64 midpoint, so t and the class follow
  (``floatfmt.arith.eft.exact_quotient`` / ``exact_sqrt`` on numpy);
* IEEE zero signs: an exact zero sum is +0, except -0 for (-0) + (-0), or in mode
  ``down`` for any exact zero but (+0) + (+0).

Stochastic rounding (every SR mode, ``sr_bits``): the exact results above carry
their fine remainder ``resid`` (what ``rounding.round_values`` needs for SR: 2**54
times the remainder's share of the float64 ulp, rounded to odd) instead of the
class: a sum's TwoSum error scaled exactly; a quotient's remainder as w + delta
(w = fl(|r| / |y|), delta's sign by TwoProd), as ``eft.exact_quotient``; a root's
remainder to the 2**g cell a format of its width reads (``eft.resid_slack``), or
exactly where g < 6 (fp64: the remainder's every bit), with exact side tests near
cell edges (``root_sticky``).  Random numbers come from a ``torch.Generator``
on the device or an int seed (a new Generator seeded with it), one per call:
the operands' casts draw first (operand by operand, one number per element), then
the result's rounding.  numpy's ops draw from a numpy Generator, so the same seed
gives other bits; tests/test_torch_sr.py proves the remainders equal to
``floatfmt.arith.eft``'s and the results equal to numpy's rule given the same random
numbers, and checks the frequency law.

fp64 (and custom formats wider than 26 significant bits): ``add``, ``sub``, ``neg``,
``abs``, ``minimum``, ``maximum`` run (TwoSum is exact for any float64 operands; a
sum past the float64 range is +-Inf with class 3, a finite value beyond it, as
``eft.exact_sum``); so do ``mul`` and ``fma`` (``product_parts`` / ``fma_parts``,
``exact_device.exact_products``:
the product of the operands' frexp mantissas is exact as p + e by TwoProd with
Veltkamp's split, and p, e with the operands' exponents, plus c, are summed exactly
in integer limbs, which also truncates subnormal results and carries results past
the range); and ``div`` / ``sqrt`` (``wide_quotient`` / ``wide_root``: the
mantissas' quotient or root by ``quotient_sticky`` / ``root_sticky`` in range, scaled
back; a subnormal quotient truncated to 2**-1074 with its remainder from the dropped
bits and the mantissa quotient's own), in every rounding mode, stochastic ones
included (tests/test_torch_wide.py).

Python scalars mix with tensors as in the numpy path; results are float64 tensors
on the operands' device, not differentiable.  ``sum``, ``dot`` and ``matmul`` on the
device: ``floatfmt.arith.accumulate_device``.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.cast import cast
from ..core.formats import Format, get_format
from ..backend.namespace import is_tensor, namespace
from ..backend.dispatch import check_tensors
from .eft import product_is_exact, resid_slack
from .eft_device import R_PAST, exact_products, exact_sum, resid_from, two_prod_error
from ..core.rounding import STOCHASTIC, resolve_mode, resolve_overflow, round_values

__all__ = ["DeviceCall", "rounded_sum", "wide_root", "wide_quotient", "product_parts",
           "fma_parts", "quotient_sticky", "root_sticky", "device_add", "device_sub",
           "device_mul", "device_fma", "device_div",
           "device_sqrt", "device_neg", "device_abs", "device_minimum", "device_maximum"]


class _Options:
    """The resolved options of one call (as ``ops.make_ctx`` resolves them)."""

    def __init__(self, fmt: Format, rounding: Any, overflow: Any, ftz: bool, daz: bool):
        self.rounding, self.overflow, self.ftz, self.daz = rounding, overflow, ftz, daz
        self.mode = resolve_mode(rounding)
        self.policy = resolve_overflow(overflow, fmt)


class DeviceCall:
    """One device call: its name, device, resolved options (``ctx``), format (``fmt``),
    namespace (``xp``) and torch module (``t``); ``operand`` casts an operand to the
    format, ``round`` rounds exact values (with their remainder class, or under
    stochastic rounding their ``resid``) by the one rounding routine, ``finish``
    refuses invalid results of formats without NaN.  ``rng``: a ``torch.Generator``
    on the device, an int seed (a new Generator on the device seeded with it) or None
    (torch's default generator), made once per call: ``generator`` is what the
    operands' casts and every rounding of the call draw from, in turn.  Shared by
    ``floatfmt.arith.accumulate_device``."""

    def __init__(self, name: str, operands: list, fmt: Any, rounding: Any, overflow: Any,
                 ftz: Any, daz: Any, sr_bits: Any = None, rng: Any = None,
                 products: bool = True):
        self.name = f"floatfmt.{name}"
        self.device = check_tensors(self.name, operands)
        mode = resolve_mode(rounding)
        if mode not in STOCHASTIC and sr_bits is not None:
            raise ValueError("sr_bits applies to the stochastic roundings only")
        self.fmt: Format = get_format(fmt)
        self.ctx = _Options(self.fmt, rounding, overflow, bool(ftz), bool(daz))
        if products and not product_is_exact(self.fmt):
            raise self.no(f"the format {self.fmt.name} (its products do not fit float64)")
        tensor = next(x for x in operands if is_tensor(x))
        self.xp = namespace(tensor)
        self.t = self.xp.t
        #: stochastic rounding: exact results carry their ``resid``, not only the class
        self.fine = mode in STOCHASTIC
        self.sr_bits = sr_bits
        self.generator = self.xp.generator(rng, tensor) if self.fine else None

    def no(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"{self.name} on {getattr(self, 'device', 'this device')}: "
                                   f"{what} is not implemented on the device yet (numpy arrays "
                                   "and CPU tensors support it)")

    def operand(self, x: Any, what: str = "operand") -> Any:
        """x cast to fmt as a float64 tensor on the device (daz applied; NaN refused for
        formats without NaN, as ``ops.operand_values``)."""
        t, fmt, ctx = self.t, self.fmt, self.ctx
        if not is_tensor(x):
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise TypeError(f"{self.name}: operands mixed with tensors must be tensors or "
                                f"Python numbers, not {type(x).__name__}")
            if isinstance(x, int) and abs(x) > 2 ** 53:
                raise self.no("a Python int past 2**53 beside tensors")
            x = t.tensor(float(x), dtype=t.float64, device=self.device)
        v = cast(x, fmt, ctx.rounding, ctx.overflow, ctx.ftz, False, rng=self.generator,
                 sr_bits=self.sr_bits, dtype=t.float64).detach()
        if ctx.daz and fmt.kind == "float" and fmt.subnormals:
            tiny = (v.abs() < fmt.smallest_normal) & (v != 0)
            v = t.where(tiny, t.copysign(t.zeros_like(v), v), v)
        if (not fmt.has_nan or fmt.kind == "int") and bool(t.isnan(v).any()):
            raise ValueError(f"{fmt.name} has no NaN, but an {what} is NaN")
        return v

    def finish(self, r: Any, name: str) -> Any:
        fmt = self.fmt
        if (not fmt.has_nan or fmt.kind == "int") and bool(self.t.isnan(r).any()):
            raise ValueError(
                f"{name} in {fmt.name} has an invalid result (such as 0/0, Inf - Inf, 0 * Inf "
                f"or sqrt of a negative number) and {fmt.name} has no NaN to hold it")
        return r

    def round(self, v: Any, sticky: Any = None) -> Any:
        """Round the exact values v (truncated toward zero, with ``sticky``: a uint8
        class, or an int64 ``resid`` under stochastic rounding)."""
        c = self.ctx
        resid = None
        if sticky is not None and sticky.dtype == self.t.int64:
            sticky, resid = None, sticky
        return round_values(v, self.fmt, c.mode, c.policy, ftz=c.ftz, sticky=sticky,
                            resid=resid, rng=self.generator, sr_bits=self.sr_bits)

    def share(self, name: str, operands: list, fmt: Any, products: bool = True) -> DeviceCall:
        """A call with the same options in another format, drawing from the same
        generator (the accumulator's and output's roundings of a reduction)."""
        c = self.ctx
        other = DeviceCall(name, operands, fmt, c.rounding, c.overflow, c.ftz, c.daz,
                           self.sr_bits, products=products)
        other.generator = self.generator
        other.fine = self.fine
        return other


def _exact_sum(x: Any, y: Any, t: Any, fine: bool = False) -> tuple[Any, Any]:
    """Exact x + y as (float64 truncated toward zero, uint8 remainder class 0..3) with
    TwoSum; the class is measured in the step above |s| (the sum lies beyond s) or
    below it (the sum lies short of s, where t is the next float64 toward zero).
    ``fine``: the int64 ``resid`` instead of the class (|e| scaled exactly to 2**54
    units of that step; ``exact_device.resid_from``).  Finite operands whose float64
    sum overflows (fp64): +-Inf with class 3 (resid ``R_PAST``), a finite value past
    the float64 range, as ``eft.exact_sum``."""
    s = x + y
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    nz = t.isfinite(s) & (s != 0) & (e != 0)
    zero = t.zeros((), dtype=s.dtype, device=s.device)
    e = t.where(nz, e, zero)
    a, ae2 = s.abs(), 2.0 * e.abs()
    beyond = t.sign(e) == t.sign(s)
    up = t.nextafter(a, t.full_like(a, math.inf)) - a
    up = t.where(t.isinf(up), 2.0 ** 971, up)  # the step above the largest double
    c_beyond = t.where(ae2 < up, 1, 2)
    tz = t.nextafter(s, zero)
    d = a - tz.abs()
    c_short = t.where(ae2 > d, 1, t.where(ae2 < d, 3, 2))
    v = t.where(nz & ~beyond, tz, s)
    if fine:
        unit = t.where(beyond, up, d)
        one = t.where(nz, unit, t.ones_like(unit))  # a power of two, exactly
        W = namespace(s).ldexp(e.abs(), 54 - (t.frexp(one)[1].to(t.int64) - 1))
        R = resid_from(W, t.zeros_like(W), ~beyond)
        R = t.where(nz, R, t.zeros_like(R))
        return v, t.where(_past(s, x, y, t), R_PAST, R)
    cls = t.where(nz, t.where(beyond, c_beyond, c_short), 0).to(t.uint8)
    return v, t.where(_past(s, x, y, t), 3, cls).to(t.uint8)


def _past(s: Any, x: Any, y: Any, t: Any) -> Any:
    """Where finite x + y has an infinite float64 sum s (past the float64 range)."""
    return t.isinf(s) & t.isfinite(x) & t.isfinite(y)


def _zero_signs(v: Any, cls: Any, x: Any, y: Any, mode: str, t: Any) -> Any:
    """IEEE signs of exact zero sums x + y (see the module docstring)."""
    exact_zero = (v == 0) & (cls == 0)
    xs, ys = t.signbit(x), t.signbit(y)
    if mode != "down":
        neg = (x == 0) & (y == 0) & xs & ys
    else:
        neg = ~(((x == 0) & ~xs) & ((y == 0) & ~ys))
    signed = t.where(neg, -0.0, 0.0).to(v.dtype)
    return t.where(exact_zero, signed, v)


def rounded_sum(c: DeviceCall, p: Any, z: Any, name: str) -> Any:
    """p + z (broadcast float64 tensors) rounded once to ``c``'s format: the exact sum
    (TwoSum, as ``floatfmt.arith.accumulate``'s step), IEEE zero signs, invalid results
    refused for formats without NaN (``name`` in the message)."""
    p, z = c.t.broadcast_tensors(p, z)
    v, cls = _exact_sum(p, z, c.t, c.fine)
    c.finish(v, name)
    v = _zero_signs(v, cls, p, z, c.ctx.mode, c.t)
    return c.round(v, cls)


def device_add(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
               ftz: Any = False, daz: Any = False, rng: Any = None, *, sr_bits: Any = None) -> Any:
    """``ff.add`` on the device (see the module docstring)."""
    c = DeviceCall("add", [a, b], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    return rounded_sum(c, c.operand(a), c.operand(b), "add")


def device_sub(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
               ftz: Any = False, daz: Any = False, rng: Any = None, *, sr_bits: Any = None) -> Any:
    """``ff.sub`` on the device: x + (-y), exactly as the numpy path."""
    c = DeviceCall("sub", [a, b], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    return rounded_sum(c, c.operand(a), -c.operand(b), "sub")


def device_mul(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
               ftz: Any = False, daz: Any = False, rng: Any = None, *, sr_bits: Any = None) -> Any:
    """``ff.mul`` on the device: the float64 product is exact for formats up to fp32;
    wider ones (fp64) take ``product_parts``."""
    c = DeviceCall("mul", [a, b], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    x, y = c.t.broadcast_tensors(c.operand(a), c.operand(b))
    if product_is_exact(c.fmt):
        return c.round(c.finish(x * y, "mul"))
    v, cls = product_parts(x, y, c.ctx.mode, c.fine)
    return c.round(c.finish(v, "mul"), cls)


def device_fma(a: Any, b: Any, cc: Any, fmt: Any, rounding: Any = "nearest_even",
               overflow: Any = None, ftz: Any = False, daz: Any = False, rng: Any = None, *,
               sr_bits: Any = None) -> Any:
    """``ff.fma`` on the device: the exact product plus c, rounded once.  (Infinite or NaN
    operands: IEEE's a * b + c, which float64 computes exactly for these formats.)
    Formats wider than fp32 (fp64): ``fma_parts``."""
    c = DeviceCall("fma", [a, b, cc], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    t = c.t
    x, y, z = t.broadcast_tensors(c.operand(a), c.operand(b), c.operand(cc))
    if product_is_exact(c.fmt):
        # the float64 product is exact (a zero one with IEEE's sign; Inf * 0 is NaN)
        return rounded_sum(c, x * y, z, "fma")
    v, cls = fma_parts(x, y, z, c.ctx.mode, c.fine)
    return c.round(c.finish(v, "fma"), cls)


def product_parts(x: Any, y: Any, mode: str, fine: bool = False) -> tuple[Any, Any]:
    """Exact x * y of float64 tensors of any magnitude as (t, class or resid):
    ``exact_products`` where both are finite and nonzero; elsewhere IEEE's product,
    which is exact (a signed zero, +-Inf, NaN)."""
    t = namespace(x).t
    x, y = t.broadcast_tensors(x, y)
    fin = t.isfinite(x) & t.isfinite(y) & (x != 0) & (y != 0)
    one = t.ones((), dtype=x.dtype, device=x.device)
    v, cls = exact_products(t.where(fin, x, one), t.where(fin, y, one), None, mode, fine)
    return t.where(fin, v, x * y), t.where(fin, cls, t.zeros_like(cls))


def fma_parts(x: Any, y: Any, z: Any, mode: str, fine: bool = False) -> tuple[Any, Any]:
    """Exact x * y + z of float64 tensors of any magnitude as (t, class or resid):
    ``exact_products`` where x y is finite and nonzero and z finite; a finite nonzero
    product plus an infinite or NaN z gives z; a zero or non-finite product (exact in
    float64) plus z is the exact sum of the two, with IEEE's zero signs."""
    t = namespace(x).t
    x, y, z = t.broadcast_tensors(x, y, z)
    fin = t.isfinite(x) & t.isfinite(y) & (x != 0) & (y != 0)
    one = t.ones((), dtype=x.dtype, device=x.device)
    xs, ys = t.where(fin, x, one), t.where(fin, y, one)
    pz = t.where(fin, t.zeros_like(x), x * y)
    v0, c0 = _exact_sum(pz, z, t, fine)
    v0 = _zero_signs(v0, c0, x * y, z, mode, t)
    zf = t.isfinite(z)
    v1, c1 = exact_products(xs, ys, t.where(fin & zf, z, t.zeros_like(z)), mode, fine)
    v = t.where(fin, t.where(zf, v1, z), v0)
    return v, t.where(fin, t.where(zf, c1, t.zeros_like(c1)), c0)


def _placed(q: Any, side: Any, inexact: Any, t: Any) -> tuple[Any, Any]:
    """(t, class) from a float64 result q and the side of it where the exact value lies
    (``side`` > 0: beyond q, away from zero): beyond, t = q and class 1; short, t is the
    next float64 toward zero and class 3 (a quotient or root of float64 numbers is never
    a float64 midpoint, so these are the only classes)."""
    zero = t.zeros((), dtype=q.dtype, device=q.device)
    beyond = side > 0
    v = t.where(inexact & ~beyond, t.nextafter(q, zero), q)
    cls = t.where(inexact, t.where(beyond, 1, 3), 0).to(t.uint8)
    return v, cls


def quotient_sticky(x: Any, y: Any, fine: bool = False) -> tuple[Any, Any]:
    """Exact x / y of float64 tensors as (t, class), t truncated toward zero (as
    ``eft.exact_quotient``, for |x|, |y|, |x / y| within 2**-900 .. 2**900): q = fl(x / y)
    and the sign of the exact residual x - q y (TwoProd) place the quotient.

    ``fine``: (t, resid), the remainder |r / y| taken as w + delta, w = fl(|r| / |y|),
    the sign of delta from the exact residual |r| - w |y| (TwoProd again), scaled to
    2**54 units of the step beyond or below q (``exact_device.resid_from``)."""
    xp = namespace(x)
    t = xp.t
    q = x / y
    ok = t.isfinite(q) & (q != 0) & t.isfinite(x) & t.isfinite(y)
    zero = t.zeros((), dtype=q.dtype, device=q.device)
    qs, ys = t.where(ok, q, zero), t.where(ok, y, zero)
    p = qs * ys
    r = (t.where(ok, x, zero) - p) - two_prod_error(qs, ys, p)
    side, inexact = t.sign(r) * t.sign(y) * t.sign(q), ok & (r != 0)
    v, cls = _placed(q, side, inexact, t)
    if not fine:
        return v, cls
    one = t.ones((), dtype=q.dtype, device=q.device)
    ar, ab = r.abs(), t.where(inexact, ys.abs(), one)
    w = ar / ab
    p2 = w * ab
    d_sign = t.sign((ar - p2) - two_prod_error(w, ab, p2))
    qa = q.abs()
    beyond = side > 0
    unit = t.where(beyond, t.nextafter(qa, t.full_like(qa, math.inf)) - qa, qa - v.abs())
    unit = t.where(inexact, unit, one)  # a power of two
    W = xp.ldexp(w, 54 - (t.frexp(unit)[1].to(t.int64) - 1))
    R = resid_from(W, d_sign, ~beyond)
    return v, t.where(inexact, R, t.zeros_like(R))


def root_sticky(x: Any, fine: bool = False, slack: int = 0) -> tuple[Any, Any]:
    """Exact sqrt(x) of a float64 tensor as (t, class) (as ``eft.exact_sqrt``, for x
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
    t = xp.t
    ok = t.isfinite(x) & (x > 0)
    zero = t.zeros((), dtype=x.dtype, device=x.device)
    inf = t.full((), math.inf, dtype=x.dtype, device=x.device)
    xs = t.where(ok, x, zero)

    def resid(v: Any) -> Any:
        p = v * v
        return (xs - p) - two_prod_error(v, v, p)

    q = t.sqrt(xs)
    r = resid(q)
    low = t.where(r < 0, t.nextafter(q, zero), q)  # at most one ulp below the root
    up = t.nextafter(low, inf)
    r_up = resid(up)
    tt = t.where(r_up >= 0, up, low)
    rt = t.where(r_up >= 0, r_up, resid(low))
    ulp = t.nextafter(tt, inf) - tt
    v = t.where(ok, tt, t.sqrt(x))
    if fine:
        return v, _root_resid(xs, tt, rt, ulp, ok & (rt != 0), slack, xp)
    cls = t.where(ok & (rt != 0), t.where(rt > tt * ulp, 3, 1), 0).to(t.uint8)
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
    terms summed by ``exact_device.exact_sum``)."""
    t = xp.t
    if not 0 <= g <= 52:
        raise ValueError(f"slack must be 0..52 for roots on a device, not {g}")
    h = g if g >= 6 else 1
    one = t.ones((), dtype=tt.dtype, device=tt.device)
    eu = t.frexp(t.where(inexact, ulp, one))[1].to(t.int64) - 1  # ulp = 2**eu
    W = xp.ldexp(rt / t.where(inexact, 2.0 * tt, one), 54 - eu)  # estimate, error < 16 units
    cell, top = float(1 << h), float((1 << (54 - h)) - 1)
    lo = t.floor((W - 16.0) / cell).clamp(0.0, top)
    hi = t.floor((W + 16.0) / cell).clamp(0.0, top)
    sel = inexact & (lo < hi)  # any shape: boolean indexing flattens alike
    if bool(sel.any()):
        L, H = lo[sel], hi[sel]
        xu, tu, eu_u = xs[sel], tt[sel], eu[sel]
        while True:
            todo = L < H
            if not bool(todo.any()):
                break
            M = L + t.floor((H - L + 1.0) / 2.0)  # exact: H - L is small
            above = _root_above(xu, tu, xp.ldexp(M, h + eu_u - 54), t)
            L = t.where(todo & above, M, L)
            H = t.where(todo & ~above, M - 1.0, H)
        lo[sel] = L
    R = (lo.to(t.int64) << h) + (1 << (h - 1))
    return t.where(inexact, R, t.zeros_like(R))


def _root_above(x: Any, r: Any, delta: Any, t: Any) -> Any:
    """Whether sqrt(x) > r + delta (float64 tensors; r, delta >= 0 and r + delta below the
    root's float64 successor; its square never equals x here): the sign of the exact
    x - r r - 2 r delta - delta delta, each product as TwoProd's two terms."""
    d2 = 2.0 * delta
    p1, p2, p3 = r * r, r * d2, delta * delta
    terms = t.stack([x, -p1, -two_prod_error(r, r, p1), -p2, -two_prod_error(r, d2, p2),
                     -p3, -two_prod_error(delta, delta, p3)])
    return exact_sum(terms, "nearest_even")[0] > 0


def device_div(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
               ftz: Any = False, daz: Any = False, rng: Any = None, *, sr_bits: Any = None) -> Any:
    """``ff.div`` on the device (``quotient_sticky``); x / 0 is a signed Inf, 0 / 0 and
    Inf / Inf NaN."""
    c = DeviceCall("div", [a, b], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    x, y = c.t.broadcast_tensors(c.operand(a), c.operand(b))
    if product_is_exact(c.fmt):
        v, cls = quotient_sticky(x, y, c.fine)
    else:
        v, cls = wide_quotient(x, y, c.fine)
    c.finish(v, "div")
    return c.round(v, cls)


def device_sqrt(a: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
                ftz: Any = False, daz: Any = False, rng: Any = None, *,
                sr_bits: Any = None) -> Any:
    """``ff.sqrt`` on the device (``root_sticky``); sqrt(-0) = -0, the root of a
    negative number is NaN."""
    c = DeviceCall("sqrt", [a], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    g = resid_slack(c.fmt) if c.fine else 0
    if product_is_exact(c.fmt):
        v, cls = root_sticky(c.operand(a), c.fine, g)
    else:
        v, cls = wide_root(c.operand(a), c.fine, g)
    c.finish(v, "sqrt")
    return c.round(v, cls)


def wide_root(x: Any, fine: bool = False, slack: int = 0) -> tuple[Any, Any]:
    """Exact sqrt(x) of a float64 tensor of any magnitude as (t, class), or with ``fine``
    (t, resid) as ``root_sticky`` gives it for ``slack``: x = m 2**(2k) with m in
    [1/2, 2) (frexp, one exponent moved to m when odd), ``root_sticky(m)`` scaled back by
    2**k (exact: a root of a float64 is a normal float64; the class and the resid are
    relative to the ulp, which scales alike)."""
    xp = namespace(x)
    t = xp.t
    ok = t.isfinite(x) & (x > 0)
    m, e = t.frexp(t.where(ok, x, t.ones((), dtype=x.dtype, device=x.device)))
    e = e.to(t.int64)
    odd = (e & 1) == 1
    tt, cls = root_sticky(t.where(odd, 2.0 * m, m), fine, slack)
    v = xp.ldexp(tt, t.div(e - odd.to(t.int64), 2, rounding_mode="floor"))
    return t.where(ok, v, t.sqrt(x)), t.where(ok, cls, t.zeros_like(cls))


def wide_quotient(x: Any, y: Any, fine: bool = False) -> tuple[Any, Any]:
    """Exact x / y of float64 tensors of any magnitude as (t, class), or (t, resid) with
    ``fine``: the quotient q' of the frexp mantissas (``quotient_sticky``, in range)
    scaled by 2**(ex - ey); a result past the float64 range is +-Inf with class 3; a
    subnormal one is truncated to a multiple of 2**-1074 (k = log2(2**-1074 / ulp) bits
    of q''s 53-bit integer dropped), its remainder being those bits D plus q''s own
    remainder rho (never a multiple of the unit when nonzero): class from D against
    half the unit, resid 2**(54 - k) D + (rho's resid >> k) (k <= 54) or D >> (k - 54),
    made odd when inexact.  Zeros, Inf and NaN: IEEE's x / y, exact."""
    xp = namespace(x)
    t = xp.t
    x, y = t.broadcast_tensors(x, y)
    ok = t.isfinite(x) & t.isfinite(y) & (x != 0) & (y != 0)
    one = t.ones((), dtype=x.dtype, device=x.device)
    mx, ex = t.frexp(t.where(ok, x, one))
    my, ey = t.frexp(t.where(ok, y, one))
    tq, cq = quotient_sticky(mx, my, fine)
    cq = cq.to(t.int64)
    E = (ex - ey).to(t.int64)
    eq = t.frexp(tq)[1].to(t.int64) - 1  # floor(log2 |tq|)
    top = E + eq
    v = xp.ldexp(tq, E)  # exact in the normal range
    past = top >= 1024
    v = t.where(past, t.copysign(t.full_like(v, math.inf), tq), v)
    cls = t.where(past, R_PAST if fine else 3, cq)
    sub = ok & (top < -1022)
    if bool(sub.any()):  # subnormal quotients (rare): on their own
        v[sub], cls[sub] = _subnormal_quotients(tq[sub], cq[sub], top[sub], eq[sub], fine, xp)
    v = t.where(ok, v, x / y)
    cls = t.where(ok, cls, t.zeros_like(cls))
    return v, cls if fine else cls.to(t.uint8)


def _subnormal_quotients(tq: Any, cq: Any, top: Any, eq: Any, fine: bool,
                         xp: Any) -> tuple[Any, Any]:
    """``wide_quotient``'s subnormal results: q' (``tq``, remainder ``cq``) of exponent
    ``top`` < -1022 truncated to a multiple of 2**-1074, with the class or resid of the
    dropped bits D and q''s own remainder (see ``wide_quotient``)."""
    t = xp.t
    k_all = -1022 - top  # bits of q' below the subnormal unit (>= 1)
    k = k_all.clamp(min=1, max=62)  # for shifts of the 53-bit integer (62: all of it)
    Mi = xp.ldexp(tq.abs(), 52 - eq).to(t.int64)  # q' as a 53-bit integer
    K = Mi >> k
    D = Mi - (K << k)
    vs = t.copysign(xp.ldexp(K.to(t.float64), t.full_like(K, -1074)), tq)
    if fine:
        j = (k_all - 54).clamp(min=0, max=62)
        low = t.where(k <= 54, (D << (54 - k).clamp(min=0)) + (cq >> k), D >> j)
        lost = t.where(k <= 54, cq != 0, ((D & ((1 << j) - 1)) != 0) | (cq != 0))
        return vs, low | lost.to(t.int64)
    half = 1 << (k - 1)
    inexact = cq != 0
    return vs, t.where((D == 0) & ~inexact, 0, t.where(D < half, 1, t.where(
        (D == half) & ~inexact, 2, 3)))


def _unary(name: str, a: Any, fmt: Any, rounding: Any, overflow: Any, ftz: Any, daz: Any,
           negate: bool, rng: Any = None) -> Any:
    c = DeviceCall(name, [a], fmt, rounding, overflow, ftz, daz, rng=rng, products=False)
    x = c.operand(a)
    v = -x if negate else x.abs()
    return c.round(c.finish(v, name))


def device_neg(a: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
               ftz: Any = False, daz: Any = False, rng: Any = None) -> Any:
    """``ff.neg`` on the device."""
    return _unary("neg", a, fmt, rounding, overflow, ftz, daz, True, rng)


def device_abs(a: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
               ftz: Any = False, daz: Any = False, rng: Any = None) -> Any:
    """``ff.abs`` on the device."""
    return _unary("abs", a, fmt, rounding, overflow, ftz, daz, False, rng)


def _minmax(name: str, a: Any, b: Any, fmt: Any, rounding: Any, overflow: Any, ftz: Any,
            daz: Any, is_min: bool, rng: Any = None) -> Any:
    c = DeviceCall(name, [a, b], fmt, rounding, overflow, ftz, daz, rng=rng, products=False)
    t = c.t
    x, y = t.broadcast_tensors(c.operand(a), c.operand(b))
    r = t.where(x < y, x, y) if is_min else t.where(x > y, x, y)
    both_zero = (x == 0) & (y == 0)
    sx, sy = t.signbit(x), t.signbit(y)
    negz = (sx | sy) if is_min else (sx & sy)
    r = t.where(both_zero, t.where(negz, -0.0, 0.0).to(r.dtype), r)
    return t.where(t.isnan(x) | t.isnan(y), math.nan, r)


def device_minimum(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even",
                   overflow: Any = None, ftz: Any = False, daz: Any = False,
                   rng: Any = None) -> Any:
    """``ff.minimum`` on the device (IEEE 754-2019 minimum: NaN wins, -0 < +0)."""
    return _minmax("minimum", a, b, fmt, rounding, overflow, ftz, daz, True, rng)


def device_maximum(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even",
                   overflow: Any = None, ftz: Any = False, daz: Any = False,
                   rng: Any = None) -> Any:
    """``ff.maximum`` on the device (NaN wins, +0 > -0)."""
    return _minmax("maximum", a, b, fmt, rounding, overflow, ftz, daz, False, rng)
