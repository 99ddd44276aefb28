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

torch tensors in give float64 tensors out on their device (``sum`` over every axis:
a 0-d tensor), computed by these numpy kernels on views of CPU tensors' memory;
not differentiable.  On other devices (CUDA) the same rules run with torch ops on the
device: every order of ``sum``, ``dot`` and ``matmul`` (``floatfmt.arith.accumulate_device``)
and ``matmul(..., model=...)``'s tensor-core steps (``floatfmt.arith.matrixunit.tensorcore_device``),
with the limits listed there (``floatfmt.backend.dispatch``).

For formats whose products do not fit float64 (fp64 and custom formats with
more than 26 significand bits) ``sequential`` uses an exact fused
multiply-add per step and ``exact`` uses exact rational arithmetic; the other
orders first round each product to acc_fmt.
"""

# size: the orders (sequential, pairwise, kahan, blocked, exact) and the product paths share the
# rounding of one step (_round_add) and the contexts; the row / column tiling that shares
# them among threads sits next to the loops it splits
from __future__ import annotations

import builtins
import math
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from . import eft
from ..core import flags as fpflags
from ..backend.dispatch import tensor_entry
from .accumulate_device import device_dot, device_matmul, device_sum
from ..core.formats import FormatLike
from ..core.names import unknown_name
from ..core.types import Overflow, RngLike, Values
from ..core.rounding import STOCHASTIC, make_rng, resolve_mode
from ..core.threads import block_rng, get_num_threads, limit_threads, run_parts
from .ops import InFormat, check_invalid, make_ctx, operand_values, zero_signs, fma as _fma, mul as _mul

if TYPE_CHECKING:  # for annotations: tensorcore is imported when a model is used
    from .matrixunit.tensorcore import TensorCoreModel

__all__ = ["sum", "dot", "matmul", "ORDERS"]

ORDERS = ("sequential", "pairwise", "kahan", "blocked", "exact")
_CHUNK_ELEMS = 1 << 21  # terms materialised at once by the vectorised orders


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


# ---------------------------------------------------------------------------------------------
def _round_add(acc, term, actx):
    """round_acc(acc + term) from the exact sum (one rounding)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = acc + term
        bb = s - acc
        e = (acc - (s - bb)) + (term - bb)
        fin_e = np.isfinite(e)
        idx = np.flatnonzero((e != 0) & fin_e)
        # finite operands whose float64 sum overflows: a finite value past the range
        over = None if fin_e.all() else np.isinf(s) & np.isfinite(acc) & np.isfinite(term)
    cls = None
    t = s
    fine = actx.fine  # stochastic rounding needs the remainder, not only its class
    dtype = np.int64 if fine else np.uint8
    if over is not None and over.any():
        cls = np.ascontiguousarray(np.where(over, eft._R_PAST if fine else 3, 0), dtype)
    if idx.size:
        # C order: s may follow strided operands' layout, and reshape(-1) must be a view
        t = np.array(s, np.float64, order="C", copy=True)
        if cls is None:
            cls = np.zeros(t.shape, dtype)
        tf, cf = t.reshape(-1), cls.reshape(-1)
        ts, cs = eft.to_sticky(s.reshape(-1)[idx], e.reshape(-1)[idx], fine=fine)
        tf[idx] = ts
        cf[idx] = cs
    fpflags.note_invalid(t, acc, term)
    if actx.mode == "down" or not actx.fmt.has_nan:
        if not actx.fmt.has_nan:
            check_invalid(t, actx, "accumulation")
        if actx.mode == "down":
            t = zero_signs(t, cls, acc, term, actx.mode)
    return actx.round(t, cls)


def _seq(terms, actx, start=None):
    """Sequential accumulation of terms[0], terms[1], ... (an iterable of arrays)."""
    acc = start
    for t in terms:
        acc = actx.round(t) if acc is None else _round_add(acc, t, actx)
    return acc


def _pairwise(T, actx):
    """Binary-tree sum over axis 0 of the stacked exact terms T."""
    if T.shape[0] == 1:
        return actx.round(T[0])
    while T.shape[0] > 1:
        n = T.shape[0]
        m = n // 2
        s = _round_add(T[0:2 * m:2], T[1:2 * m:2], actx)
        T = np.concatenate([s, T[2 * m:]], axis=0) if n % 2 else s
    return T[0]


