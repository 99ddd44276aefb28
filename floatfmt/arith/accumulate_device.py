"""``sum``, and ``dot`` / ``matmul`` without a tensor-core model, on tensors of any
device (CUDA): the accumulation orders of ``floatfmt.arith.accumulate`` written over the
array namespace (torch ops on the tensor's device; torch is never imported here).

``floatfmt.backend.dispatch`` calls these for tensors that are not computed by the numpy
kernels (CUDA tensors, or CPU tensors under ``force_namespace``, which the tests use
to prove them equal to the numpy path bit for bit).  The rules are those of
``floatfmt.arith.accumulate``: the inputs are cast to ``fmt`` (``ff.cast`` on the device),
products of two values of a format up to fp32 are exact in float64, and every
accumulation step is the exact sum rounded once to ``acc_fmt``
(``ops_device.rounded_sum``: TwoSum, IEEE zero signs, one call of the rounding
routine), in the order asked for:

``sequential``  acc = round(acc + t_k), acc starting as round(t_0)
``pairwise``    adjacent pairs added level by level (an odd last one moves up)
``kahan``       y = t - c; s' = s + y; c = (s' - s) - y, each rounded to acc_fmt
``blocked``     sequential sums of ``block`` terms, then a sequential sum of those
``exact``       the exact sum (``exact_device.exact_sum``: an integer
                superaccumulator in int64 limbs), rounded once to ``out_fmt`` (else ``acc_fmt``)

then ``alpha * acc + beta * c`` (``dot`` / ``matmul``: ``ops_device``'s ``mul`` and
``fma`` in acc_fmt, c cast to the output format) and one rounding to ``out_fmt``.
Batched shapes are numpy's (``dot``: leading axes broadcast; ``matmul``: 1-D
operands promoted, leading batch axes broadcast).  ``matmul`` / ``dot`` with a
``model`` go to ``floatfmt.arith.matrixunit.tensorcore_device``.

Stochastic rounding: every step rounds its exact result with its ``resid`` (see
``ops_device``), drawing from one ``torch.Generator`` per call (an int seed: a new
one seeded with it): first the casts of the operands, then each rounding in the
order's sequence.  numpy's sums draw from a numpy Generator (by parts of the output,
``threads.block_rng``), so a seed gives other bits; the law is the same
(tests/test_torch_sr.py).

fp64 (formats whose products do not fit float64): ``sum`` as above (its steps are
additions; the limbs of the exact order span the whole float64 range); ``dot`` /
``matmul`` as ``accumulate`` does it: ``sequential`` rounds an exact fused step
x_k y_k + acc (``ops_device.fma_parts``), ``exact`` sums every product's two
``exact_device.product_terms`` once, the other orders round each exact product to
acc_fmt first.  Results are float64 tensors on the operands' device, not
differentiable.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.names import unknown_name
from ..backend.dispatch import check_tensors
from .limbs import limb_sum as exact_sum, product_terms
from .eft import product_is_exact
from .ops import OpCall as DeviceCall, fma_rule as device_fma, mul_rule as device_mul, rounded_sum
from .residuals import fma_parts, product_parts
from .matrixunit.gemm import model_dot as tensorcore_dot
from .matrixunit.gemm import model_matmul as tensorcore_matmul

__all__ = ["DEVICE_ORDERS", "device_sum", "device_dot", "device_matmul"]

#: The orders of the device code (those of ``floatfmt.arith.accumulate.ORDERS``, every one).
DEVICE_ORDERS = ("sequential", "pairwise", "kahan", "blocked", "exact")


def _order(order: Any) -> str:
    if not isinstance(order, str):
        raise TypeError(f"order must be a string, not {type(order).__name__}")
    key = order.strip().lower()
    if key not in DEVICE_ORDERS:
        raise unknown_name("order", order, DEVICE_ORDERS, n=2)
    return key


def _block(block: Any) -> int:
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a positive integer, not {block!r}")
    return block


class _Calls:
    """The three roundings of one reduction: inputs (``i``), accumulator (``a``) and
    output (``o``, the accumulator's when no out_fmt), drawing from one generator under
    stochastic rounding (``DeviceCall``)."""

    def __init__(self, name: str, operands: list, fmt: Any, acc_fmt: Any, out_fmt: Any,
                 rounding: Any, overflow: Any, ftz: Any, daz: Any, sr_bits: Any, rng: Any,
                 products: bool = True):
        self.i = DeviceCall(name, operands, fmt, rounding, overflow, ftz, daz, sr_bits, rng,
                            products)
        self.a = self.i.share(name, operands, acc_fmt if acc_fmt is not None else fmt, products)
        self.o = self.i.share(name, operands, out_fmt, products) if out_fmt is not None \
            else self.a


# ------------------------------------------------------------------------------- the orders
def _seq(terms: Any, a: DeviceCall) -> Any:
    acc = None
    for t in terms:
        acc = a.round(t) if acc is None else rounded_sum(a, acc, t, "accumulation")
    return acc


def _pairwise(T: Any, a: DeviceCall) -> Any:
    if T.shape[0] == 1:
        return a.round(T[0])
    while T.shape[0] > 1:
        n, m = T.shape[0], T.shape[0] // 2
        pair = rounded_sum(a, T[0:2 * m:2], T[1:2 * m:2], "accumulation")
        T = a.t.cat([pair, T[2 * m:]], 0) if n % 2 else pair
    return T[0]


def _kahan(terms: Any, a: DeviceCall, shape: tuple) -> Any:
    """Compensated sum, as ``accumulate``'s: s starts as round(t_0) (keeping a -0), and
    a zero t with a zero c gives y = t (formats with -0)."""
    t_ = a.t
    s: Any = None
    c: Any = None
    for term in terms:
        if s is None:
            s = t_.broadcast_to(a.round(term), shape)
            c = t_.zeros(shape, dtype=t_.float64, device=term.device)
            continue
        y = rounded_sum(a, term, -c, "accumulation")
        if a.fmt.negative_zero:
            y = t_.where((c == 0) & (term == 0), term, y)
        s_new = rounded_sum(a, s, y, "accumulation")
        c = rounded_sum(a, rounded_sum(a, s_new, -s, "accumulation"), -y, "accumulation")
        s = s_new
    return s


def _blocked(T: Any, a: DeviceCall, block: int) -> Any:
    t_ = a.t
    n = T.shape[0]
    nb = -(-n // block)
    pad = nb * block - n
    if pad:
        T = t_.cat([T, t_.zeros((pad,) + tuple(T.shape[1:]), dtype=T.dtype, device=T.device)])
    B = T.reshape((nb, block) + tuple(T.shape[1:]))
    acc = a.round(B[:, 0])
    for j in range(1, block):
        new = rounded_sum(a, acc, B[:, j], "accumulation")
        if pad and j >= block - pad:  # the last block is shorter: it stops here
            new[nb - 1] = acc[nb - 1]
        acc = new
    return _seq((acc[i] for i in range(nb)), a)


def _reduce(T: Any, calls: _Calls, order: str, block: int) -> Any:
    """Sum the float64 terms T over axis 0 (in acc_fmt; ``exact``: in the output format)."""
    a = calls.a
    if T.shape[0] == 0:
        return a.t.zeros(tuple(T.shape[1:]), dtype=a.t.float64, device=T.device)
    if order == "sequential":
        return _seq((T[k] for k in range(T.shape[0])), a)
    if order == "pairwise":
        return _pairwise(T, a)
    if order == "kahan":
        return _kahan((T[k] for k in range(T.shape[0])), a, tuple(T.shape[1:]))
    if order == "blocked":
        return _blocked(T, a, block)
    v, cls = exact_sum(T, calls.o.ctx.mode, calls.o.fine)
    calls.o.finish(v, "sum")
    return calls.o.round(v, cls)


# --------------------------------------------------------------------------------- sum
def device_sum(x: Any, fmt: Any, acc_fmt: Any = None, order: str = "sequential",
               axis: Any = None, *, block: int = 32, out_fmt: Any = None,
               rounding: Any = "nearest_even", overflow: Any = None, ftz: Any = False,
               daz: Any = False, rng: Any = None, sr_bits: Any = None) -> Any:
    """``ff.sum`` on the device, every order of ``floatfmt.arith.accumulate`` (the module
    docstring): the same arguments, a float64 tensor on x's device (0-d for
    ``axis=None``)."""
    order = _order(order)
    block = _block(block)
    calls = _Calls("sum", [x], fmt, acc_fmt, out_fmt, rounding, overflow, ftz, daz, sr_bits, rng,
                   products=False)
    v = calls.i.operand(x)
    if axis is None:
        T = v.reshape(-1, 1)
    else:
        if v.ndim == 0:
            raise ValueError("axis given for a scalar input")
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError(f"sum: axis must be an int or None, not {type(axis).__name__}")
        if not -v.ndim <= axis < v.ndim:
            raise ValueError(f"sum: axis {axis} is out of range for a {v.ndim}-dimensional input")
        T = v.movedim(axis, 0)
    r = _reduce(T, calls, order, block)
    if order != "exact" and calls.o is not calls.a:
        r = calls.o.round(r)
    return r.reshape(()) if axis is None else r


# ------------------------------------------------------------------------ dot and matmul
_TERMS = 1 << 22  # products materialised at once by the stacked orders (rows of a matmul)


def _products(kind: str, x: Any, y: Any, calls: _Calls, order: str, block: int) -> Any:
    """Reduce the exact products x_k * y_k (dot: the last axes; matmul: x's last, y's
    second last) in ``order``."""
    t = calls.i.t
    if kind == "dot":
        out_shape = tuple(t.broadcast_shapes(x.shape[:-1], y.shape[:-1]))
        n = x.shape[-1]

        def term(k: int, xs: Any = x) -> Any:
            return t.broadcast_to(xs[..., k] * y[..., k], out_shape)
        stacked = lambda xs, shape: t.broadcast_to(  # noqa: E731
            (xs * y).movedim(-1, 0), (n,) + shape)
    else:
        out_shape = tuple(t.broadcast_shapes(x.shape[:-2], y.shape[:-2])) + (x.shape[-2],
                                                                              y.shape[-1])
        n = x.shape[-1]

        def term(k: int, xs: Any = x) -> Any:
            shape = out_shape[:-2] + (xs.shape[-2], out_shape[-1])
            return t.broadcast_to(xs[..., :, k, None] * y[..., None, k, :], shape)
        stacked = lambda xs, shape: t.broadcast_to(  # noqa: E731
            (xs[..., :, :, None] * y[..., None, :, :]).movedim(-2, 0), (n,) + shape)
    if n == 0:
        return t.zeros(out_shape, dtype=t.float64, device=x.device)
    a = calls.a
    if not product_is_exact(calls.i.fmt):
        if kind == "dot":
            pair = lambda k: (x[..., k], y[..., k])  # noqa: E731
        else:
            pair = lambda k: (x[..., :, k, None], y[..., None, k, :])  # noqa: E731
        return _wide_products(pair, n, out_shape, calls, order, block)
    if order == "sequential":
        return _seq((term(k) for k in range(n)), a)
    if order == "kahan":
        return _kahan((term(k) for k in range(n)), a, out_shape)
    if kind == "dot":
        return _reduce(stacked(x, out_shape), calls, order, block)
    rows = out_shape[-2]
    per_row = max(1, math.prod(out_shape[:-2]) * out_shape[-1] * n)
    step = max(1, _TERMS // per_row)
    parts = []
    for r0 in range(0, rows, step):  # a few rows at a time (outputs are independent)
        xs = x[..., r0:r0 + step, :]
        shape = out_shape[:-2] + (xs.shape[-2], out_shape[-1])
        parts.append(_reduce(stacked(xs, shape), calls, order, block))
    return t.cat(parts, -2) if parts else t.zeros(out_shape, dtype=t.float64, device=x.device)


def _wide_products(pair: Any, n: int, out_shape: tuple, calls: _Calls, order: str,
                   block: int) -> Any:
    """The orders for formats whose products do not fit float64 (fp64), as
    ``accumulate``: ``sequential`` an exact fused step acc = round(x_k y_k + acc)
    (``ops_device.fma_parts``); ``exact`` every product's two ``product_terms`` summed
    exactly once; the others round each product to acc_fmt first."""
    a, t = calls.a, calls.i.t
    mode = a.ctx.mode

    def xy(k: int) -> tuple[Any, Any]:
        p, q = pair(k)
        return t.broadcast_to(p, out_shape), t.broadcast_to(q, out_shape)

    if order == "sequential":
        acc = None
        for k in range(n):
            p, q = xy(k)
            v, cls = product_parts(p, q, mode, a.fine) if acc is None else \
                fma_parts(p, q, acc, mode, a.fine)
            acc = a.round(a.finish(v, "accumulation"), cls)
        return acc
    if order == "exact":
        parts = [product_terms(*xy(k)) for k in range(n)]
        o = calls.o
        v, cls = exact_sum(t.cat([T for T, _ in parts]), o.ctx.mode, o.fine,
                           t.cat([S for _, S in parts]))
        return o.round(o.finish(v, "dot"), cls)
    terms = [a.round(*product_parts(*xy(k), mode, a.fine)) for k in range(n)]
    if order == "kahan":
        return _kahan(iter(terms), a, out_shape)
    return _reduce(t.stack(terms), calls, order, block)


def _epilogue(r: Any, alpha: Any, beta: Any, c: Any, acc: DeviceCall, out: DeviceCall,
              options: dict) -> Any:
    """alpha * acc + beta * c in the accumulator's format (c cast to the output format)."""
    if alpha is None:
        alpha = 1.0
    if beta is None:  # cuBLAS's beta: 1 when a c is given
        beta = 0.0 if c is None else 1.0
    if alpha != 1.0:
        r = device_mul(alpha, r, acc.fmt, **options)
    if c is not None and beta != 0.0:
        r = device_fma(beta, out.operand(c), r, acc.fmt, **options)
    return r


