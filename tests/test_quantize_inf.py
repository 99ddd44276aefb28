"""Inf and NaN under amax calibration, scheme by scheme (issue 22 item 6), on the numpy
path and on the device code (CPU tensors under ``force_namespace``).

Each expected value is derived here from the rule the docstring of ``ff.quantize``
states: float formats take Transformer Engine's rule (its amax, ``fmaxf`` of |x|, keeps
Inf and skips NaN; ``compute_scale_from_amax`` returns 1 for an infinite amax, in
``transformer_engine/common/recipe/recipe_common.cuh``), so a calibration set holding Inf
is rounded unscaled, with Inf saturating to the format's max; integer formats leave Inf
out of the amax and clamp it; an OCP MX block with Inf or NaN has the NaN scale; NVFP4
refuses non-finite input.  Inputs are exact in every format used, so the unscaled
results are the inputs themselves.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import floatfmt as ff

INF = np.inf
FLOAT_MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0, "fp6_e2m3": 7.5, "fp6_e3m2": 28.0, "fp4_e2m1": 6.0}


def _paths():
    try:
        import torch  # noqa: F401
    except ImportError:
        return ["numpy"]
    return ["numpy", "device"]


def _q(path, x, fmt, **kw):
    """(dequantised values, scale) as float64 numpy arrays, on one path."""
    if path == "numpy":
        q = ff.quantize(np.asarray(x, np.float64), fmt, **kw)
        return np.asarray(q.dequantize(), np.float64), np.asarray(q.scale, np.float64)
    import torch
    from floatfmt.backend.dispatch import force_namespace
    with force_namespace() if path == "device" else contextlib.nullcontext():
        q = ff.quantize(torch.tensor(np.asarray(x, np.float64)), fmt, **kw)
        d = q.dequantize()
    sc = q.scale.cpu().numpy() if isinstance(q.scale, torch.Tensor) else np.asarray(q.scale)
    return d.cpu().numpy().astype(np.float64), sc.astype(np.float64)


GRANULARITIES = [{}, {"granularity": "channel", "axis": 0}, {"granularity": "group", "group_size": 4},
                 {"granularity": "block", "block": (1, 4)}]


@pytest.mark.parametrize("path", _paths())
@pytest.mark.parametrize("kw", GRANULARITIES, ids=["tensor", "channel", "group", "block"])
@pytest.mark.parametrize("fmt", sorted(FLOAT_MAX))
def test_float_formats_scale_one_where_the_amax_is_infinite(fmt, kw, path):
    mx = FLOAT_MAX[fmt]
    # row 0 holds +Inf and -Inf with values the format holds exactly; row 1 is finite
    x = np.array([[INF, 1.0, -INF, -0.5], [4.0, 2.0, 1.0, -3.0]])
    got, sc = _q(path, x, fmt, **kw)
    assert got[0].tolist() == [mx, 1.0, -mx, -0.5]
    if kw:  # row 1 has a scale of its own, amax 4: fp32(4 / max), as without row 0
        assert np.asarray(sc).reshape(-1)[-1] == np.float32(4.0 / mx)
        assert np.asarray(sc).reshape(-1)[0] == 1.0
        alone, _ = _q(path, x[1:], fmt, **kw)
        assert got[1].tolist() == alone[0].tolist()
    else:  # one scale for all: 1.0, row 1 unscaled too
        assert float(sc) == 1.0
        assert got[1].tolist() == [4.0, 2.0, 1.0, -3.0]


@pytest.mark.parametrize("path", _paths())
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_float_formats_leave_nan_out_of_the_amax(fmt, path):
    mx = FLOAT_MAX[fmt]
    got, sc = _q(path, [np.nan, 2 * mx, -mx], fmt)  # finite amax 2 * max: scale 2 (exact)
    assert float(sc) == 2.0
    assert np.isnan(got[0]) and got[1:].tolist() == [2 * mx, -mx]
    # Inf and NaN together: the Inf rule (scale 1), NaN stays NaN
    got, sc = _q(path, [np.nan, INF, -1.0], fmt)
    assert float(sc) == 1.0 and np.isnan(got[0]) and got[1:].tolist() == [FLOAT_MAX[fmt], -1.0]


@pytest.mark.parametrize("path", _paths())
@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_integer_formats_leave_inf_out_of_the_amax_and_clamp_it(fmt, path):
    f = ff.get_format(fmt)
    # symmetric: the amax of the finite values is 1, the scale fp32(1 / half) with
    # half = 2**(b-1) - 1 (codes -half..half); +-Inf clamps to the end codes
    got, sc = _q(path, [INF, 1.0, -INF, 0.25], fmt)
    half = (1 << (f.bits - 1)) - 1
    s = float(np.float32(1.0 / half))
    assert float(sc) == s
    assert got[0] == half * s and got[2] == -half * s and got[1] == half * s
    with pytest.raises(ValueError, match="no NaN"):
        _q(path, [np.nan, 1.0], fmt)


@pytest.mark.parametrize("path", _paths())
@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8"])
def test_mx_block_with_inf_or_nan_is_nan(fmt, path):
    x = np.ones(96)
    x[3], x[40] = INF, np.nan  # block 0 holds Inf, block 1 NaN, block 2 is finite
    got, sc = _q(path, x, fmt)
    assert np.isnan(got[:64]).all() and np.isnan(np.asarray(sc).reshape(-1)[:2]).all()
    assert got[64:].tolist() == [1.0] * 32


@pytest.mark.parametrize("path", _paths())
def test_nvfp4_refuses_non_finite_input(path):
    for bad in (INF, -INF, np.nan):
        with pytest.raises(ValueError, match="non-finite"):
            _q(path, [bad] + [1.0] * 15, "nvfp4")
