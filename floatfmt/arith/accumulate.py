"""Sums, dot products and matrix products with a chosen accumulator and order.

``sum``, ``dot`` and ``matmul`` first cast their inputs to ``fmt``.  Products
of two values of any format up to fp32 are exact in float64; the accumulator
then holds values of ``acc_fmt`` and every accumulation step rounds its exact
result once (a fused multiply-add into the accumulator for dot products), in
the chosen ``order``:

``sequential``  acc = round(acc + t_k) for k = 0, 1, ... (acc starts as round(t_0))
``pairwise``    a binary tree: adjacent pairs are added level by level (an odd
                last element moves up a level unchanged)
``kahan``       compensated summation, every operation rounded to acc_fmt:
                y = t - c; s' = s + y; c = (s' - s) - y
``blocked``     sequential sums of ``block`` consecutive terms, then a
                sequential sum of the block sums (all in acc_fmt)
``exact``       the exact sum, rounded once (to out_fmt when given, else acc_fmt)

The result is a value of ``acc_fmt`` (``out_fmt`` when given: one more
rounding, as a GPU epilogue does).  Work is vectorised over every axis that
is not summed; the loop over the summed axis is a Python loop.

``dot(..., model="h100")`` and ``matmul(..., model=...)`` hand the products to
the tensor-core model of ``floatfmt.arith.matrixunit.tensorcore`` instead.

One implementation for numpy arrays and tensors: the functions here and the orders of
``floatfmt.arith.accumulate_orders`` are written over the array namespace
(``floatfmt.backend.namespace``) and serve numpy arrays, CPU tensors (viewed as numpy
arrays) and tensors of other devices (torch ops on the device: ``tensor_entry``'s
``portable``).  numpy arrays take the faster kernels of ``floatfmt.arith.accumulate_fast``
where one applies (``_fast`` is the one place that picks them; they give the
reference's bits); the exact sum of many terms has two named strategies
(``floatfmt.arith.accumulate_exact``).  ``matmul(..., model=...)`` on tensors outside
the numpy path runs the tensor-core steps of ``floatfmt.arith.matrixunit.gemm``.
Tensors in give float64 tensors out on their device (``sum`` over every axis: a 0-d
tensor), not differentiable.  Stochastic rounding of tensors outside the numpy path
draws from one ``torch.Generator`` per call (the operands' casts, then every rounding
in the order's sequence); numpy's from a numpy Generator (by parts of the output,
``threads.block_rng``), so a seed gives other bits; the law is the same
(tests/test_torch_sr.py).

For formats whose products do not fit float64 (fp64 and custom formats with
more than 26 significand bits) ``sequential`` uses an exact fused
multiply-add per step and ``exact`` the exact sum of the products (numpy: rational
arithmetic; tensors: integer limbs); the other orders first round each product to
acc_fmt.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from . import accumulate_fast, eft
from ..core import flags as fpflags
from ..backend.dispatch import tensor_entry
from ..backend.namespace import NUMPY, namespace_of
from ..core.formats import FormatLike
from ..core.names import unknown_name
from ..core.types import Overflow, RngLike, Values
from ..core.rounding import STOCHASTIC, make_rng, resolve_mode
from .accumulate_exact import exact_dot_terms
from .accumulate_orders import Calls, Rounder, calls, kahan, reduce_terms, seq
from .matrixunit.gemm import model_dot as tensorcore_dot, model_matmul as tensorcore_matmul
from .ops import InFormat, make_ctx, fma as _fma, mul as _mul

if TYPE_CHECKING:  # for annotations: tensorcore is imported when a model is used
    from .matrixunit.tensorcore import TensorCoreModel

__all__ = ["sum", "dot", "matmul", "ORDERS"]

ORDERS = ("sequential", "pairwise", "kahan", "blocked", "exact")
_TERMS = 1 << 22  # products materialised at once by the reference's stacked orders (matmul rows)


def _resolve_order(order):
    if not isinstance(order, str):
        raise TypeError(f"order must be a string, not {type(order).__name__}")
    key = order.strip().lower()
    if key in ORDERS:
        return key
    raise unknown_name("order", order, ORDERS, n=2)


def _check_block(block):
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be a positive integer, not {block!r}")
    return int(block)


def _fast(c: Calls) -> bool:
    """Whether the call takes numpy's fast kernels (``accumulate_fast``) where they apply:
    the one place that chooses them."""
    return c.host and accumulate_fast.enabled()


def _final(r, order, c: Calls, scalar):
    if order != "exact" and c.o is not c.a:
        r = c.o.round(r)
    r = c.xp.to_float64(r)
    return float(r) if scalar and c.host else r


@tensor_entry('sum', ('x',), portable=True)
def sum(x: Values, fmt: FormatLike, acc_fmt: FormatLike | None = None, order: str = "sequential",  # noqa: A001
        axis: int | None = None, *, block: int = 32, out_fmt: FormatLike | None = None,
        rounding: str = "nearest_even", overflow: Overflow = None, ftz: bool = False,
        daz: bool = False, rng: RngLike = None, sr_bits: int | None = None) -> Values:
    """Sum of ``x`` (cast to ``fmt``) with partial sums rounded to ``acc_fmt`` (default ``fmt``).

    ``order``: ``sequential``, ``pairwise``, ``kahan``, ``blocked`` (``block``
    terms per partial sum) or ``exact`` (see the module docstring).  ``axis``
    None sums everything (a Python float back); an int sums along that axis.

    Ten thousand copies of 0.0001 summed in fp16 stop growing at 0.25, where
    half an ulp (2**-13) exceeds the term; an fp32 accumulator or Kahan
    summation gets close to 1:

    >>> x = [0.0001] * 10000
    >>> sum(x, "fp16"), sum(x, "fp16", acc_fmt="fp32"), sum(x, "fp16", order="kahan")
    (0.25, 1.0001659393310547, 1.0)
    """
    order = _resolve_order(order)
    block = _check_block(block)
    c = calls("sum", [x], fmt, acc_fmt, out_fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    v = c.operand(x)
    if axis is None:
        T = v.reshape(-1, 1)
        r = reduce_terms(T, c, order, block)
        if c.host:
            return _final(r.reshape(()), order, c, True)
        return _final(r, order, c, False).reshape(())
    if v.ndim == 0:
        raise ValueError("axis given for a scalar input")
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"sum: axis must be an int or None, not {type(axis).__name__}")
    if not -v.ndim <= axis < v.ndim:
        raise ValueError(f"sum: axis {axis} is out of range for a {v.ndim}-dimensional input")
    T = c.xp.moveaxis(v, int(axis), 0)
    if _fast(c):
        r = accumulate_fast.reduce_split(T, c, order, block)
    else:
        r = reduce_terms(T, c, order, block)
    return _final(r, order, c, False)


# ---------------------------------------------------------------------------------------------
def _epilogue(r, alpha, beta, cv, acc: Rounder, out: Rounder, c: Calls, rounding, overflow, ftz,
              daz, sr_bits=None):
    """alpha * acc + beta * c in acc's format (c cast to the output format ``out`` first),
    each rounding by ``ff.mul`` / ``ff.fma`` drawing from the call's one generator."""
    if alpha is None:
        alpha = 1.0
    if beta is None:  # cuBLAS's beta: 1 when a c is given (c is never silently ignored)
        beta = 0.0 if cv is None else 1.0
    opts = dict(rounding=rounding, overflow=overflow, ftz=ftz, daz=daz, rng=c.rng, sr_bits=sr_bits)
    if alpha != 1.0:
        r = _mul(alpha, r, acc.fmt, **opts)
    if cv is not None and beta != 0.0:
        r = _fma(beta, c.operand(cv, out), r, acc.fmt, **opts)
    return c.xp.to_float64(r)


