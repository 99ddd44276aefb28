"""Rowwise FP8 scaling in recipe GEMMs (issue 23): ``Recipe(granularity="rowwise")`` and the
``"fp8_rowwise"`` preset (torchao's ``Float8LinearConfig.from_recipe_name("rowwise")``).

The reference is computed op by op with floatfmt's public numpy functions: ``ff.quantize``
per channel along the right axis (one scale per row along each GEMM's K), ``ff.matmul``
of the codes on the H100 model to the fp32 accumulator, the two scale vectors applied by
numpy float32 multiplies (the column scale first, then the row scale: the rowwise CUTLASS
epilogue), the bias in float32, one rounding to bf16."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import floatfmt as ff  # noqa: E402
import floatfmt.torch as fft  # noqa: E402

F32 = np.float32


def rowwise(a: np.ndarray, reduce_axis: int, r):
    """(E4M3 codes' values, scales in keepdims layout) of a 2-D array, one scale per index
    of the axis the GEMM does not reduce over."""
    q = ff.quantize(a, "fp8_e4m3", granularity="channel", axis=1 - reduce_axis,
                    scale_convention=r.scale_convention, pow2_scale=r.pow2_scale)
    return np.asarray(q.elements, np.float64), np.asarray(q.scale, np.float64)


def ref_gemm(ea, sa, eb, sb, out_fmt, bias=None, order="col_first"):
    """a (M x K) @ b (K x N) on the H100 model, then the rowwise epilogue in float32."""
    acc = np.asarray(ff.matmul(ea, eb, "fp8_e4m3", model="h100", out_fmt="fp32"), np.float64)
    t = acc.astype(F32)
    first, second = (sb, sa) if order == "col_first" else (sa, sb)
    t = first.astype(F32) * t
    t = second.astype(F32) * t
    if bias is not None:
        t = np.asarray(ff.cast(bias, out_fmt), np.float64).astype(F32) + t
    return np.asarray(ff.cast(t.astype(np.float64), out_fmt), np.float64)


def reference(x, w, b, g, r, order="col_first"):
    """(y, grad_x, grad_W, grad_b) of y = x @ W.T + b under the rowwise recipe ``r``."""
    ex, sx = rowwise(x, 1, r)                 # forward: x per row, W per output channel
    ew, sw = rowwise(w, 1, r)
    y = ref_gemm(ex, sx, ew.T, sw.T, r.out_fmt, b, order)
    eg, sg = rowwise(g, 1, r)                 # grad_x = g @ W reduces over N
    ew0, sw0 = rowwise(w, 0, r)
    gx = ref_gemm(eg, sg, ew0, sw0, r.out_fmt, None, order)
    eg0, sg0 = rowwise(g, 0, r)               # grad_W = g.T @ x reduces over M
    ex0, sx0 = rowwise(x, 0, r)
    gw = ref_gemm(eg0.T, sg0.T, ex0, sx0, r.wgrad_fmt, None, order)
    gb = np.asarray(ff.sum(g, "fp32", acc_fmt="fp32", order="pairwise", axis=0,
                           out_fmt=r.wgrad_fmt), np.float64)
    return y, gx, gw, gb


def data(seed=0):
    gen = np.random.default_rng(seed)
    x = gen.standard_normal((8, 32)).astype(F32)
    x[2] *= 3000.0                            # one large row
    w = (gen.standard_normal((16, 32)) * 0.2).astype(F32)
    w[5] *= 500.0                             # one large output channel
    b = (gen.standard_normal(16) * 0.1).astype(F32)
    g = gen.standard_normal((8, 16)).astype(F32)
    g[:, 3] *= 1000.0
    return x, w, b, g


def emulated(x, w, b, g, recipe):
    lin = torch.nn.Linear(32, 16)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    xt = torch.from_numpy(x).requires_grad_()
    with fft.emulating(lin, recipe):
        y = lin(xt)
        y.backward(torch.from_numpy(g))
    return [t.detach().double().numpy() for t in (y, xt.grad, lin.weight.grad, lin.bias.grad)]


@pytest.mark.parametrize("pow2", [True, False])
def test_rowwise_linear_matches_the_op_by_op_reference(pow2):
    r = fft.get_recipe("fp8_rowwise").replace(pow2_scale=pow2)
    if not pow2:  # fp32 outputs: the last bits of the epilogue are kept
        r = r.replace(out_fmt="fp32", wgrad_fmt="fp32")
    x, w, b, g = data()
    got = emulated(x, w, b, g, r)
    want = reference(x, w, b, g, r)
    bad = [int((a != e).sum()) for a, e in zip(got, want)]
    assert bad == [0, 0, 0, 0], bad
    if not pow2:  # fp32 scale products round: the epilogue's order of the two multiplies shows
        other = reference(x, w, b, g, r, order="row_first")
        assert sum(int((a != e).sum()) for a, e in zip(got, other)) > 0


def test_gemm_fast_uses_the_same_epilogue():
    r = fft.get_recipe("fp8_rowwise").replace(gemm="fast", pow2_scale=False)
    x, w, b, g = data(1)
    y = emulated(x, w, b, g, r)[0]
    want = reference(x, w, b, g, r)[0]
    # the BLAS sums differ from the model's only where the model truncates: near enough
    assert np.allclose(y, want, rtol=2 ** -7)


def test_rowwise_differs_from_tensorwise_on_one_large_row():
    r = fft.get_recipe("fp8_rowwise")
    x, w, b, g = data(2)
    x[2] *= 100.0                             # 3e5 times the others: they fall to E4M3's subnormals
    row = emulated(x, w, b, g, r)
    ten = emulated(x, w, b, g, r.replace(granularity="tensor"))
    truth = x.astype(np.float64) @ w.astype(np.float64).T + b
    small = np.ix_(np.arange(8) != 2, np.arange(16) != 5)  # ordinary rows and channels
    assert int((row[0] != ten[0]).sum()) > 20
    err_row = np.median(np.abs(row[0] / truth - 1)[small])
    err_ten = np.median(np.abs(ten[0] / truth - 1)[small])
    assert err_row < err_ten / 4, (err_row, err_ten)


def test_recipe_checks():
    assert fft.get_recipe("fp8_rowwise").granularity == "rowwise"
    with pytest.raises(ValueError, match="Valid: tensor, rowwise"):
        fft.Recipe("x", fwd_fmt="fp8_e4m3", scaling="tensor", granularity="rows")
    with pytest.raises(ValueError, match="scaling='tensor'"):
        fft.Recipe("x", fwd_fmt="fp8_e4m3", scaling="delayed", granularity="rowwise")
    conv = torch.nn.Conv1d(2, 2, 3)
    with fft.emulating(conv, "fp8_rowwise"):
        with pytest.raises(NotImplementedError, match="convolutions"):
            conv(torch.randn(1, 2, 8))


def test_rowwise_equal_on_the_device_path():
    """The array-namespace path (CUDA; CPU under force_namespace) gives the host's bits, with
    the exact scale convention and with the preset's own (torchao's)."""
    from floatfmt.backend.dispatch import force_namespace
    x, w, b, g = data(3)
    for r in (fft.get_recipe("fp8_rowwise"), fft.get_recipe("fp8_rowwise").replace(scale_convention="exact")):
        host = emulated(x, w, b, g, r)
        with force_namespace():
            dev = emulated(x, w, b, g, r)
        assert all(np.array_equal(a, e) for a, e in zip(host, dev))
    r = fft.get_recipe("fp8_rowwise").replace(scale_convention="exact")
    host = emulated(x, w, b, g, r)
    assert all(np.array_equal(a, e) for a, e in zip(host, reference(x, w, b, g, r)))
