"""floatfmt.torch.fake_quant: the same bits as floatfmt.fake_quant on numpy, and the
straight-through gradients it defines (identity, clipped at the saturation limits)."""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")
fft = pytest.importorskip("floatfmt.torch")


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(autouse=True, params=["host", "namespace"])
def path(request):
    """Each test twice: CPU tensors through the numpy kernels (the default) and
    through the device (namespace) code (``floatfmt.backend.dispatch.force_namespace``)."""
    from floatfmt.backend.dispatch import force_namespace
    with force_namespace(request.param == "namespace"):
        yield request.param


def data(shape, seed, spread=20):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))
    x.reshape(-1)[:4] = [0.0, -0.0, 1e-300, -3e-310]
    return x


def same(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


INT = ["int8", "uint8", "int4", "uint4"]
FLOAT = ["fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "bf16", "fp16"]
MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "down", "odd"]


@pytest.mark.parametrize("fmt", INT + FLOAT)
def test_fake_quant_equals_numpy(fmt):
    """Every deterministic mode, per tensor and per channel (both axes), symmetric and
    asymmetric (integers), pow2 scales, margins, given scales: zero mismatches against
    floatfmt.fake_quant on the same float64 data, and on float32 data."""
    x = data((48, 80), 3)
    schemes = ["symmetric", "asymmetric"] if fmt in INT else ["symmetric"]
    n_bad = n = 0
    for src in (x, x.astype(np.float32)):
        for scheme in schemes:
            for gran, axis in (("tensor", None), ("channel", 0), ("channel", 1)):
                for mode in MODES:
                    for kw in ({}, {"pow2_scale": True}, {"margin": 1}, {"scale": 0.0371}):
                        want = ff.fake_quant(src, fmt, scheme=scheme, granularity=gran, axis=axis,
                                             rounding=mode, **kw)
                        got = fft.fake_quant(torch.from_numpy(src), fmt, scheme=scheme,
                                             granularity=gran, axis=axis, rounding=mode, **kw)
                        assert got.dtype == torch.float64
                        n_bad += int((~same(got.numpy(), want)).sum())
                        n += want.size
    assert n_bad == 0 and n > 0


def test_fake_quant_specials_equal_numpy():
    x = data((8, 40), 5, spread=300)
    x[1, :4] = [np.inf, -np.inf, 1e308, -1e308]
    for fmt in ("fp8_e4m3", "fp8_e5m2", "int8"):
        for gran in ("tensor", "channel"):
            want = ff.fake_quant(x, fmt, granularity=gran)
            got = fft.fake_quant(torch.from_numpy(x), fmt, granularity=gran).numpy()
            assert same(got, want).all(), fmt


def test_fake_quant_identity_gradient():
    x = torch.from_numpy(data((16, 32), 1)).requires_grad_()
    g = torch.from_numpy(np.random.default_rng(2).standard_normal((16, 32)))
    fft.fake_quant(x, "int8", granularity="channel").backward(g)
    assert torch.equal(x.grad, g)


@pytest.mark.parametrize("fmt", ["int8", "uint8", "fp8_e4m3", "fp4_e2m1"])
def test_fake_quant_clipped_gradient_is_zero_where_clipped(fmt):
    """ste='clipped' with a given scale (so values clip): the gradient equals the
    incoming one where lo < x < hi (QuantizedTensor.limits of the numpy quantize with
    the same options) and 0 elsewhere."""
    xv = data((16, 64), 4, spread=6)
    x = torch.from_numpy(xv).requires_grad_()
    g = torch.from_numpy(np.random.default_rng(3).standard_normal(xv.shape))
    out = fft.fake_quant(x, fmt, scale=0.05, ste="clipped")
    out.backward(g)
    lo, hi = ff.quantize(xv, fmt, scale=0.05).limits()
    inside = (xv > lo) & (xv < hi)
    assert 0 < inside.mean() < 1  # the test data does clip
    assert np.array_equal(x.grad.numpy(), np.where(inside, g.numpy(), 0.0))
    assert same(out.detach().numpy(), ff.fake_quant(xv, fmt, scale=0.05)).all()


def test_fake_quant_bad_input():
    with pytest.raises(TypeError, match="torch.Tensor"):
        fft.fake_quant(np.ones(3), "int8")
    with pytest.raises(ValueError, match="block scaling"):
        fft.fake_quant(torch.ones(32), "mxfp8")
    with pytest.raises(ValueError, match="Valid: tensor, channel"):
        fft.fake_quant(torch.ones(32), "int8", granularity="group")
    with pytest.raises(ValueError, match="no NaN"):
        fft.fake_quant(torch.tensor([float("nan"), 1.0]), "int8")
    with pytest.raises(ValueError, match="Valid: 'identity'"):
        fft.fake_quant(torch.ones(3), "int8", ste="straight")


def near_ties(points, s):
    """float64 x near point * s whose float64 quotient x / s lands exactly on the
    point while the exact quotient does not (so rounding the float64 quotient would
    be a second rounding), from Fractions."""
    from fractions import Fraction
    out = []
    for p in points:
        x0 = float(Fraction(p) * Fraction(s))
        for x in (np.nextafter(x0, -np.inf), x0, np.nextafter(x0, np.inf)):
            x = float(x)
            if x / s == p and Fraction(x) / Fraction(s) != Fraction(p):
                out.append(x)
    return np.array(out)


@pytest.mark.parametrize("fmt", ["int8", "uint8", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_fake_quant_quotients_near_ties_are_rounded_once(fmt):
    """Inputs whose float64 quotient is exactly a tie (or a grid point for the directed
    modes) while the exact one is not: the tensor path must see the exact quotient.
    (With an fp32 scale this cannot happen for float64 inputs; a given float64 scale
    makes it common.)"""
    f = ff.get_format(fmt)
    s = 0.0371  # a 53-bit scale (given scales are not rounded to fp32): p * s is inexact
    if f.kind == "int":
        grid = np.arange(f.min, f.max + 1, dtype=np.float64)
    else:
        v = ff.values(f)
        grid = v[np.isfinite(v)]
    pts = np.concatenate([grid, (grid[1:] + grid[:-1]) / 2])
    x = near_ties(pts, s)
    assert x.size > 10
    for mode in MODES:
        want = ff.fake_quant(x, fmt, scale=s, rounding=mode)
        got = fft.fake_quant(torch.from_numpy(x), fmt, scale=s, rounding=mode).numpy()
        assert same(got, want).all(), (mode, x[~same(got, want)][:3])
