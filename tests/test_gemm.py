"""``floatfmt.arith.matrixunit.gemm`` (``model_matmul`` / ``model_dot``: the tensor-core
products and the epilogue written once over the array namespace) on numpy arrays equals
``ff.matmul`` / ``ff.dot`` with a model (``floatfmt.arith.accumulate``'s numpy path, which
the oracle tests check), bit for bit, for every matmul preset of the registry, with and
without the epilogue (alpha, beta, c, out_fmt, a directed rounding) and under stochastic
rounding from the same seed (the same stream, drawn in the same order)."""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith.matrixunit import gemm
from tests.oracles.compare import mismatches

PRESETS = sorted(p for p, m in ff.tensorcore_models().items() if m.block_fmt is None)
CALLS = [dict(), dict(alpha=0.75, beta=0.5, c="c", out_fmt="bf16", rounding="toward_zero"),
         dict(c="c", out_fmt="fp8_e4m3", rounding="stochastic", rng=7),
         dict(alpha=3.0, c="c", rounding="stochastic", rng=11)]


def _operands(fmt, rng):
    if fmt == "int8":
        return rng.integers(-128, 128, (3, 40)).astype(float), rng.integers(-128, 128, (40, 5)) \
            .astype(float)
    a, b = rng.normal(size=(3, 40)), rng.normal(size=(40, 5))
    a[0, :5] = 0.0
    b[:3, 1] = 2.0 ** -20
    return a, b


@pytest.mark.parametrize("preset", PRESETS)
def test_model_matmul_and_dot_equal_ff_on_numpy(preset):
    m = ff.tensorcore_models()[preset]
    fmt = "fp32" if m.fmt == "tf32" else m.fmt
    rng = np.random.default_rng(sum(map(ord, preset)))
    a, b = _operands(m.fmt, rng)
    c = rng.normal(size=(3, 5))
    bad = 0
    for call in CALLS:
        kw = {k: (c if v == "c" else v) for k, v in call.items()}
        with np.errstate(all="ignore"):
            want = ff.matmul(a, b, fmt, model=preset, **kw)
            got = gemm.model_matmul(a, b, fmt, model=preset, **kw)
            kd = dict(kw, c=c[:, 0]) if "c" in kw else kw
            want_d = ff.dot(a, b.T[:3], fmt, model=preset, **kd)
            got_d = gemm.model_dot(a, b.T[:3], fmt, model=preset, **kd)
        assert isinstance(got, np.ndarray) and got.shape == want.shape
        bad += int(mismatches(got, want).sum()) + int(mismatches(got_d, want_d).sum())
    assert bad == 0


def test_model_matmul_refuses_what_ff_matmul_refuses():
    a = np.ones((2, 3))
    with pytest.raises(ValueError, match="order"):
        gemm.model_matmul(a, a.T, "bf16", order="pairwise", model="h100")
    with pytest.raises(ValueError, match="block"):
        gemm.model_matmul(a, a.T, "bf16", model="h100", block=0)
    with pytest.raises(ValueError, match="sr_bits"):
        gemm.model_matmul(a, a.T, "bf16", model="h100", sr_bits=8)
    with pytest.raises(ValueError, match="model"):
        gemm.model_matmul(a, a.T, "bf16")
