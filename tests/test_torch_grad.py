"""Straight-through gradients on tensors, over the whole class: ff.cast for every
registry format, every overflow policy it has and float32 / float64 inputs;
floatfmt.torch.fake_quant for integer and float formats, per tensor and per channel,
calibrated and with a given scale; quantize(...).dequantize() where tensors are
accepted.  The gradient must equal its definition: the incoming gradient unchanged
(ste None / "identity"), or, with ste="clipped", the incoming gradient where the
input lies inside the clipping range and 0 elsewhere, the range taken from the
format's facts (cast) or from the numpy path's QuantizedTensor.limits (fake_quant)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import floatfmt as ff  # noqa: E402
import floatfmt.torch as fft  # noqa: E402

FLOATS = [n for n in ff.formats() if ff.get_format(n).kind == "float" and n != "fp64"]
INTS = [n for n in ff.formats() if ff.get_format(n).kind == "int"]


def spread(f, n, seed):
    """Values across the format's whole range and past both ends, plus specials."""
    rng = np.random.default_rng(seed)
    top = np.log2(f.max)
    lo = np.log2(f.smallest_subnormal) if f.kind == "float" else 0.0
    v = rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(lo - 4, top + 4, n))
    v[:8] = [np.inf, -np.inf, np.nan, 0.0, -0.0, f.max, -f.max, f.max * 1.0001]
    return v


def cast_range(f):
    """The documented clipping range of cast: [-max, max]; integers [min, max];
    unsigned floats from 0 (E8M0: from its smallest value)."""
    if f.kind == "int":
        return float(f.min), float(f.max)
    if not f.signed:
        return (0.0 if f.zero else f.smallest_normal), f.max
    return -f.max, f.max


def policies(f):
    return [None, "saturate"] + (["inf"] if f.inf else []) + (["nan"] if f.nan != "none" else [])


@pytest.mark.parametrize("name", FLOATS + INTS)
def test_cast_gradients_equal_their_definition(name):
    f = ff.get_format(name)
    xv = spread(f, 2048, 1)
    gv = np.random.default_rng(2).standard_normal(xv.size)
    lo, hi = cast_range(f)
    inside = (xv >= lo) & (xv <= hi)
    assert inside.any() and not inside.all()
    n = 0
    for dtype in (torch.float64, torch.float32):
        x32 = torch.from_numpy(xv).to(dtype).numpy().astype(np.float64)  # the values the cast sees
        inside = (x32 >= lo) & (x32 <= hi)
        for pol in (policies(f) if f.kind == "float" else [None]):
            for ste in (None, "identity", "clipped"):
                x = torch.from_numpy(xv).to(dtype).requires_grad_()
                g = torch.from_numpy(gv).to(dtype)
                try:
                    ff.cast(x, f, overflow=pol, ste=ste).backward(g)
                except ValueError:  # a policy this format refuses: not a gradient question
                    continue
                want = g.numpy() if ste != "clipped" else np.where(inside, g.numpy(), 0.0)
                assert x.grad.dtype == dtype and np.array_equal(x.grad.numpy(), want), (pol, ste, dtype)
                n += 1
    assert n >= 6


