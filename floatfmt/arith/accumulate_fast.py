"""The numpy kernels of ``floatfmt.arith.accumulate`` that are faster than the reference
orders of ``floatfmt.arith.accumulate_orders`` and give their bits (numpy arrays and the
CPU tensors viewed as numpy arrays; ``accumulate._fast`` is the one place that picks them):

* ``seq_products``: the sequential order of dot / matmul over exact float64 products in
  preallocated buffers, rounding most steps as their float64 sum (``ExactSteps``
  certifies the exact ones; elsewhere only elements whose sum is a rounding decision
  point take the exact remainder), by tiles of output rows (``seq_products_rows``);
* ``reduce_split``: ``sum`` along an axis in parts of the outputs, shared among threads;
* ``reduce_rows``: the vectorised orders of ``matmul`` a few output rows at a time,
  shared among threads.

Under stochastic rounding the parts of ``reduce_split`` / ``reduce_rows`` draw from
``threads.block_rng(k, p)`` (k drawn once from the call's generator), so the bits do
not depend on the thread count; the reference draws from the generator itself (same
law, other bits).  ``reference()`` turns these kernels off (tests/test_accumulate_fast.py
proves both ways equal on numpy).
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator

import numpy as np

from . import eft
from ..core import flags as fpflags
from ..core.threads import block_rng, get_num_threads, limit_threads, run_parts
from .accumulate_orders import Calls, reduce_terms, round_add

__all__ = ["enabled", "reference", "products", "seq_products_ok", "seq_products", "seq_products_rows",
           "step_bounds", "ExactSteps", "reduce_split", "reduce_rows"]

_ON = [True]


def enabled() -> bool:
    """Whether the fast kernels are in use (``reference()`` turns them off)."""
    return _ON[0]


@contextlib.contextmanager
def reference() -> Iterator[None]:
    """Within the block numpy arrays take the reference orders only (the tests' oracle)."""
    old = _ON[0]
    _ON[0] = False
    try:
        yield
    finally:
        _ON[0] = old


_SPLIT_ELEMS = 1 << 14  # outputs per part of reduce_split (a core's cache of partial sums)
_CHUNK_ELEMS = 1 << 21  # terms materialised at once by reduce_rows


def _parts_rng(c: Calls, parts: int):
    """The key of the parts' generators under stochastic rounding (None otherwise)."""
    if c.a.mode == "stochastic" and parts > 1:
        return int(c.a.ctx.rng.integers(0, 1 << 63))
    return None


def _part_rounders(c: Calls, key, p):
    if key is None:
        return c.a, c.o
    a = c.a.with_rng(block_rng(key, p))
    return a, (a if c.o is c.a else c.o.with_rng(a.ctx.rng))


def reduce_split(T, c: Calls, order: str, block: int):
    """``reduce_terms`` over axis 0 of T, in parts along T's axis 1 (the outputs are
    independent) shared among threads (``floatfmt.core.threads``)."""
    if T.ndim < 2 or T.shape[0] == 0:
        return reduce_terms(T, c, order, block)
    rows = T.shape[1]
    per_row = max(1, int(np.prod(T.shape[2:], dtype=np.int64)))
    step = max(1, _SPLIT_ELEMS // per_row)
    parts = -(-rows // step)
    if parts < 2:
        return reduce_terms(T, c, order, block)
    key = _parts_rng(c, parts)
    out = np.empty(T.shape[1:])

    def part(p):
        a, o = _part_rounders(c, key, p)
        out[p * step:(p + 1) * step] = reduce_terms(T[:, p * step:(p + 1) * step], c, order, block, a, o)

    run_parts(parts, part)
    return out


def reduce_rows(x, y, n, out_shape, c: Calls, order: str, block: int):
    """The vectorised orders of a matmul: the products materialised for a few output rows
    at a time (parts on threads; under stochastic rounding, ``block_rng(key, p)``)."""
    rows = out_shape[-2]
    per_row = max(1, int(np.prod(out_shape[:-2], dtype=np.int64)) * out_shape[-1] * n)
    step = max(1, _CHUNK_ELEMS // per_row)
    out = np.empty(out_shape)
    parts = -(-rows // step)
    key = _parts_rng(c, parts)

    def part(p):
        a, o = _part_rounders(c, key, p)
        r0 = p * step
        xs = x[..., r0:r0 + step, :]
        with np.errstate(invalid="ignore", over="ignore"):
            T = np.moveaxis(xs[..., :, :, None] * y[..., None, :, :], -2, 0)
        out[..., r0:r0 + step, :] = reduce_terms(T, c, order, block, a, o)

    run_parts(parts, part)
    return out


def seq_products_ok(actx) -> bool:
    """Whether ``seq_products`` applies: the remainder class is all the rounding needs
    (not stochastic), IEEE zero signs are numpy's (not ``down``), and NaN is a value."""
    return actx.mode not in ("stochastic", "down") and actx.fmt.has_nan and not fpflags.active()


_SEQ_TILE = 1 << 12  # fewest outputs per tile of seq_products_rows
_NONE = np.zeros(0, np.intp)


def seq_products_rows(x, y, n, out_shape, actx, fmt):
    """``seq_products`` of a matmul, in tiles of output rows (at least ``_SEQ_TILE``
    outputs; for now one tile, on the calling thread, see below): the rows are
    independent and the rounding elementwise, so the tiling changes no result.  Each
    tile reads x's columns from a contiguous copy (a strided column makes the outer
    product of a step a third slower) and has its own step bounds (``step_bounds``)."""
    rows = out_shape[-2]
    per_row = max(1, int(np.prod(out_shape[:-2], dtype=np.int64)) * out_shape[-1])
    out = np.empty(out_shape)

    def tile(t):
        r0, r1 = t * step, min(rows, (t + 1) * step)
        xs = x[..., r0:r1, :]
        xt = np.ascontiguousarray(np.moveaxis(xs, -1, 0))  # xt[k] = xs[..., :, k]
        out[..., r0:r1, :] = seq_products(lambda k: xt[k][..., :, None],
                                           lambda k: y[..., None, k, :], n,
                                           out_shape[:-2] + (r1 - r0, out_shape[-1]), actx,
                                           step_bounds(xs, y, -1, -2, fmt, actx.fmt))

    # one tile on the calling thread: 2 threads measured slower on the 2-core machine
    # (256^3 bf16, fp32 acc: 1 thread 0.036 s CPU / 0.068 s wall, 2: 0.043 / 0.086 s)
    with limit_threads(1):
        parts = max(1, min(get_num_threads(), rows, rows * per_row // _SEQ_TILE))
        step = max(1, -(-rows // parts))  # (no rows: no tile)
        run_parts(-(-rows // step), tile)
    return out



def step_bounds(x, y, kx, ky, fmt, afmt):
    """For the chain sum_k x_k * y_k (x_k: x's entries at index k of axis kx, y_k: y's at
    axis ky), per step k: ``tmax[k]`` = max|x_k| * max|y_k|, a bound on every product, and
    ``q[k]``, an exponent such that every product of step k is a multiple of 2**q[k]: a
    nonzero value v of a float format is a multiple of 2**(max(E(v), emin) - mbits),
    E(v) = floor(log2|v|), so of 2**(that at the smallest nonzero |v|); an integer of 2**0.
    None when the bounds cannot serve (Inf or NaN operands, no entries, an integer
    accumulator): ``ExactSteps`` then certifies nothing."""
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


class ExactSteps:
    """Which steps of a sequential chain acc = round(acc + t_k) have float64 sums
    acc + t_k that are exact for every element, from scalars carried along the chain
    (``step_bounds``' tmax and q of the products, and a bound on |acc|).

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


def seq_products(xk, yk, n, out_shape, actx, bounds=None):
    """``accumulate_orders.seq`` over the exact products xk(k) * yk(k), with its results bit for bit, in
    preallocated buffers.  A step certified by ``ExactSteps`` (``bounds``: the
    ``step_bounds`` of the products) has an exact float64 sum s = acc + t, which is
    rounded as it is.  Any other step forms s and its TwoSum error e, rounds s as it is,
    and rounds again, with the remainder class of e, only the few elements where e != 0
    and s is a multiple of half a step of acc_fmt (elsewhere a remainder below half a
    float64 ulp of s cannot move s across a rounding decision).  A step with a
    non-finite sum is handed to ``round_add``."""
    acc = np.array(actx.round(np.broadcast_to(xk(0) * yk(0), out_shape)), np.float64)
    if n == 1:
        return acc
    T, S, B, E = (np.empty(out_shape) for _ in range(4))
    f = actx.fmt
    low = np.int64((1 << (52 - f.mbits - 1)) - 1) if f.kind == "float" and f.mbits <= 50 else None
    steps = None if bounds is None else ExactSteps(f, *bounds)
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
                acc = round_add(acc, T, actx)
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


def products(kind, x, y, n, out_shape, c: Calls, order: str, block: int, fmt):
    """The fast kernel for the exact float64 products x_k * y_k of dot / matmul in
    ``order``, or None where the reference orders are as fast (their result)."""
    actx = c.a.ctx
    if order == "sequential" and seq_products_ok(actx):
        with np.errstate(invalid="ignore", over="ignore"):
            if kind == "matmul":
                return seq_products_rows(x, y, n, out_shape, actx, fmt)
            return seq_products(lambda k: x[..., k], lambda k: y[..., k], n, out_shape, actx,
                                step_bounds(x, y, -1, -1, fmt, actx.fmt))
    if kind == "matmul" and order not in ("sequential", "kahan"):
        return reduce_rows(x, y, n, out_shape, c, order, block)
    return None
