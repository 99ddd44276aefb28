"""quantize(x, "nvfp4", scale_convention="te" | "torchao"): Transformer Engine's and torchao's
NVFP4 arithmetic through quantize's options (issue 23), against the slow Fraction models of
tests/oracles/nvfp4_libraries.py.  Zero mismatches is the pass; on data next to the
rounding midpoints of the block scales and of the element quotients the three conventions
must part (counted), so the tests can tell them apart."""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.scaling.nvfp4_te import te_encode_scale
from oracles.nvfp4_libraries import te_nvfp4, torchao_nvfp4

ORACLES = {"te": te_nvfp4, "torchao": torchao_nvfp4}
E4M3 = np.array(sorted({float(v) for v in ff.values("fp8_e4m3") if np.isfinite(v) and v >= 0}))
E2M1_MIDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])


def _per_element(q):
    """A QuantizedTensor's block scale repeated onto every element."""
    s = np.repeat(np.moveaxis(q.scale, q.axis, -1), 16, axis=-1)
    n = np.moveaxis(q.elements, q.axis, -1).shape[-1]
    return np.moveaxis(s[..., :n], -1, q.axis)


def mismatches(x, convention, axis=-1):
    q = ff.quantize(x, "nvfp4", scale_convention=convention, axis=axis)
    oq, osb, ots = ORACLES[convention](x, axis)
    return int((q.elements != oq).sum() + (_per_element(q) != osb).sum()
               + (q.tensor_scale != ots)
               + (q.dequantize() != oq * osb * ots).sum())


def random_cases(rng):
    out = [rng.standard_normal((3, 48)) * 2.0 ** k for k in (-40, -3, 0, 7, 40)]
    a = rng.standard_normal((2, 64))
    a[:, 16:32] *= 2.0 ** -10          # block scales in the E4M3 subnormals ...
    a[:, 32:48] *= 2.0 ** -30          # ... and below them (0 for TE, 2**-6 for torchao)
    out += [a, rng.standard_normal((5, 21))]  # a partial block
    return [np.asarray(c, np.float32) for c in out]


def midpoint_cases(rng, n=64):
    """Rows of 2 blocks: block 0 holds the tensor's amax; block 1's amax puts its exact block
    quotient amax_b / (6 ts) a few fp32 ulps from an E4M3 rounding midpoint, and every
    other element of both blocks sits a few ulps from an E2M1 midpoint of its exact block
    scale (where one rounding and a chain of fp32 roundings part)."""
    rows = []
    amax = np.float32(rng.uniform(1, 100))  # the tensor's amax, in block 0 of every row
    ts = float(ff.cast(float(amax) / 2688, "fp32"))
    for _ in range(n):
        i = rng.integers(8, len(E4M3) - 2)
        mid = (E4M3[i] + E4M3[i + 1]) / 2
        r = np.zeros(32, np.float32)
        r[0] = amax
        b1 = np.float32(mid * 6 * ts)
        r[16] = (np.array([b1]).view(np.int32) + rng.integers(-1, 2)).view(np.float32)[0]
        for blk in (0, 1):
            top = r[16 * blk]
            sb = float(ff.cast(float(top) / (6 * ts), "fp8_e4m3", overflow="saturate"))
            v = (rng.choice(E2M1_MIDS, 15) * rng.choice([-1, 1], 15) * sb * ts).astype(np.float32)
            v = (v.view(np.int32) + rng.integers(-2, 3, 15).astype(np.int32)).view(np.float32)
            r[16 * blk + 1:16 * blk + 16] = np.clip(v, -top, top)
        rows.append(r)
    return np.stack(rows)


@pytest.mark.parametrize("convention", ["te", "torchao"])
def test_random_data_matches_the_slow_model(convention):
    rng = np.random.default_rng(23)
    bad = total = 0
    for c in random_cases(rng):
        for axis in (-1, 0):
            bad += mismatches(c, convention, axis)
            total += c.size
    assert total > 1500
    assert bad == 0


def test_midpoints_match_and_the_conventions_part():
    x = midpoint_cases(np.random.default_rng(7))
    ex = ff.quantize(x, "nvfp4").dequantize()
    differ = {}
    for convention in ("te", "torchao"):
        assert mismatches(x, convention) == 0
        lib = ff.quantize(x, "nvfp4", scale_convention=convention)
        differ[convention] = int((lib.dequantize() != ex).sum())
        # block scales too: near E4M3 midpoints the fp32 chains round some other way
        differ[convention + " scales"] = int((lib.scale != ff.quantize(x, "nvfp4").scale).sum())
    te = ff.quantize(x, "nvfp4", scale_convention="te").dequantize()
    ao = ff.quantize(x, "nvfp4", scale_convention="torchao").dequantize()
    differ["te vs torchao"] = int((te != ao).sum())
    print(differ)
    assert min(differ.values()) > 0, differ
    # and on ordinary data the conventions mostly agree on the elements
    r = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    same = ff.quantize(r, "nvfp4").elements == ff.quantize(r, "nvfp4", scale_convention="te").elements
    assert same.mean() > 0.9


