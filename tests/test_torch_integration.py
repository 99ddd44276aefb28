"""floatfmt inside ordinary PyTorch training code (issue 23, item 6).

* ``ff.LossScaler`` on tensors that require grad, and its GradScaler interface
  (``scale`` / ``unscale_`` / ``step`` / ``update``), step by step against
  ``torch.amp.GradScaler`` on CPU (the library itself is the reference);
* ``floatfmt.torch.fake_quant`` returns the input's dtype: the exact (float64)
  dequantised value rounded once to nearest-even, checked against a Fraction rounding
  written here, and no bit changed where the dtype holds the value;
* ``torch.compile`` of an emulated model (``backend="eager"`` and inductor) gives the bits
  of the eager model, forward and backward.
"""

from __future__ import annotations

import shutil
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import floatfmt as ff  # noqa: E402
import floatfmt.torch as fft  # noqa: E402
from conftest import all_same  # noqa: E402
from oracles.block_scaling import fp32_rne, rne  # noqa: E402


# ------------------------------------------------------------------ loss scaling
def _model(seed: int) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return m


def test_loss_scaler_scales_a_loss_that_requires_grad():
    """scale(loss) keeps the graph: the gradients are the loss's times S (a power of two:
    exact), and the value is GradScaler's."""
    w = torch.tensor([1.5, -2.0, 0.1], requires_grad=True)
    loss = (w * w).sum()
    ls = ff.LossScaler(init_scale=2.0 ** 10)
    out = ls.scale(loss)
    assert out.requires_grad and out.dtype == torch.float32
    out.backward()
    assert torch.equal(w.grad, (2 * w.detach()) * 2.0 ** 10)
    want = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10).scale(loss)
    assert torch.equal(out.detach(), want.detach()) and out.dtype == want.dtype
    # a 0-d bfloat16 loss: torch's type promotion, as GradScaler (float32 result)
    lb = torch.tensor(3.0, dtype=torch.bfloat16, requires_grad=True)
    assert ls.scale(lb).dtype == torch.amp.GradScaler("cpu").scale(lb).dtype
    two = ls.scale([loss, loss])
    assert isinstance(two, list) and len(two) == 2


@pytest.mark.parametrize("init_scale,growth_interval", [(2.0 ** 16, 2), (2.0 ** 127, 1), (3.0, 3)])
def test_loss_scaler_steps_like_grad_scaler(init_scale, growth_interval):
    """Six SGD steps with ff.LossScaler's scale / step / update and with
    torch.amp.GradScaler: the same scale after every update, the same skipped steps
    (2**127 * a loss overflows fp32 gradients: Inf), bit-identical parameters."""
    ma, mb = _model(1), _model(1)
    oa = torch.optim.SGD(ma.parameters(), lr=0.01)
    ob = torch.optim.SGD(mb.parameters(), lr=0.01)
    ls = ff.LossScaler(init_scale=init_scale, growth_interval=growth_interval)
    gs = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    g = torch.Generator().manual_seed(2)
    skipped = 0
    for step in range(6):
        x = torch.randn(4, 6, generator=g)
        for m, o, s in ((ma, oa, ls), (mb, ob, gs)):
            o.zero_grad()
            s.scale(m(x).square().mean()).backward()
            if step == 2:  # unscale_ by hand before step, as for gradient clipping
                s.unscale_(o)
            s.step(o)
            s.update()
        skipped += int(ls.history[-1]["found_inf"])
        assert ls.get_scale() == float(gs.get_scale())
        for p, q in zip(ma.parameters(), mb.parameters()):
            assert all_same(p.detach().numpy(), q.detach().numpy())
            assert all_same(p.grad.numpy(), q.grad.numpy())  # NaN where both are NaN
    if init_scale == 2.0 ** 127:
        assert skipped >= 1


def test_loss_scaler_unscale_refuses_twice_and_fp16():
    m = _model(3)
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    ls = ff.LossScaler()
    ls.scale(m(torch.ones(1, 6)).sum()).backward()
    ls.unscale_(o)
    with pytest.raises(RuntimeError, match="already"):
        ls.unscale_(o)
    ls.update()
    h = _model(3).half()
    oh = torch.optim.SGD(h.parameters(), lr=0.1)
    h(torch.ones(1, 6, dtype=torch.float16)).sum().backward()
    with pytest.raises(ValueError, match="float32 or float64"):
        ls.unscale_(oh)


# ------------------------------------------------------------------ fake_quant dtype
def _bf16_rne(fr: Fraction) -> Fraction:
    """Fraction rounded to the nearest bfloat16 (8 significant bits, ties to even)."""
    return rne(fr, 7, -126)