def _kahan(terms, actx, shape):
    """Compensated sum.  s starts as the first term (what s = 0 + t_0 gives, but keeping
    a -0 term's sign) and a zero t with a zero c gives y = t (t - 0 is t; IEEE's
    +0 - +0 = -0 in mode down would put a sign on a sum of +0 terms that no other
    order gives)."""
    s = c = None
    for t in terms:
        if s is None:
            s = np.array(np.broadcast_to(actx.round(t), shape), np.float64)
            c = np.zeros(shape)
            continue
        y = _round_add(t, -c, actx)
        if actx.fmt.negative_zero:
            y = np.where((c == 0) & (t == 0), t, y)
        s_new = _round_add(s, y, actx)
        c = _round_add(_round_add(s_new, -s, actx), -y, actx)
        s = s_new
    return np.zeros(shape) if s is None else s


def _blocked(T, actx, block):
    n = T.shape[0]
    nb = -(-n // block)
    pad = nb * block - n
    if pad:
        T = np.concatenate([T, np.zeros((pad,) + T.shape[1:])], axis=0)
    B = T.reshape((nb, block) + T.shape[1:])
    acc = actx.round(B[:, 0])
    for j in range(1, block):
        new = _round_add(acc, B[:, j], actx)
        if pad and j >= block - pad:  # the last block is shorter: leave it alone there
            new[nb - 1] = acc[nb - 1]
        acc = new
    return _seq((acc[i] for i in range(nb)), actx)


# ---------------------------------------------------------------------------------------------
def _exact_sum_axis0(T, octx):
    """The exact sum over axis 0 of float64 terms T, rounded once with octx.

    A superaccumulator: each term m * 2**q (m a 53-bit integer) is cut into
    16-bit pieces added into 16-bit limbs (float64 bincounts of integers below
    2**53 are exact); carries are then propagated and each sum becomes one
    Python integer."""
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
    fine = octx.fine
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
    # IEEE zero of an exact zero sum (as every order of additions gives it): -0 when all
    # terms are -0; in mode down, -0 unless all terms are +0
    neg_zero = ~all_poszero if octx.mode == "down" else all_negzero
    out[zero] = np.where(neg_zero[zero], -0.0, 0.0)
    out = np.where(has_nan, np.nan, np.where(inf_val != 0, inf_val, out))
    # Inf / NaN terms give exact specials; an Inf from int_to_sticky is a finite sum past
    # the float64 range and keeps its class (so toward_zero etc. can give max)
    cls = np.where(has_nan | (inf_val != 0), 0, cls).astype(cls.dtype)
    # flags: NaN terms are quiet; Inf + (-Inf) is an invalid operation
    nan_terms = (np.where(np.isnan(X).any(0), np.nan, 0.0),) if fpflags.active() else ()
    check_invalid(out, octx, "sum", *nan_terms)
    return octx.round(out, cls).reshape(rest)


def _reduce(T, actx, order, block, octx):
    """Sum the stacked exact terms T over axis 0 in ``order`` (result in acc, or out for exact)."""
    if T.shape[0] == 0:
        return np.zeros(T.shape[1:])
    if order == "sequential":
        return _seq((T[k] for k in range(T.shape[0])), actx)
    if order == "pairwise":
        return _pairwise(T, actx)
    if order == "kahan":
        return _kahan((T[k] for k in range(T.shape[0])), actx, T.shape[1:])
    if order == "blocked":
        return _blocked(T, actx, block)
    return _exact_sum_axis0(T, octx)


# ---------------------------------------------------------------------------------------------
def _contexts(fmt, acc_fmt, out_fmt, rounding, overflow, ftz, daz, rng, sr_bits):
    ictx = make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    actx = make_ctx(acc_fmt if acc_fmt is not None else ictx.fmt, rounding, overflow, ftz, daz,
                ictx.rng, sr_bits)
    octx = make_ctx(out_fmt, rounding, overflow, ftz, daz, ictx.rng, sr_bits) if out_fmt is not None \
        else actx
    return ictx, actx, octx


def _final(r, order, actx, octx, scalar):
    if order != "exact" and octx is not actx:
        r = octx.round(r)
    r = np.asarray(r, np.float64)
    return float(r) if scalar else r


@tensor_entry('sum', ('x',), device_impl=device_sum)
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
    ictx, actx, octx = _contexts(fmt, acc_fmt, out_fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    v, _ = operand_values(x, ictx)
    if axis is None:
        T = v.reshape(-1, 1)
        r = _reduce(T, actx, order, block, octx)
        return _final(r.reshape(()), order, actx, octx, True)
    if v.ndim == 0:
        raise ValueError("axis given for a scalar input")
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"sum: axis must be an int or None, not {type(axis).__name__}")
    if not -v.ndim <= axis < v.ndim:
        raise ValueError(f"sum: axis {axis} is out of range for a {v.ndim}-dimensional input")
    T = np.moveaxis(v, axis, 0)
    r = _reduce_split(T, actx, order, block, octx)
    return _final(r, order, actx, octx, False)


_SPLIT_ELEMS = 1 << 14  # outputs per part of _reduce_split (a core's cache of partial sums)


def _reduce_split(T, actx, order, block, octx):
    """``_reduce`` over axis 0 of T, in parts along T's axis 1 (the outputs are
    independent) shared among threads (``floatfmt.core.threads``).  Under stochastic
    rounding part p draws from ``threads.block_rng(k, p)``, k drawn once from the
    generator (one part: the generator itself), whatever the thread count."""
    if T.ndim < 2 or T.shape[0] == 0:
        return _reduce(T, actx, order, block, octx)
    rows = T.shape[1]
    per_row = max(1, int(np.prod(T.shape[2:], dtype=np.int64)))
    step = max(1, _SPLIT_ELEMS // per_row)
    parts = -(-rows // step)
    if parts < 2:
        return _reduce(T, actx, order, block, octx)
    key = None
    if actx.mode == "stochastic":
        key = int(actx.rng.integers(0, 1 << 63))
    out = np.empty(T.shape[1:])

    def part(p):
        a, o = actx, octx
        if key is not None:
            g = block_rng(key, p)
            a = replace(actx, rng=g)
            o = a if octx is actx else replace(octx, rng=g)
        out[p * step:(p + 1) * step] = _reduce(T[:, p * step:(p + 1) * step], a, order, block, o)

    run_parts(parts, part)
    return out


# ---------------------------------------------------------------------------------------------
def _epilogue(r, alpha, beta, c, actx, octx, rounding, overflow, ftz, daz, rng, sr_bits=None):
    """alpha * acc + beta * c in acc_fmt (c cast to the output format first); ``rng``:
    the call's one generator under stochastic rounding, ``sr_bits`` its bits."""
    if alpha is None:
        alpha = 1.0
    if beta is None:  # cuBLAS's beta: 1 when a c is given (c is never silently ignored)
        beta = 0.0 if c is None else 1.0
    opts = dict(rounding=rounding, overflow=overflow, ftz=ftz, daz=daz, rng=rng, sr_bits=sr_bits)
    if alpha != 1.0:
        r = _mul(alpha, r, actx.fmt, **opts)
    if c is not None and beta != 0.0:
        cv, _ = operand_values(c, octx)
        r = _fma(beta, cv, r, actx.fmt, **opts)
    return np.asarray(r, np.float64)


def _reduce_products(x, y, kind, n, actx, octx, order, block, fmt):
    """Reduce the products x_k * y_k (dot: last axes; matmul: x's last, y's second last)."""
    if kind == "dot":
        out_shape = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
        xk = lambda k: x[..., k]  # noqa: E731
        yk = lambda k: y[..., k]  # noqa: E731
    else:
        out_shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
        xk = lambda k: x[..., :, k, None]  # noqa: E731
        yk = lambda k: y[..., None, k, :]  # noqa: E731
    fpflags.note_products(x, y, kind)
    if n == 0:
        return np.zeros(out_shape)
    if not eft.product_is_exact(fmt):
        if order == "sequential":
            acc = None
            for k in range(n):
                a, b = np.broadcast_arrays(xk(k), yk(k))
                if acc is None:
                    t, cls = eft.exact_product(a, b, fine=actx.fine)
                else:
                    t, cls = eft.exact_fma(a, b, acc, fine=actx.fine)
                    if (t == 0).any():  # exact_fma gives +0: signs as for p + acc
                        p = np.where((a == 0) | (b == 0),
                                     np.where(np.signbit(a) ^ np.signbit(b), -0.0, 0.0), 1.0)
                        t = zero_signs(t, cls, p, acc, actx.mode)
                check_invalid(t, actx, "accumulation")
                acc = actx.round(t, cls)
            return np.broadcast_to(acc, out_shape)
        if order == "exact":
            return _exact_products_slow(xk, yk, n, out_shape, octx)
        T = np.stack([np.broadcast_to(actx.round(*eft.exact_product(*np.broadcast_arrays(
            xk(k), yk(k)), fine=actx.fine)), out_shape) for k in range(n)])
        return _reduce(T, actx, order, block, octx)
    with np.errstate(invalid="ignore", over="ignore"):
        if order in ("sequential", "kahan"):
            if order == "sequential" and _seq_products_ok(actx):
                if kind == "matmul":
                    return _seq_products_rows(x, y, n, out_shape, actx, fmt)
                return _seq_products(xk, yk, n, out_shape, actx,
                                     _step_bounds(x, y, -1, -1, fmt, actx.fmt))
            gen = (np.broadcast_to(xk(k) * yk(k), out_shape) for k in range(n))
            if order == "sequential":
                return _seq(gen, actx)
            return _kahan(gen, actx, out_shape)
        if kind == "dot":
            T = np.moveaxis(x * y, -1, 0)
            return _reduce(T, actx, order, block, octx)
        # matmul, vectorised orders: materialise the products for a few output rows at a time
        rows = out_shape[-2]
        per_row = max(1, int(np.prod(out_shape[:-2], dtype=np.int64)) * out_shape[-1] * n)
        step = max(1, _CHUNK_ELEMS // per_row)
        out = np.empty(out_shape)
        parts = -(-rows // step)
        key = int(actx.rng.integers(0, 1 << 63)) if actx.mode == "stochastic" and parts > 1 \
            else None

        def part(p):  # a few rows (parts run on threads; under SR, block_rng(key, p))
            a, o = actx, octx
            if key is not None:
                a = replace(actx, rng=block_rng(key, p))
                o = a if octx is actx else replace(octx, rng=a.rng)
            r0 = p * step
            xs = x[..., r0:r0 + step, :]
            with np.errstate(invalid="ignore", over="ignore"):
                T = np.moveaxis(xs[..., :, :, None] * y[..., None, :, :], -2, 0)
            out[..., r0:r0 + step, :] = _reduce(T, a, order, block, o)

        run_parts(parts, part)
        return out


def _seq_products_ok(actx) -> bool:
    """Whether ``_seq_products`` applies: the remainder class is all the rounding needs
    (not stochastic), IEEE zero signs are numpy's (not ``down``), and NaN is a value."""
    return actx.mode not in ("stochastic", "down") and actx.fmt.has_nan and not fpflags.active()


_SEQ_TILE = 1 << 12  # fewest outputs per tile of _seq_products_rows
_NONE = np.zeros(0, np.intp)


def _seq_products_rows(x, y, n, out_shape, actx, fmt):
    """``_seq_products`` of a matmul, in tiles of output rows (at least ``_SEQ_TILE``
    outputs; for now one tile, on the calling thread, see below): the rows are
    independent and the rounding elementwise, so the tiling changes no result.  Each
    tile reads x's columns from a contiguous copy (a strided column makes the outer
    product of a step a third slower) and has its own step bounds (``_step_bounds``)."""
    rows = out_shape[-2]
    per_row = max(1, int(np.prod(out_shape[:-2], dtype=np.int64)) * out_shape[-1])
    out = np.empty(out_shape)

    def tile(t):
        r0, r1 = t * step, min(rows, (t + 1) * step)
        xs = x[..., r0:r1, :]
        xt = np.ascontiguousarray(np.moveaxis(xs, -1, 0))  # xt[k] = xs[..., :, k]
        out[..., r0:r1, :] = _seq_products(lambda k: xt[k][..., :, None],
                                           lambda k: y[..., None, k, :], n,
                                           out_shape[:-2] + (r1 - r0, out_shape[-1]), actx,
                                           _step_bounds(xs, y, -1, -2, fmt, actx.fmt))

    # one tile on the calling thread: 2 threads measured slower on the 2-core machine
    # (256^3 bf16, fp32 acc: 1 thread 0.036 s CPU / 0.068 s wall, 2: 0.043 / 0.086 s)
    with limit_threads(1):
        parts = max(1, min(get_num_threads(), rows, rows * per_row // _SEQ_TILE))
        step = max(1, -(-rows // parts))  # (no rows: no tile)
        run_parts(-(-rows // step), tile)
    return out


def _step_bounds(x, y, kx, ky, fmt, afmt):
    """For the chain sum_k x_k * y_k (x_k: x's entries at index k of axis kx, y_k: y's at
    axis ky), per step k: ``tmax[k]`` = max|x_k| * max|y_k|, a bound on every product, and
    ``q[k]``, an exponent such that every product of step k is a multiple of 2**q[k]: a
    nonzero value v of a float format is a multiple of 2**(max(E(v), emin) - mbits),
    E(v) = floor(log2|v|), so of 2**(that at the smallest nonzero |v|); an integer of 2**0.
    None when the bounds cannot serve (Inf or NaN operands, no entries, an integer
    accumulator): ``_ExactSteps`` then certifies nothing."""
    if afmt.kind != "float" or x.size == 0 or y.size == 0:
        return None
    n = x.shape[kx]
    ax = np.abs(np.moveaxis(x, kx, -1)).reshape(-1, n)
    ay = np.abs(np.moveaxis(y, ky, -1)).reshape(-1, n)
    with np.errstate(invalid="ignore", over="ignore"):
        tmax = ax.max(0) * ay.max(0)
    if not np.isfinite(tmax).all():
        return None

    def low(a):  # exponent of the lowest bit any nonzero entry of step k can have
        if fmt.kind != "float":
            return np.zeros(n, np.int64)
        smallest = np.where(a == 0, np.inf, a).min(0)
        smallest[np.isinf(smallest)] = fmt.max  # no nonzero entry: no constraint needed
        e = np.frexp(smallest)[1].astype(np.int64) - 1
        return np.maximum(e, fmt.emin) - fmt.mbits

    return tmax, low(ax) + low(ay)


class _ExactSteps:
    """Which steps of a sequential chain acc = round(acc + t_k) have float64 sums
    acc + t_k that are exact for every element, from scalars carried along the chain
    (``_step_bounds``' tmax and q of the products, and a bound on |acc|).

    Every product of steps 0..k is a multiple of 2**Q_k, Q_k = min(q[0..k]), and so is
    every accumulator value: an exact sum of multiples of 2**Q_k either lies on acc_fmt's
    grid (rounding keeps it) or lies in a binade whose quantum exceeds 2**Q_k, and
    rounding moves it to a multiple of that quantum (without overflow: the sums stay
    within acc_fmt's max).  So acc + t_k is a multiple of 2**Q_k, and float64 holds it
    exactly when |acc + t_k| <= bound + tmax[k] < 2**(Q_k + 53).  The bound on |acc|
    after a step is (bound + tmax[k]) (1 + 2**-mbits) + acc_fmt's smallest normal (a
    rounding moves a value by at most one quantum), widened by 2**-50 for its own
    float64 rounding; where a step is not certified, the bound is measured from acc
    (two reductions) and the step tried again, and a step that still fails is left to
    the caller (TwoSum), after which the bound is measured anew."""

    def __init__(self, afmt, tmax, q):
        self.tmax = tmax.tolist()
        self.q = np.minimum.accumulate(q).tolist()
        self.grow = (1.0 + 2.0 ** -afmt.mbits) * (1.0 + 2.0 ** -50)
        self.tiny = float(afmt.smallest_normal)
        self.max = float(afmt.max)
        self.bound = self.tmax[0] * self.grow + self.tiny  # |acc| after step 0: round(t_0)

    def _fits(self, k, bound):
        s = bound + self.tmax[k]
        return s <= self.max and (s == 0.0 or math.frexp(s)[1] <= self.q[k] + 53)

    def exact(self, k, acc) -> bool:
        """Whether the float64 sum acc + t_k is exact everywhere (and note the new bound)."""
        b = self.bound
        if b is None or not self._fits(k, b):
            if acc.size == 0:
                return False
            b = max(float(acc.max()), -float(acc.min()))  # NaN: not finite, not certified
            if not self._fits(k, b):  # (a NaN bound fails the comparisons)
                self.bound = None
                return False
        self.bound = (b + self.tmax[k]) * self.grow + self.tiny
        return True


def _seq_products(xk, yk, n, out_shape, actx, bounds=None):
    """``_seq`` over the exact products xk(k) * yk(k), with its results bit for bit, in
    preallocated buffers.  A step certified by ``_ExactSteps`` (``bounds``: the
    ``_step_bounds`` of the products) has an exact float64 sum s = acc + t, which is
    rounded as it is.  Any other step forms s and its TwoSum error e, rounds s as it is,
    and rounds again, with the remainder class of e, only the few elements where e != 0
    and s is a multiple of half a step of acc_fmt (elsewhere a remainder below half a
    float64 ulp of s cannot move s across a rounding decision).  A step with a
    non-finite sum is handed to ``_round_add``."""
    acc = np.array(actx.round(np.broadcast_to(xk(0) * yk(0), out_shape)), np.float64)
    if n == 1:
        return acc
    T, S, B, E = (np.empty(out_shape) for _ in range(4))
    f = actx.fmt
    low = np.int64((1 << (52 - f.mbits - 1)) - 1) if f.kind == "float" and f.mbits <= 50 else None
    steps = None if bounds is None else _ExactSteps(f, *bounds)
    for k in range(1, n):
        np.multiply(xk(k), yk(k), out=T)
        np.add(acc, T, out=S)
        if steps is not None and steps.exact(k, acc):
            actx.round(S, out=acc)
            continue
        np.subtract(S, acc, out=B)  # TwoSum: e = (acc - (s - b)) + (t - b)
        np.subtract(S, B, out=E)
        np.subtract(acc, E, out=E)
        np.subtract(T, B, out=B)
        np.add(E, B, out=E)
        # inexact float64 sums (and NaN errors: non-finite sums); mostly none, and any()
        # is a tenth of flatnonzero's time
        idx = np.flatnonzero(E) if E.any() else _NONE
        if idx.size:
            ef = E.reshape(-1)[idx]
            if not np.isfinite(ef).all():
                acc = _round_add(acc, T, actx)
                continue
            sv = S.reshape(-1)[idx]
            if low is not None:
                # the remainder e (|e| <= half an ulp of s in float64) can only change the
                # rounding where s is a decision point of acc_fmt: a multiple of half its
                # step, so s has no bits below its leading mbits + 1; skip the others
                keep = (sv.view(np.int64) & low) == 0
                idx, sv, ef = idx[keep], sv[keep], ef[keep]
            ts, cs = eft.to_sticky(sv, ef) if idx.size else (None, None)
        actx.round(S, out=acc)
        if idx.size:
            acc.reshape(-1)[idx] = actx.round(ts, cs)
    return acc


def _exact_products_slow(xk, yk, n, out_shape, octx):
    """Exact rational dot products for formats whose products do not fit float64."""
    cols = [np.broadcast_to(xk(k), out_shape).reshape(-1) for k in range(n)]
    rows = [np.broadcast_to(yk(k), out_shape).reshape(-1) for k in range(n)]
    m = cols[0].size if n else 0
    t = np.zeros(m)
    cls = np.zeros(m, np.int64 if octx.fine else np.uint8)
    for j in range(m):
        pairs = [(float(cols[k][j]), float(rows[k][j])) for k in range(n)]
        special = _special_dot(pairs)
        if special is not None:
            t[j] = special
            continue
        fr = builtins.sum((Fraction(a) * Fraction(b) for a, b in pairs), Fraction(0))
        if fr == 0:
            zeros = [math.copysign(0.0, a) * math.copysign(1.0, b) if a == 0 or b == 0 else 1.0
                     for a, b in pairs]
            t[j] = _zero_sum_sign(zeros, octx.mode)
        else:
            t[j], cls[j] = eft.fraction_to_sticky(fr, octx.fine)
    check_invalid(t, octx, "dot")
    return octx.round(t, cls).reshape(out_shape)


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


def _zero_sum_sign(terms, mode):
    """The IEEE zero of an exact zero sum: -0 when every term is -0, and in mode
    ``down`` unless every term is +0 (what any order of IEEE additions gives)."""
    neg = [t == 0 and math.copysign(1.0, t) < 0 for t in terms]
    pos = [t == 0 and math.copysign(1.0, t) > 0 for t in terms]
    if mode == "down":
        return 0.0 if builtins.all(pos) else -0.0
    return -0.0 if builtins.all(neg) else 0.0


def _prep_pair(a, b, ictx, kind):
    x, sx = operand_values(a, ictx)
    y, sy = operand_values(b, ictx)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"{kind} needs arrays, not scalars (use mul)")
    return x, y


@tensor_entry('dot', ('a', 'b', 'c'), device_impl=device_dot)
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



@tensor_entry('matmul', ('a', 'b', 'c'), device_impl=device_matmul)
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


def _product(kind, a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta, c, block, rounding,
             overflow, ftz, daz, rng, sr_bits):
    order = _resolve_order(order)
    block = _check_block(block)
    if model is not None:
        if order != "sequential":
            raise ValueError(f"order={order!r} does not apply with a tensor-core model: the model "
                             "fixes the order (blocks of L products chained along K)")
        from .matrixunit.tensorcore import tensorcore_product
        a, b = (x._v if isinstance(x, InFormat) else x for x in (a, b))
        acc_name = "fp32" if acc_fmt is None else acc_fmt
        if resolve_mode(rounding) in STOCHASTIC:
            rng = make_rng(rng)  # one stream: the operands, the epilogue, out_fmt, in turn
        res, actx_fmt = tensorcore_product(kind, a, b, fmt, model, acc_name, rounding=rounding,
                                           overflow=overflow, ftz=ftz, daz=daz, rng=rng,
                                           sr_bits=sr_bits)
        actx = make_ctx(actx_fmt, "nearest_even", None, False, False, None)
        octx = make_ctx(out_fmt, rounding, overflow, ftz, daz, rng, sr_bits) \
            if out_fmt is not None else actx
        res = _epilogue(res, alpha, beta, c, actx, octx, rounding, overflow, ftz, daz, rng,
                        sr_bits)
        return _final(res, "sequential", actx, octx, np.ndim(res) == 0)
    ictx, actx, octx = _contexts(fmt, acc_fmt, out_fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    x, y = _prep_pair(a, b, ictx, kind)
    if kind == "dot":
        if x.shape[-1] != y.shape[-1]:
            raise ValueError(f"dot: last axes differ ({x.shape[-1]} and {y.shape[-1]})")
        n = x.shape[-1]
        res = _reduce_products(x, y, "dot", n, actx, octx, order, block, ictx.fmt)
    else:
        x1, y1 = x.ndim == 1, y.ndim == 1
        if x1:
            x = x[None, :]
        if y1:
            y = y[:, None]
        if x.shape[-1] != y.shape[-2]:
            raise ValueError(f"matmul: shapes {x.shape} and {y.shape} do not align "
                             f"({x.shape[-1]} != {y.shape[-2]})")
        n = x.shape[-1]
        res = _reduce_products(x, y, "matmul", n, actx, octx, order, block, ictx.fmt)
        if x1:
            res = res[..., 0, :]
        if y1:
            res = res[..., 0]
    res = np.asarray(res, np.float64)
    if order == "exact":
        # the exact result was already rounded once to the output format
        if alpha != 1.0 or (c is not None and beta != 0.0):
            res = _epilogue(res, alpha, beta, c, octx, octx, rounding, overflow, ftz, daz,
                            ictx.rng, sr_bits)
        return _final(res, "exact", actx, octx, res.ndim == 0)
    res = _epilogue(res, alpha, beta, c, actx, octx, rounding, overflow, ftz, daz, ictx.rng,
                    sr_bits)
    return _final(res, order, actx, octx, res.ndim == 0)
