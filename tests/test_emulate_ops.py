"""floatfmt.torch.emulate at the op level (issue 23): every GEMM-like op of a model,
forward and backward, goes through floatfmt, whoever calls it.

Oracles, each independent of the code under test:

* geometry: on small-integer data every product and sum is exact in fp32, so the
  emulated convolutions (every stride, padding, dilation, groups, transposed),
  matmul family and einsum must give torch's own results bit for bit, forward and
  every gradient;
* numbers: the models' outputs equal a reference written op by op with the numpy
  path (``ff.cast`` / ``ff.quantize`` / ``ff.matmul`` on numpy arrays; convolutions
  through ``F.unfold``) and torch for the other ops;
* coverage: a ``TorchDispatchMode`` counter written here counts the aten GEMM and
  convolution ops torch runs itself (the emulation computes in numpy, so whatever the
  counter sees ran unemulated) with its own FLOP formulas; a training step of each
  model must leave at most 1% of the plain step's FLOPs to torch, and the report's
  numbers must equal the counter's.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import floatfmt as ff  # noqa: E402
import floatfmt.torch as fft  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")
aten = torch.ops.aten


# ------------------------------------------------------------------ the independent counter
def _spatial_flops(n, w, spatial):
    return 2 * n * math.prod(w) * math.prod(spatial)


class GemmCounter(TorchDispatchMode):
    """FLOPs of the aten GEMM / convolution / attention ops torch runs (2 per multiply-add)."""

    def __init__(self):
        super().__init__()
        self.flops = 0
        self.calls = {}

    def _add(self, name, n):
        self.flops += int(n)
        self.calls[name] = self.calls.get(name, 0) + 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        p = func.overloadpacket
        name = str(p).split(".")[-1]
        if p in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm):
            a, b = (args[0], args[1]) if p in (aten.mm, aten.bmm) else (args[1], args[2])
            batch = a.shape[0] if a.ndim == 3 else 1
            self._add(name, 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1])
        elif p in (aten.mv, aten.addmv):
            a = args[0] if p is aten.mv else args[1]
            self._add(name, 2 * a.numel())
        elif p is aten.dot:
            self._add(name, 2 * args[0].numel())
        elif p is aten.convolution:
            x, w, transposed = args[0], args[1], args[6]
            sp = (x if transposed else out).shape[2:]
            self._add(name, _spatial_flops(x.shape[0], w.shape, sp))
        elif p is aten.convolution_backward:
            g, x, w, transposed, mask = args[0], args[1], args[2], args[7], args[10]
            sp = (x if transposed else g).shape[2:]
            self._add(name, (int(mask[0]) + int(mask[1])) * _spatial_flops(x.shape[0], w.shape, sp))
        elif "scaled_dot_product" in name:
            q, k, v = (args[1], args[2], args[3]) if name.endswith("backward") else args[:3]
            fwd = 2 * q.numel() * k.shape[-2] + 2 * (q.numel() // q.shape[-1]) * k.shape[-2] * v.shape[-1]
            self._add(name, 2 * fwd if name.endswith("backward") else fwd)
        return out


def training_step(model, x, seed=0):
    """Forward, a fixed random-projection loss, backward; returns the output."""
    y = model(x)
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(y.shape, generator=g)
    (y * w).sum().backward()
    return y


def counted_step(model, x):
    with GemmCounter() as c:
        y = training_step(model, x)
    return y, c


# ------------------------------------------------------------------ models from torch modules
class PreNormTransformer(nn.Module):
    """Two pre-norm blocks: nn.MultiheadAttention, then an SDPA attention; GELU MLPs."""

    def __init__(self, e=16, h=2, f=32, vocab=11):
        super().__init__()
        self.h = h
        self.emb = nn.Linear(vocab, e)
        self.ln1, self.ln2, self.ln3, self.ln4 = (nn.LayerNorm(e) for _ in range(4))
        self.mha = nn.MultiheadAttention(e, h, batch_first=True)
        self.qkv, self.proj = nn.Linear(e, 3 * e), nn.Linear(e, e)
        self.mlp1 = nn.Sequential(nn.Linear(e, f), nn.GELU(), nn.Linear(f, e))
        self.mlp2 = nn.Sequential(nn.Linear(e, f), nn.GELU(), nn.Linear(f, e))
        self.head = nn.Linear(e, vocab)

    def forward(self, x):
        x = self.emb(x)
        a = self.ln1(x)
        x = x + self.mha(a, a, a, need_weights=False)[0]
        x = x + self.mlp1(self.ln2(x))
        b, t, e = x.shape
        q, k, v = self.qkv(self.ln3(x)).reshape(b, t, 3, self.h, e // self.h).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, e))
        x = x + self.mlp2(self.ln4(x))
        return self.head(x)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 1, 1)
        self.bn = nn.BatchNorm2d(8)
        self.blocks = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        x = self.blocks(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Conv1DLike(nn.Module):
    """transformers.pytorch_utils.Conv1D: a Linear whose weight is (in, out), through addmm."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.2)
        self.bias = nn.Parameter(torch.randn(nf) * 0.1)

    def forward(self, x):
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(*x.shape[:-1], -1)


