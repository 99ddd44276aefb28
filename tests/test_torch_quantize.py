"""``ff.quantize`` / ``ff.dequantize`` / ``ff.fake_quant`` on torch tensors (issue 11 items
1, 4 (identity STE) and 7): the ``QuantizedTensor`` holds tensors, ``dequantize`` gives
a tensor on the same device, and every scheme (integer symmetric / asymmetric, per
tensor / channel / group / 2-D block, FP8, every MX format, NVFP4) gives the numpy
path's values element for element (NaN by class, the sign of zero counted)."""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.backend.dispatch import force_namespace
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

SCHEMES = [
    ("int8", {}), ("int8", {"scheme": "asymmetric"}), ("uint8", {"scheme": "asymmetric"}),
    ("int4", {"granularity": "channel", "axis": 0}),
    ("int8", {"granularity": "group", "group_size": 32, "axis": 1}),
    ("int8", {"granularity": "block", "block": (16, 32)}),
    ("fp8_e4m3", {}), ("fp8_e5m2", {"granularity": "channel", "axis": 1}),
    ("fp8_e4m3", {"granularity": "block", "block": (16, 16)}),
    ("fp4_e2m1", {"granularity": "group", "group_size": 16, "axis": 1}),
    ("int8", {"rounding": "toward_zero", "calibration": "percentile", "percentile": 99.0}),
] + [(name, {}) for name in ff.block_formats()] + [("mxfp8_e4m3", {"axis": 0})]


def data(shape, seed, spread=10):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))
    x.reshape(-1)[:3] = [0.0, -0.0, 3e-40]
    return x


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fmt,opts", SCHEMES, ids=lambda v: str(v))
def test_quantize_and_fake_quant_equal_numpy(fmt, opts, dtype):
    x = data((32, 64), 1).astype(dtype)
    t = torch.from_numpy(x)
    q, qn = ff.quantize(t, fmt, **opts), ff.quantize(x, fmt, **opts)
    assert isinstance(q.elements, torch.Tensor) and q.elements.device == t.device
    d, dn = q.dequantize(), qn.dequantize()
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float64 and d.shape == t.shape
    assert int(mismatches(d.numpy(), dn).sum()) == 0
    assert int(mismatches(ff.dequantize(q).numpy(), dn).sum()) == 0
    assert np.array_equal(q.codes.numpy(), qn.codes)
    for name in ("scale", "zero_point", "scale_codes"):
        a, b = getattr(q, name), getattr(qn, name)
        a = a.numpy() if isinstance(a, torch.Tensor) else a
        assert np.array_equal(np.asarray(a), np.asarray(b)), name
    fq, fqn = ff.fake_quant(t, fmt, **opts), ff.fake_quant(x, fmt, **opts)
    assert isinstance(fq, torch.Tensor) and fq.dtype == torch.from_numpy(np.asarray(fqn)).dtype
    assert int(mismatches(fq.numpy(), fqn).sum()) == 0


@pytest.mark.parametrize("fmt", ["int8", "fp8_e4m3", "mxfp4_e2m1", "nvfp4"])
def test_quantize_dequantize_and_fake_quant_pass_the_gradient_through(fmt):
    """Identity straight-through estimator: d(sum(out))/dx is 1 everywhere."""
    x = torch.from_numpy(data((8, 64), 2)).to(torch.float32).requires_grad_()
    out = ff.quantize(x, fmt).dequantize()
    assert out.requires_grad
    (out.sum() + ff.fake_quant(x, fmt).sum()).backward()
    assert x.grad is not None and x.grad.dtype == torch.float32
    assert torch.equal(x.grad, torch.full_like(x, 2.0))
    assert ff.quantize(x, fmt).dequantize(torch.float32).dtype == torch.float32


def test_quantize_on_the_device_path_and_what_it_refuses():
    """Under force_namespace CPU tensors take the device code (tests/test_torch_quantize_device.py
    proves it equal); what has no device code says so, naming the function and device."""
    x = torch.ones(4, 32)
    with force_namespace():
        q = ff.quantize(x, "mxfp8")
        assert torch.equal(q.dequantize(), torch.ones(4, 32, dtype=torch.float64))
        dev = ff.fake_quant(x, "int8")
        mse = ff.fake_quant(x, "int8", calibration="mse")  # on the device too (it used to raise)
    assert torch.equal(dev, ff.fake_quant(x, "int8"))
    assert torch.equal(mse, ff.fake_quant(x, "int8", calibration="mse"))


def test_quantize_bad_tensor_input():
    with pytest.raises(TypeError, match="complex"):
        ff.quantize(torch.ones(4, 32, dtype=torch.complex64), "int8")
    with pytest.raises(TypeError, match="numpy array mixed with torch tensors"):
        ff.quantize(torch.ones(4, 32), "int8", scale=np.array(0.5))
