"""floatfmt.torch.emulate: an emulated model gives, bit for bit, what the numpy-path
functions (ff.cast / ff.quantize / ff.DelayedScaling / ff.matmul / ff.sum) give when
called layer by layer by the rules the module documents, in forward and backward, for
every named recipe; restore, loss scaling and bad input."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import floatfmt as ff  # noqa: E402
import floatfmt.torch as fft  # noqa: E402
from torch import nn  # noqa: E402

RECIPES = sorted(fft.recipes())
#: the per-operand recipes the by-hand reference below models; NVIDIA's NVFP4 training
#: recipe (2-D weight tiles, RHT, stochastic gradients, BF16 end layers) has its own
#: op-by-op tests in tests/test_nvfp4_recipe.py, rowwise FP8 (a scale vector per operand,
#: the rowwise epilogue) in tests/test_recipe_rowwise.py
REF_RECIPES = [n for n in RECIPES if n not in ("nvfp4_training", "fp8_rowwise")]


# ------------------------------------------------------------------ the reference, by hand
class RawBlock:
    """An operand for the block-scaled unit: the data and the axis ``ff.quantize`` blocks
    it along (``.T`` transposes both), quantised by ``ref_gemm`` itself."""

    def __init__(self, v, fmt, axis):
        self.v, self.fmt, self.axis = v, fmt, axis

    @property
    def T(self):
        return RawBlock(self.v.T, self.fmt, 1 - self.axis % 2)

    def q(self):
        return ff.quantize(self.v, self.fmt, axis=self.axis)


def ref_operand(v, fmt, r, axis, ds=None, name="", role="forward"):
    """(values the unit reads, tensor scale) by the recipe's scaling rule."""
    if r.scaling == "none":
        return np.asarray(ff.cast(v, fmt, dtype=np.float64), np.float64), 1.0
    if r.scaling == "block" and r.model is not None:  # the block-scaled unit (b200)
        return RawBlock(v, fmt, axis), None
    if r.scaling == "block":
        q = ff.quantize(v, fmt, axis=axis)
        ts = q.tensor_scale if q.tensor_scale is not None else 1.0
        return q.dequantize() / ts, ts
    q = ds.quantize(name, v, role) if ds is not None else ff.quantize(v, fmt)
    return np.asarray(q.elements, np.float64), q.scale


def ref_gemm(a, fa, b, fb, r, out_fmt, c=None):
    (av, sa), (bv, sb) = a, b
    if isinstance(av, RawBlock):  # ff.block_scaled_matmul (NVFP4's tensor scales inside),
        res = ff.block_scaled_matmul(av.q(), bv.q(), model=r.model)  # then c and out_fmt
        if c is not None:
            res = ff.add(res, ff.cast(c, out_fmt), "fp32")
        return ff.cast(res, out_fmt)
    alpha = float(ff.cast(sa * sb, "fp32"))
    kw = dict(acc_fmt=r.acc_fmt, out_fmt=out_fmt, alpha=alpha)
    if c is not None:
        kw["c"] = c
    if r.scaling == "block":
        return ff.matmul(av, bv, "fp32", order=r.order, **kw)
    if r.model is None:
        return ff.matmul(av, bv, fa if fa == fb else "fp32", order=r.order, **kw)
    if fa == fb:
        return ff.matmul(av, bv, fa, model=r.model, **kw)
    assert {fa, fb} == {"fp8_e4m3", "fp8_e5m2"}
    unit = ff.tensorcore_models()[f"{r.model}/{fa}"].replace(fmt="e5m3")
    return ff.matmul(av, bv, "e5m3", model=unit, **kw)


def ref_linear(x, lin, r, ds):
    w = lin.weight.detach().double().numpy()
    b = lin.bias.detach().double().numpy()
    qx = ref_operand(x, r.fwd_fmt, r, 1, ds, "input")
    qw = ref_operand(w, r.fwd_fmt, r, 1, ds, "weight")
    y = ref_gemm(qx, r.fwd_fmt, (qw[0].T, qw[1]), r.fwd_fmt, r, r.out_fmt,
                 np.broadcast_to(b, (x.shape[0], w.shape[0])))
    return y, (x, w, qx, qw)


