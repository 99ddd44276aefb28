"""The fast NumPy kernel of a tensor-core model's K chain (``chain_matmul_fast``): the
same bits as the reference steps (``tfdpa``), in fewer and cheaper passes.

Per tile of outputs and block of L products along K the kernel makes four passes over
the L products and two over their int16 exponents: the exponent sums and their maximum
e_max; the products (float32 where they are exact there, else float64), each times
2**(F - e_max) (the unit of the alignment becomes 1), a truncating conversion to
integers (the alignment's truncation toward zero: C's float-to-int conversion), and an
integer sum.  The accumulator, the scaling back and the rounding to the step format are
per output (1 / L of the work), mostly on exponent bits.  Tiles of about 2**18 products
keep numpy's per-call cost small against the work (512^3 bf16 on the 2-core machine:
2**14 products a tile 1.1 s of CPU, 2**18 0.27-0.3 s).  ``fast_ok`` says when the kernel
applies and ``tensorcore.choose_kernel`` chooses between it and the reference in one place;
tests/test_tensorcore_fast.py proves them equal.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import eft
from ...core.formats import Format, get_format
from ...core.rounding import OBSERVER, round_values
from ...core.threads import run_parts

from .model import TensorCoreModel
from .tfdpa import finish

__all__ = ['fast_ok', 'product_dtype', 'chain_matmul_fast']


# Products held at once by the kernel (one step of L products for a tile of outputs):
# large enough that numpy's cost per call is small against the work (see the docstring).
_TILE_TERMS = 1 << 18
_ZERO_EXP = -16000  # int16 exponent of a zero input: its products never set e_max


def fast_ok(x, y, m: TensorCoreModel) -> bool:
    """Whether ``chain_matmul_fast`` applies: finite inputs, and a zero-term floor that
    only matters when c is zero (it is at most the accumulator's and the step format's
    smallest normal exponent, as in every preset), within int16 reach; and no
    ``ff.flags()`` block listening (the kernel truncates without the rounding routine,
    whose calls the flags count: there the reference steps run)."""
    floor = m.zero_exponent
    if m.algorithm != "t_fdpa" or OBSERVER.get() is not None:
        return False
    if m.c_entry == "aligned" and floor > min(get_format(m.acc_fmt).emin,
                                              m.output_format.emin):
        return False
    if not -900 <= floor <= 900:  # 2**(F - e_max) stays a normal double
        return False
    f = get_format(m.fmt)  # biased exponents (+1023) of products and sums index 2048 entries
    if max(2 * f.emax + 1, get_format(m.acc_fmt).emax, m.output_format.emax) > 1000 or \
            f.emin - f.mbits < -1000 or f.kind != "float":
        return False
    return bool(np.isfinite(x).all() and np.isfinite(y).all())


@lru_cache(maxsize=None)
def _tables(F: int, pdt) -> tuple:
    """Powers of two indexed by a biased exponent b = e_max + 1023 (0..2047): 2**(F - e_max)
    in the product dtype and in float64, and 2**(e_max - F) in float64.  Exponents past a
    dtype's normal range are clamped: only steps without a nonzero term read those
    (their terms are 0 times any finite number)."""
    e = np.arange(2048) - 1023
    lo, hi = (-126, 127) if pdt is np.float32 else (-1022, 1023)
    up_p = np.ldexp(1.0, np.clip(F - e, lo, hi)).astype(pdt)
    up = np.ldexp(1.0, np.clip(F - e, -1022, 1023))
    down = np.ldexp(1.0, np.clip(e - F, -1022, 1023))
    return up_p, up, down


def _biased_exponents16(v, fmt: Format, k_axis, bias: int):
    """``exponents`` of the values (finite, zero or normal doubles: the values of every
    format up to fp32) plus ``bias``, as int16 with ``_ZERO_EXP`` for zeros, the K axis
    moved to the front (contiguous)."""
    e = (v.view(np.int64) >> 52) & 0x7FF
    e = np.maximum(e - 1023, fmt.emin) + bias
    e = np.where(v != 0, e, _ZERO_EXP).astype(np.int16)
    return np.ascontiguousarray(np.moveaxis(e, k_axis, 0))


def product_dtype(x, y, in_fmt: Format, F: int):
    """float32 where every product, and every product times 2**(F - e_max), is exact
    there: significands of at most 12 bits (their products: 24), and the nonzero
    inputs' binades within [lo, 62] with lo = max(-63, (F - 127) / 2), so that products
    are normal float32 values below 2**126 and 2**(F - e_max) is a normal float32 for
    every e_max a nonzero product can set (e_max is at most 127, the largest exponent of
    a product or of an accumulator); float64 elsewhere."""
    if in_fmt.mbits > 11:
        return np.float64
    lo = max(-63, -(-(F - 127) // 2))
    for v in (x, y):
        a = np.abs(v)
        big = a.max(initial=0.0)
        small = np.min(a, initial=np.inf, where=a != 0)
        if big >= 2.0 ** 63 or small < 2.0 ** lo:
            return np.float64
    return np.float32


class _Step:
    """The constants of one call's steps (``chain_matmul_fast``)."""

    def __init__(self, m: TensorCoreModel, in_fmt: Format, pdt, nl: int):
        self.m, self.F, self.pdt, self.nl = m, m.F, pdt, nl
        self.acc_fmt, self.ofmt = get_format(m.acc_fmt), m.output_format
        self.after = m.c_entry == "after"
        self.policy = "inf" if m.overflow == "inf" and self.ofmt.inf else "saturate"
        self.floor_b = m.zero_exponent + 1023
        ofmt = self.ofmt
        self.rz = m.rounding == "toward_zero" and ofmt.kind == "float" and ofmt.mbits <= 52
        self.mask = np.int64(-(1 << (52 - ofmt.mbits)))
        # |val| < (nl + 1) 2**(e_max + 2) < 2**(ofmt.emax + 1) for e_max <= top, and a
        # nonzero |val| >= 2**(e_max - F) is normal in ofmt for e_max >= ofmt.emin + F
        self.top_b = ofmt.emax - 1 - (nl + 1).bit_length() + 1023
        self.tiny_b = ofmt.emin + self.F + 1023
        # integer sums: int32 holds nl terms below 2**(F + 2) each if nl 2**(F + 2) <= 2**31
        self.idt = np.int32 if nl << (self.F + 2) <= 1 << 31 else np.int64
        self.jdt = np.int32 if self.F + 2 <= 31 else np.int64  # one term: below 2**(F + 2)
        self.up_p, self.up, self.down = _tables(self.F, pdt)

    def finish(self, val, eb):
        """The exact sums val = S * 2**(e_max - F) (eb = e_max + 1023) rounded to the step
        format, and whether a result may be +-Inf.  Toward zero to a float format: the
        low bits cleared, where no result can be subnormal there or past its range (the
        bounds follow from e_max); the few other outputs, and other roundings, go
        through ``tfdpa.finish`` itself.  Returns (values, maybe Inf, maybe subnormal)."""
        if not self.rz:
            r = finish(val, val, None, None, self.m, self.ofmt)
            return r, not np.isfinite(r).all(), True
        r = (val.view(np.int64) & self.mask).view(np.float64)
        hi, lo = eb.max(initial=0), eb.min(initial=2047)
        tiny = False
        if hi > self.top_b or lo < self.tiny_b:
            risky = np.flatnonzero(((eb > self.top_b) | (eb < self.tiny_b)) & (val != 0))
            if risky.size:
                v = val.reshape(-1)[risky]
                r.reshape(-1)[risky] = finish(v, v, None, None, self.m, self.ofmt)
                tiny = bool((np.abs(v) < self.ofmt.smallest_normal).any())
        return r, hi > self.top_b, tiny