def test_fake_quant_and_cpu_tensors_give_the_same_bits():
    torch = pytest.importorskip("torch")
    from floatfmt.backend.dispatch import force_namespace
    x = midpoint_cases(np.random.default_rng(3), 4)
    for convention in ("te", "torchao"):
        want = ff.quantize(x, "nvfp4", scale_convention=convention).dequantize()
        assert np.array_equal(ff.fake_quant(x, "nvfp4", scale_convention=convention), want)
        t = torch.from_numpy(x).requires_grad_()
        q = ff.quantize(t, "nvfp4", scale_convention=convention)
        assert isinstance(q.elements, torch.Tensor)
        assert np.array_equal(q.dequantize().detach().numpy(), want)
        f = ff.fake_quant(t, "nvfp4", scale_convention=convention)
        assert np.array_equal(f.detach().numpy(), want)
        f.sum().backward()                      # the straight-through gradient
        assert np.array_equal(t.grad.numpy(), np.ones_like(x))
        with force_namespace():                 # the device path refuses, never "exact"
            with pytest.raises(NotImplementedError, match=f"scale_convention='{convention}'"):
                ff.quantize(t.detach(), "nvfp4", scale_convention=convention)
            with pytest.raises(NotImplementedError, match="array-namespace"):
                ff.fake_quant(t.detach(), "nvfp4", scale_convention=convention)
            # a QuantizedTensor made on the host dequantises alike on the namespace path
            assert np.array_equal(q.dequantize().detach().numpy(), want)


def test_edges_amax_zero_tiny_inf_nan():
    z = np.zeros((2, 16))
    assert mismatches(z, "te") == 0
    assert not ff.quantize(z, "nvfp4", scale_convention="te").dequantize().any()
    with pytest.raises(ValueError, match="divides by its per-tensor scale"):
        ff.quantize(z, "nvfp4", scale_convention="torchao")
    # fp32 subnormals: TE's S_enc is FLT_MAX; torchao's ts = fp32(amax / 2688) a subnormal
    tiny = np.array([[1e-40, -3e-41] * 8], np.float32)
    assert float(te_encode_scale(1e-40)) == float(np.finfo(np.float32).max)
    assert mismatches(tiny, "te") == 0 and mismatches(tiny, "torchao") == 0
    tinier = np.array([[2.0 ** -149] * 16], np.float32)   # ts rounds to 0
    assert mismatches(tinier, "te") == 0
    with pytest.raises(ValueError, match="NaN"):
        ff.quantize(tinier, "nvfp4", scale_convention="torchao")
    # tiny but normal: both compute, torchao's block divisor a subnormal
    small = (np.random.default_rng(2).standard_normal((2, 32)) * 2.0 ** -118).astype(np.float32)
    assert mismatches(small, "te") == 0 and mismatches(small, "torchao") == 0
    assert float(te_encode_scale(np.inf)) == 1.0
    for convention in ("exact", "te", "torchao"):
        for bad in (np.inf, np.nan):
            with pytest.raises(ValueError, match="NaN or Inf|not finite|non-finite"):
                ff.quantize([1.0] * 15 + [bad], "nvfp4", scale_convention=convention)
    for convention in ("te", "torchao"):     # finite in float64, past fp32: refused
        with pytest.raises(ValueError, match="fp32"):
            ff.quantize([1e39] * 16, "nvfp4", scale_convention=convention)


def test_options_of_the_library_conventions():
    x = np.random.default_rng(4).standard_normal((2, 32)).astype(np.float32)
    q = ff.quantize(x, "nvfp4", scale_convention="torchao", tensor_scale=0.001)
    oq, osb, ots = torchao_nvfp4(x, -1, tensor_scale=0.001)
    assert q.tensor_scale == ots and np.array_equal(q.elements, oq)
    with pytest.raises(ValueError, match="tensor_scale does not apply to scale_convention='te'"):
        ff.quantize(x, "nvfp4", scale_convention="te", tensor_scale=0.5)
    with pytest.raises(ValueError, match="nearest even"):
        ff.quantize(x, "nvfp4", scale_convention="torchao", rounding="stochastic", rng=1)
    with pytest.raises(ValueError, match="nearest even or stochastic"):
        ff.quantize(x, "nvfp4", scale_convention="te", rounding="toward_zero")
    with pytest.raises(ValueError, match="Did you mean 'te'"):
        ff.quantize(x, "nvfp4", scale_convention="tee")
    s = ff.quantize(x, "nvfp4", scale_convention="te", rounding="stochastic", rng=5)
    assert set(np.unique(np.abs(s.elements))) <= {0, 0.5, 1, 1.5, 2, 3, 4, 6}
    assert np.array_equal(ff.quantize(x, "nvfp4", scale_convention="exact").elements,
                          ff.quantize(x, "nvfp4").elements)
