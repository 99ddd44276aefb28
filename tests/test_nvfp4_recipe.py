"""NVIDIA's NVFP4 training recipe (floatfmt.training.nvfp4_recipe, the random Hadamard
transform of floatfmt.scaling.hadamard, and its use by floatfmt.torch.emulate)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.scaling.hadamard import (TE_WGRAD_SIGNS, hadamard_matrix, random_hadamard_transform,
                                       rht_matrix)
from floatfmt.scaling.nvfp4_te import nvfp4_te_quantize
from floatfmt.training.nvfp4_recipe import NVFP4Recipe, get_nvfp4_recipe, nvfp4_recipe_matmul


# ------------------------------------------------------------------ the transform
def _sylvester(n):
    """H_n by the doubling rule [[H, H], [H, -H]] (independent of the popcount formula)."""
    h = [[1]]
    while len(h) < n:
        h = [r + r for r in h] + [r + [-v for v in r] for r in h]
    return h


def test_rht_matrix_is_orthogonal_and_the_te_one():
    T = rht_matrix()
    assert (T @ T.T == np.eye(16)).all() and (T.T @ T == np.eye(16)).all()
    H = np.array(_sylvester(16), float)
    assert (hadamard_matrix(16) * 4 == H).all()
    assert (T * 4 == np.array(TE_WGRAD_SIGNS, float)[:, None] * H).all()
    assert len(TE_WGRAD_SIGNS) == 16 and set(TE_WGRAD_SIGNS) == {1, -1}
    with pytest.raises(ValueError):
        hadamard_matrix(12)


def test_rht_outputs_are_exact_sums_rounded_once_to_fp32():
    """Blocks of narrow exponent span (summed in float64) and of wide span (the exact
    accumulator) both give the exact sum of the 16 products rounded once to fp32."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 32)) * 2.0 ** rng.integers(-3, 3, (3, 32))
    x[1:] *= 2.0 ** rng.integers(-40, 40, (2, 32))
    x = x.astype(np.float32)
    out = random_hadamard_transform(x, axis=-1)
    T = [[Fraction(int(v * 4), 4) for v in row] for row in rht_matrix()]
    bad = 0
    for i in range(3):
        for b in range(2):
            blk = [Fraction(float(v)) for v in x[i, 16 * b:16 * b + 16]]
            for j in range(16):
                exact = sum(blk[k] * T[k][j] for k in range(16))
                bad += float(ff.cast(exact, "fp32")) != out[i, 16 * b + j]
    assert bad == 0


