"""quantize(..., scale_convention="te" | "torchao"): Transformer Engine's and torchao's
per-tensor / per-row FP8 arithmetic, bit for bit (issue 23, item 5).

The reference is written here from the libraries' documented arithmetic
(``floatfmt.scaling.scale_convention`` cites the sources), with torch's own fp32 ops and its RNE
float8 casts (no floatfmt code): ``s = fp32(max / amax)``, ``y = fp32(x * s)``, clamp to
+-max, cast.  FP4 elements (torch has no unpacked float4 dtype) use the Fraction rounding
of tests/oracles/block_scaling.py.  When torchao is installed, its own functions too.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import floatfmt as ff  # noqa: E402
import floatfmt.torch as fft  # noqa: E402
from oracles.block_scaling import ref_float_round  # noqa: E402

DT = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0, "fp4_e2m1": 6.0}


def near_midpoints(fmt: str, n: int, seed: int) -> np.ndarray:
    """float32 data whose scaled values sit next to the format's rounding midpoints (where
    one rounding and two roundings part), plus the amax itself and ordinary values."""
    rng = np.random.default_rng(seed)
    if fmt == "fp4_e2m1":
        grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)
    else:
        codes = np.arange(0x7F if fmt == "fp8_e4m3" else 0x7C, dtype=np.uint8)
        grid = torch.from_numpy(codes).view(DT[fmt]).double().numpy()
    mids = (grid[1:] + grid[:-1]) / 2
    amax = np.float32(3.7)
    s = np.float32(MAX[fmt]) / amax
    pick = rng.choice(mids, n) * rng.choice([-1, 1], n)
    x = (pick / np.float64(s)).astype(np.float32)
    ulps = rng.integers(-3, 4, n).astype(np.int32)  # a few float32 ulps either side
    x = (x.view(np.int32) + ulps).view(np.float32)
    x = np.clip(x, -amax, amax)
    x[0] = amax
    return np.concatenate([x, (rng.standard_normal(n) * 1.2).astype(np.float32).clip(-amax, amax)])


def reference(x: np.ndarray, fmt: str, convention: str, margin=0, pow2=False, axis=None):
    """(elements, scale_inv) by the libraries' arithmetic, in torch fp32 ops."""
    t = torch.from_numpy(x)
    a = t.abs().amax() if axis is None else t.abs().amax(dim=1 - axis, keepdim=True)
    mx = torch.tensor(MAX[fmt], dtype=torch.float32)
    if convention == "torchao":
        s = (MAX[fmt] / torch.clamp(a.double(), min=1e-12)).float()
    else:
        s = mx / a
        s = torch.where(torch.isinf(s), torch.tensor(torch.finfo(torch.float32).max), s)
        s = torch.where((a == 0) | ~torch.isfinite(a), torch.tensor(1.0), s)
    s = s / torch.tensor(2.0 ** margin, dtype=torch.float32)
    if pow2:
        s = torch.exp2(torch.floor(torch.log2(s)))
    y = (t * s).clamp(-MAX[fmt], MAX[fmt])  # float32 multiply, then saturate
    if fmt in DT:
        e = y.to(DT[fmt]).double().numpy()
    else:
        e = np.array([float(ref_float_round(Fraction(float(v)), fmt)) for v in y.double().numpy().ravel()])
        e = e.reshape(x.shape)
    return e, (1.0 / s).double().numpy()


@pytest.mark.parametrize("convention", ["te", "torchao"])
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_library_convention_per_tensor(fmt, convention):
    x = near_midpoints(fmt, 3000, 1)
    want_e, want_inv = reference(x, fmt, convention)
    q = ff.quantize(x, fmt, scale_convention=convention)
    e = np.asarray(q.elements, np.float64)
    assert int((e != want_e).sum()) == 0
    assert q.scale == float(want_inv)
    # the same data under floatfmt's own (exact) convention differs near the midpoints,
    # so this test can tell the two apart
    exact = np.asarray(ff.quantize(x, fmt).elements, np.float64)
    assert int((exact != want_e).sum()) > 0
    # fake_quant: q * scale_inv, exactly
    fq = ff.fake_quant(x, fmt, scale_convention=convention)
    assert np.array_equal(fq, want_e * float(want_inv))