# size: one kernel: buffers, alignment and the accumulator chain share the tile's state;
# the tiles run on threads
def chain_matmul_fast(x, y, in_fmt: Format, m: TensorCoreModel, c, out_shape):
    """``_chain_matmul`` for finite inputs (see ``fast_ok``), bit for bit the same steps.

    Per tile of output rows and block of L products along K: e_max is the largest of the
    int16 exponent sums e_a + e_b of the nonzero products (a zero input's exponent is
    far below every other), ``zero_exponent`` and the accumulator's exponent (but not
    with ``c_entry="after"``).  Every product times 2**(F - e_max) is exact (the product
    dtype: ``product_dtype``) and below 2**(F + 2) in magnitude; its conversion to an
    integer truncates toward zero, which is the alignment's truncation to a multiple of
    the unit 2**(e_max - F); the integers are summed exactly (int32, or int64 where L
    terms could pass 2**31), the truncated c is added in float64, and the sum times
    2**(e_max - F) is the exact value of the step, rounded once to the step format
    (``_Step.finish``).  Products of finite inputs are finite, so only the accumulator
    can carry Inf or NaN."""
    if out_shape[-1] < out_shape[-2]:
        # fewer columns than rows: work on the transpose (the model is symmetric in a and b), so that
        # numpy's inner loops run along the long axis
        ct = None if c is None else np.swapaxes(np.broadcast_to(c, out_shape), -1, -2)
        tshape = out_shape[:-2] + (out_shape[-1], out_shape[-2])
        return np.swapaxes(chain_matmul_fast(np.swapaxes(y, -1, -2), np.swapaxes(x, -1, -2),
                                              in_fmt, m, ct, tshape), -1, -2)
    nb = len(out_shape) - 2
    x = x.reshape((1,) * (nb - (x.ndim - 2)) + x.shape)
    y = y.reshape((1,) * (nb - (y.ndim - 2)) + y.shape)
    K, L = x.shape[-1], m.L
    pdt = product_dtype(x, y, in_fmt, m.F)
    xK = np.ascontiguousarray(np.moveaxis(x, -1, 0), pdt)  # (K, ..., M)
    yK = np.ascontiguousarray(np.moveaxis(y, -2, 0), pdt)  # (K, ..., N)
    # e_a + 1023 and e_b: their sums are the products' biased exponents
    exK = _biased_exponents16(x, in_fmt, -1, 1023)
    eyK = _biased_exponents16(y, in_fmt, -2, 0)
    batch, rows, cols = out_shape[:-2], out_shape[-2], out_shape[-1]
    nl = max(1, min(L, K))
    st = _Step(m, in_fmt, pdt, nl)
    per_row = max(1, int(np.prod(batch, dtype=np.int64)) * cols)
    step = max(1, _TILE_TERMS // (per_row * nl))
    out = np.empty(out_shape)
    c = np.zeros(out_shape) if c is None else np.broadcast_to(c, out_shape)

    def tile(ti):  # one tile of output rows (tiles run on threads: floatfmt.core.threads)
        r0 = ti * step
        r1 = min(rows, r0 + step)
        tshape = batch + (r1 - r0, cols)
        E = np.empty((nl,) + tshape, np.int16)
        P = np.empty((nl,) + tshape, pdt)
        J = np.empty((nl,) + tshape, st.jdt)
        acc = np.array(c[..., r0:r1, :], np.float64)
        special = not np.isfinite(acc).all()  # Inf or NaN in the accumulator
        a = np.abs(acc)
        tiny = bool(((a < st.acc_fmt.smallest_normal) & (a != 0)).any())  # subnormal c
        cemin_b = st.acc_fmt.emin + 1023
        for k0 in range(0, K, L):
            k1 = min(K, k0 + L)
            e, p, j = E[:k1 - k0], P[:k1 - k0], J[:k1 - k0]
            np.add(exK[k0:k1, ..., r0:r1, None], eyK[k0:k1, ..., None, :], out=e)
            np.multiply(xK[k0:k1, ..., r0:r1, None], yK[k0:k1, ..., None, :], out=p)
            eb = np.maximum.reduce(e, axis=0, initial=st.floor_b)  # e_max + 1023, products
            fin = old = None
            if not st.after:
                ef = ((acc.view(np.uint64) << np.uint64(1)) >> np.uint64(53)).view(np.int64)
                if special:
                    fin, old = ef != 2047, acc
                    acc, ef = np.where(fin, acc, 0.0), np.where(fin, ef, 0)
                if tiny:  # a subnormal c has the exponent emin (a zero c: the floor)
                    ef = np.where(ef != 0, np.maximum(ef, cemin_b), 0)
                eb = np.maximum(eb, ef)
            np.multiply(p, np.take(st.up_p, eb), out=p)
            np.copyto(j, p, casting="unsafe")  # truncation toward zero: C's conversion
            val = np.add.reduce(j, axis=0, dtype=st.idt).astype(np.float64)
            if st.after:
                val *= np.take(st.down, eb)
                s, _, _ = st.finish(val, eb)
                t, cls = eft.exact_sum(s, acc)
                acc = round_values(t, st.ofmt, "nearest_even", st.policy, sticky=cls)
                continue
            yc = acc * np.take(st.up, eb)  # exact: |c| < 2**(e_max + 1)
            val += np.trunc(yc, out=yc)  # an exact zero is +0 (integers as float64)
            val *= np.take(st.down, eb)
            acc, over, tiny = st.finish(val, eb)
            if fin is not None:  # Inf or NaN in c: the result is c (NaN canonical)
                acc = np.where(fin, acc, np.where(np.isnan(old), np.nan, old))
            special = special or (m.overflow == "inf" and bool(over))
            cemin_b = st.ofmt.emin + 1023  # later steps: c is a value of the step format
        out[..., r0:r1, :] = acc

    # the tiles share floatfmt's threads (``get_num_threads``); the bits do not depend on
    # it.  512^3 bf16 on the 2-core machine: 265 ms on one thread, 165 ms on two
    with np.errstate(under="ignore"):
        run_parts(-(-rows // step), tile)
    return out