@pytest.mark.parametrize("fmt", ["int8", "uint8", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_fake_quant_returns_the_input_dtype(fmt):
    """float32 in, float32 out (bfloat16 in, bfloat16 out): each element is the exact
    dequantised value (dtype=float64) rounded once to nearest-even (a Fraction rounding
    written here); a float32 matmul with the result works."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(16, 24, generator=g) * 3).float()
    for gran in ("tensor", "channel"):
        exact = fft.fake_quant(x, fmt, granularity=gran, dtype=torch.float64)
        got = fft.fake_quant(x, fmt, granularity=gran)
        assert got.dtype == torch.float32 and exact.dtype == torch.float64
        want = [float(fp32_rne(Fraction(v))) for v in exact.flatten().tolist()]
        assert got.flatten().tolist() == want
        _ = x @ got.T  # the failure: a float64 result made this a dtype error
    xb = x.bfloat16()
    exact = fft.fake_quant(xb, fmt, dtype=torch.float64)
    got = fft.fake_quant(xb, fmt)
    assert got.dtype == torch.bfloat16
    want = [float(_bf16_rne(Fraction(v))) for v in exact.flatten().tolist()]
    assert got.float().flatten().tolist() == want


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_fake_quant_float32_keeps_bits_where_representable(fmt):
    """A power-of-two scale: every dequantised value (a short significand times 2**k) is
    a float32, so the float32 result has exactly the bits of the float64 one."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, 32, generator=g, dtype=torch.float32)
    for kw in ({"pow2_scale": True}, {"scale": 0.25}):
        got = fft.fake_quant(x, fmt, **kw)
        exact = fft.fake_quant(x, fmt, dtype=torch.float64, **kw)
        assert got.dtype == torch.float32
        assert torch.equal(got.to(torch.float64), exact)  # nothing rounded


def test_fake_quant_dtype_keeps_the_gradient():
    x = torch.tensor([0.5, -3.0, 1000.0, 0.01], requires_grad=True)
    y = fft.fake_quant(x, "fp8_e4m3", scale=1.0, ste="clipped")
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 0.0, 1.0]  # 1000 saturates past 448: clipped
    with pytest.raises(ValueError, match="Valid"):
        fft.fake_quant(x, "int8", dtype=torch.int32)
    with pytest.raises(TypeError):
        fft.fake_quant(x, "int8", dtype="float32")


# ------------------------------------------------------------------ torch.compile
def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


def _compiled_equals_eager(recipe: str, backend: str) -> None:
    torch._dynamo.reset()
    a, b = _net(0), _net(0)
    fft.emulate(a, recipe)
    fft.emulate(b, recipe)
    x = torch.randn(32, 8, generator=torch.Generator().manual_seed(6))
    c = torch.compile(b, backend=backend)
    for _ in range(2):  # the second call runs the compiled code (delayed scaling: new scales)
        for m in (a, b):
            for p in m.parameters():
                p.grad = None
        ya = a(x)
        ya.square().sum().backward()
        yb = c(x)
        yb.square().sum().backward()
        assert torch.equal(ya, yb)
        for p, q in zip(a.parameters(), b.parameters()):
            assert torch.equal(p.grad, q.grad)


@pytest.mark.parametrize("recipe", ["bf16",  # each recipe costs a dynamo trace (~30 s shared)
                                    pytest.param("fp8_tensorwise", marks=pytest.mark.slow),
                                    pytest.param("mxfp8", marks=pytest.mark.slow),
                                    pytest.param("nvfp4", marks=pytest.mark.slow)])
def test_compile_eager_backend_gives_eager_bits(recipe):
    """Dynamo used to trace into floatfmt's numpy kernels and fail ('dst' must be an
    array: a FakeTensor reached np.copyto); floatfmt's entries now run eagerly under a
    graph break."""
    _compiled_equals_eager(recipe, "eager")


@pytest.mark.slow  # inductor compiles C++ (a minute on a shared CPU)
def test_compile_inductor_gives_eager_bits():
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("inductor on CPU needs a C compiler")
    _compiled_equals_eager("bf16", "inductor")


def test_compile_of_floatfmt_calls_on_tensors_and_numbers():
    """ff.cast, ff.quantize(...).dequantize() and ff.matmul inside a compiled function,
    on tensors and on Python numbers."""
    def f(a, b):
        s = ff.cast(0.1, "bf16")  # a Python number: the numpy path, run eagerly
        q = ff.quantize(a, "fp8_e4m3").dequantize(torch.float32)
        return ff.matmul(ff.cast(q, "bf16"), b, "bf16", model="h100") * s

    torch._dynamo.reset()
    a = torch.randn(4, 8, generator=torch.Generator().manual_seed(7))
    b = torch.randn(8, 3, generator=torch.Generator().manual_seed(8))
    assert torch.equal(torch.compile(f, backend="eager")(a, b), f(a, b))
    assert not ff.backend.dispatch.compiling()
    assert np.isclose(float(ff.cast(0.1, "bf16")), 0.10009765625)
