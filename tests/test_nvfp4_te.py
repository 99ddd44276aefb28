"""NVFP4 by Transformer Engine's scale arithmetic (floatfmt.scaling.nvfp4_te) against an
independent slow model: every fp32 step of TE's cast kernel written out with Fractions
and rounded by MPFR (gmpy2), E4M3 and E2M1 rounding by MPFR contexts described from the
formats' fields here (not floatfmt's rounding).  Zero mismatches is the pass."""

from __future__ import annotations

from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpfr, mpq

import floatfmt as ff
from floatfmt.scaling.mx_nvfp4 import nvfp4_quantize
from floatfmt.scaling.nvfp4_te import nvfp4_te_quantize, te_block_scales, te_encode_scale, te_gemm_alpha

# MPFR writes 0.1xxx * 2**E: smallest positive 2**(emin - 1); emax: the exponent of the top binade
_F32 = dict(precision=24, emin=-148, emax=128, subnormalize=True)
_E4M3 = dict(precision=4, emin=-8, emax=10, subnormalize=True)   # 2**-9 .. 448, room above
_E2M1 = dict(precision=2, emin=0, emax=4, subnormalize=True)     # 0.5 .. 6, room above
FLT_MAX = Fraction(2 ** 24 - 1, 2 ** 24) * 2 ** 128


def rnd(ctx, q: Fraction) -> Fraction:
    """q rounded to nearest even in ctx; +-inf past the top stays an Inf marker (None)."""
    with gmpy2.context(gmpy2.get_context(), round=gmpy2.RoundToNearest, **ctx):
        r = mpfr(mpq(q.numerator, q.denominator))
    if gmpy2.is_infinite(r):
        return Fraction(10 ** 60) * (1 if q > 0 else -1)  # an overflow: larger than any clamp
    return Fraction(*r.as_integer_ratio())


def sat(q: Fraction, top: Fraction) -> Fraction:
    return max(-top, min(top, q))


def f32(q: Fraction) -> Fraction:
    return rnd(_F32, q)


def oracle(x: np.ndarray, axis: int, tile: tuple) -> tuple[np.ndarray, np.ndarray, Fraction]:
    """(E2M1 elements, per-element E4M3 block scale, S_dec) by TE's steps, one element at a time."""
    x = np.asarray(x, np.float32)
    X = np.vectorize(lambda v: Fraction(float(v)), otypes=[object])(x)
    amax = max((abs(v) for v in X.flat), default=Fraction(0))
    s_enc = f32(Fraction(2688) / amax) if amax else Fraction(1)
    s_enc = min(s_enc, FLT_MAX)
    if amax == 0 or s_enc == 0:
        s_enc = Fraction(1)
    inv6 = f32(Fraction(1, 6))
    mult = f32(s_enc * inv6)
    s_dec = f32(1 / s_enc)
    # the block amax of each element
    bam = np.empty(x.shape, object)
    if tile == (16, 16):
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                i0, j0 = i - i % 16, j - j % 16
                bam[i, j] = max(abs(v) for v in X[i0:i0 + 16, j0:j0 + 16].flat)
    else:
        Xm = np.moveaxis(X, axis, -1)
        B = np.empty(Xm.shape, object)
        for idx in np.ndindex(Xm.shape):
            k = idx[-1] - idx[-1] % 16
            B[idx] = max(abs(v) for v in Xm[idx[:-1]][k:k + 16])
        bam = np.moveaxis(B, -1, axis)
    q = np.empty(x.shape, np.float64)
    sb_out = np.empty(x.shape, np.float64)
    for idx in np.ndindex(x.shape):
        t = min(f32(bam[idx] * mult), FLT_MAX)
        sb = sat(rnd(_E4M3, t), Fraction(448))
        prod = f32(sb * s_dec)
        e = min(f32(1 / prod), FLT_MAX) if prod else FLT_MAX
        y = f32(X[idx] * e)
        q[idx] = float(sat(rnd(_E2M1, y), Fraction(6)))
        sb_out[idx] = float(sb)
    return q, sb_out, s_dec


def _cases(rng):
    """float32 arrays: wide magnitudes, tiny blocks next to large ones (block scales in the
    E4M3 subnormals and at zero), values on the E2M1 grid of amax / 6 and between."""
    out = []
    for k in (-60, -20, -3, 0, 5, 30, 60):
        out.append((rng.standard_normal((3, 48)) * 2.0 ** k))
    a = rng.standard_normal((2, 64))
    a[:, 16:32] *= 2.0 ** -12
    a[:, 32:48] *= 2.0 ** -30
    out.append(a)
    g = rng.integers(-24, 25, (4, 32)) * (7.0 / 24)     # multiples of amax / 24: midpoints
    g[:, 0] = 7.0
    out.append(g)
    out.append(np.full((1, 16), 3.0))
    out.append(np.zeros((2, 16)))
    out.append(rng.standard_normal((5, 21)))            # a partial block
    return [np.asarray(c, np.float32) for c in out]


