"""The fast NumPy kernel of a tensor-core model's K chain (``chain_matmul_fast``):
int16 exponents, per-block alignment in cache-sized tiles, on threads.  It must
equal the reference steps (``tfdpa``) bit for bit; ``fast_ok`` says when it applies
and ``tensorcore`` chooses between them in one place.
"""

from __future__ import annotations

import numpy as np

from .. import eft
from ...core.formats import Format, get_format
from ...core.rounding import round_values
from ...core.threads import limit_threads, run_parts

from .model import TensorCoreModel
from .tfdpa import ALIGNED, exponents, finish

__all__ = ['fast_ok', 'chain_matmul_fast']


# Products held at once by the fast kernel (one step of L products for a tile of outputs):
# small enough that its three buffers stay in a core's cache.
_TILE_TERMS = 1 << 16
_ZERO_EXP = -16000  # int16 exponent of a zero input: its products never set e_max


def fast_ok(x, y, m: TensorCoreModel) -> bool:
    """Whether ``chain_matmul_fast`` applies: finite inputs, and a zero-term floor that
    only matters when c is zero (it is at most the accumulator's and the step format's
    smallest normal exponent, as in every preset), within int16 reach."""
    floor = m.zero_exponent
    if m.algorithm != "t_fdpa":  # the AMD steps run on the generic path
        return False
    if m.c_entry == "aligned" and floor > min(get_format(m.acc_fmt).emin,
                                              m.output_format.emin):
        return False
    if not -900 <= floor <= 900:  # 2**(F - e_max) stays a normal double
        return False
    return bool(np.isfinite(x).all() and np.isfinite(y).all())


def _pow2(k):
    """2.0**k for int64 k in -1022..1023, from the exponent bits."""
    return ((k + 1023) << 52).view(np.float64)


def _exponents_bits(v, fmt: Format):
    """``exponents`` of finite values that are normal doubles (or zero), from the
    exponent bits: max(floor(log2|v|), emin)."""
    e = (v.view(np.int64) >> 52) & 0x7FF
    return np.maximum(e - 1023, fmt.emin)


def _exponents16(v, fmt: Format, k_axis):
    """The exponents of ``exponents`` as int16 with ``_ZERO_EXP`` for zeros, the K axis
    moved to the front (contiguous)."""
    e = np.where(v != 0, exponents(v, fmt), _ZERO_EXP).astype(np.int16)
    return np.ascontiguousarray(np.moveaxis(e, k_axis, 0))


