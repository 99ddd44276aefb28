"""Elementwise arithmetic in a format (``FPArray``, an array that lives in one, is in ``fparray``).

Every operation here follows one rule: the operands are first cast to ``fmt``
(with the same ``rounding``, ``overflow``, ``ftz``, ``daz`` and ``rng``
options as ``ff.cast``); the *exact* result of the operation on those values
is then rounded once to ``fmt`` by the library's one rounding routine.  Where
float64 cannot hold the exact result, it is handed over as a float64 truncated
toward zero plus a remainder class (see ``floatfmt.arith.eft``), so ``fma`` rounds
once from the exact ``a*b + c`` and ``div`` / ``sqrt`` are correctly rounded
in every mode.  This holds for every format, fp64 included.

Special values follow IEEE 754: ``Inf - Inf``, ``0 * Inf``, ``0 / 0``,
``Inf / Inf`` and ``sqrt`` of a negative number give NaN; ``x / 0`` gives a
signed Inf; an exact zero sum of nonzero terms (or of ``+0`` and ``-0``) is
``+0`` in every mode but ``down``, where it is ``-0``.  Formats without Inf
treat an infinite result as an overflow and apply their overflow policy
(``fp8_e4m3``: NaN; ``fp6`` / ``fp4``: saturate to +-max).  Formats without
NaN (``fp6_*``, ``fp4_e2m1``, integers) cannot hold the result of an invalid
operation: those raise ``ValueError`` (as does NaN input), never a silent
wrong number.

``daz`` here means: operands that are subnormal in ``fmt`` count as zero.

Scalars in give Python floats out; arrays broadcast (numpy rules) and give
float64 arrays whose values are in ``fmt``.  torch tensors give float64 tensors on
their device (a 0-d tensor for 0-d operands); these results are not differentiable.

One rule, two kernels, chosen in one place (``_kernel``):

* the rule itself, written once over the array namespace (``add_rule``, ``mul_rule``
  ... with ``OpCall``; the exact results from ``floatfmt.arith.residuals`` and
  ``floatfmt.arith.limbs``): what tensors on a device (CUDA, or CPU under
  ``floatfmt.backend.dispatch.force_namespace``) run, with torch ops there, every
  format and rounding mode, stochastic ones included (random numbers from a
  ``torch.Generator`` on the device or an int seed: the operands' casts draw first,
  operand by operand, then the result's rounding);
* the numpy kernels (``floatfmt.arith.ops_fast``: chunked, in place, on threads,
  exact slow paths through ``fractions.Fraction``): what numpy arrays, Python numbers,
  ``FPArray`` and CPU tensors (numpy views of their memory) run.

tests/test_ops_fast.py proves the two equal bit for bit on numpy arrays;
tests/test_torch_ops.py on CPU tensors.  Under stochastic rounding the two draw from
different generators (numpy's, torch's), so a seed gives other bits; the rule is the
same (tests/test_torch_sr.py).

>>> add(1.0, 0.0001, "fp16")
1.0
>>> add(1.0, 0.0001, "fp32") != 1.0
True
>>> mul(3.0, 1/3, "bf16"), div(1.0, 3.0, "bf16"), sqrt(2.0, "fp8_e4m3")
(1.0, 0.333984375, 1.375)
>>> fma(1.0 + 2**-10, 1.0 - 2**-10, -1.0, "fp16")   # exact -2**-20, no rounding of a*b first
-9.5367431640625e-07
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from . import ops_fast
from .eft import product_is_exact, resid_slack
from .ops_fast import InFormat, check_invalid, make_ctx, operand_values, zero_signs
from .residuals import (fma_parts, product_parts, quotient_sticky, root_sticky, sum_sticky,
                        sum_zero_signs, wide_quotient, wide_root)
from ..backend.dispatch import check_tensors, tensor_entry
from ..backend.namespace import is_tensor, namespace
from ..core.cast import cast
from ..core.formats import Format, FormatLike, get_format
from ..core.intake import holds
from ..core.modes import make_rng
from ..core.rounding import STOCHASTIC, resolve_mode, resolve_overflow, round_values
from ..core.types import Overflow, RngLike, Values

# the public entries; the rules over the namespace (``add_rule`` ..., ``OpCall``,
# ``rounded_sum``) are the library's building blocks, imported by name where they serve
__all__ = ["add", "sub", "mul", "div", "fma", "sqrt", "neg", "abs", "minimum", "maximum",
           "promote_formats"]

# re-exported for ``accumulate`` and ``fparray`` (the numpy path's context and operand cast)
_NUMPY_PATH = (InFormat, check_invalid, make_ctx, operand_values, zero_signs)


def _kernel(fast: Callable[..., Any], rule: Callable[..., Any], *operands: Any) -> Callable[..., Any]:
    """The one place where an operation's kernel is chosen: the rule written over the
    namespace (``rule``) when an operand is a tensor (``floatfmt.backend.dispatch`` hands
    tensors over only when they are computed on their device), else the numpy kernel of
    ``floatfmt.arith.ops_fast`` (``fast``)."""
    return rule if any(is_tensor(x) for x in operands) else fast


# ---------------------------------------------------------------------------------------------

@tensor_entry('add', ('a', 'b'), portable=True)
def add(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """``a + b`` in ``fmt``: operands cast to ``fmt``, the exact sum rounded once.

    >>> add(1.0, 0.0001, "fp16"), add(1.0, 0.0001, "fp32")
    (1.0, 1.000100016593933)
    >>> add(1.0, -1.0, "fp16"), add(1.0, -1.0, "fp16", rounding="down")
    (0.0, -0.0)
    """
    return _kernel(ops_fast.add, add_rule, a, b)(a, b, fmt, rounding, overflow, ftz, daz, rng,
                                                  sr_bits=sr_bits)


@tensor_entry('sub', ('a', 'b'), portable=True)
def sub(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """``a - b`` in ``fmt`` (the exact difference rounded once).

    >>> sub(1.0, 2**-12, "fp16"), sub(1.0, 2**-12, "fp16", rounding="down")
    (1.0, 0.99951171875)
    """
    return _kernel(ops_fast.sub, sub_rule, a, b)(a, b, fmt, rounding, overflow, ftz, daz, rng,
                                                  sr_bits=sr_bits)


@tensor_entry('mul', ('a', 'b'), portable=True)
def mul(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """``a * b`` in ``fmt`` (the exact product rounded once; 0 * Inf is NaN).

    >>> mul(0.1, 0.1, "bf16"), mul(300.0, 300.0, "fp16")
    (0.010009765625, inf)
    """
    return _kernel(ops_fast.mul, mul_rule, a, b)(a, b, fmt, rounding, overflow, ftz, daz, rng,
                                                  sr_bits=sr_bits)


@tensor_entry('div', ('a', 'b'), portable=True)
def div(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """``a / b`` in ``fmt``, correctly rounded in every mode.

    The float64 quotient and the exact sign of its residual ``a - q*b``
    (computed error-free) locate the true quotient, so it is rounded once.
    ``x / 0`` is a signed Inf (then the format's overflow policy), ``0 / 0``
    and ``Inf / Inf`` are NaN.

    >>> div(1.0, 3.0, "fp16"), div(1.0, 3.0, "fp16", rounding="up"), div(-1.0, 0.0, "fp16")
    (0.333251953125, 0.33349609375, -inf)
    """
    return _kernel(ops_fast.div, div_rule, a, b)(a, b, fmt, rounding, overflow, ftz, daz, rng,
                                                  sr_bits=sr_bits)


@tensor_entry('sqrt', ('a',), portable=True)
def sqrt(a: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,
         ftz: bool = False, daz: bool = False, rng: RngLike = None, *, sr_bits: int | None = None) -> Values:
    """Square root in ``fmt``, correctly rounded in every mode; sqrt(-0) = -0,
    sqrt of a negative number is NaN.

    >>> sqrt(2.0, "bf16"), sqrt(2.0, "bf16", rounding="up"), sqrt(-0.0, "fp16")
    (1.4140625, 1.421875, -0.0)
    """
    return _kernel(ops_fast.sqrt, sqrt_rule, a)(a, fmt, rounding, overflow, ftz, daz, rng,
                                                 sr_bits=sr_bits)


@tensor_entry('fma', ('a', 'b', 'c'), portable=True)
def fma(a: Values, b: Values, c: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """Fused multiply-add ``a*b + c`` in ``fmt``: one rounding of the exact value.

    >>> a, b = 1 + 2**-10, 1 - 2**-10            # a*b = 1 - 2**-20, not an fp16 value
    >>> fma(a, b, -1.0, "fp16"), add(mul(a, b, "fp16"), -1.0, "fp16")
    (-9.5367431640625e-07, 0.0)
    """
    return _kernel(ops_fast.fma, fma_rule, a, b, c)(a, b, c, fmt, rounding, overflow, ftz, daz, rng,
                                                     sr_bits=sr_bits)


@tensor_entry('neg', ('a',), portable=True)
def neg(a: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,
        ftz: bool = False, daz: bool = False, rng: RngLike = None) -> Values:
    """``-a`` in ``fmt`` (exact for signed float formats; int8 ``-(-128)`` follows the
    overflow policy).

    >>> neg(0.1, "bf16"), neg(-128, "int8")
    (-0.10009765625, 127.0)
    """
    return _kernel(ops_fast.neg, neg_rule, a)(a, fmt, rounding, overflow, ftz, daz, rng)


@tensor_entry('abs', ('a',), portable=True)
def abs(a: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,  # noqa: A001
        ftz: bool = False, daz: bool = False, rng: RngLike = None) -> Values:
    """``|a|`` in ``fmt``.

    >>> abs(-0.1, "fp16")
    0.0999755859375
    """
    return _kernel(ops_fast.abs, abs_rule, a)(a, fmt, rounding, overflow, ftz, daz, rng)


@tensor_entry('minimum', ('a', 'b'), portable=True)
def minimum(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
            overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None) -> Values:
    """Elementwise minimum of ``a`` and ``b`` cast to ``fmt`` (IEEE 754-2019
    ``minimum``: NaN if either is NaN, and -0 < +0).

    >>> minimum(0.0, -0.0, "fp16"), minimum(0.1, 0.2, "bf16")
    (-0.0, 0.10009765625)
    """
    return _kernel(ops_fast.minimum, minimum_rule, a, b)(a, b, fmt, rounding, overflow, ftz,
                                                          daz, rng)


@tensor_entry('maximum', ('a', 'b'), portable=True)
def maximum(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
            overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None) -> Values:
    """Elementwise maximum of ``a`` and ``b`` cast to ``fmt`` (NaN if either is NaN,
    +0 > -0).

    >>> maximum(0.0, -0.0, "fp16"), maximum([1, 5], 3, "fp8_e4m3")
    (0.0, array([3., 5.]))
    """
    return _kernel(ops_fast.maximum, maximum_rule, a, b)(a, b, fmt, rounding, overflow, ftz,
                                                          daz, rng)


# ---------------------------------------------------------------- the rule, over the namespace
class _Options:
    """The resolved options of one call (as ``ops_fast.make_ctx`` resolves them)."""

    def __init__(self, fmt: Format, rounding: Any, overflow: Any, ftz: bool, daz: bool):
        self.rounding, self.overflow, self.ftz, self.daz = rounding, overflow, ftz, daz
        self.mode = resolve_mode(rounding)
        self.policy = resolve_overflow(overflow, fmt)


class OpCall:
    """One call of a rule written over the namespace: its name, device (None for numpy
    arrays), resolved options (``ctx``), format (``fmt``), namespace (``xp``; ``t`` is the
    torch module for tensors, else None); ``operand`` casts an operand to the format,
    ``round`` rounds exact values (with their remainder class, or under stochastic
    rounding their ``resid``) by the one rounding routine, ``finish`` refuses invalid
    results of formats without NaN.  ``rng``: for tensors a ``torch.Generator`` on the
    device, an int seed (a new Generator on the device seeded with it) or None (torch's
    default generator); for numpy arrays a numpy Generator, a seed or None; made once
    per call: ``generator`` is what the operands' casts and every rounding of the call
    draw from, in turn.  Shared by the tensor reductions and products."""

    def __init__(self, name: str, operands: list, fmt: Any, rounding: Any, overflow: Any,
                 ftz: Any, daz: Any, sr_bits: Any = None, rng: Any = None,
                 products: bool = True):
        self.name = f"floatfmt.{name}"
        tensors = [x for x in operands if is_tensor(x)]
        self.device = check_tensors(self.name, operands) if tensors else None
        mode = resolve_mode(rounding)
        if mode not in STOCHASTIC and sr_bits is not None:
            raise ValueError("sr_bits applies to the stochastic roundings only")
        self.fmt: Format = get_format(fmt)
        self.ctx = _Options(self.fmt, rounding, overflow, bool(ftz), bool(daz))
        if products and not product_is_exact(self.fmt):
            raise self.no(f"the format {self.fmt.name} (its products do not fit float64)")
        like = tensors[0] if tensors else next(
            (x for x in operands if isinstance(x, np.ndarray)), np.zeros(()))
        self.like = like
        self.xp = namespace(like)
        self.t: Any = getattr(self.xp, "t", None)
        #: stochastic rounding: exact results carry their ``resid``, not only the class
        self.fine = mode in STOCHASTIC
        self.sr_bits = sr_bits
        self.generator = (None if not self.fine else self.xp.generator(rng, like) if tensors
                          else make_rng(rng))

    def no(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"{self.name} on {getattr(self, 'device', 'this device')}: "
                                   f"{what} is not implemented on the device yet (numpy arrays "
                                   "and CPU tensors support it)")

    def operand(self, x: Any, what: str = "operand") -> Any:
        """x cast to fmt as a float64 array of the call's namespace (daz applied; NaN
        refused for formats without NaN, as ``ops_fast.operand_values``)."""
        xp, fmt, ctx = self.xp, self.fmt, self.ctx
        if not is_tensor(x) and not isinstance(x, np.ndarray):
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise TypeError(f"{self.name}: operands mixed with tensors must be tensors or "
                                f"Python numbers, not {type(x).__name__}")
            if isinstance(x, int) and not -2 ** 53 <= x <= 2 ** 53:  # (abs: ff.abs here)
                raise self.no("a Python int past 2**53 beside tensors")
            x = xp.asfloat(x, self.like)
        sr = resolve_mode(ctx.rounding) in STOCHASTIC  # cast refuses a generator it would ignore
        v = xp.detach(cast(x, fmt, ctx.rounding, ctx.overflow, ctx.ftz, False,
                           rng=self.generator if sr else None,
                           sr_bits=self.sr_bits if sr else None, dtype=xp.float64))
        if xp.name == "numpy":
            v = np.asarray(v, np.float64)  # (a 0-d result of cast is a Python float)
        if ctx.daz and fmt.kind == "float" and fmt.subnormals:
            tiny = (xp.abs(v) < fmt.smallest_normal) & (v != 0)
            v = xp.where(tiny, xp.copysign(0.0, v), v)
        if (not fmt.has_nan or fmt.kind == "int") and xp.any(xp.isnan(v)):
            raise ValueError(f"{fmt.name} has no NaN, but an {what} is NaN")
        return v

    def finish(self, r: Any, name: str) -> Any:
        fmt = self.fmt
        if (not fmt.has_nan or fmt.kind == "int") and self.xp.any(self.xp.isnan(r)):
            raise ValueError(
                f"{name} in {fmt.name} has an invalid result (such as 0/0, Inf - Inf, 0 * Inf "
                f"or sqrt of a negative number) and {fmt.name} has no NaN to hold it")
        return r

    def round(self, v: Any, sticky: Any = None) -> Any:
        """Round the exact values v (truncated toward zero, with ``sticky``: a uint8
        class, or an int64 ``resid`` under stochastic rounding)."""
        c = self.ctx
        resid = None
        if sticky is not None and self.xp.is_int64(sticky):
            sticky, resid = None, sticky
        return round_values(v, self.fmt, c.mode, c.policy, ftz=c.ftz, sticky=sticky,
                            resid=resid, rng=self.generator, sr_bits=self.sr_bits)

    def share(self, name: str, operands: list, fmt: Any, products: bool = True) -> OpCall:
        """A call with the same options in another format, drawing from the same
        generator (the accumulator's and output's roundings of a reduction)."""
        c = self.ctx
        other = OpCall(name, operands, fmt, c.rounding, c.overflow, c.ftz, c.daz,
                       self.sr_bits, products=products)
        other.generator = self.generator
        other.fine = self.fine
        return other


def rounded_sum(c: OpCall, p: Any, z: Any, name: str) -> Any:
    """p + z (broadcast float64 arrays) rounded once to ``c``'s format: the exact sum
    (``residuals.sum_sticky``, as ``floatfmt.arith.accumulate``'s step), IEEE zero signs,
    invalid results refused for formats without NaN (``name`` in the message)."""
    p, z = c.xp.broadcast(p, z)
    v, cls = sum_sticky(p, z, c.fine)
    c.finish(v, name)
    v = sum_zero_signs(v, cls, p, z, c.ctx.mode)
    return c.round(v, cls)


def add_rule(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
             ftz: Any = False, daz: Any = False, rng: Any = None, *, sr_bits: Any = None) -> Any:
    """``add``'s rule over the namespace: the operands' exact sum (TwoSum, class or resid)
    rounded once."""
    c = OpCall("add", [a, b], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    return rounded_sum(c, c.operand(a), c.operand(b), "add")


def sub_rule(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
             ftz: Any = False, daz: Any = False, rng: Any = None, *, sr_bits: Any = None) -> Any:
    """``sub``'s rule over the namespace: x + (-y)."""
    c = OpCall("sub", [a, b], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    return rounded_sum(c, c.operand(a), -c.operand(b), "sub")


def mul_rule(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
             ftz: Any = False, daz: Any = False, rng: Any = None, *, sr_bits: Any = None) -> Any:
    """``mul``'s rule over the namespace: the float64 product is exact for formats up to
    fp32; wider ones (fp64) take ``residuals.product_parts`` (integer limbs)."""
    c = OpCall("mul", [a, b], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    x, y = c.xp.broadcast(c.operand(a), c.operand(b))
    if product_is_exact(c.fmt):
        with c.xp.quiet():
            return c.round(c.finish(x * y, "mul"))
    v, cls = product_parts(x, y, c.ctx.mode, c.fine)
    return c.round(c.finish(v, "mul"), cls)


def fma_rule(a: Any, b: Any, cc: Any, fmt: Any, rounding: Any = "nearest_even",
             overflow: Any = None, ftz: Any = False, daz: Any = False, rng: Any = None, *,
             sr_bits: Any = None) -> Any:
    """``fma``'s rule over the namespace: the exact product plus c, rounded once (infinite
    or NaN operands: IEEE's a * b + c, which float64 computes exactly for these formats);
    formats wider than fp32 (fp64): ``residuals.fma_parts``."""
    c = OpCall("fma", [a, b, cc], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    x, y, z = c.xp.broadcast(c.operand(a), c.operand(b), c.operand(cc))
    if product_is_exact(c.fmt):
        # the float64 product is exact (a zero one with IEEE's sign; Inf * 0 is NaN)
        with c.xp.quiet():
            p = x * y
        return rounded_sum(c, p, z, "fma")
    v, cls = fma_parts(x, y, z, c.ctx.mode, c.fine)
    return c.round(c.finish(v, "fma"), cls)


def div_rule(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
             ftz: Any = False, daz: Any = False, rng: Any = None, *, sr_bits: Any = None) -> Any:
    """``div``'s rule over the namespace (``residuals.quotient_sticky``; wider formats
    ``wide_quotient``); x / 0 is a signed Inf, 0 / 0 and Inf / Inf NaN."""
    c = OpCall("div", [a, b], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    x, y = c.xp.broadcast(c.operand(a), c.operand(b))
    if product_is_exact(c.fmt):
        v, cls = quotient_sticky(x, y, c.fine)
    else:
        v, cls = wide_quotient(x, y, c.fine)
    c.finish(v, "div")
    return c.round(v, cls)


def sqrt_rule(a: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
              ftz: Any = False, daz: Any = False, rng: Any = None, *,
              sr_bits: Any = None) -> Any:
    """``sqrt``'s rule over the namespace (``residuals.root_sticky``; wider formats
    ``wide_root``); sqrt(-0) = -0, the root of a negative number is NaN."""
    c = OpCall("sqrt", [a], fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    g = resid_slack(c.fmt) if c.fine else 0
    if product_is_exact(c.fmt):
        v, cls = root_sticky(c.operand(a), c.fine, g)
    else:
        v, cls = wide_root(c.operand(a), c.fine, g)
    c.finish(v, "sqrt")
    return c.round(v, cls)


def _unary_rule(name: str, a: Any, fmt: Any, rounding: Any, overflow: Any, ftz: Any, daz: Any,
                negate: bool, rng: Any = None) -> Any:
    c = OpCall(name, [a], fmt, rounding, overflow, ftz, daz, rng=rng, products=False)
    x = c.operand(a)
    v = -x if negate else c.xp.abs(x)
    return c.round(c.finish(v, name))


def neg_rule(a: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
             ftz: Any = False, daz: Any = False, rng: Any = None) -> Any:
    """``neg``'s rule over the namespace."""
    return _unary_rule("neg", a, fmt, rounding, overflow, ftz, daz, True, rng)


def abs_rule(a: Any, fmt: Any, rounding: Any = "nearest_even", overflow: Any = None,
             ftz: Any = False, daz: Any = False, rng: Any = None) -> Any:
    """``abs``'s rule over the namespace."""
    return _unary_rule("abs", a, fmt, rounding, overflow, ftz, daz, False, rng)


def _minmax_rule(name: str, a: Any, b: Any, fmt: Any, rounding: Any, overflow: Any, ftz: Any,
                 daz: Any, is_min: bool, rng: Any = None) -> Any:
    c = OpCall(name, [a, b], fmt, rounding, overflow, ftz, daz, rng=rng, products=False)
    xp = c.xp
    x, y = xp.broadcast(c.operand(a), c.operand(b))
    with xp.quiet():
        r = xp.where(x < y, x, y) if is_min else xp.where(x > y, x, y)
    both_zero = (x == 0) & (y == 0)
    sx, sy = xp.signbit(x), xp.signbit(y)
    negz = (sx | sy) if is_min else (sx & sy)
    r = xp.where(both_zero, xp.where(negz, -0.0, 0.0), r)
    return xp.where(xp.isnan(x) | xp.isnan(y), math.nan, r)


def minimum_rule(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even",
                 overflow: Any = None, ftz: Any = False, daz: Any = False,
                 rng: Any = None) -> Any:
    """``minimum``'s rule over the namespace (IEEE 754-2019 minimum: NaN wins, -0 < +0)."""
    return _minmax_rule("minimum", a, b, fmt, rounding, overflow, ftz, daz, True, rng)


def maximum_rule(a: Any, b: Any, fmt: Any, rounding: Any = "nearest_even",
                 overflow: Any = None, ftz: Any = False, daz: Any = False,
                 rng: Any = None) -> Any:
    """``maximum``'s rule over the namespace (NaN wins, +0 > -0)."""
    return _minmax_rule("maximum", a, b, fmt, rounding, overflow, ftz, daz, False, rng)



# ---------------------------------------------------------------------------------------------
_CHAIN = ("fp16", "bf16", "fp32", "fp64")


def promote_formats(f1, f2) -> Format:
    """Result format of an operation between arrays of two formats.

    Follows PyTorch's type promotion where PyTorch has a rule, and extends it
    the same way where it has none: if one format holds every value of the
    other, that one; otherwise the first of fp16, bf16, fp32, fp64 that holds
    both.

    ==========  ==========  ========
    left        right       result
    ==========  ==========  ========
    fp16        bf16        fp32      (as torch.float16 + torch.bfloat16)
    fp16        fp32        fp32
    bf16        fp32        fp32
    any         fp64        fp64
    tf32        fp16, bf16  tf32      (tf32 holds both)
    tf32        fp32        fp32
    fp8_e4m3    fp8_e5m2    fp16      (PyTorch refuses to mix fp8 types)
    fp8_*       fp16        fp16
    fp8_*       bf16        bf16
    fp4 / fp6   any float   the wider one
    int8        fp16        fp16      (as torch)
    int8        uint8       fp16      (torch gives int16, which floatfmt lacks)
    ==========  ==========  ========

    >>> promote_formats("bf16", "fp16").name, promote_formats("fp8_e4m3", "fp8_e5m2").name
    ('fp32', 'fp16')
    """
    f1, f2 = get_format(f1), get_format(f2)
    if f1 == f2:
        return f1
    if holds(f1, f2) or (f1.kind == f2.kind == "int" and _int_holds(f1, f2)):
        return f1
    if holds(f2, f1) or (f1.kind == f2.kind == "int" and _int_holds(f2, f1)):
        return f2
    for name in _CHAIN:
        g = get_format(name)
        if holds(g, f1) and holds(g, f2):
            return g
    raise TypeError(f"no format holds both {f1.name} and {f2.name}; cast one of them first")


def _int_holds(big: Format, small: Format) -> bool:
    return big.min <= small.min and big.max >= small.max