def _product(kind: str, a: Any, b: Any, fmt: Any, acc_fmt: Any, order: str, out_fmt: Any,
             alpha: Any, beta: Any, c: Any, block: int, rounding: Any, overflow: Any,
             ftz: Any, daz: Any, rng: Any, sr_bits: Any) -> Any:
    order = _order(order)
    block = _block(block)
    check_tensors(f"floatfmt.{kind}", [a, b, c])
    calls = _Calls(kind, [a, b], fmt, acc_fmt, out_fmt, rounding, overflow, ftz, daz, sr_bits,
                   rng, products=False)
    x, y = calls.i.operand(a), calls.i.operand(b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"{kind} needs arrays, not scalars (use mul)")
    if kind == "dot":
        if x.shape[-1] != y.shape[-1]:
            raise ValueError(f"dot: last axes differ ({x.shape[-1]} and {y.shape[-1]})")
        res = _products("dot", x, y, calls, order, block)
    else:
        x1, y1 = x.ndim == 1, y.ndim == 1
        x = x[None, :] if x1 else x
        y = y[:, None] if y1 else y
        if x.shape[-1] != y.shape[-2]:
            raise ValueError(f"matmul: shapes {tuple(x.shape)} and {tuple(y.shape)} do not "
                             f"align ({x.shape[-1]} != {y.shape[-2]})")
        res = _products("matmul", x, y, calls, order, block)
        res = res[..., 0, :] if x1 else res
        res = res[..., 0] if y1 else res
    options = dict(rounding=rounding, overflow=overflow, ftz=ftz, daz=daz,
                   rng=calls.i.generator, sr_bits=sr_bits)
    if order == "exact":  # already rounded once to the output format
        if alpha != 1.0 or (c is not None and beta != 0.0):
            res = _epilogue(res, alpha, beta, c, calls.o, calls.o, options)
        return res
    res = _epilogue(res, alpha, beta, c, calls.a, calls.o, options)
    return calls.o.round(res) if calls.o is not calls.a else res