# size: one kernel: buffers, per-block alignment and the accumulator chain share the
# tile's state; the tiles run on threads
def chain_matmul_fast(x, y, in_fmt: Format, m: TensorCoreModel, c, out_shape):
    """``_chain_matmul`` for finite inputs (see ``fast_ok``), bit for bit the same steps.

    Per tile of output rows and block of L products along K: the L products and their
    exponents e_a + e_b are formed in buffers of L x tile (int16 exponents), e_max is
    one maximum over the block, and the unit of the alignment is q = 2**(e_max - F).
    A product whose last bit (at least 2**(e_a + e_b - 2 mbits)) is not below q is a
    multiple of q already; only the others are scaled to units by 2**(F - e_max),
    truncated toward zero by ``round_values`` and scaled back (all exact).  Every term
    is then a multiple of q below 2**(F + 2) q, so their float64 sum is exact.  Products
    of finite inputs are finite, so only the accumulator can carry Inf or NaN."""
    if out_shape[-1] < out_shape[-2] and out_shape[-1] < 64:
        # few columns: work on the transpose (the model is symmetric in a and b), so that
        # numpy's inner loops run along the long axis
        ct = None if c is None else np.swapaxes(np.broadcast_to(c, out_shape), -1, -2)
        tshape = out_shape[:-2] + (out_shape[-1], out_shape[-2])
        return np.swapaxes(chain_matmul_fast(np.swapaxes(y, -1, -2), np.swapaxes(x, -1, -2),
                                              in_fmt, m, ct, tshape), -1, -2)
    nb = len(out_shape) - 2
    x = x.reshape((1,) * (nb - (x.ndim - 2)) + x.shape)
    y = y.reshape((1,) * (nb - (y.ndim - 2)) + y.shape)
    K = x.shape[-1]
    xK = np.ascontiguousarray(np.moveaxis(x, -1, 0))  # (K, ..., M)
    yK = np.ascontiguousarray(np.moveaxis(y, -2, 0))  # (K, ..., N)
    exK, eyK = _exponents16(x, in_fmt, -1), _exponents16(y, in_fmt, -2)
    F, L, floor = m.F, m.L, m.zero_exponent
    thr = F - 2 * in_fmt.mbits
    batch, rows, cols = out_shape[:-2], out_shape[-2], out_shape[-1]
    per_row = max(1, int(np.prod(batch, dtype=np.int64)) * cols)
    step = max(1, _TILE_TERMS // (per_row * min(L, max(K, 1))))
    out = np.empty(out_shape)
    c = np.zeros(out_shape) if c is None else np.broadcast_to(c, out_shape)
    acc_fmt, ofmt = get_format(m.acc_fmt), m.output_format
    after = m.c_entry == "after"
    policy = "inf" if m.overflow == "inf" and ofmt.inf else "saturate"

    def tile(ti):  # one tile of output rows (tiles run on threads: floatfmt.core.threads)
        r0 = ti * step
        r1 = min(rows, r0 + step)
        tshape = batch + (r1 - r0, cols)
        nl = min(L, K)
        E = np.empty((nl,) + tshape, np.int16)
        P = np.empty((nl,) + tshape)
        D = np.empty((nl,) + tshape, np.int16)
        acc = np.array(c[..., r0:r1, :], np.float64)
        cfmt = acc_fmt
        for k0 in range(0, K, L):
            k1 = min(K, k0 + L)
            e, p, d = E[:k1 - k0], P[:k1 - k0], D
            np.add(exK[k0:k1, ..., r0:r1, None], eyK[k0:k1, ..., None, :], out=e)
            with np.errstate(under="ignore"):
                np.multiply(xK[k0:k1, ..., r0:r1, None], yK[k0:k1, ..., None, :], out=p)
            em = np.maximum.reduce(e, axis=0).astype(np.int64)
            if after:
                cv = None
                e_max = np.maximum(em, floor)
            else:
                fin = np.isfinite(acc)
                cv = np.where(fin, acc, 0.0)
                e_max = np.maximum(em, np.where(cv != 0, _exponents_bits(cv, cfmt), floor))
            scale = F - e_max
            # d = e_max - e_a - e_b - (F - 2 mbits) - 1: where it is negative the product
            # is a multiple of the unit q = 2**(e_max - F) already (its last bit is at
            # least 2**(e_a + e_b - 2 mbits)), and zero products have d >= 8000; only
            # the others are truncated, scaled to units by 2**scale and back (exact).
            np.subtract((e_max - (thr + 1)).astype(np.int16), e, out=d[:k1 - k0])
            need = np.flatnonzero(d[:k1 - k0].view(np.uint16) < 8000)
            if need.size:
                pf, at = p.reshape(-1), need % scale.size
                sf = scale.reshape(-1)[at]
                with np.errstate(under="ignore"):
                    y = pf[need] * _pow2(sf)
                pf[need] = round_values(y, ALIGNED, "toward_zero", "saturate", out=y) \
                    * _pow2(-sf)
            # every term is now a multiple of q below 2**(F + 2) q: the float64 sum of up
            # to 33 of them is exact in any order
            val = np.add.reduce(p, axis=0)
            if after:
                s = finish(val, val, None, None, m, ofmt)
                t, cls = eft.exact_sum(s, acc)
                acc = round_values(t, ofmt, "nearest_even", policy, sticky=cls)
            else:
                yc = cv * _pow2(scale)  # exact: |c| < 2**(e_max + 1)
                val += round_values(yc, ALIGNED, "toward_zero", "saturate", out=yc) \
                    * _pow2(-scale)
                acc = finish(val, val, ~fin, acc, m, ofmt)
            cfmt = ofmt
        out[..., r0:r1, :] = acc

    with limit_threads(1):  # 2 threads measured slower here (h100 256^3: 94 -> 128 ms)
        run_parts(-(-rows // step), tile)
    return out
