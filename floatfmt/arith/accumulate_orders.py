"""The accumulation orders of ``floatfmt.arith.accumulate``, written once over the array
namespace: one body for numpy arrays and for tensors of any device.

A reduction call rounds in three formats: its inputs (``fmt``), its accumulator
(``acc_fmt``) and its output (``out_fmt``, else the accumulator's).  ``calls`` makes
the three ``Rounder`` objects of one call, for numpy arrays (``ops`` contexts, drawing
stochastic rounding's numbers from one numpy Generator) or for tensors
(``ops.OpCall``, one ``torch.Generator`` per call); this is the one place
that picks the step kernels of a namespace.  A ``Rounder`` gives the orders what they
need: ``round`` (exact values with their remainder class, or ``resid`` under
stochastic rounding, rounded once), ``add`` (round(acc + t) from the exact sum),
``product`` / ``fma_step`` (exact products of formats too wide for float64) and
``exact`` (the exact sum of many terms rounded once, ``accumulate_exact``).

The orders (``reduce_terms``): the terms are stacked on axis 0.

``sequential``  acc = round(acc + t_k), acc starting as round(t_0)
``pairwise``    adjacent pairs added level by level (an odd last one moves up)
``kahan``       y = t - c; s' = s + y; c = (s' - s) - y, each rounded to acc_fmt
``blocked``     sequential sums of ``block`` terms, then a sequential sum of those
``exact``       the exact sum, rounded once to the output format
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from . import eft
from ..backend.namespace import NUMPY, namespace_of
from ..core import flags as fpflags
from .accumulate_exact import exact_sum_terms
from .ops import check_invalid, make_ctx, operand_values, zero_signs
from .ops import OpCall as DeviceCall, rounded_sum
from .residuals import fma_parts, product_parts

__all__ = ["Rounder", "Calls", "calls", "round_add", "seq", "pairwise", "kahan", "blocked",
           "reduce_terms"]


def round_add(acc, term, actx):
    """round(acc + term) of numpy arrays from the exact sum (one rounding): the float64
    sum s and its TwoSum error e; only the elements with e != 0 take the slow exact path
    (``eft.to_sticky``)."""
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


class Rounder:
    """One format's roundings within a reduction call: ``ctx`` an ``ops`` context
    (numpy arrays) or an ``ops.OpCall`` (tensors)."""

    def __init__(self, ctx: Any, host: bool):
        self.ctx, self.host = ctx, host
        self.fmt = ctx.fmt
        self.mode = ctx.mode if host else ctx.ctx.mode
        self.fine = ctx.fine

    def round(self, v: Any, cls: Any = None) -> Any:
        """Round exact values v (truncated toward zero, with their class or resid)."""
        return self.ctx.round(v, cls)

    def add(self, acc: Any, t: Any) -> Any:
        """round(acc + t) from the exact sum, IEEE zero signs, invalid results refused
        for formats without NaN."""
        if self.host:
            return round_add(acc, t, self.ctx)
        return rounded_sum(self.ctx, acc, t, "accumulation")

    def invalid(self, v: Any, name: str, *operands: Any) -> Any:
        """v, after refusing NaN results for formats without NaN (``name`` in the message;
        numpy: inside ``ff.flags()`` also counting invalid where no operand is NaN)."""
        if self.host:
            check_invalid(v, self.ctx, name, *operands)
            return v
        return self.ctx.finish(v, name)

    def product(self, p: Any, q: Any) -> tuple[Any, Any]:
        """The exact p * q of float64 arrays of any magnitude as (t, class or resid)."""
        if self.host:
            return eft.exact_product(p, q, fine=self.fine)
        return product_parts(p, q, self.mode, self.fine)

    def fma_step(self, p: Any, q: Any, acc: Any) -> Any:
        """round(p * q + acc), exactly, for float64 arrays of any magnitude."""
        if self.host:
            t, cls = eft.exact_fma(p, q, acc, fine=self.fine)
            if (t == 0).any():  # exact_fma gives +0: signs as for p q + acc
                z = np.where((p == 0) | (q == 0), np.where(np.signbit(p) ^ np.signbit(q), -0.0, 0.0),
                             1.0)
                t = zero_signs(t, cls, z, acc, self.mode)
        else:
            t, cls = fma_parts(p, q, acc, self.mode, self.fine)
        return self.round(self.invalid(t, "accumulation"), cls)

    def exact(self, T: Any, name: str = "sum", strategy: str | None = None) -> Any:
        """The exact sum over axis 0 of the float64 terms T, rounded once."""
        t, cls = exact_sum_terms(T, self.mode, self.fine, strategy=strategy)
        nan_terms: tuple = ()
        if self.host and fpflags.active():  # NaN terms are quiet; Inf - Inf is invalid
            X = T.reshape(T.shape[0], -1)
            nan_terms = (np.where(np.isnan(X).any(0), np.nan, 0.0).reshape(t.shape),)
        return self.round(self.invalid(t, name, *nan_terms), cls)

    def with_rng(self, g: Any) -> Rounder:
        """The same rounding drawing from the numpy Generator g (numpy's parts)."""
        return Rounder(replace(self.ctx, rng=g), True)


class Calls:
    """The three roundings of one reduction call: inputs ``i``, accumulator ``a``,
    output ``o`` (``a`` itself when there is no out_fmt); ``xp`` the namespace, ``rng``
    the call's one generator (numpy Generator or ``torch.Generator``; None when not
    stochastic)."""

    def __init__(self, i: Rounder, a: Rounder, o: Rounder, xp: Any, rng: Any):
        self.i, self.a, self.o, self.xp, self.rng = i, a, o, xp, rng
        self.host = i.host

    def operand(self, x: Any, r: Rounder | None = None) -> Any:
        """x cast to the format of ``r`` (default the inputs') as float64 values."""
        r = r or self.i
        if self.host:
            return operand_values(x, r.ctx)[0]
        return r.ctx.operand(x)


def calls(name: str, operands: list, fmt: Any, acc_fmt: Any, out_fmt: Any, rounding: Any,
          overflow: Any, ftz: Any, daz: Any, rng: Any, sr_bits: Any) -> Calls:
    """The ``Calls`` of one reduction on ``operands`` (numpy or tensors: the namespace of
    the first tensor among them)."""
    xp = namespace_of(*operands)
    if xp is NUMPY:
        ictx = make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits)
        actx = make_ctx(acc_fmt if acc_fmt is not None else ictx.fmt, rounding, overflow, ftz,
                        daz, ictx.rng, sr_bits)
        octx = make_ctx(out_fmt, rounding, overflow, ftz, daz, ictx.rng, sr_bits) \
            if out_fmt is not None else actx
        i, a = Rounder(ictx, True), Rounder(actx, True)
        return Calls(i, a, a if octx is actx else Rounder(octx, True), xp, ictx.rng)
    tensors = [x for x in operands if x is not None]
    di = DeviceCall(name, tensors, fmt, rounding, overflow, ftz, daz, sr_bits, rng, False)
    da = di.share(name, tensors, acc_fmt if acc_fmt is not None else fmt, False)
    do = di.share(name, tensors, out_fmt, False) if out_fmt is not None else da
    i, a = Rounder(di, False), Rounder(da, False)
    return Calls(i, a, a if do is da else Rounder(do, False), xp, di.generator)


