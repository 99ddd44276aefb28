"""The DeepSeek-V3 FP8 GEMM recipe (floatfmt.training.recipes) against an independent reference.

Reference, one output at a time: operands quantised by tests/oracles/block_scaling.py
(Fractions), each chunk of 128 products through the slow tensor-core model
(tests/oracles/tensorcore_slow.py, Python integers), every FP32 promotion step rounded by
MPFR (tests/oracles/mpfr.py).  No floatfmt arithmetic in the reference.
"""

from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.training.recipes import RECIPES, BlockFP8Recipe, get_recipe
from floatfmt.arith.matrixunit.tensorcore import get_model
from tests.oracles import tensorcore_slow as slow
from tests.oracles.block_scaling import ref_quantize
from tests.oracles.mpfr import round_one

F32 = ff.get_format("fp32")


def fp32(fr):
    return round_one(fr, F32)


def ref_recipe(x, w, promotion, pow2):
    M, K = x.shape
    N = w.shape[1]
    a, sa, _ = ref_quantize(x, "fp8_e4m3", "group", 128, 1, True, pow2)
    b, sw, _ = ref_quantize(w, "fp8_e4m3", "block", (128, 128), None, True, pow2)
    model = get_model("h100", "fp8_e4m3")
    out = np.empty((M, N))
    for m in range(M):
        for n in range(N):
            acc = 0.0
            for c, k0 in enumerate(range(0, K, 128)):
                p = slow.dot(a[m, k0:k0 + 128], b[k0:k0 + 128, n], model)
                s_a, s_w = sa[(m, c)], sw[(c, n // 128)]
                if promotion == "separate":
                    t = fp32(Fraction(p) * s_a)
                    u = fp32(Fraction(t) * s_w)
                    acc = fp32(Fraction(acc) + Fraction(u))
                else:
                    s = fp32(s_a * s_w)
                    acc = fp32(Fraction(p) * Fraction(s) + Fraction(acc))
            out[m, n] = acc
    return out


def operands(rng, M, K, N):
    x = rng.standard_normal((M, K)) * 2.0 ** rng.integers(-6, 6, (M, 1))
    w = rng.standard_normal((K, N)) * 0.02
    x[0, :200] = 0.0  # a zero tile and a partly zero one
    w[rng.integers(0, K, 20), rng.integers(0, N, 20)] = 0.0
    return x.astype(np.float32).astype(np.float64), w.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("promotion", ["separate", "fma"])
@pytest.mark.parametrize("pow2", [False, True])
def test_deepseek_v3_against_reference(promotion, pow2):
    """K = 300 (two full chunks and a partial one), N = 130 (a partial weight block)."""
    x, w = operands(np.random.default_rng(11), 3, 300, 130)
    r = get_recipe("deepseek_v3").replace(promotion=promotion, pow2_scale=pow2)
    got = ff.recipe_matmul(x, w, r)
    want = ref_recipe(x, w, promotion, pow2)
    assert got.shape == want.shape
    assert int(np.sum(got != want)) == 0


def test_promotion_every_128_products_bounds_the_error():
    """DeepSeek-V3's reason for the recipe: with the Hopper FP8 unit (13 fraction bits,
    truncation) a K = 4096 sum loses percents; promoting every 128 products keeps the
    error near fp32's.  Both measured against the exact product of the same FP8 values."""
    rng = np.random.default_rng(2)
    x = np.abs(rng.standard_normal((4, 4096))).astype(np.float32).astype(np.float64)
    w = np.abs(rng.standard_normal((4096, 8))).astype(np.float32).astype(np.float64)
    errors = {}
    for label, r in [("promoted", RECIPES["deepseek_v3"]),
                     ("one chunk", RECIPES["deepseek_v3"].replace(
                         act_group=4096, weight_block=(4096, 128), promote_every=4096))]:
        qa = ff.quantize(x, "fp8_e4m3", granularity="group", group_size=r.act_group)
        qw = ff.quantize(w, "fp8_e4m3", granularity="block", block=(r.weight_block[0], 8))
        exact = qa.dequantize() @ qw.dequantize()
        got = ff.recipe_matmul(None, None, r, quantized=(qa, qw))
        np.testing.assert_array_equal(got, ff.recipe_matmul(x, w, r))
        errors[label] = float(np.max(np.abs(got - exact) / exact))
    assert errors["promoted"] < 2.0 ** -10
    assert errors["one chunk"] > 1e-2


def test_output_format_and_recipe_data():
    x, w = operands(np.random.default_rng(4), 2, 256, 128)
    r = RECIPES["deepseek_v3"]
    assert (r.fmt, r.act_group, r.weight_block, r.promote_every) == ("fp8_e4m3", 128, (128, 128), 128)
    f32 = ff.recipe_matmul(x, w)
    bf = ff.recipe_matmul(x, w, r.replace(out_fmt="bf16"))
    np.testing.assert_array_equal(bf, ff.cast(f32, "bf16"))
    assert get_recipe("DeepSeek-V3") is r
    assert isinstance(ff.BlockFP8Recipe, type) and ff.BlockFP8Recipe is BlockFP8Recipe


def test_bad_options():
    x, w = np.ones((2, 256)), np.ones((256, 4))
    with pytest.raises(ValueError, match="unknown recipe 'deepseek_v2'. Valid: deepseek_v3"):
        ff.recipe_matmul(x, w, "deepseek_v2")
    with pytest.raises(TypeError, match="recipe must be a name"):
        ff.recipe_matmul(x, w, 3)
    with pytest.raises(ValueError, match="promote_every=96 must divide act_group=128"):
        RECIPES["deepseek_v3"].replace(promote_every=96)
    with pytest.raises(ValueError, match="unknown promotion 'kahan'. Valid: separate, fma"):
        RECIPES["deepseek_v3"].replace(promotion="kahan")
    with pytest.raises(ValueError, match="no fp8_e4m3 inputs"):
        RECIPES["deepseek_v3"].replace(model="v100")
    with pytest.raises(ValueError, match="weight_block must be a pair"):
        RECIPES["deepseek_v3"].replace(weight_block=(128,))
    with pytest.raises(ValueError, match="act_group must be a positive integer"):
        RECIPES["deepseek_v3"].replace(act_group=0)
    with pytest.raises(ValueError, match="do not align"):
        ff.recipe_matmul(x, w[:128])
    with pytest.raises(ValueError, match="2-D"):
        ff.recipe_matmul(x[0], w)
    with pytest.raises(TypeError, match="pair of QuantizedTensor"):
        ff.recipe_matmul(None, None, quantized=(x, w))