def ref_linear_back(g, saved, r, ds):
    x, w, qx, qw = saved
    qg = ref_operand(g, r.bwd_fmt, r, 1, ds, "grad_output", "backward")
    if r.scaling == "block":  # each backward GEMM quantises along the axis it reduces over
        wq, gq_m, xq_m = (ref_operand(w, r.fwd_fmt, r, 0), ref_operand(g, r.bwd_fmt, r, 0),
                          ref_operand(x, r.fwd_fmt, r, 0))
    else:
        wq, gq_m, xq_m = qw, qg, qx
    gx = ref_gemm(qg, r.bwd_fmt, wq, r.fwd_fmt, r, r.out_fmt)
    gw = ref_gemm((gq_m[0].T, gq_m[1]), r.bwd_fmt, xq_m, r.fwd_fmt, r, r.wgrad_fmt)
    gb = ff.sum(g, "fp32", acc_fmt="fp32", order="pairwise", axis=0, out_fmt=r.wgrad_fmt)
    if ds is not None:
        ds.update()
    return gx, gw, gb


def small_model(seed=0, d_in=24, hidden=40, d_out=8):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))


def data(seed, shape, spread=1.0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape) * spread)


def same(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(((a == b) | (np.isnan(a) & np.isnan(b))).all())


@pytest.mark.parametrize("name", REF_RECIPES)
def test_emulated_mlp_equals_the_numpy_path_layer_by_layer(name):
    """Two training steps (forward, backward with a fixed output gradient, scales
    updated) of a 2-layer MLP: outputs, input gradient and every parameter gradient
    equal the reference computed with ff.* calls, bit for bit."""
    r = fft.get_recipe(name)
    model = small_model()
    fft.emulate(model, r)
    dss = [ff.DelayedScaling(r.history_len, r.amax_algo, r.margin, r.fwd_fmt, r.bwd_fmt)
           if r.scaling == "delayed" else None for _ in range(2)]
    for step in range(2):
        xv = data(10 + step, (16, 24)).astype(np.float32)
        gv = data(20 + step, (16, 8), spread=2.0).astype(np.float32)
        x = torch.from_numpy(xv).requires_grad_()
        y = model(x)
        y.backward(torch.from_numpy(gv))
        # reference: layer 0, ReLU (exact), layer 1; backward in reverse
        h, s0 = ref_linear(xv.astype(np.float64), model[0], r, dss[0])
        a = np.maximum(h, 0.0)
        y_ref, s1 = ref_linear(a, model[2], r, dss[1])
        assert same(y.detach().numpy(), y_ref), (name, step)
        ga, gw1, gb1 = ref_linear_back(gv.astype(np.float64), s1, r, dss[1])
        gh = np.where(h > 0, ga, 0.0)
        gx, gw0, gb0 = ref_linear_back(gh, s0, r, dss[0])
        assert same(model[2].weight.grad.numpy(), gw1) and same(model[2].bias.grad.numpy(), gb1)
        assert same(model[0].weight.grad.numpy(), gw0) and same(model[0].bias.grad.numpy(), gb0)
        assert same(x.grad.numpy(), gx), (name, step)
        model.zero_grad()
    if r.scaling == "delayed":  # the histories moved: step 2 used scales other than 1
        assert fft.delayed_scaling(model[0]).scale("input") != 1.0
        assert fft.delayed_scaling(model[0]).history("grad_output") == dss[0].history("grad_output")
    fft.unemulate(model)


def test_outputs_are_values_of_the_output_format_and_near_fp32():
    """Independent of the rules above: a bf16 recipe's outputs are bf16 values, and every
    recipe's forward is close to torch's own fp32 forward (the formats' precision)."""
    model = small_model(1)
    x = torch.from_numpy(data(3, (32, 24)).astype(np.float32))
    want = model(x).detach().numpy()
    tol = {"fp32": 1e-6, "tf32": 1e-2, "bf16": 3e-2, "fp16": 3e-3, "bf16_pure": 3e-2,
           "fp16_pure": 3e-3, "fp8_tensorwise": 0.3, "fp8_rowwise": 0.3,
           "fp8_unscaled": 0.3, "mxfp8": 0.3, "nvfp4": 1.5, "mxfp4": 1.5, "nvfp4_training": 1.5,
           "mxfp8_b200": 0.3, "mxfp4_b200": 1.5, "nvfp4_b200": 1.5}
    for name in RECIPES:
        with fft.emulating(model, name):
            got = model(x).detach().numpy()
        if fft.get_recipe(name).out_fmt == "bf16":
            assert same(ff.cast(got.astype(np.float64), "bf16"), got), name
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err < tol[name], (name, err)


def test_functional_matmul_equals_the_numpy_path():
    """matmul(a, b, recipe) on attention-shaped (batch, M, K) @ (batch, K, N): forward and
    both gradients equal ff.* calls (block scaling along the reduced axis of each GEMM)."""
    av, bv = data(5, (2, 8, 64)), data(6, (2, 64, 40))
    gv = data(7, (2, 8, 40))
    for name in ("bf16", "fp8_tensorwise", "mxfp8", "nvfp4"):
        r = fft.get_recipe(name)
        a = torch.from_numpy(av).requires_grad_()
        b = torch.from_numpy(bv).requires_grad_()
        y = fft.matmul(a, b, r)
        y.backward(torch.from_numpy(gv))
        qa, qb = ref_operand(av, r.fwd_fmt, r, -1), ref_operand(bv, r.fwd_fmt, r, -2)
        assert same(y.detach().numpy(), ref_gemm(qa, r.fwd_fmt, qb, r.fwd_fmt, r, r.out_fmt)), name
        t = lambda q: (np.swapaxes(q[0], -1, -2), q[1])  # noqa: E731
        qg = ref_operand(gv, r.bwd_fmt, r, -1)
        blk = r.scaling == "block"
        qb2 = ref_operand(bv, r.fwd_fmt, r, -1) if blk else qb
        qg2, qa2 = (ref_operand(gv, r.bwd_fmt, r, -2), ref_operand(av, r.fwd_fmt, r, -2)) if blk else (qg, qa)
        assert same(a.grad.numpy(), ref_gemm(qg, r.bwd_fmt, t(qb2), r.fwd_fmt, r, r.out_fmt)), name
        assert same(b.grad.numpy(), ref_gemm(t(qa2), r.fwd_fmt, qg2, r.bwd_fmt, r, r.out_fmt)), name


def test_unemulate_restores_the_same_modules_and_outputs():
    model = small_model(2)
    mods, params = list(model.modules()), list(model.parameters())
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.from_numpy(data(8, (4, 24)).astype(np.float32))
    want = model(x)
    fft.emulate(model, "mxfp4")
    assert not torch.equal(model(x), want)  # mxfp4 does change the numbers
    with pytest.raises(ValueError, match="already emulated"):
        fft.emulate(model, "bf16")
    assert fft.unemulate(model) is model
    assert list(model.modules()) == mods and all(p is q for p, q in zip(model.parameters(), params))
    assert torch.equal(model(x), want) and model.state_dict().keys() == sd.keys()
    assert "forward" not in model[0].__dict__
    with fft.emulating(model, "fp8_tensorwise") as m:
        assert m is model and not torch.equal(model(x), want)
    assert torch.equal(model(x), want)
    try:  # restored even when the block raises
        with fft.emulating(model, "bf16"):
            raise KeyError("boom")
    except KeyError:
        pass
    assert torch.equal(model(x), want)


def test_loss_scaling_with_floatfmt_and_torch_scalers():
    """fp16 gradients of a loss times 2**-30 flush to zero without a loss scale; with
    torch.amp.GradScaler or ff.LossScaler (same scale) they survive, and the two agree
    bit for bit; an overflowing step is reported by both and skipped by GradScaler."""
    x = torch.from_numpy(data(9, (16, 24)).astype(np.float32))

    def grads(scaler, k=-30.0):
        model = small_model(3)
        fft.emulate(model, "fp16")
        loss = model(x).sum() * 2.0 ** k
        if scaler is None:
            loss.backward()
        elif isinstance(scaler, ff.LossScaler):
            (loss * scaler.get_scale()).backward()
            found = fft.unscale_grads(scaler, model.parameters())
            scaler.update()
            return model, found
        else:
            scaler.scale(loss).backward()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            before = [p.detach().clone() for p in model.parameters()]
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
            return model, before
        return model, None

    plain, _ = grads(None)
    assert all(float(p.grad.abs().max()) == 0.0 for p in plain[0].parameters())
    ls = ff.LossScaler(init_scale=2.0 ** 16)
    mine, found = grads(ls)
    assert not found and float(mine[0].weight.grad.abs().max()) > 0
    gs = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    theirs, _ = grads(gs)
    for p, q in zip(mine.parameters(), theirs.parameters()):
        assert torch.equal(p.grad, q.grad)
    # overflow: fp16 gradients past 65504 become Inf; both scalers see it
    ls2 = ff.LossScaler(init_scale=2.0 ** 16)
    _, found = grads(ls2, k=8.0)
    assert found and ls2.get_scale() == 2.0 ** 15
    gs2 = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    model, before = grads(gs2, k=8.0)
    assert gs2.get_scale() == 2.0 ** 15
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))  # step skipped


