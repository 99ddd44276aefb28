"""A given scale and zero point (issue 22 item 6): the zero point must be a code of the
format, and ``pow2_scale=True`` applies to a given scale as to a calibrated one.

Over every integer format floatfmt names, per tensor and per channel, on the numpy
path, on CPU tensors (the numpy kernels) and on the device code under
``force_namespace``.  Expected values are derived here from the definitions
(``q = clamp(round_half_even(x / scale) + zp, qmin, qmax)``, codes of a b-bit format
``-2**(b-1) .. 2**(b-1) - 1`` or ``0 .. 2**b - 1``; the power of two at or above s
from ``math.frexp``), not from floatfmt.
"""

from __future__ import annotations

import contextlib
import math
import re
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff

INT_FORMATS = ["int8", "uint8", "int4", "uint4", "int2", "uint2", "int16", "uint16"]


def _codes(name):
    f = ff.get_format(name)
    b = f.bits
    return (-(1 << (b - 1)), (1 << (b - 1)) - 1) if f.signed else (0, (1 << b) - 1)


def _paths():
    out = ["numpy"]
    try:
        import torch  # noqa: F401
        out += ["tensor", "device"]
    except ImportError:
        pass
    return out


def _quantize(path, x, fmt, **kw):
    """quantize on one path; returns (dequantised values as float64 numpy, the scale)."""
    if path == "numpy":
        q = ff.quantize(np.asarray(x, np.float64), fmt, **kw)
        return np.asarray(q.dequantize(), np.float64), np.asarray(q.scale, np.float64)
    import torch
    from floatfmt.backend.dispatch import force_namespace
    dtypes = {"scale": torch.float64, "zero_point": torch.int64}
    kw = {k: (torch.tensor(v, dtype=dtypes[k]) if isinstance(v, list) and path == "device" else v)
          for k, v in kw.items()}
    with force_namespace() if path == "device" else contextlib.nullcontext():
        q = ff.quantize(torch.tensor(x, dtype=torch.float64), fmt, **kw)
        d = q.dequantize()
    sc = q.scale.cpu().numpy() if isinstance(q.scale, torch.Tensor) else np.asarray(q.scale)
    return d.cpu().numpy().astype(np.float64), sc.astype(np.float64)


def _bad_zero_points(name):
    qmin, qmax = _codes(name)
    return [qmin - 1, qmax + 1, qmin - 1000, qmax + 300]


@pytest.mark.parametrize("path", _paths())
@pytest.mark.parametrize("fmt", INT_FORMATS)
def test_zero_point_outside_the_codes_is_refused(fmt, path):
    qmin, qmax = _codes(fmt)
    rng_ = re.escape(f"[{qmin}, {qmax}]")
    for zp in _bad_zero_points(fmt):
        with pytest.raises(ValueError, match=rng_):
            _quantize(path, [1.0, 2.0], fmt, scale=0.125, zero_point=zp)
        # per channel: one bad zero point among good ones
        zps = [qmin, zp, qmax]
        with pytest.raises(ValueError, match=rng_):
            _quantize(path, [[1.0, 2.0]] * 3, fmt, granularity="channel", axis=0,
                      scale=[0.125] * 3, zero_point=zps)
    with pytest.raises(ValueError, match=rng_):
        ff.fake_quant(np.array([1.0, 2.0]), fmt, scale=0.125, zero_point=qmax + 1)


@pytest.mark.parametrize("path", _paths())
@pytest.mark.parametrize("fmt", INT_FORMATS)
def test_every_code_is_a_valid_zero_point(fmt, path):
    """Zero points at the ends of the code range (and one inside) quantise as defined."""
    qmin, qmax = _codes(fmt)
    x = [-3.0, -0.375, 0.0, 0.125, 0.3125, 1.0, 2.5, 40.0]
    s = 0.25
    for zp in sorted({qmin, qmax, (qmin + qmax) // 2}):
        want = [float((min(max(round(Fraction(v) / Fraction(s)) + zp, qmin), qmax) - zp) * s) for v in x]
        got, _ = _quantize(path, x, fmt, scale=s, zero_point=zp)
        assert got.tolist() == want, (fmt, zp)
        # per channel, the three zero points at once
    zps = sorted({qmin, qmax, (qmin + qmax) // 2})
    got, _ = _quantize(path, [x] * len(zps), fmt, granularity="channel", axis=0,
                       scale=[s] * len(zps), zero_point=zps)
    for row, zp in zip(got, zps):
        want = [float((min(max(round(Fraction(v) / Fraction(s)) + zp, qmin), qmax) - zp) * s) for v in x]
        assert row.tolist() == want, (fmt, zp)


def test_int_matmul_out_zero_point_must_be_a_code():
    a = ff.quantize([[1.0, 1.5]], "int8", scale=1 / 64)
    b = ff.quantize([[1.0], [1.0]], "int8", scale=1 / 64)
    with pytest.raises(ValueError, match=re.escape("[0, 255]")):
        ff.int_matmul(a, b, out_scale=0.1, out_fmt="uint8", out_zero_point=256)
    with pytest.raises(ValueError, match=re.escape("[-128, 127]")):
        ff.int_matmul(a, b, out_scale=0.1, out_zero_point=-129)
    assert ff.int_matmul(a, b, out_scale=0.5, out_fmt="uint8", out_zero_point=255).out.dequantize().tolist() == [[0.0]]


def _pow2_at_or_above(s):
    m, e = math.frexp(s)  # s = m * 2**e, 0.5 <= m < 1
    return math.ldexp(1.0, e - 1) if m == 0.5 else math.ldexp(1.0, e)


GIVEN_SCALES = [0.3, 0.5, 1.0, 0.1, 3.0, 1e-3, 2.0 ** -20, 0.75, 7.0, 1 + 2 ** -52, 2 ** -149 * 3]


@pytest.mark.parametrize("path", _paths())
@pytest.mark.parametrize("fmt", ["int8", "uint8", "int4", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "bf16"])
def test_pow2_scale_rounds_a_given_scale_up(fmt, path):
    x = [0.7, -0.2, 1.9]
    for s in GIVEN_SCALES:
        p = _pow2_at_or_above(s)
        got, sc = _quantize(path, x, fmt, scale=s, pow2_scale=True)
        assert sc.tolist() == p, (fmt, s)
        # the result is the quantisation with the power of two given as the scale
        want, _ = _quantize(path, x, fmt, scale=p)
        assert got.tolist() == want.tolist(), (fmt, s)
    # per channel: each scale rounded up on its own
    rows = [[0.7, -0.2, 1.9]] * len(GIVEN_SCALES)
    got, sc = _quantize(path, rows, fmt, granularity="channel", axis=0, scale=GIVEN_SCALES, pow2_scale=True)
    assert sc.reshape(-1).tolist() == [_pow2_at_or_above(s) for s in GIVEN_SCALES]
