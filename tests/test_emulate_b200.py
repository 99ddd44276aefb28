"""emulate(model, recipe) with block recipes on Blackwell's block-scaled unit (model="b200"):
the forward output and every gradient of a Linear + matmul model equal an op-by-op
computation with floatfmt's public numpy functions (ff.quantize along each GEMM's K, then
ff.block_scaled_matmul with the same unit, the epilogue's bias add and output rounding),
E4M3 forward with E5M2 gradients (operands of two formats on kind::mxf8f6f4) included;
the model=None block recipe differs (the test can tell the unit from an fp32 sum); and
the recipes the unit cannot run are refused, naming what exists."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import floatfmt as ff  # noqa: E402
import floatfmt.torch as fft  # noqa: E402
from torch import nn  # noqa: E402


class LinearMatmul(nn.Module):
    """x -> Linear -> ReLU -> (@ P): an nn.Linear GEMM and an intercepted torch.matmul."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 32)
        self.p = nn.Parameter(torch.randn(32, 16) * 0.3)

    def forward(self, x):
        return torch.relu(self.lin(x)) @ self.p


def _data(seed, shape):
    """Normal values times a power of two per 16 x 16 tile (-8..8): a block of 16 or 32
    along either axis holds values of like size (few quantise to 0), and the blocks of
    one dot product differ by up to 32 binades, so their sum is inexact in fp32."""
    rng = np.random.default_rng(seed)
    e = rng.integers(-8, 9, (-(-shape[0] // 16), -(-shape[1] // 16)))
    tiles = np.repeat(np.repeat(e, 16, 0), 16, 1)[:shape[0], :shape[1]]
    return (rng.standard_normal(shape) * np.exp2(tiles)).astype(np.float32)


def _reference(x, w, b, p, g, r):
    """The model's forward and gradients by hand: every GEMM's operands quantised along the
    axis it reduces over (forward ones in fwd_fmt, the output gradient in bwd_fmt), the
    product by ff.block_scaled_matmul(model=r.model), then c (cast to out_fmt) added in
    fp32 and one rounding to out_fmt; ReLU exact; the bias gradient an fp32 pairwise sum."""
    ff_, fb = r.fwd_fmt, r.bwd_fmt

    def gemm(a, fa, bb, fbb, out, c=None):
        res = ff.block_scaled_matmul(ff.quantize(a, fa, axis=-1), ff.quantize(bb, fbb, axis=-2),
                                     model=r.model)
        if c is not None:
            res = ff.add(res, ff.cast(c, out), "fp32")
        return np.asarray(ff.cast(res, out), np.float64)

    h = gemm(x, ff_, w.T, ff_, r.out_fmt, np.broadcast_to(b, (x.shape[0], w.shape[0])))
    a = np.maximum(h, 0.0)
    y = gemm(a, ff_, p, ff_, r.out_fmt)
    gp = gemm(a.T, ff_, g, fb, r.wgrad_fmt)     # reduces over M
    ga = gemm(g, fb, p.T, ff_, r.out_fmt)       # reduces over N
    gh = np.where(h > 0, ga, 0.0)
    gw = gemm(gh.T, fb, x, ff_, r.wgrad_fmt)    # dW = dh^T @ x: B operand of another format
    gx = gemm(gh, fb, w, ff_, r.out_fmt)
    gb = ff.sum(gh, "fp32", acc_fmt="fp32", order="pairwise", axis=0, out_fmt=r.wgrad_fmt)
    return y, dict(x=gx, w=gw, b=gb, p=gp)


def _run(recipe, xv, gv):
    torch.manual_seed(0)
    m = LinearMatmul()
    fft.emulate(m, recipe)
    x = torch.from_numpy(xv).requires_grad_()
    y = m(x)
    y.backward(torch.from_numpy(gv))
    grads = dict(x=x.grad, w=m.lin.weight.grad, b=m.lin.bias.grad, p=m.p.grad)
    rep = fft.emulation_report(m)
    params = [t.detach().double().numpy() for t in (m.lin.weight, m.lin.bias, m.p)]
    return y.detach().double().numpy(), {k: v.double().numpy() for k, v in grads.items()}, rep, params


RECIPES = [
    fft.Recipe("mixed_b200", fwd_fmt="mxfp8_e4m3", bwd_fmt="mxfp8_e5m2", scaling="block",
               model="b200", out_fmt="fp32", wgrad_fmt="fp32"),
    # fp32 outputs: a bf16 rounding would hide the unit's last bits (the bf16 presets are in
    # tests/test_emulate.py's layer-by-layer reference)
    fft.get_recipe("nvfp4_b200").replace(name="nvfp4_b200_fp32", out_fmt="fp32", wgrad_fmt="fp32"),
]


@pytest.mark.parametrize("r", RECIPES, ids=lambda r: r.name)
def test_b200_block_recipe_equals_block_scaled_matmul_op_by_op(r):
    xv, gv = _data(1, (32, 64)), _data(2, (32, 16))
    y, grads, rep, (w, b, p) = _run(r, xv, gv)
    y_ref, g_ref = _reference(xv.astype(np.float64), w, b, p, gv.astype(np.float64), r)
    assert np.array_equal(y, y_ref)
    bad = {k: int((grads[k] != g_ref[k]).sum()) for k in g_ref}
    assert not any(bad.values()), bad
    assert rep.fraction_left() == 0.0  # every GEMM ran emulated
    # the model=None block recipe (an fp32 sum of the dequantised products) differs
    y0, g0, _, _ = _run(r.replace(name="no_unit", model=None), xv, gv)
    differ = int((y0 != y).sum()) + sum(int((g0[k] != grads[k]).sum()) for k in grads)
    assert differ > 0
    assert np.allclose(y0, y, rtol=1e-3, atol=1e-6 * np.abs(y).max())  # but only a little


def test_recipes_the_unit_cannot_run_are_refused():
    base = fft.get_recipe("mxfp8_b200")
    with pytest.raises(ValueError, match="'h100/mxfp8_e4m3'.*Valid: b200/mxfp4_e2m1"):
        base.replace(model="h100")
    with pytest.raises(ValueError, match="nvfp4 operand.*mixes with: mxfp4_e2m1, mxfp6_e2m3"):
        base.replace(bwd_fmt="nvfp4")
    with pytest.raises(ValueError, match="b200_mxf4nvf4/mxfp8_e4m3"):
        base.replace(model="b200_mxf4nvf4")
    with pytest.raises(ValueError, match="acc_fmt must be 'fp32'"):
        base.replace(acc_fmt="fp16")
    with pytest.raises(ValueError, match="not run on a block-scaled unit"):
        fft.get_recipe("nvfp4_training").replace(model="b200")
    # what the unit does take: MXFP6 and MXFP4 under MXFP8, or the preset names themselves
    assert base.replace(bwd_fmt="mxfp4_e2m1").bwd_fmt == "mxfp4_e2m1"
    assert base.replace(model="b200/mxfp8_e4m3", bwd_fmt="mxfp8_e5m2").model == "b200/mxfp8_e4m3"