def device_dot(a: Any, b: Any, fmt: Any, acc_fmt: Any = "fp32", order: str = "sequential",
               out_fmt: Any = None, model: Any = None, *, alpha: float = 1.0, beta: Any = None,
               c: Any = None, block: int = 32, rounding: Any = "nearest_even",
               overflow: Any = None, ftz: Any = False, daz: Any = False, rng: Any = None,
               sr_bits: Any = None) -> Any:
    """``ff.dot`` on the device: with a ``model``, ``tensorcore_device``'s; without, the
    accumulation orders (the module docstring).  The same arguments as ``ff.dot``."""
    if model is not None:
        return tensorcore_dot(a, b, fmt, acc_fmt, order, out_fmt, model, alpha=alpha,
                              beta=beta, c=c, block=block, rounding=rounding,
                              overflow=overflow, ftz=ftz, daz=daz, rng=rng, sr_bits=sr_bits)
    return _product("dot", a, b, fmt, acc_fmt, order, out_fmt, alpha, beta, c, block,
                    rounding, overflow, ftz, daz, rng, sr_bits)


def device_matmul(a: Any, b: Any, fmt: Any, acc_fmt: Any = "fp32", order: str = "sequential",
                  out_fmt: Any = None, model: Any = None, *, alpha: float = 1.0,
                  beta: Any = None, c: Any = None, block: int = 32,
                  rounding: Any = "nearest_even", overflow: Any = None, ftz: Any = False,
                  daz: Any = False, rng: Any = None, sr_bits: Any = None) -> Any:
    """``ff.matmul`` on the device: with a ``model``, ``tensorcore_device``'s; without,
    the accumulation orders (the module docstring).  The same arguments as
    ``ff.matmul``."""
    if model is not None:
        return tensorcore_matmul(a, b, fmt, acc_fmt, order, out_fmt, model, alpha=alpha,
                                 beta=beta, c=c, block=block, rounding=rounding,
                                 overflow=overflow, ftz=ftz, daz=daz, rng=rng, sr_bits=sr_bits)
    return _product("matmul", a, b, fmt, acc_fmt, order, out_fmt, alpha, beta, c, block,
                    rounding, overflow, ftz, daz, rng, sr_bits)