def test_bad_input():
    lin = nn.Linear(4, 2)
    with pytest.raises(ValueError, match="Valid"):
        fft.emulate(lin, "fp9")
    with pytest.raises(TypeError, match="nn.Module"):
        fft.emulate(np.ones(3), "bf16")
    with pytest.raises(ValueError, match="scaling"):
        fft.Recipe("mine", fwd_fmt="mxfp8", scaling="tensor")
    with pytest.raises(ValueError, match="mxfp8"):  # an unknown block format lists the close ones
        fft.Recipe("mine", fwd_fmt="mxfp9", bwd_fmt="mxfp8", scaling="block")
    with pytest.raises(ValueError, match="block-scaled model 'h100/mxfp8_e4m3'.*b200/mxfp8_e4m3"):
        fft.Recipe("mine", fwd_fmt="mxfp8", bwd_fmt="mxfp8", scaling="block", model="h100")
    with pytest.raises(ValueError, match="no wider than fp32"):
        fft.Recipe("mine", out_fmt="fp64")
    with pytest.raises(ValueError, match="equal batch"):
        fft.matmul(torch.ones(2, 3, 4), torch.ones(3, 4, 5))
    fft.emulate(lin, "bf16")
    with pytest.raises(ValueError, match="meta"):
        lin(torch.ones(1, 4, device="meta"))
    with pytest.raises(TypeError, match="floating-point"):
        lin(torch.ones(1, 4, dtype=torch.int64))
    fft.unemulate(lin)
    # a user's own recipe: bf16 operands, an A100 unit, fp32 outputs
    mine = fft.get_recipe("bf16").replace(name="bf16_a100", model="a100", out_fmt="fp32")
    fft.emulate(lin, mine)
    y = lin(torch.ones(3, 4))
    assert y.shape == (3, 2) and y.dtype == torch.float32