@pytest.mark.parametrize("convention", ["te", "torchao"])
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_library_convention_rowwise_margin_pow2(fmt, convention):
    """Rowwise (torchao's AXISWISE, one scale per row = granularity="channel", axis=0),
    a margin, and power-of-two scales."""
    x = near_midpoints(fmt, 960, 2).reshape(48, 40)
    x[3] *= 50  # rows of different range
    x[5] = 0.0  # an all-zero row: TE's scale 1, torchao's max / 1e-12
    for kw, ref_kw in (({}, {}), ({"margin": 2}, {"margin": 2}), ({"pow2_scale": True}, {"pow2": True})):
        want_e, want_inv = reference(x, fmt, convention, axis=0, **ref_kw)
        q = ff.quantize(x, fmt, granularity="channel", axis=0, scale_convention=convention, **kw)
        assert int((np.asarray(q.elements, np.float64) != want_e).sum()) == 0, kw
        assert np.array_equal(np.asarray(q.scale, np.float64).reshape(-1), want_inv.reshape(-1)), kw


def test_library_convention_given_scale_is_the_multiplier():
    """A given scale is the library's s (delayed scaling's scale): y = fp32(x * s)."""
    x = near_midpoints("fp8_e4m3", 500, 3)
    s = np.float32(448.0 / 3.5)
    y = torch.from_numpy(x) * torch.tensor(s)
    want = y.clamp(-448, 448).to(torch.float8_e4m3fn).double().numpy()
    q = ff.quantize(x, "fp8_e4m3", scale=float(s), scale_convention="te")
    assert np.array_equal(np.asarray(q.elements, np.float64), want)
    assert q.scale == float(np.float32(1) / s)


def test_library_convention_on_cpu_tensors_and_fft():
    x = near_midpoints("fp8_e4m3", 400, 4)
    want_e, want_inv = reference(x, "fp8_e4m3", "te")
    t = torch.from_numpy(x)
    q = ff.quantize(t, "fp8_e4m3", scale_convention="te")
    assert torch.equal(q.elements.double(), torch.from_numpy(want_e))
    got = fft.fake_quant(t, "fp8_e4m3", scale_convention="te", dtype=torch.float64)
    assert torch.equal(got, torch.from_numpy(want_e * float(want_inv)))


def test_scale_convention_bad_input():
    with pytest.raises(ValueError, match="exact"):
        ff.quantize([1.0], "fp8_e4m3", scale_convention="nvidia")
    with pytest.raises(ValueError, match="scale_convention"):
        ff.quantize([1.0], "int8", scale_convention="te")
    with pytest.raises(ValueError, match="scale_convention"):
        ff.quantize(np.ones(32), "mxfp8_e4m3", scale_convention="te")



def test_against_torchao_when_installed():
    ao = pytest.importorskip("torchao.float8.float8_utils")
    su = pytest.importorskip("torchao.float8.float8_scaling_utils")
    from torchao.float8.config import ScalingGranularity
    for fmt in ("fp8_e4m3", "fp8_e5m2"):
        x = torch.from_numpy(near_midpoints(fmt, 2000, 5).reshape(100, 40))
        for gran, kw in ((ScalingGranularity.TENSORWISE, {}),
                         (ScalingGranularity.AXISWISE, {"axiswise_dim": -1})):
            s = ao.tensor_to_scale(x, DT[fmt], scaling_granularity=gran, **kw)
            t = su.hp_tensor_and_scale_to_float8(x, s, DT[fmt], axiswise_dim=kw.get("axiswise_dim"))
            opts = {} if not kw else {"granularity": "channel", "axis": 0}
            q = ff.quantize(x, fmt, scale_convention="torchao", **opts)
            assert torch.equal(q.elements.double(), t._data.double())
            assert torch.equal(torch.as_tensor(q.scale).reshape(-1).double(),
                               (1.0 / s).reshape(-1).double())
