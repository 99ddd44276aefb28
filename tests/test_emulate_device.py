"""floatfmt.torch.emulate on the device path (issue 11 item 5 on any device).

``emulate`` computes with floatfmt's tensor functions (``ff.cast``, ``ff.quantize``,
``ff.matmul``, ``ff.sum``), which dispatch: CPU tensors run the numpy kernels, other
devices the device code.  Under ``force_namespace`` CPU tensors take the device code,
so an emulated model run both ways must give the same forward outputs, input
gradients and weight gradients, bit for bit, over two training steps (delayed
scaling's history included).  Where a step has no device code yet (``ff.matmul``
without a tensor-core model, or with the epilogue: alpha from per-tensor scales, a
bias), the device path must raise NotImplementedError naming ``floatfmt.matmul``
(never copy to the host); those combinations are skipped, and run as soon as the
device matmul has them.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

import floatfmt.torch as fft  # noqa: E402
from floatfmt.backend.dispatch import force_namespace  # noqa: E402
from floatfmt.torch.emulation import quantize_operand  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _train(recipe, bias, forced, steps=2):
    """Outputs and gradients of a small MLP emulated under ``recipe``, ``steps`` SGD steps."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32, bias=bias), torch.nn.ReLU(),
                            torch.nn.Linear(32, 8, bias=bias))
    fft.emulate(m, recipe)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    out = []
    for _ in range(steps):
        x = (torch.randn(6, 16) * 4).requires_grad_(True)
        opt.zero_grad()
        with force_namespace(forced):
            y = m(x)
            (y * torch.linspace(-1, 1, 8)).sum().backward()
        out.append([y.detach(), x.grad] + [p.grad.clone() for p in m.parameters()])
        opt.step()
    return out


def _equal(a, b) -> bool:
    return all(torch.equal(u, v) or (torch.isnan(u).any() and torch.equal(u.nan_to_num(), v.nan_to_num()))
               for sa, sb in zip(a, b) for u, v in zip(sa, sb))


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("recipe", sorted(fft.recipes()))
def test_emulated_model_equal_on_both_paths(recipe, bias):
    host = _train(recipe, bias, False)
    try:
        dev = _train(recipe, bias, True)
    except NotImplementedError as e:
        # only the GEMM may lack device code (the library scale conventions have it)
        assert "floatfmt.matmul on cpu" in str(e), e
        pytest.skip(f"no device code yet: {e}")
    assert _equal(host, dev)


@pytest.mark.parametrize("recipe", ["tf32", "bf16", "fp16", "fp8_unscaled"])
def test_tensor_core_recipes_run_on_the_device_path_now(recipe):
    """What the device code covers today must not skip: tensor-core recipes without a
    bias or per-tensor scales (no epilogue)."""
    assert _equal(_train(recipe, False, False), _train(recipe, False, True))


@pytest.mark.parametrize("recipe", ["mxfp8", "mxfp4", "nvfp4", "fp8_tensorwise", "fp8_unscaled"])
def test_operands_of_every_scaling_equal_on_both_paths(recipe):
    """The operand quantisation of every scaling (cast, per-tensor, MX and NVFP4 blocks
    along either axis) gives the same values and scales on both paths."""
    r = fft.get_recipe(recipe)
    if r.scaling == "delayed":
        r = r.replace(scaling="tensor")
    torch.manual_seed(1)
    x = torch.randn(32, 64) * torch.exp2(torch.randint(-8, 8, (32, 64)).float())
    for fmt in (r.fwd_fmt, r.bwd_fmt):
        for axis in (-1, 0):
            a = quantize_operand(x, fmt, r, axis)
            with force_namespace():
                b = quantize_operand(x, fmt, r, axis)
            assert torch.equal(a.values, b.values) and a.scale == b.scale and a.fmt == b.fmt


def test_functional_matmul_equal_on_both_paths():
    torch.manual_seed(2)
    q = torch.randn(2, 8, 16, requires_grad=True)
    k = torch.randn(2, 8, 16, requires_grad=True)
    res = []
    for forced in (False, True):
        q.grad = k.grad = None
        with force_namespace(forced):
            s = fft.matmul(q, k.transpose(-2, -1), "bf16")
            s.square().sum().backward()
        res.append((s.detach(), q.grad.clone(), k.grad.clone()))
    assert all(torch.equal(u, v) for u, v in zip(*res))


def test_loss_scaler_unscales_tensors_as_arrays():
    """ff.LossScaler.unscale on tensors (what unscale_grads gives it): grads * fp32(1/S),
    equal to the numpy path, Inf found."""
    import numpy as np

    import floatfmt as ff
    s1, s2 = ff.LossScaler(init_scale=2.0 ** 12), ff.LossScaler(init_scale=2.0 ** 12)
    g = torch.randn(100, dtype=torch.float64) * 1e3
    g[7] = float("inf")
    (u,), found = s1.unscale([g])
    (w,), found_np = s2.unscale([g.numpy()])
    assert found and found_np and isinstance(u, torch.Tensor)
    assert np.array_equal(u.numpy(), w)


def test_fast_gemm_equal_on_both_paths():
    """gemm="fast": the host (numpy float32 epilogue) and the device path (ff.mul, ff.add,
    ff.cast on tensors) give the same bits."""
    r = fft.get_recipe("bf16").replace(name="bf16_fast", gemm="fast")
    host = _train(r, True, False)
    dev = _train(r, True, True)
    assert _equal(host, dev)