# ------------------------------------------------------------------------------- the orders
def seq(terms: Any, a: Rounder) -> Any:
    """Sequential accumulation of terms[0], terms[1], ... (an iterable of arrays)."""
    acc = None
    for t in terms:
        acc = a.round(t) if acc is None else a.add(acc, t)
    return acc


def pairwise(T: Any, a: Rounder, xp: Any) -> Any:
    """Binary-tree sum over axis 0 of the stacked terms T."""
    if T.shape[0] == 1:
        return a.round(T[0])
    while T.shape[0] > 1:
        n = T.shape[0]
        m = n // 2
        s = a.add(T[0:2 * m:2], T[1:2 * m:2])
        T = xp.concatenate([s, T[2 * m:]], 0) if n % 2 else s
    return T[0]


def kahan(terms: Any, a: Rounder, shape: tuple, xp: Any, like: Any) -> Any:
    """Compensated sum.  s starts as the first term (what s = 0 + t_0 gives, but keeping
    a -0 term's sign) and a zero t with a zero c gives y = t (t - 0 is t; IEEE's
    +0 - +0 = -0 in mode down would put a sign on a sum of +0 terms that no other
    order gives)."""
    s: Any = None
    c: Any = None
    for t in terms:
        if s is None:
            s = xp.copy(xp.broadcast_to(a.round(t), shape))
            c = xp.zeros(shape, like)
            continue
        y = a.add(t, -c)
        if a.fmt.negative_zero:
            y = xp.where((c == 0) & (t == 0), t, y)
        s_new = a.add(s, y)
        c = a.add(a.add(s_new, -s), -y)
        s = s_new
    return xp.zeros(shape, like) if s is None else s


def blocked(T: Any, a: Rounder, block: int, xp: Any) -> Any:
    """Sequential sums of ``block`` consecutive terms, then a sequential sum of those."""
    n = T.shape[0]
    nb = -(-n // block)
    pad = nb * block - n
    if pad:
        T = xp.concatenate([T, xp.zeros((pad,) + tuple(T.shape[1:]), T)], 0)
    B = T.reshape((nb, block) + tuple(T.shape[1:]))
    acc = a.round(B[:, 0])
    for j in range(1, block):
        new = a.add(acc, B[:, j])
        if pad and j >= block - pad:  # the last block is shorter: leave it alone there
            new[nb - 1] = acc[nb - 1]
        acc = new
    return seq((acc[i] for i in range(nb)), a)


def reduce_terms(T: Any, c: Calls, order: str, block: int, a: Rounder | None = None,
                 o: Rounder | None = None) -> Any:
    """Sum the stacked float64 terms T over axis 0 in ``order`` (in the accumulator's
    format; ``exact``: rounded once to the output format).  ``a`` / ``o``: roundings
    other than the call's (numpy's parts drawing from their own generators)."""
    a, o, xp = a or c.a, o or c.o, c.xp
    if T.shape[0] == 0:
        return xp.zeros(tuple(T.shape[1:]), T)
    if order == "sequential":
        return seq((T[k] for k in range(T.shape[0])), a)
    if order == "pairwise":
        return pairwise(T, a, xp)
    if order == "kahan":
        return kahan((T[k] for k in range(T.shape[0])), a, tuple(T.shape[1:]), xp, T)
    if order == "blocked":
        return blocked(T, a, block, xp)
    return o.exact(T, "sum")