class GPTBlock(nn.Module):
    def __init__(self, e=16, h=2):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(e), nn.LayerNorm(e)
        self.c_attn, self.c_proj = Conv1DLike(3 * e, e), Conv1DLike(e, e)
        self.c_fc, self.c_out = Conv1DLike(4 * e, e), Conv1DLike(e, 4 * e)

    def forward(self, x):
        b, t, e = x.shape
        q, k, v = self.c_attn(self.ln1(x)).split(e, dim=2)
        q, k, v = (z.view(b, t, self.h, e // self.h).transpose(1, 2) for z in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(e // self.h)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        w = torch.where(causal, w, torch.full_like(w, -1e9))
        o = torch.matmul(torch.softmax(w, dim=-1), v).transpose(1, 2).reshape(b, t, e)
        x = x + self.c_proj(o)
        return x + self.c_out(F.gelu(self.c_fc(self.ln2(x)), approximate="tanh"))


def models():
    torch.manual_seed(0)
    tr = PreNormTransformer()
    torch.manual_seed(1)
    rn = ResNetLike()
    torch.manual_seed(2)
    gpt = GPTBlock()
    g = torch.Generator().manual_seed(3)
    return {"transformer": (tr, torch.randn(2, 6, 11, generator=g)),
            "resnet": (rn, torch.randn(2, 3, 8, 8, generator=g)),
            "gpt": (gpt, torch.randn(2, 5, 16, generator=g))}


MODELS = ["transformer", "resnet", "gpt"]


# ------------------------------------------------------------------ coverage and the report
@pytest.mark.parametrize("name", MODELS)
def test_training_step_is_emulated_and_the_report_agrees_with_a_dispatch_counter(name):
    model, x = models()[name]
    _, plain = counted_step(model, x)
    assert plain.flops > 0
    model.zero_grad()
    fft.emulate(model, "bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left: no warning
        _, emu = counted_step(model, x)
    rep = fft.emulation_report(model)
    done, left = rep.gemm_flops()
    assert emu.flops <= 0.01 * plain.flops, (emu.calls, str(rep))
    assert left == emu.flops and done == plain.flops - emu.flops, (done, left, plain.flops, emu.flops)
    fwd = sum(r["flops_emulated"] for r in rep.rows() if r["phase"] == "forward")
    assert 0 < fwd < done  # backward GEMMs emulated too
    assert "floatfmt emulated: bf16" in repr(model)
    assert "GEMM-like FLOPs emulated" in str(rep)
    fft.unemulate(model)
    assert "floatfmt" not in repr(model)


def test_recurrent_layers_are_reported_as_not_emulated():
    torch.manual_seed(19)
    lstm = nn.LSTM(6, 8)
    fft.emulate(lstm, "bf16")
    x = torch.randn(5, 3, 6)
    with pytest.warns(UserWarning, match="ran unemulated"):
        training_step(Fn(lambda x: lstm(x)[0]), x)
    rows = {(r["op"], r["phase"]): r for r in fft.emulation_report(lstm).rows()}
    assert rows[("lstm", "forward")]["reasons"] == {"not emulated by floatfmt": 1}
    # the estimate: 2 FLOPs per weight element per time step and row
    assert rows[("lstm", "forward")]["flops_left"] == 2 * 15 * (4 * 8 * 6 + 4 * 8 * 8)


def test_ops_left_to_torch_are_reported_with_reasons_and_warned_about_once():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)
            self.w = nn.Parameter(torch.randn(8, 8))

        def forward(self, x):
            y = self.lin(x)
            z = torch.addmm(y, x, self.w, beta=0.5)  # beta != 1: torch computes it
            n = torch.ones(3, 4, dtype=torch.int64) @ torch.ones(4, 2, dtype=torch.int64)
            return z + n.sum()

    model, x = Odd(), torch.randn(4, 8)
    fft.emulate(model, "bf16")
    with pytest.warns(UserWarning, match="ran unemulated"):
        _, c = counted_step(model, x)
    rep = fft.emulation_report(model)
    done, left = rep.gemm_flops()
    assert left == c.flops and left > 0
    rows = {(r["op"], r["phase"]): r for r in rep.rows()}
    assert rows[("addmm", "forward")]["reasons"] == {"alpha or beta other than 1": 1}
    assert rows[("addmm", "backward")]["flops_left"] == 2 * 4 * 8 * 8  # x needs no grad: dW only
    assert rows[("matmul", "forward")]["reasons"] == {"integer tensors": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per model
        counted_step(model, x)
    assert "alpha or beta other than 1" in str(rep)
    fft.unemulate(model)


# ------------------------------------------------------------------ geometry: exact on integers
def _ints(g, *shape):
    return torch.randint(-3, 4, shape, generator=g).float()


class Fn(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, *a):
        return self.f(*a)


def _same_as_torch(f, args, recipe="fp32"):
    """Emulated forward and every gradient equal torch's (exact data: exact sums)."""
    g = torch.Generator().manual_seed(7)
    a1 = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    a2 = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    y1 = f(*a1)
    gy = _ints(g, *y1.shape)
    y1.backward(gy)
    m = fft.emulate(Fn(f), recipe)
    with GemmCounter() as c:
        y2 = m(*a2)
        y2.backward(gy)
    assert c.flops == 0, c.calls
    assert torch.equal(y1, y2)
    for u, v in zip(a1, a2):
        if u.requires_grad:
            assert torch.equal(u.grad, v.grad)
    return fft.emulation_report(m)


CONVS = [(1, 0, 1, 1), (2, 1, 1, 2), (3, 2, 2, 1), (2, 0, 1, 4), (1, 3, 3, 2)]


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,dilation,groups", CONVS)
def test_convolutions_every_geometry_forward_dgrad_wgrad(d, stride, padding, dilation, groups):
    g = torch.Generator().manual_seed(d * 100 + stride * 10 + groups)
    conv, convt = getattr(F, f"conv{d}d"), getattr(F, f"conv_transpose{d}d")
    size = 7 if d < 3 else 5
    x = _ints(g, 2, 4, *[size] * d)
    w = _ints(g, 8, 4 // groups, *[3] * d)
    b = _ints(g, 8)
    _same_as_torch(lambda x, w, b: conv(x, w, b, stride, padding, dilation, groups), [x, w, b])
    wt = _ints(g, 4, 8 // groups, *[3] * d)
    op = 1 if stride > 1 and dilation < stride else 0
    _same_as_torch(lambda x, w, b: convt(x, w, b, stride, padding, op, groups, dilation), [x, wt, b])
    _same_as_torch(lambda x, w: conv(x, w, None, 1, "same", dilation, groups), [x, w], "bf16")


def test_conv_modules_unbatched_inputs_and_padding_modes():
    g = torch.Generator().manual_seed(5)
    torch.manual_seed(5)
    for mod in (nn.Conv1d(3, 4, 2, padding=1, padding_mode="reflect"), nn.Conv2d(3, 6, (2, 3), stride=(2, 1)),
                nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1)):
        with torch.no_grad():
            for p in mod.parameters():
                p.copy_(_ints(g, *p.shape))
        x = _ints(g, 3, *[6] * (mod.weight.ndim - 2))
        _same_as_torch(mod, [x])


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("bij,jk", [(2, 3, 4), (4, 5)]), ("i,j->ij", [(3,), (4,)]), ("bi,bi->b", [(3, 4), (3, 4)]),
    ("kj,ik->ji", [(4, 5), (3, 4)])])
def test_einsum_two_operands(eq, shapes):
    g = torch.Generator().manual_seed(len(eq))
    _same_as_torch(lambda a, b: torch.einsum(eq, a, b), [_ints(g, *s) for s in shapes])


def test_matmul_family_shapes():
    g = torch.Generator().manual_seed(9)
    a3, b3, a2, b2, v = _ints(g, 2, 3, 4), _ints(g, 2, 4, 5), _ints(g, 3, 4), _ints(g, 4, 5), _ints(g, 4)
    c = _ints(g, 5)
    _same_as_torch(lambda a, b: a @ b, [a3, b2])
    _same_as_torch(lambda a, b: torch.matmul(a, b), [a2, b3])  # broadcast batch
    _same_as_torch(lambda a, b: a.matmul(b), [v, b2])
    _same_as_torch(lambda a, b: torch.matmul(a, b), [a3, v])
    _same_as_torch(torch.bmm, [a3, b3])
    _same_as_torch(torch.mv, [a2, v])
    _same_as_torch(torch.dot, [v, _ints(g, 4)])
    _same_as_torch(torch.mm, [a2, b2])
    _same_as_torch(lambda c, a, b: torch.addmm(c, a, b), [c, a2, b2])
    _same_as_torch(lambda c, a, b: torch.baddbmm(c, a, b), [_ints(g, 2, 3, 5), a3, b3])
    _same_as_torch(lambda x, w, b: F.linear(x, w, b), [a3, _ints(g, 5, 4), c])


# ------------------------------------------------------------------ numbers: the numpy path op by op
def _np(t):
    return t.detach().double().numpy()


def G(a, b, c=None, out="bf16", alpha=1.0, fmt="bf16"):
    """The bf16 recipe's GEMM on the numpy path: cast operands, H100 unit, epilogue, out_fmt."""
    kw = {} if c is None else {"c": np.broadcast_to(_np(c), _np(a).shape[:-1] + (_np(b).shape[-1],))}
    if alpha != 1.0:
        kw["alpha"] = alpha
    y = ff.matmul(ff.cast(_np(a), fmt), ff.cast(_np(b), fmt), fmt, model="h100", out_fmt=out, **kw)
    return torch.from_numpy(np.asarray(y)).float()


def lin(x, m):
    y = G(x.reshape(-1, x.shape[-1]), m.weight.T, m.bias)
    return y.reshape(*x.shape[:-1], -1)


def attn(q, k, v, causal=False):
    s = G(q, k.transpose(-1, -2), out="fp32", alpha=float(ff.cast(1 / math.sqrt(q.shape[-1]), "fp32")))
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return G(torch.softmax(s, -1), v)


def ref_transformer(m, x):
    x = lin(x, m.emb)
    a = m.ln1(x)
    b, t, e = x.shape
    h = m.mha.num_heads
    qkv = G(a.transpose(0, 1).reshape(-1, e), m.mha.in_proj_weight.T, m.mha.in_proj_bias)
    q, k, v = (z.reshape(t, b * h, e // h).transpose(0, 1).reshape(b, h, t, e // h) for z in qkv.chunk(3, -1))
    o = attn(q, k, v).permute(2, 0, 1, 3).reshape(t * b, e)
    o = G(o, m.mha.out_proj.weight.T, m.mha.out_proj.bias).reshape(t, b, e).transpose(0, 1)
    x = x + o
    x = x + lin(F.gelu(lin(m.ln2(x), m.mlp1[0])), m.mlp1[2])
    q, k, v = lin(m.ln3(x), m.qkv).reshape(b, t, 3, m.h, e // m.h).permute(2, 0, 3, 1, 4)
    x = x + lin(attn(q, k, v, causal=True).transpose(1, 2).reshape(b, t, e), m.proj)
    x = x + lin(F.gelu(lin(m.ln4(x), m.mlp2[0])), m.mlp2[2])
    return lin(x, m.head)


def conv_ref(x, c):
    """nn.Conv2d (groups 1) as F.unfold followed by the numpy GEMM."""
    kh, kw = c.kernel_size
    cols = F.unfold(x, (kh, kw), c.dilation, c.padding, c.stride)  # (N, C*kh*kw, L)
    n, _, ll = cols.shape
    y = G(cols.transpose(1, 2).reshape(n * ll, -1), c.weight.reshape(c.out_channels, -1).T,
          None if c.bias is None else c.bias)
    oh = (x.shape[2] + 2 * c.padding[0] - c.dilation[0] * (kh - 1) - 1) // c.stride[0] + 1
    return y.reshape(n, oh, ll // oh, -1).permute(0, 3, 1, 2)


def bn(x, b):
    return F.batch_norm(x, None, None, b.weight, b.bias, True, 0.0, b.eps)


def ref_resnet(m, x):
    x = F.relu(bn(conv_ref(x, m.stem), m.bn))
    for blk in m.blocks:
        y = F.relu(bn(conv_ref(x, blk.c1), blk.b1))
        y = bn(conv_ref(y, blk.c2), blk.b2)
        x = F.relu(y + (x if blk.down is None else bn(conv_ref(x, blk.down[0]), blk.down[1])))
    return lin(F.adaptive_avg_pool2d(x, 1).flatten(1), m.fc)


def ref_gpt(m, x):
    b, t, e = x.shape

    def c1d(z, c):
        return G(z.reshape(-1, z.shape[-1]), c.weight, c.bias).reshape(*z.shape[:-1], -1)

    q, k, v = c1d(m.ln1(x), m.c_attn).split(e, dim=2)
    q, k, v = (z.view(b, t, m.h, e // m.h).transpose(1, 2) for z in (q, k, v))
    w = G(q, k.transpose(-1, -2)) / math.sqrt(e // m.h)
    w = torch.where(torch.ones(t, t, dtype=torch.bool).tril(), w, torch.full_like(w, -1e9))
    o = G(torch.softmax(w, dim=-1), v).transpose(1, 2).reshape(b, t, e)
    x = x + c1d(o, m.c_proj)
    return x + c1d(F.gelu(c1d(m.ln2(x), m.c_fc), approximate="tanh"), m.c_out)


@pytest.mark.parametrize("name", MODELS)
def test_model_outputs_equal_the_numpy_path_op_by_op(name):
    model, x = models()[name]
    ref = {"transformer": ref_transformer, "resnet": ref_resnet, "gpt": ref_gpt}[name]
    with torch.no_grad():
        want = ref(model, x)
    with fft.emulating(model, "bf16"):
        got = model(x)
    assert got.dtype == torch.float32 and torch.equal(got, want)
    assert not torch.equal(got, model(x))  # and it differs from fp32


def test_conv2d_block_and_tensor_scaling_equal_unfold_then_quantised_matmul():
    """conv2d under MX block scaling (blocks of 32 along K = C*kh*kw) and per-tensor FP8
    scaling equals F.unfold, ff.quantize, ff.matmul on numpy (groups 2, stride 2)."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 8, 6, 6, generator=g)
    w = torch.randn(6, 4, 3, 3, generator=g)
    for name in ("mxfp8", "fp8_tensorwise"):
        r = fft.get_recipe(name)
        if r.scaling == "delayed":
            r = r.replace(scaling="tensor", name="fp8_current")
        y = fft.emulate(Fn(lambda x, w: F.conv2d(x, w, None, 2, 1, 1, 2)), r)(x, w)
        cols = F.unfold(x, 3, 1, 1, 2)  # (N, 8*9, L)
        n, _, ll = cols.shape
        parts = []
        for gi in range(2):
            a = _np(cols[:, gi * 36:(gi + 1) * 36].transpose(1, 2).reshape(n * ll, 36))
            b = _np(w[gi * 3:(gi + 1) * 3].reshape(3, 36).T)
            if r.scaling == "block":
                qa, qb = ff.quantize(a, r.fwd_fmt, axis=1), ff.quantize(b, r.fwd_fmt, axis=0)
                yy = ff.matmul(qa.dequantize(), qb.dequantize(), "fp32", out_fmt=r.out_fmt)
            else:
                xa = ff.quantize(_np(x), r.fwd_fmt)  # the tensor's scale, then the gather
                qa_vals = np.asarray(ff.quantize(a, r.fwd_fmt, scale=xa.scale).elements, np.float64)
                qb = ff.quantize(_np(w), r.fwd_fmt)
                qb_vals = np.asarray(ff.quantize(b, r.fwd_fmt, scale=qb.scale).elements, np.float64)
                yy = ff.matmul(qa_vals, qb_vals, r.fwd_fmt, model="h100", out_fmt=r.out_fmt,
                               alpha=float(ff.cast(xa.scale * qb.scale, "fp32")))
            parts.append(np.asarray(yy).reshape(n, 3, 3, 3))
        want = np.concatenate(parts, axis=-1).transpose(0, 3, 1, 2)
        assert np.array_equal(y.detach().numpy(), want), name


def test_sdpa_forward_and_backward_equal_the_numpy_path():
    """SDPA with a float mask and a scale: S, softmax, O as documented; the four backward
    GEMMs as the emulated matmul's (checked against autograd of the reference's pieces)."""
    g = torch.Generator().manual_seed(12)
    q, k, v = (torch.randn(2, 2, 5, 8, generator=g) for _ in range(3))
    mask = torch.randn(5, 5, generator=g)
    sdpa = Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3))
    fft.emulate(sdpa, "bf16")
    qe, ke, ve = (t.clone().requires_grad_() for t in (q, k, v))
    o = sdpa(qe, ke, ve)
    s = G(q, k.transpose(-1, -2), out="fp32", alpha=float(ff.cast(0.3, "fp32"))) + mask
    p = torch.softmax(s, -1)
    assert torch.equal(o, G(p, v))
    go = torch.randn(o.shape, generator=g)
    o.backward(go)
    gv = G(p.transpose(-1, -2), go)
    gp = G(go, v.transpose(-1, -2))
    gs = torch.softmax(s, -1) * (gp - (gp * p).sum(-1, keepdim=True))  # softmax backward, fp32
    assert torch.equal(ve.grad, gv)
    gs_torch = torch._softmax_backward_data(gp, p, -1, torch.float32)
    a03 = float(ff.cast(0.3, "fp32"))
    assert torch.equal(qe.grad, G(gs_torch, k, alpha=a03))
    assert torch.equal(ke.grad, G(gs_torch.transpose(-1, -2), q, alpha=a03))
    assert torch.allclose(gs, gs_torch, atol=1e-6)


# ------------------------------------------------------------------ policy and autocast
def test_pure_policy_rounds_activations_and_their_gradients():
    torch.manual_seed(13)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x = torch.randn(3, 8)
    with fft.emulating(mlp, "bf16_pure"):
        y = mlp(x)
        rep = fft.emulation_report(mlp)
        assert rep.rounded["gelu"] == 1
    h = ff.cast(F.gelu(lin(x, mlp[0])), "bf16")
    assert torch.equal(y, lin(h, mlp[2]))
    with fft.emulating(mlp, "bf16"):  # autocast policy: the GELU's fp32 output is not rounded
        y2 = mlp(x)
        assert fft.emulation_report(mlp).kept["gelu"] == 1
    assert torch.equal(y2, lin(F.gelu(lin(x, mlp[0])), mlp[2]))
    # the gradient arriving at a rounded op's output is rounded too
    f = fft.emulate(Fn(lambda t: t * 3.1), "bf16_pure")
    t = torch.randn(50).requires_grad_()
    f(t).backward(torch.full((50,), 0.1))
    assert torch.equal(t.grad, ff.cast(torch.full((50,), 0.1), "bf16") * 3.1)
    assert not torch.equal(t.grad, torch.full((50,), 0.1) * 3.1)


def test_under_autocast_the_emulated_model_follows_its_dtype():
    torch.manual_seed(14)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(3, 8)
    with fft.emulating(mlp, "bf16"):
        want = mlp(x)
    with fft.emulating(mlp, "tf32"), torch.autocast("cpu", torch.bfloat16):
        got = mlp(x)
    assert got.dtype == torch.bfloat16 and torch.equal(got.float(), want)


# ------------------------------------------------------------------ gemm="fast"
def test_fast_gemm_is_float32_sums_of_the_exact_operands():
    torch.manual_seed(15)
    lin1 = nn.Linear(24, 8)
    x = torch.randn(6, 24)
    fast = fft.get_recipe("bf16").replace(name="bf16_fast", gemm="fast")
    with fft.emulating(lin1, fast):
        y = lin1(x)
    a = np.asarray(ff.cast(_np(x), "bf16"), np.float32)
    b = np.asarray(ff.cast(_np(lin1.weight), "bf16"), np.float32).T
    acc = np.matmul(a, b).astype(np.float64)
    want = ff.cast(ff.add(ff.cast(_np(lin1.bias), "bf16"), acc, "fp32"), "bf16")
    assert np.array_equal(y.detach().numpy(), want)
    with fft.emulating(lin1, "bf16"):
        exact = lin1(x)
    # the two differ at most by the sum's rounding: a few bf16 ulps here
    ulp = np.exp2(np.floor(np.log2(np.abs(exact.detach().numpy()))) - 7)
    assert np.all(np.abs(y.detach().numpy() - exact.detach().numpy()) <= 2 * ulp)


def test_recipe_fields_are_checked():
    with pytest.raises(ValueError, match="exact"):
        fft.Recipe("mine", gemm="fastest")
    with pytest.raises(ValueError, match="autocast"):
        fft.Recipe("mine", policy="autocst")
    with pytest.raises(ValueError, match="not emulated"):
        fft.emulation_report(nn.Linear(2, 2))


MHA_CASES = [
    dict(), dict(batch_first=True, need_weights=True), dict(need_weights=True, average=False),
    dict(mask="bool"), dict(mask="float3d", need_weights=True), dict(kpm=True, mask="bool"),
    dict(cross=True), dict(kv_same=True), dict(unbatched=True, need_weights=True), dict(causal=True)]


@pytest.mark.parametrize("case", MHA_CASES, ids=lambda c: "-".join(c) or "plain")
def test_multihead_attention_options_follow_torch(case):
    """nn.MultiheadAttention under the fp32 recipe (fp32 operands, fp32 sequential sums)
    gives torch's outputs, attention weights and gradients to fp32 rounding, with every
    GEMM emulated; the options torch has beyond these are left to torch and reported."""
    torch.manual_seed(16)
    e, h, ll, s, b = 8, 2, 4, 5, 3
    kw = dict(kdim=6, vdim=7) if case.get("cross") else {}
    mha = nn.MultiheadAttention(e, h, batch_first=case.get("batch_first", False), **kw)
    g = torch.Generator().manual_seed(17)
    q = torch.randn(ll, b, e, generator=g)
    k = torch.randn(s, b, kw.get("kdim", e), generator=g) if case.get("cross") or case.get("kv_same") else q
    v = torch.randn(s, b, kw.get("vdim", e), generator=g) if case.get("cross") else k
    if case.get("batch_first"):
        q = k = v = q.transpose(0, 1).contiguous()
    sl = k.shape[1] if case.get("batch_first") else k.shape[0]
    opts = dict(need_weights=case.get("need_weights", False), average_attn_weights=case.get("average", True))
    if case.get("mask") == "bool":
        opts["attn_mask"] = torch.rand(ll, sl, generator=g) > 0.7
        opts["attn_mask"][:, 0] = False
    elif case.get("mask") == "float":
        opts["attn_mask"] = torch.randn(ll, sl, generator=g)
    elif case.get("mask") == "float3d":
        opts["attn_mask"] = torch.randn(b * h, ll, sl, generator=g)
    if case.get("kpm"):
        opts["key_padding_mask"] = torch.zeros(b, sl, dtype=torch.bool)
        opts["key_padding_mask"][0, -2:] = True
    if case.get("causal"):
        opts["attn_mask"] = nn.Transformer.generate_square_subsequent_mask(ll)
        opts["is_causal"] = True
    if case.get("unbatched"):
        q = k = v = q[:, 0]
    args = (q, k, v)
    want_o, want_w = mha(*args, **opts)
    go = torch.randn(want_o.shape, generator=g)
    want_o.backward(go)
    want_g = [p.grad.clone() for p in mha.parameters()]
    mha.zero_grad()
    fft.emulate(mha, "fp32")
    with GemmCounter() as c:
        got_o, got_w = mha(*args, **opts)
        got_o.backward(go)
    assert c.flops == 0, c.calls
    assert torch.allclose(got_o, want_o, rtol=1e-5, atol=1e-6)
    assert (got_w is None) == (want_w is None)
    if want_w is not None:
        assert got_w.shape == want_w.shape and torch.allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    for p, w in zip(mha.parameters(), want_g):
        assert torch.allclose(p.grad, w, rtol=1e-4, atol=1e-5)
    fft.unemulate(mha)


def test_multihead_attention_options_left_to_torch_are_reported():
    mha = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    x = torch.randn(4, 2, 8)
    fft.emulate(mha, "bf16")
    with pytest.warns(UserWarning, match="unemulated"):
        mha(x, x, x)
    rows = fft.emulation_report(mha).rows()
    assert rows[0]["reasons"] == {"bias_k / bias_v": 1} and rows[0]["flops_left"] > 0


def test_torch_transformer_encoder_layer_is_emulated():
    """torch's own nn.TransformerEncoderLayer (pre-norm, key padding mask) in training:
    every GEMM of the step emulated, outputs near fp32 torch's under the fp32 recipe."""
    torch.manual_seed(18)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True)
    x = torch.randn(2, 5, 8)
    kpm = torch.zeros(2, 5, dtype=torch.bool)
    kpm[1, -1] = True
    want = layer(x, src_key_padding_mask=kpm)
    fft.emulate(layer, "fp32")
    with GemmCounter() as c:
        got = layer(x, src_key_padding_mask=kpm)
        got.sum().backward()
    assert c.flops == 0, c.calls
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    fft.unemulate(layer)


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_the_float32_operand_cast_equals_ff_cast_on_every_boundary(fmt):
    """The operand casts of emulation (``ff.cast(float32 tensor, fmt, dtype=float64)``,
    which takes cast's float32 route) against ff.cast of the same values as float64 (the
    MPFR-checked general route): every value of the format, every midpoint between two
    neighbours and the float32 values on either side of each, the overflow threshold,
    Inf and NaN -- zero mismatches, for tensors and numpy arrays."""
    codes = np.arange(2 ** 16, dtype=np.uint32)
    if fmt == "bf16":
        vals = (codes << 16).view(np.float32)
    else:
        vals = codes.astype(np.uint16).view(np.float16).astype(np.float32)
    fin = np.sort(vals[np.isfinite(vals)].astype(np.float64))
    mids = ((fin[1:] + fin[:-1]) / 2).astype(np.float32)  # exact in float32
    bits = np.concatenate([vals, mids]).view(np.int32)
    cases = np.concatenate([(bits + d).view(np.float32) for d in (-1, 0, 1)]
                           + [np.array([65519.996, 65520.0, 65520.004, 3.4e38, -np.inf, np.inf, np.nan],
                                       np.float32)])
    with np.errstate(invalid="ignore"):  # ff.cast's own numpy warning on the NaN input
        want = np.asarray(ff.cast(cases.astype(np.float64), fmt), np.float64)
        for got in (ff.cast(torch.from_numpy(cases), fmt, dtype=torch.float64).numpy(),
                    ff.cast(cases, fmt, dtype=np.float64)):
            assert got.dtype == np.float64
            bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
            assert int(bad.sum()) == 0, cases[bad][:10]


def test_a_layer_called_on_its_own_is_emulated_and_exceptions_switch_the_mode_off():
    torch.manual_seed(20)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 8)
    fft.emulate(model, "bf16")
    assert torch.equal(model[0](x), lin(x, model[0]))
    with pytest.raises(RuntimeError):
        model(torch.randn(3, 5))  # shape error inside forward
    y = torch.mm(x, x.T)  # outside the model again: torch's own
    assert torch.equal(y, x @ x.T) and fft.emulation_report(model).rows()[0]["calls_emulated"] == 1
    fft.unemulate(model)
    assert not model._forward_hooks and not model[0]._forward_pre_hooks


def test_fast_gemm_broadcast_bias_and_float32_carrier():
    """gemm="fast": a bias expand-ed over the rows gives the bits of the same C written out
    in full; float32 operands give a float32 result (float64 ones a float64 result with
    the same values)."""
    from floatfmt.torch.emulation import fast_gemm
    g = torch.Generator().manual_seed(3)
    a = ff.cast(torch.randn(33, 20, generator=g), "bf16")
    b = ff.cast(torch.randn(20, 17, generator=g), "bf16")
    bias = torch.randn(17, generator=g, dtype=torch.float64) * 5
    cb = bias.expand(33, 17)
    y = fast_gemm(a, b, 0.75, cb, "bf16")
    y_full = fast_gemm(a, b, 0.75, cb.contiguous(), "bf16")
    y64 = fast_gemm(a.double(), b.double(), 0.75, cb.contiguous(), "bf16")
    assert y.dtype == torch.float32 and y64.dtype == torch.float64
    assert torch.equal(y, y_full) and torch.equal(y.double(), y64)