@pytest.mark.parametrize("m", [32, 21])
def test_rht_cancels_in_the_wgrad_gemm(m):
    """With data whose transform is exact (small integers: outputs are multiples of 1/4),
    (T^T g)^T (T^T x) equals g^T x exactly, padding included (m not a multiple of 16)."""
    rng = np.random.default_rng(m)
    x = rng.integers(-50, 50, (m, 5)).astype(np.float64)
    g = rng.integers(-50, 50, (m, 3)).astype(np.float64)
    xt = random_hadamard_transform(x, axis=0)
    gt = random_hadamard_transform(g, axis=0)
    assert xt.shape[0] == -(-m // 16) * 16
    lhs = np.array([[sum(Fraction(a) * Fraction(b) for a, b in zip(gt[:, i], xt[:, j]))
                     for j in range(5)] for i in range(3)])
    rhs = np.array([[sum(Fraction(a) * Fraction(b) for a, b in zip(g[:, i], x[:, j]))
                     for j in range(5)] for i in range(3)])
    assert (lhs == rhs).all()
    assert not (xt[:m] == x).all()  # it did transform


# ------------------------------------------------------------------ 2-D weight blocks
@pytest.mark.parametrize("shape", [(32, 48), (40, 21)])
def test_2d_blocks_quantise_w_and_w_transposed_alike(shape):
    rng = np.random.default_rng(shape[1])
    w = (rng.standard_normal(shape) * np.exp(rng.uniform(-4, 4, shape))).astype(np.float32)
    for ax in (-1, 0):
        a = nvfp4_te_quantize(w, ax, tile=(16, 16)).dequantize()
        for bx in (-1, 0):
            b = nvfp4_te_quantize(w.T, bx, tile=(16, 16)).dequantize()
            assert (a == b.T).all()
    # 1 x 16 blocks do not have the property on such data
    assert not (nvfp4_te_quantize(w, -1).dequantize() == nvfp4_te_quantize(w.T, -1).dequantize().T).all()


# ------------------------------------------------------------------ recipe as data, recipe_matmul
def test_recipe_fields_and_errors():
    r = get_nvfp4_recipe("nvfp4_training")
    assert (r.weight_tile, r.act_tile, r.grad_tile) == ((16, 16), (1, 16), (1, 16))
    assert r.grad_rounding == "stochastic" and r.wgrad_rht and r.high_precision == "bf16"
    with pytest.raises(ValueError, match="nvfp4_training"):
        get_nvfp4_recipe("nvfp4_trainin")
    with pytest.raises(ValueError):
        NVFP4Recipe(act_tile=(16, 16))
    with pytest.raises(TypeError):
        get_nvfp4_recipe(3)


def test_recipe_matmul_one_block_against_fractions():
    """K = 16: one block, so the unit's sum of E2M1 x E2M1 products times two E4M3 scales is
    exact; the result is fp32(sum * alpha) rounded to bf16, alpha TE's from the amaxes."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    w = rng.standard_normal((16, 3)).astype(np.float32)
    y = nvfp4_recipe_matmul(x, w)
    assert (ff.recipe_matmul(x, w, "nvfp4_training") == y).all()
    from tests.test_nvfp4_te import f32, oracle
    qx, sx, _ = oracle(x, -1, (1, 16))
    qw, sw, _ = oracle(w, 0, (16, 16))
    ax, aw = Fraction(float(np.abs(x).max())), Fraction(float(np.abs(w).max()))
    alpha = f32(f32(ax * aw) * f32(Fraction(1, 2688 ** 2)))
    for i in range(4):
        for j in range(3):
            acc = sum(Fraction(qx[i, k]) * Fraction(sx[i, k]) * Fraction(qw[k, j]) * Fraction(sw[k, j])
                      for k in range(16))
            assert y[i, j] == float(ff.cast(float(f32(acc * alpha)), "bf16"))


# ------------------------------------------------------------------ emulate
torch = pytest.importorskip("torch")
import floatfmt.torch as fft  # noqa: E402
from floatfmt.torch.nvfp4_operands import nvfp4_te_values  # noqa: E402


def test_emulate_recipe_is_registered_and_checked():
    r = fft.get_recipe("nvfp4_training")
    assert r.scale_convention == "te" and r.weight_block_2d and r.wgrad_rht
    assert r.grad_rounding == "stochastic" and (r.keep_first, r.keep_last) == (1, 1)
    with pytest.raises(ValueError, match="weight_block_2d"):
        fft.get_recipe("nvfp4").replace(weight_block_2d=True)
    with pytest.raises(ValueError, match="non-negative"):
        r.replace(keep_last=-1)


def test_weight_operand_is_the_same_along_either_axis():
    w = torch.randn(48, 32, generator=torch.Generator().manual_seed(0))
    r = fft.get_recipe("nvfp4_training")
    a, ta = nvfp4_te_values(w, r, -1, "forward", True, False)      # forward: K = in_features
    b, tb = nvfp4_te_values(w.T, r, -1, "forward", True, False)    # dgrad reads W^T along N
    assert ta == tb and torch.equal(a, b.T)


def test_linear_wgrad_equals_the_steps_op_by_op():
    """One Linear, nearest rounding (deterministic): W.grad is the fp32-accumulated product
    of the RHT'd, NVFP4-quantised g and x (along M), alpha fp32(S_dec_g * S_dec_x), bf16."""
    torch.manual_seed(1)
    lin = torch.nn.Linear(32, 16, bias=False)
    r = fft.get_recipe("nvfp4_training").replace(grad_rounding="nearest_even", keep_first=0,
                                                  keep_last=0)
    fft.emulate(lin, r)
    x = torch.randn(24, 32)
    G = torch.randn(24, 16)
    (lin(x) * G).sum().backward()
    gq = nvfp4_te_quantize(random_hadamard_transform(G.numpy().astype(np.float64), 0), 0)
    xq = nvfp4_te_quantize(random_hadamard_transform(x.numpy().astype(np.float64), 0), 0)
    a = gq.dequantize() / gq.tensor_scale
    b = xq.dequantize() / xq.tensor_scale
    alpha = float(np.float32(gq.tensor_scale) * np.float32(xq.tensor_scale))
    want = ff.matmul(a.T, b, "fp32", acc_fmt="fp32", alpha=alpha, out_fmt="bf16")
    assert np.array_equal(lin.weight.grad.numpy().astype(np.float64), want)


def test_first_and_last_layers_run_in_bf16():
    torch.manual_seed(2)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 16))
    x = torch.randn(8, 16)
    ref_first = fft.emulate(torch.nn.Sequential(m[0]), "bf16")(x)
    fft.unemulate(m[0])
    fft.emulate(m, "nvfp4_training")
    h0 = m[0](x)                       # the first layer alone: its own bf16 hook
    assert torch.equal(h0, ref_first)
    fft.unemulate(m)
    nv = fft.get_recipe("nvfp4_training").replace(keep_first=0, keep_last=0)
    fft.emulate(m, nv)
    assert not torch.equal(m[0](x), ref_first)


def test_a_small_model_trains_under_the_recipe():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                            torch.nn.ReLU(), torch.nn.Linear(32, 4))
    fft.emulate(m, "nvfp4_training")
    x = torch.randn(48, 32)
    y = (x[:, :4].argmax(dim=1))
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.85 * losses[0]
    done, left = fft.emulation_report(m).gemm_flops()
    assert done > 0 and left == 0