@pytest.mark.parametrize("fmt", ["int8", "uint8", "int4", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "fp6_e3m2"])
@pytest.mark.parametrize("granularity", ["tensor", "channel"])
@pytest.mark.parametrize("how", ["amax_margin", "given_scale"])
def test_fake_quant_gradients_equal_their_definition(fmt, granularity, how):
    """Identity: unchanged.  Clipped: where lo < x < hi, the limits of the numpy path's
    QuantizedTensor with the same options (a negative margin or a small given scale
    makes values clip)."""
    rng = np.random.default_rng(4)
    xv = rng.standard_normal((12, 48)) * np.exp2(rng.integers(-4, 5, (12, 1)))
    gv = rng.standard_normal(xv.shape)
    opts = dict(granularity=granularity)
    if how == "amax_margin":
        opts["margin"] = -2  # scale = amax / 4 / max: the top of each range clips
    else:
        f = ff.get_format(fmt)  # a scale that puts the top code at 2.0: the tails clip
        opts["scale"] = 2.0 / (f.max if f.kind == "float" else 2 ** (f.bits - 1))
    lo, hi = ff.quantize(xv, fmt, **opts).limits()
    inside = (xv > lo) & (xv < hi)
    assert 0 < inside.mean() < 1
    for ste in (None, "identity", "clipped"):
        x = torch.from_numpy(xv).requires_grad_()
        out = fft.fake_quant(x, fmt, ste=ste, **opts)
        out.backward(torch.from_numpy(gv))
        want = gv if ste != "clipped" else np.where(inside, gv, 0.0)
        assert np.array_equal(x.grad.numpy(), want), ste
        assert np.array_equal(out.detach().numpy(), ff.fake_quant(xv, fmt, **opts))


def test_quantize_dequantize_gradient_on_tensors():
    """quantize(tensor).dequantize(): straight-through (and clipped at the limits)."""
    x = torch.linspace(-3, 3, 64, dtype=torch.float64, requires_grad=True)
    try:
        q = ff.quantize(x, "int8", scale=0.01)
        y = q.dequantize()
    except (TypeError, ValueError, RuntimeError) as e:
        pytest.skip(f"ff.quantize does not take tensors in this build ({type(e).__name__})")
    if not isinstance(y, torch.Tensor) or not y.requires_grad:
        pytest.skip("ff.quantize(tensor).dequantize() gives no differentiable tensor in this build")
    g = torch.arange(64, dtype=torch.float64)
    y.backward(g)
    assert torch.equal(x.grad, g)
    x.grad = None
    try:
        y = ff.quantize(x, "int8", scale=0.01, ste="clipped").dequantize()
    except TypeError:
        pytest.skip("ff.quantize has no ste= in this build")
    y.backward(g)
    lo, hi = ff.quantize(x.detach().numpy(), "int8", scale=0.01).limits()
    xv = x.detach().numpy()
    assert np.array_equal(x.grad.numpy(), np.where((xv > lo) & (xv < hi), g.numpy(), 0.0))


@pytest.mark.parametrize("fmt,opts", [("int8", {"scale": 0.01}),
                                      ("uint8", {"scheme": "asymmetric", "scale": 0.02, "zero_point": 10}),
                                      ("fp8_e4m3", {"scale": 0.005}),
                                      ("int8", {"granularity": "channel", "axis": 0, "calibration": "percentile",
                                                "percentile": 90.0}),
                                      ("mxfp8_e4m3", {}), ("nvfp4", {})])
def test_quantize_dequantize_clipped_gradient_every_kind(fmt, opts):
    """ste="clipped": the gradient passes exactly where lo < x < hi for the limits of the
    numpy path's QuantizedTensor (saturated / clipped values get 0); identity elsewhere."""
    xv = np.linspace(-6, 6, 4 * 64).reshape(4, 64) * np.exp2(np.arange(4))[:, None]
    gv = np.arange(xv.size, dtype=np.float64).reshape(xv.shape) + 1
    lo, hi = ff.quantize(xv, fmt, **opts).limits()
    inside = (xv > lo) & (xv < hi)
    for ste, want in ((None, gv), ("clipped", np.where(inside, gv, 0.0))):
        x = torch.from_numpy(xv.copy()).requires_grad_(True)
        y = ff.quantize(x, fmt, ste=ste, **opts).dequantize()
        assert np.array_equal(y.detach().numpy(), ff.quantize(xv, fmt, **opts).dequantize())
        y.backward(torch.from_numpy(gv))
        assert np.array_equal(x.grad.numpy(), want), (fmt, ste)
    if fmt in ("int8", "fp8_e4m3") and "scale" in opts:
        assert not inside.all()  # the data reaches past the limits: the mask is exercised
    with pytest.raises(ValueError, match="ste"):
        ff.quantize(xv, fmt, ste="bogus", **opts)
