"""Slow models of the NVFP4 arithmetic of Transformer Engine and torchao, in Fractions.

Each fp32 operation of the libraries' cast kernels is the exact rational result rounded
to fp32 by the integer rounding of ``oracles.block_scaling.fp32_rne`` (ties to even;
subnormals on the 2**-149 grid); E4M3 and E2M1 roundings by ``ref_float_round`` (the
ml_dtypes value tables, nearest even, saturating).  One block of 16 at a time, one
element at a time.  Nothing of floatfmt is used.

TE (``transformer_engine/common/cast/nvfp4``): ``S_enc = min(fp32(2688 / amax), FLT_MAX)``
(1 for amax 0), block ``s_b = e4m3(min(fp32(amax_b * fp32(S_enc * fp32(1/6))), FLT_MAX))``,
``S_dec = fp32(1 / S_enc)``, ``e_b = min(fp32(1 / fp32(s_b * S_dec)), FLT_MAX)`` (1 / 0
is Inf, so FLT_MAX), ``q = e2m1(fp32(x * e_b))``.

torchao (``torchao/prototype/mx_formats/nvfp4_tensor.py``, ``nvfp4_quantize`` with a
per-tensor scale): ``ts = fp32(amax / 2688)``, ``s_b = e4m3(clamp(fp32(fp32(amax_b / 6) /
ts), 2**-6, 448))``, ``q = e2m1(clamp(fp32(x / fp32(ts * s_b)), -6, 6))``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .block_scaling import fp32_rne, ref_float_round

FLT_MAX = Fraction(2 ** 24 - 1, 2 ** 24) * 2 ** 128


def _blocks(x: np.ndarray, axis: int):
    """The float32 input as Fractions, moved so that ``axis`` is last, and the row slices
    of each block of 16 along it (a partial last block keeps the elements it has)."""
    xm = np.moveaxis(np.asarray(x, np.float32), axis, -1)
    X = np.vectorize(lambda v: Fraction(float(v)), otypes=[object])(xm)
    n = xm.shape[-1]
    return X, [(idx, slice(k, min(k + 16, n))) for idx in np.ndindex(xm.shape[:-1])
               for k in range(0, n, 16)]


def _result(X, blocks, axis, elem_of, scale_of):
    q = np.empty(X.shape, np.float64)
    sb = np.empty(X.shape, np.float64)
    for idx, sl in blocks:
        row = X[idx][sl]
        s = scale_of(max(abs(v) for v in row))
        q[idx + (sl,)] = [float(elem_of(v, s)) for v in row]
        sb[idx + (sl,)] = float(s)
    return np.moveaxis(q, -1, axis), np.moveaxis(sb, -1, axis)


def te_nvfp4(x: np.ndarray, axis: int = -1):
    """(E2M1 elements, each element's E4M3 block scale, S_dec) by TE's steps."""
    X, blocks = _blocks(x, axis)
    amax = max((abs(v) for v in X.flat), default=Fraction(0))
    s_enc = min(fp32_rne(Fraction(2688) / amax), FLT_MAX) if amax else Fraction(1)
    mult = fp32_rne(s_enc * fp32_rne(Fraction(1, 6)))
    s_dec = fp32_rne(1 / s_enc)

    def scale_of(amax_b):
        return ref_float_round(min(fp32_rne(amax_b * mult), FLT_MAX), "fp8_e4m3")

    def elem_of(v, s):
        prod = fp32_rne(s * s_dec)
        e = min(fp32_rne(1 / prod), FLT_MAX) if prod else FLT_MAX
        return ref_float_round(fp32_rne(v * e), "fp4_e2m1")

    q, sb = _result(X, blocks, axis, elem_of, scale_of)
    return q, sb, float(s_dec)


def torchao_nvfp4(x: np.ndarray, axis: int = -1, tensor_scale: float | None = None):
    """(E2M1 elements, each element's E4M3 block scale, ts) by torchao's steps (ts > 0)."""
    X, blocks = _blocks(x, axis)
    amax = max((abs(v) for v in X.flat), default=Fraction(0))
    ts = fp32_rne(amax / 2688) if tensor_scale is None else Fraction(float(np.float32(tensor_scale)))
    lo, hi = Fraction(1, 64), Fraction(448)

    def scale_of(amax_b):
        t = fp32_rne(fp32_rne(amax_b / 6) / ts)
        return ref_float_round(min(max(t, lo), hi), "fp8_e4m3")

    def elem_of(v, s):
        y = fp32_rne(v / fp32_rne(ts * s))
        return ref_float_round(min(max(y, Fraction(-6)), Fraction(6)), "fp4_e2m1")

    q, sb = _result(X, blocks, axis, elem_of, scale_of)
    return q, sb, float(ts)
