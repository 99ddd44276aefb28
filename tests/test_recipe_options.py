"""Recipe options (issue 23, item 4): ``scale_rounding`` of MX recipes, stochastic
rounding of gradients (``grad_rounding``), and ``scale_convention`` of per-tensor recipes,
each against a model written here from the rule (torch float8 casts, Fractions, numpy
float32 arithmetic; no floatfmt code)."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import floatfmt.torch as fft  # noqa: E402
from floatfmt.torch.emulation import quantize_operand  # noqa: E402


def _mx_e4m3(x: np.ndarray, rule: str) -> np.ndarray:
    """MXFP8 E4M3 along the last axis, blocks of 32: scale 2**E with E = floor(log2 amax) - 8
    (OCP, "floor") or ceil(log2(amax / 448)) (NVIDIA's RCEIL), elements RNE, saturating."""
    out = np.empty_like(x, dtype=np.float64)
    for idx in np.ndindex(*x.shape[:-1]):
        row = x[idx]
        for b in range(0, row.size, 32):
            blk = row[b:b + 32].astype(np.float64)
            amax = Fraction(float(np.abs(blk).max()))
            if rule == "floor":
                e = math.floor(math.log2(amax)) - 8
                while Fraction(2) ** (e + 9) <= amax:  # exact floor(log2)
                    e += 1
                while Fraction(2) ** (e + 8) > amax:
                    e -= 1
            else:
                e = math.ceil(math.log2(amax / 448))
                while Fraction(2) ** (e - 1) >= amax / 448:
                    e -= 1
                while Fraction(2) ** e < amax / 448:
                    e += 1
            y = torch.from_numpy(blk / 2.0 ** e).clamp(-448, 448).to(torch.float8_e4m3fn)
            out[idx][b:b + 32] = y.double().numpy() * 2.0 ** e
    return out


def _seq_fp32_matmul_bf16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b.T with fp32 products (exact here) summed in K order in fp32, rounded to bf16."""
    m, k = a.shape
    n = b.shape[0]
    out = np.empty((m, n), np.float64)
    for i in range(m):
        for j in range(n):
            acc = np.float32(0)
            for t in range(k):
                acc = np.float32(acc + np.float32(a[i, t] * b[j, t]))
            out[i, j] = float(np.float32(acc).astype(ml_dtypes.bfloat16))
    return out


@pytest.mark.parametrize("rule", ["floor", "rceil"])
def test_mx_recipe_scale_rounding(rule):
    g = torch.Generator().manual_seed(0)
    lin = torch.nn.Linear(64, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(3, 64, generator=g) * 0.7)
    x = torch.randn(4, 64, generator=g) * 5
    r = fft.get_recipe("mxfp8").replace(name="mxfp8_" + rule, scale_rounding=rule)
    with fft.emulating(lin, r):
        y = lin(x).detach().double().numpy()
    xq = _mx_e4m3(x.numpy(), rule)
    wq = _mx_e4m3(lin.weight.detach().numpy(), rule)
    want = _seq_fp32_matmul_bf16(xq, wq)
    assert int((y != want).sum()) == 0
    other = _seq_fp32_matmul_bf16(_mx_e4m3(x.numpy(), "rceil" if rule == "floor" else "floor"), wq)
    assert int((other != want).sum()) > 0  # the two rules part on this data


def _e5m2_neighbours(v: np.ndarray):
    grid = torch.arange(0, 0x7C, dtype=torch.uint8).view(torch.float8_e5m2).double().numpy()
    a = np.abs(v)
    i = np.searchsorted(grid, a)  # grid[i-1] < a <= grid[i]
    lo, hi = grid[np.maximum(i - 1, 0)], grid[np.minimum(i, grid.size - 1)]
    lo = np.where(grid[np.minimum(i, grid.size - 1)] == a, a, lo)
    return np.sign(v) * lo, np.sign(v) * hi


def test_stochastic_rounding_of_gradients():
    """W = I (exact in E4M3), so grad_x = the E5M2 output gradient itself: every element is
    one of the two E5M2 neighbours of g, the rounding is not RNE every time, and the mean
    over trials approaches g (unbiased: P(up) = (g - down) / (up - down))."""
    r = fft.Recipe("sr_grads", fwd_fmt="fp8_e4m3", bwd_fmt="fp8_e5m2", scaling="none",
                   grad_rounding="stochastic")
    lin = torch.nn.Linear(8, 8, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(8))
    gen = torch.Generator().manual_seed(3)
    gout = (torch.rand(2, 8, generator=gen) + 1.0) * torch.tensor([1.0, -1.0]).repeat(8)[:8]
    lo, hi = _e5m2_neighbours(gout.double().numpy())
    rne = gout.to(torch.float8_e5m2).double().numpy()
    trials = 400
    total = np.zeros(gout.shape)
    saw_other = False
    fft.emulate(lin, r)
    for _ in range(trials):
        x = torch.ones(2, 8, requires_grad=True)
        lin(x).backward(gout)
        gx = x.grad.double().numpy()
        assert np.all((gx == lo) | (gx == hi))
        saw_other |= bool(np.any(gx != rne))
        total += gx
    fft.unemulate(lin)
    assert saw_other
    g = gout.double().numpy()
    p = np.where(hi != lo, (g - lo) / np.where(hi != lo, hi - lo, 1), 0)
    sigma = np.abs(hi - lo) * np.sqrt(p * (1 - p) / trials)
    assert np.all(np.abs(total / trials - g) <= 5 * sigma + 1e-12)


def test_nearest_gradients_by_default():
    r = fft.Recipe("rne_grads", fwd_fmt="fp8_e4m3", bwd_fmt="fp8_e5m2", scaling="none")
    lin = torch.nn.Linear(8, 8, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(8))
    gout = torch.linspace(1.01, 1.99, 16).reshape(2, 8)
    with fft.emulating(lin, r):
        x = torch.ones(2, 8, requires_grad=True)
        lin(x).backward(gout)
    assert torch.equal(x.grad.double(), gout.to(torch.float8_e5m2).double())


@pytest.mark.parametrize("convention", ["te", "torchao"])
def test_tensor_recipe_scale_convention(convention):
    """A current-scaling FP8 recipe with the TE / torchao convention quantises its operands
    as s = fp32(448 / amax), fp32(x * s), saturating RNE cast; the scale is fp32(1/s)."""
    r = fft.Recipe("fp8_cur", fwd_fmt="fp8_e4m3", bwd_fmt="fp8_e5m2", scaling="tensor",
                   scale_convention=convention)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(64, 32, generator=gen) * 3
    op = quantize_operand(x, "fp8_e4m3", r, -1)
    amax = x.abs().amax()
    s = (torch.tensor(448.0) / amax) if convention == "te" else (448.0 / amax.double()).float()
    want = (x * s).clamp(-448, 448).to(torch.float8_e4m3fn).double()
    assert torch.equal(op.values, want)
    assert op.scale == float((1.0 / s).item())


def test_recipe_option_errors():
    with pytest.raises(ValueError, match="rceil"):
        fft.get_recipe("mxfp8").replace(scale_rounding="round")
    with pytest.raises(ValueError, match="MX block"):
        fft.get_recipe("nvfp4").replace(scale_rounding="rceil")
    with pytest.raises(ValueError, match="scaling='tensor'"):
        fft.get_recipe("bf16").replace(scale_convention="te")
    with pytest.raises(ValueError, match="stochastic"):
        fft.get_recipe("bf16").replace(grad_rounding="sr")