@pytest.mark.parametrize("name", ["bf16", "fp8_tensorwise", "mxfp4"])
def test_leading_axes_bias_free_layers_and_inputs_without_grad(name):
    """A (batch, seq, features) input gives what its flattened (batch*seq, features) rows
    give; a Linear without bias and an input that needs no gradient change nothing else
    (the input-gradient GEMM is skipped, the weight gradient is the same)."""
    r = fft.get_recipe(name)
    torch.manual_seed(4)
    lin = nn.Linear(24, 16, bias=False)
    fft.emulate(lin, r)
    xv = data(30, (3, 5, 24)).astype(np.float32)
    gv = data(31, (3, 5, 16)).astype(np.float32)
    x3 = torch.from_numpy(xv).requires_grad_()
    y3 = lin(x3)
    y3.backward(torch.from_numpy(gv))
    gw3 = lin.weight.grad.clone()
    assert lin.bias is None and y3.shape == (3, 5, 16)
    fft.unemulate(lin)
    fft.emulate(lin, r)  # fresh delayed-scaling state, as for the 3-D run
    lin.weight.grad = None
    y2 = lin(torch.from_numpy(xv.reshape(15, 24)))  # no requires_grad on the input
    y2.backward(torch.from_numpy(gv.reshape(15, 16)))
    assert same(y3.detach().numpy().reshape(15, 16), y2.detach().numpy())
    assert same(gw3.numpy(), lin.weight.grad.numpy())
    w = lin.weight.detach().double().numpy()
    ds = ff.DelayedScaling(r.history_len, r.amax_algo, r.margin, r.fwd_fmt, r.bwd_fmt) \
        if r.scaling == "delayed" else None
    qx = ref_operand(xv.reshape(15, 24).astype(np.float64), r.fwd_fmt, r, 1, ds, "input")
    qw = ref_operand(w, r.fwd_fmt, r, 1, ds, "weight")
    assert same(y2.detach().numpy(), ref_gemm(qx, r.fwd_fmt, (qw[0].T, qw[1]), r.fwd_fmt, r, r.out_fmt))