def _reduce_products(kind, x, y, c: Calls, order, block, fmt):
    """Reduce the products x_k * y_k (dot: last axes; matmul: x's last, y's second last)."""
    xp = c.xp
    n = x.shape[-1]
    if kind == "dot":
        out_shape = xp.broadcast_shapes(tuple(x.shape[:-1]), tuple(y.shape[:-1]))
        xk = lambda k: x[..., k]  # noqa: E731
        yk = lambda k: y[..., k]  # noqa: E731
    else:
        out_shape = xp.broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2])) \
            + (x.shape[-2], y.shape[-1])
        xk = lambda k: x[..., :, k, None]  # noqa: E731
        yk = lambda k: y[..., None, k, :]  # noqa: E731
    if c.host:
        fpflags.note_products(x, y, kind)
    if n == 0:
        return xp.zeros(out_shape, x)
    if not eft.product_is_exact(fmt):
        return _wide_products(xk, yk, n, out_shape, c, order, block)
    if _fast(c):
        r = accumulate_fast.products(kind, x, y, n, out_shape, c, order, block, fmt)
        if r is not None:
            return r
    with np.errstate(invalid="ignore", over="ignore"):
        if order in ("sequential", "kahan"):
            gen = (xp.broadcast_to(xk(k) * yk(k), out_shape) for k in range(n))
            if order == "sequential":
                return seq(gen, c.a)
            return kahan(gen, c.a, out_shape, xp, x)
        if kind == "dot":
            T = xp.broadcast_to(xp.moveaxis(x * y, -1, 0), (n,) + out_shape)
            return reduce_terms(T, c, order, block)
        rows = out_shape[-2]  # matmul: the products of a few output rows at a time
        step = max(1, _TERMS // max(1, math.prod(out_shape[:-2]) * out_shape[-1] * n))
        parts = []
        for r0 in range(0, rows, step):
            xs = x[..., r0:r0 + step, :]
            shape = out_shape[:-2] + (xs.shape[-2], out_shape[-1])
            T = xp.moveaxis(xs[..., :, :, None] * y[..., None, :, :], -2, 0)
            parts.append(reduce_terms(xp.broadcast_to(T, (n,) + shape), c, order, block))
        return xp.concatenate(parts, -2) if parts else xp.zeros(out_shape, x)


def _wide_products(xk, yk, n, out_shape, c: Calls, order, block):
    """The orders for formats whose products do not fit float64 (fp64): ``sequential`` an
    exact fused step acc = round(x_k y_k + acc); ``exact`` the exact sum of the products
    rounded once (``accumulate_exact.exact_dot_terms``); the others round each exact
    product to acc_fmt first."""
    xp, a = c.xp, c.a

    def xy(k):
        return xp.broadcast_to(xk(k), out_shape), xp.broadcast_to(yk(k), out_shape)

    if order == "sequential":
        acc = None
        for k in range(n):
            p, q = xy(k)
            if acc is None:
                t, cls = a.product(p, q)
                acc = a.round(a.invalid(t, "accumulation"), cls)
            else:
                acc = a.fma_step(p, q, acc)
        return acc
    if order == "exact":
        pairs = [xy(k) for k in range(n)]
        t, cls = exact_dot_terms([p for p, _ in pairs], [q for _, q in pairs], c.o.mode, c.o.fine)
        return c.o.round(c.o.invalid(t, "dot"), cls)
    terms = [xp.broadcast_to(a.round(*a.product(*xy(k))), out_shape) for k in range(n)]
    if order == "kahan":
        return kahan(iter(terms), a, out_shape, xp, terms[0])
    return reduce_terms(xp.stack(terms), c, order, block)


def _prep_pair(a, b, c: Calls, kind):
    x, y = c.operand(a), c.operand(b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"{kind} needs arrays, not scalars (use mul)")
    return x, y


@tensor_entry('dot', ('a', 'b', 'c'), portable=True)
def dot(a: Values, b: Values, fmt: FormatLike, acc_fmt: FormatLike | None = "fp32", order: str = "sequential",
        out_fmt: FormatLike | None = None, model: str | TensorCoreModel | None = None, *, alpha: float = 1.0,
        beta: float | None = None, c: Values = None, block: int = 32, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None,
        sr_bits: int | None = None) -> Values:
    """Dot product over the last axis (leading axes broadcast, like ``numpy.vecdot``).

    Inputs are cast to ``fmt``; products are exact; each accumulation step
    rounds acc + a_k*b_k once to ``acc_fmt`` in ``order`` (see the module
    docstring).  ``model`` (a preset name such as ``"h100"`` or a
    ``TensorCoreModel``) uses the tensor-core model instead, with ``acc_fmt``
    ``"fp32"`` or ``"fp16"``.  Epilogue: ``alpha * acc + beta * c`` in acc_fmt,
    then one rounding to ``out_fmt`` when given.

    >>> a = [1.0, 2.0**-11, 2.0**-11]
    >>> dot(a, [1.0, 1.0, 1.0], "fp16", acc_fmt="fp16"), dot(a, [1.0, 1.0, 1.0], "fp16")
    (1.0, 1.0009765625)
    """
    return _product("dot", a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta, c, block,
                    rounding, overflow, ftz, daz, rng, sr_bits)


@tensor_entry('matmul', ('a', 'b', 'c'), portable=True)
def matmul(a: Values, b: Values, fmt: FormatLike, acc_fmt: FormatLike | None = "fp32",
           order: str = "sequential", out_fmt: FormatLike | None = None,
           model: str | TensorCoreModel | None = None, *, alpha: float = 1.0, beta: float | None = None,
           c: Values = None, block: int = 32, rounding: str = "nearest_even",
           overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None,
           sr_bits: int | None = None) -> Values:
    """Matrix product ``a @ b`` (numpy shapes: 1-D promoted, leading batch axes broadcast).

    Same rules as ``dot``: inputs cast to ``fmt``, exact products, each
    accumulation step rounded to ``acc_fmt`` in ``order``; or the tensor-core
    ``model``; then ``alpha * acc + beta * c`` and ``out_fmt``.

    >>> import numpy as np
    >>> A = np.full((2, 4), 0.1)
    >>> matmul(A, np.ones((4, 2)), "bf16")
    array([[0.40039062, 0.40039062],
           [0.40039062, 0.40039062]])
    >>> matmul(A, np.ones((4, 2)), "bf16", model="h100", out_fmt="bf16")[0, 0]
    np.float64(0.400390625)

    ``c`` (scaled by ``beta``, which is 1 when ``c`` is given and ``beta`` is not) is added
    in this epilogue, as cuBLAS does, after the tensor core ran from a zero accumulator.  ``ff.mma(a, b, c, fmt, model)`` puts C into
    the matrix unit instead, where it is aligned and truncated with the products: the
    product 1.5 * 2**-24 survives the epilogue's rounding to nearest, not the H100 unit:

    >>> from floatfmt import mma
    >>> a, b, C = [[1.5 * 2.0**-24]], [[1.0]], [[1.0]]
    >>> float(matmul(a, b, "bf16", model="h100", c=C)[0, 0])
    1.0000001192092896
    >>> float(mma(a, b, C, "bf16", "h100")[0, 0])
    1.0
    """
    return _product("matmul", a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta, c, block,
                    rounding, overflow, ftz, daz, rng, sr_bits)


def _product(kind, a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta, cv, block, rounding,
             overflow, ftz, daz, rng, sr_bits):
    order = _resolve_order(order)
    block = _check_block(block)
    if model is not None:
        return _model_product(kind, a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta, cv,
                              block, rounding, overflow, ftz, daz, rng, sr_bits)
    c = calls(kind, [a, b, cv], fmt, acc_fmt, out_fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    x, y = _prep_pair(a, b, c, kind)
    if kind == "dot":
        if x.shape[-1] != y.shape[-1]:
            raise ValueError(f"dot: last axes differ ({x.shape[-1]} and {y.shape[-1]})")
        res = _reduce_products("dot", x, y, c, order, block, c.i.fmt)
    else:
        x1, y1 = x.ndim == 1, y.ndim == 1
        if x1:
            x = x[None, :]
        if y1:
            y = y[:, None]
        if x.shape[-1] != y.shape[-2]:
            raise ValueError(f"matmul: shapes {tuple(x.shape)} and {tuple(y.shape)} do not align "
                             f"({x.shape[-1]} != {y.shape[-2]})")
        res = _reduce_products("matmul", x, y, c, order, block, c.i.fmt)
        if x1:
            res = res[..., 0, :]
        if y1:
            res = res[..., 0]
    res = c.xp.to_float64(res)
    if order == "exact":
        # the exact result was already rounded once to the output format
        if alpha != 1.0 or (cv is not None and beta != 0.0):
            res = _epilogue(res, alpha, beta, cv, c.o, c.o, c, rounding, overflow, ftz, daz, sr_bits)
        return _final(res, "exact", c, res.ndim == 0)
    res = _epilogue(res, alpha, beta, cv, c.a, c.o, c, rounding, overflow, ftz, daz, sr_bits)
    return _final(res, order, c, res.ndim == 0)


def _model_product(kind, a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta, cv, block,
                   rounding, overflow, ftz, daz, rng, sr_bits):
    """dot / matmul with a tensor-core model: numpy arrays by
    ``tensorcore.tensorcore_product`` and the epilogue here; tensors outside the numpy
    path by ``matrixunit.gemm`` (its steps, the same epilogue)."""
    if order != "sequential":
        raise ValueError(f"order={order!r} does not apply with a tensor-core model: the model "
                         "fixes the order (blocks of L products chained along K)")
    if namespace_of(a, b, cv) is not NUMPY:
        device = tensorcore_dot if kind == "dot" else tensorcore_matmul
        return device(a, b, fmt, acc_fmt, order, out_fmt, model, alpha=alpha, beta=beta, c=cv,
                      block=block, rounding=rounding, overflow=overflow, ftz=ftz, daz=daz,
                      rng=rng, sr_bits=sr_bits)
    from .matrixunit.tensorcore import tensorcore_product
    a, b = (x._v if isinstance(x, InFormat) else x for x in (a, b))
    acc_name = "fp32" if acc_fmt is None else acc_fmt
    if resolve_mode(rounding) in STOCHASTIC:
        rng = make_rng(rng)  # one stream: the operands, the epilogue, out_fmt, in turn
    res, actx_fmt = tensorcore_product(kind, a, b, fmt, model, acc_name, rounding=rounding,
                                       overflow=overflow, ftz=ftz, daz=daz, rng=rng,
                                       sr_bits=sr_bits)
    acc = Rounder(make_ctx(actx_fmt, "nearest_even", None, False, False, None), True)
    out = Rounder(make_ctx(out_fmt, rounding, overflow, ftz, daz, rng, sr_bits), True) \
        if out_fmt is not None else acc
    c = Calls(acc, acc, out, NUMPY, rng)
    res = _epilogue(res, alpha, beta, cv, acc, out, c, rounding, overflow, ftz, daz, sr_bits)
    return _final(res, "sequential", c, np.ndim(res) == 0)