def test_te_convention_matches_the_slow_model_1x16():
    rng = np.random.default_rng(23)
    bad = total = 0
    for c in _cases(rng):
        for axis in (-1, 0):
            q = nvfp4_te_quantize(c, axis)
            oq, osb, osd = oracle(c, axis, (1, 16))
            sb = np.moveaxis(np.repeat(np.moveaxis(q.scale, axis, -1), 16, axis=-1)[..., :np.moveaxis(c, axis, -1).shape[-1]], -1, axis)
            bad += int((q.elements != oq).sum() + (sb != osb).sum() + (q.tensor_scale != float(osd)))
            total += c.size
    assert total > 1500
    assert bad == 0


def test_te_convention_matches_the_slow_model_16x16():
    rng = np.random.default_rng(5)
    bad = 0
    for shape, k in (((16, 32), 0), ((40, 24), 10), ((17, 33), -8)):
        w = (rng.standard_normal(shape) * 2.0 ** k).astype(np.float32)
        w[:16, :16] *= 2.0 ** -20  # one tile far below the others
        oq, osb, osd = oracle(w, -1, (16, 16))
        for axis in (-1, 0):
            q = nvfp4_te_quantize(w, axis, tile=(16, 16))
            d = q.dequantize()
            bad += int((q.elements != oq).sum() + (d != oq * osb * float(osd)).sum())
    assert bad == 0


def test_two_roundings_differ_from_the_exact_convention_somewhere():
    """TE's multiply chain and floatfmt's exact quotients are different rules: on random data
    they agree, but with elements at (fp32 roundings of) the exact convention's E2M1
    midpoints many differ, and the slow model sides with TE's path there."""
    rng = np.random.default_rng(1)
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    differ = 0
    for _ in range(20):
        x = np.zeros((1, 16), np.float32)
        x[0, 0] = rng.uniform(0.5, 100)
        ex = ff.quantize(x, "nvfp4")
        step = float(ex.scale[0, 0]) * ex.tensor_scale
        x[0, 1:8] = mids * step
        x[0, 8:15] = -mids * step
        te = nvfp4_te_quantize(x)
        differ += int((te.dequantize() != ff.quantize(x, "nvfp4").dequantize()).sum())
        assert (te.elements == oracle(x, -1, (1, 16))[0]).all()
    assert differ > 20


def test_scale_edges():
    assert float(te_encode_scale(0.0)) == 1.0
    assert float(te_encode_scale(np.inf)) == 1.0          # 2688 / inf = 0 -> 1
    assert float(te_encode_scale(2.0 ** -140)) == float(np.finfo(np.float32).max)
    assert te_block_scales([1e30], 1.0).tolist() == [448.0]  # saturating E4M3
    assert te_gemm_alpha(2688.0, 2688.0, 2.0) == 2.0


def test_stochastic_rounding_is_unbiased_by_frequency():
    """1 x 16 blocks, identical rows: each element's mean over many stochastic draws is
    the scaled value y = fp32(x * e_b) of the slow model, within 5 binomial sigmas."""
    row = np.array([7.0, 0.3, -1.1, 2.2, 0.01, 5.5, -4.9, 3.3, 0.7, -0.2, 1.3, 2.6, -3.9, 0.45, 6.1, 1.0],
                   np.float32)
    n = 20000
    x = np.tile(row, (n, 1))
    q = nvfp4_te_quantize(x, rounding="stochastic", rng=3).elements
    X = [Fraction(float(v)) for v in row]
    amax = max(abs(v) for v in X)
    s_enc = f32(Fraction(2688) / amax)
    sb = sat(rnd(_E4M3, f32(amax * f32(s_enc * f32(Fraction(1, 6))))), Fraction(448))
    e = f32(1 / f32(sb * f32(1 / s_enc)))
    y = np.array([float(f32(v * e)) for v in X])
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    lo = np.array([grid[grid <= abs(v)].max() for v in y])
    hi = np.array([grid[grid >= abs(v)].min() for v in y])
    p = np.where(hi > lo, (np.abs(y) - lo) / np.where(hi > lo, hi - lo, 1), 0)
    sigma = (hi - lo) * np.sqrt(p * (1 - p) / n)
    mean = q.mean(axis=0)
    assert np.all(np.abs(mean - y) <= 5 * sigma + 1e-12)
    assert set(np.unique(np.abs(q))) <= set(grid)
    assert (q.std(axis=0) > 0).sum() >= 10     # it does draw


def test_mx_nvfp4_hook_and_errors():
    x = np.linspace(-3, 5, 32).reshape(2, 16)
    a = nvfp4_quantize(x, None, True, 1, "nearest_even", None, scale_convention="te")
    assert (a.elements == nvfp4_te_quantize(x, 1).elements).all()
    with pytest.raises(ValueError, match="tile"):
        nvfp4_te_quantize(x, tile=(32, 32))
    with pytest.raises(ValueError, match="2-D"):
        nvfp4_te_quantize(np.ones((2, 2, 16)), tile=(16, 16))
    with pytest.raises(ValueError, match="non-finite"):
        nvfp4_te_quantize(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="nearest even or stochastic"):
        nvfp4_te_quantize(x, rounding="toward_zero")
