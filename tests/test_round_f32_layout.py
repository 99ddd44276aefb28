"""cast of transposed float32 arrays and tensors: rounded in memory order (no copy), the
layout kept as numpy's ufuncs keep it, the values those of the float64 route."""

import numpy as np
import pytest
import torch

import floatfmt as ff


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp8_e4m3", "fp4_e2m1"])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up"])
def test_transposed_array_same_values_and_layout(fmt, mode):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((3, 40, 50)) * 4).astype(np.float32).transpose(2, 0, 1)
    r = ff.cast(a, fmt, mode)
    ref = ff.cast(a.astype(np.float64), fmt, mode)  # the general route, C order
    assert r.dtype == np.float32 and r.shape == a.shape
    assert np.array_equal(r, ref.astype(np.float32))
    assert np.argsort(r.strides).tolist() == np.argsort(a.strides).tolist()


def test_transposed_tensor_same_values():
    t = (torch.randn(64, 48) * 3).T
    r = ff.cast(t, "bf16")
    assert r.shape == t.shape and r.stride() == t.stride()
    assert torch.equal(r, ff.cast(t.to(torch.float64), "bf16").float())
