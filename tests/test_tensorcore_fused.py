"""The fused tensor-core kernel (``tensorcore_fused``): its steps run on numpy against the
slow independent model (tests/oracles/tensorcore_slow.py) for every preset it admits,
and against the numpy fast kernel on larger products; the same steps compiled by
torch.compile against the fast kernel, fallbacks included; the kernel setting's
interface and errors."""

from __future__ import annotations

import sys
import warnings
import zlib

import numpy as np
import pytest

import floatfmt as ff
import floatfmt.arith.matrixunit.tensorcore  # noqa: F401  (the module, not the lazy names)
from tests.oracles import tensorcore_slow as slow
from tests.test_mma import _random_c
from tests.test_tensorcore import _same
from tests.test_tensorcore_fast import MODELS, PRESETS, _operands

tc = sys.modules["floatfmt.arith.matrixunit.tensorcore"]
tfu = sys.modules["floatfmt.arith.matrixunit.tensorcore_fused"]


def _inputs(m, a, b):
    x, y, in_fmt = tc._cast_inputs(a, b, m.fmt, m, "nearest_even", None, False, False, None)
    return x, y, in_fmt


def _kernel(m, a, b, c, kernel):
    """x @ y (+ c in the unit) through one kernel of ``tc.KERNELS``."""
    x, y, in_fmt = _inputs(m, a, b)
    with np.errstate(all="ignore"):
        return tc._chain_matmul(x, None, y, None, m, c, in_fmt, kernel=kernel)


FUSED = [(n, m) for n, m in MODELS
         if tfu.fused_ok(np.ones((1, 1)), np.ones((1, 1)), m, None)]


def test_the_fused_kernel_admits_the_presets_and_refuses_the_rest():
    """Every T-FDPA float preset with c aligned, and B200 FP8 (c after, fp32 steps), are
    admitted; an fp16 accumulator (rounded to nearest) and c "after" into a format other
    than fp32 are not."""
    names = {n for n, _ in FUSED}
    for n, m in PRESETS.items():
        if m.algorithm == "t_fdpa" and m.fmt != "int8":
            assert n in names, n
    assert "b200/fp8_e4m3" in names and "h100/fp8_e4m3~flip" not in names
    assert not any(n.endswith("+fp16acc") for n in names)
    m = PRESETS["h100/bf16"]
    one = np.ones((1, 1))
    assert not tfu.fused_ok(one, one, m, np.array([[np.inf]]))
    assert not tfu.fused_ok(one, one, m, np.array([[2.0 ** -140]]))  # subnormal c
    assert tfu.fused_ok(one, one, m, np.array([[2.0 ** -126]]))
    assert not tfu.fused_ok(np.array([[np.nan]]), one, m, None)


@pytest.mark.parametrize("name,m", FUSED, ids=[n for n, _ in FUSED])
def test_fused_steps_equal_slow_model(name, m):
    """The fused steps on numpy: full and partial blocks of L, zeros, subnormals and
    products 40 binades apart; with and without an accumulator input, an all-zero row
    and a cancelling pair of blocks."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 7)
    M, N, K = (5, 8, 2 * m.L + m.L // 2 + 1) if len(name) % 2 else (8, 5, 2 * m.L + 3)
    a, b = _operands(m, (M, K), (K, N), rng)
    a[0] = 0.0
    a[1], b[:, 1] = 1.0, 0.0
    b[:m.L, 1], b[m.L:2 * m.L, 1] = 2.0 ** -4, -(2.0 ** -4)  # row 1, col 1: exact zero
    c = _random_c(m, M * N, rng).reshape(M, N)
    c[1, 1] = 0.0
    c[2, :2] = [-0.0, ff.info(m.acc_fmt).smallest_normal]
    for cc in (None, c):
        x, y, _ = _inputs(m, a, b)
        assert tfu.fused_ok(x, y, m, cc)
        got = _kernel(m, a, b, cc, "fused")
        ref = np.array([[slow.dot(a[i], b[:, j], m, 0.0 if cc is None else cc[i, j])
                         for j in range(N)] for i in range(M)])
        bad = ~_same(got, ref)
        assert not bad.any(), (name, int(bad.sum()), np.argwhere(bad)[:4].tolist())


@pytest.mark.parametrize("name,m", FUSED[::3], ids=[n for n, _ in FUSED[::3]])
def test_fused_steps_equal_fast_kernel_batched(name, m):
    """Bit for bit the fast kernel on 2 x 24 x 20 x (3 L + 5) products, batch axes that
    broadcast (a's batch, b shared) and fewer columns than rows (the transposed work)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 11)
    K = 3 * m.L + 5
    a, b = _operands(m, (48, K), (K, 20), rng)
    a = a.reshape(2, 24, K)
    c = _random_c(m, 24 * 20, rng).reshape(24, 20)
    for cc in (None, c):
        fast = _kernel(m, a, b, cc, "fast")
        fused = _kernel(m, a, b, cc, "fused")
        assert fused.shape == (2, 24, 20)
        assert _same(fast, fused).all(), (name, int((~_same(fast, fused)).sum()))


def _edge_cases():
    """(label, model, a, b, c): results that leave the plain range (subnormal, overflow)
    and products wider than float32 holds, where the kernel hands over or widens."""
    rng = np.random.default_rng(3)
    h = PRESETS["h100/bf16"]
    a, b = rng.standard_normal((6, 40)), rng.standard_normal((40, 9))
    tiny = ff.cast(a * 2.0 ** -66, "bf16"), ff.cast(b * 2.0 ** -66, "bf16")  # sums ~2**-130
    huge = ff.cast(a * 2.0 ** 63, "bf16"), ff.cast(b * 2.0 ** 63, "bf16")  # sums ~2**128
    wide = ff.cast(a, "bf16"), ff.cast(b, "bf16")
    wide[0][0, 0], wide[1][0, 0] = 2.0 ** 90, 2.0 ** -100  # float64 products
    b2 = PRESETS["b200/fp8_e4m3"]
    fa, fb = ff.cast(a * 16, "fp8_e4m3"), ff.cast(b * 16, "fp8_e4m3")
    cb = np.full((6, 9), 3.0e38)  # c after: the fp32 addition overflows
    return [("tiny", h, *tiny, None), ("huge", h, *huge, None), ("wide", h, *wide, None),
            ("b200-after-overflow", b2, fa, fb, cb), ("b200-after", b2, fa, fb, -cb * 1e-30)]


EDGES = _edge_cases()


@pytest.mark.parametrize("label,m,a,b,c", EDGES, ids=[e[0] for e in EDGES])
def test_fused_edges_equal_slow_model(label, m, a, b, c):
    """Subnormal and overflowing results (the steps notice them and the fast kernel
    redoes the product), float64 products and the B200 addition of c after."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    got = _kernel(m, a, b, c, "fused")
    with np.errstate(all="ignore"):
        ref = np.array([[slow.dot(a[i], b[:, j], m, 0.0 if c is None else c[i, j])
                         for j in range(b.shape[1])] for i in range(a.shape[0])])
    bad = ~_same(got, ref)
    assert not bad.any(), (label, int(bad.sum()))
    if label in ("tiny", "huge", "b200-after-overflow"):  # the case the hand-over is for
        assert (np.abs(ref) < 2.0 ** -126).any() or np.isinf(ref).any() or \
            (np.abs(ref) >= 2.0 ** 127).any()


def test_compiled_kernel_equals_fast_kernel():
    """torch.compile of the same steps (inductor's C++ code) against the fast kernel:
    three presets, a K tail, batch axes, an accumulator, the edge cases above; compiling
    must work here (CI has a C++ compiler: a failure is a failed test, not a fallback)."""
    pytest.importorskip("torch", reason="the compiled kernel needs torch")
    rng = np.random.default_rng(21)
    cases = []
    for name in ("h100/bf16", "ada/fp8_e4m3", "a100/tf32", "b200/fp8_e4m3"):
        m = PRESETS[name]
        K = 4 * m.L + 3
        a, b = _operands(m, (2 * 17, K), (K, 23), rng)
        cases.append((name, m, a.reshape(2, 17, K), b, _random_c(m, 17 * 23, rng).reshape(17, 23)))
    cases += [(e[0], *e[1:]) for e in EDGES]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a failed compile warns: fail here
        for name, m, a, b, c in cases:
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            fast = _kernel(m, a, b, c, "fast")
            comp = _kernel(m, a, b, c, "compiled")
            assert _same(fast, comp).all(), (name, int((~_same(fast, comp)).sum()))
    assert not tfu._FAILED


def test_matmul_kernel_setting_chooses_and_refuses(monkeypatch):
    """``ff.matmul_kernel`` / ``set_matmul_kernel`` choose the compiled kernel where it
    applies (``choose_kernel``; products of ``MIN_PRODUCTS`` multiply-adds and more),
    ``get_matmul_kernel`` says which is in force, and bad names and types are clear
    errors."""
    m = PRESETS["h100/bf16"]
    f = ff.get_format("bf16")
    a = np.ones((3, 4))
    assert ff.get_matmul_kernel() == "numpy"
    assert tc.choose_kernel(a, a.T, m, f) == "fast"
    big = np.ones((2, 64, 128))  # 2 x 64 x 128 x 64 = 2**20 multiply-adds
    with ff.matmul_kernel("compiled"):
        assert tc.choose_kernel(a, a.T, m, f) == "fast"  # small: numpy's kernel
        assert tc.choose_kernel(big, big[0].T, m, f) == "compiled"
        assert tc.choose_kernel(big[:, :63], big[0].T, m, f) == "fast"
    monkeypatch.setattr(tfu, "MIN_PRODUCTS", 0)
    with ff.matmul_kernel("compiled"):
        assert ff.get_matmul_kernel() == "compiled"
        assert tc.choose_kernel(a, a.T, m, f) == "compiled"
        assert tc.choose_kernel(a, a.T, m, f, np.full((3, 3), np.nan)) == "fast"
        with ff.matmul_kernel("numpy"):
            assert tc.choose_kernel(a, a.T, m, f) == "fast"
    assert ff.get_matmul_kernel() == "numpy"
    with pytest.raises(ValueError, match="Did you mean 'compiled'"):
        ff.set_matmul_kernel("compile")
    with pytest.raises(TypeError, match="name"):
        ff.set_matmul_kernel(True)
    with pytest.raises(ValueError, match="tensor-core kernel"):
        tc._chain_matmul(a, None, a.T, None, m, fmt=f, kernel="fuse")


def test_compiled_kernel_through_matmul_and_emulate(monkeypatch):
    """The public entry points take the setting: ``ff.matmul(model=)`` of a 64^3 product
    and an emulated linear layer's forward and gradients give the numpy kernel's bits."""
    torch = pytest.importorskip("torch", reason="emulate needs torch")
    monkeypatch.setattr(tfu, "MIN_PRODUCTS", 0)  # small products take it too
    chosen = []
    fused = tc.chain_matmul_fused
    monkeypatch.setattr(tc, "chain_matmul_fused", lambda *a, **k: (chosen.append(k), fused(*a, **k))[1])
    import floatfmt.torch as fft
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((64, 64)), rng.standard_normal((64, 48))
    want = ff.matmul(a, b, "bf16", model="h100", out_fmt="bf16")
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(8, 64, requires_grad=True)

    def step():
        lin.zero_grad()
        x.grad = None
        with fft.emulating(lin, "bf16"):
            y = lin(x)
        y.pow(2).sum().backward()
        return [y.detach().clone(), x.grad.clone(), lin.weight.grad.clone()]

    plain = step()
    with ff.matmul_kernel("compiled"):
        got = ff.matmul(a, b, "bf16", model="h100", out_fmt="bf16")
        comp = step()
    assert _same(want, got).all()
    for p, q in zip(plain, comp):
        assert torch.equal(p, q)
    assert len(chosen) >= 4 and all(k["compiled"] for k in chosen)  # matmul, fwd, 2 grads


@pytest.mark.parametrize("kernel", ["fused", "compiled"])
def test_fused_kernel_empty_products(kernel):
    """K = 0 gives c (or +0), and no rows or no columns give empty results, as numpy."""
    if kernel == "compiled":
        pytest.importorskip("torch", reason="the compiled kernel needs torch")
    m = PRESETS["h100/bf16"]
    warnings.simplefilter("error", RuntimeWarning)  # (pytest restores the filters)
    z = _kernel(m, np.ones((3, 0)), np.ones((0, 4)), None, kernel)
    assert z.shape == (3, 4) and (z == 0).all() and not np.signbit(z).any()
    c = np.full((3, 4), -1.5)
    assert (_kernel(m, np.ones((3, 0)), np.ones((0, 4)), c, kernel) == -1.5).all()
    assert _kernel(m, np.ones((0, 5)), np.ones((5, 4)), None, kernel).shape == (0, 4)
    assert _kernel(m, np.ones((3, 5)), np.ones((5, 0)), None, kernel).shape == (3, 0)


def test_compiled_kernel_survives_dynamo_recompile_limit(monkeypatch):
    """More shapes than dynamo's recompile limit allows one code object: the kernel makes
    fresh copies and goes on compiling (no warning, no fallback), with the same bits."""
    torch = pytest.importorskip("torch", reason="the compiled kernel needs torch")
    retired = []
    retire = tfu._retire
    monkeypatch.setattr(tfu, "_retire", lambda key: (retired.append(key), retire(key)))
    m = PRESETS["h100/bf16"].replace(F=24)  # a plan of its own: fresh code objects
    rng = np.random.default_rng(4)
    with warnings.catch_warnings(), torch._dynamo.config.patch(recompile_limit=4):
        warnings.simplefilter("error", RuntimeWarning)
        for shape in ((1, 20, 3), (2, 33, 5), (4, 16, 1)):  # batch 1 / 2, K tails, N = 1
            a, b = _operands(m, (shape[0] * 3, shape[1]), (shape[1], shape[2]), rng)
            a = a.reshape(shape[0], 3, shape[1])
            fast = _kernel(m, a, b, None, "fast")
            comp = _kernel(m, a, b, None, "compiled")
            assert _same(fast, comp).all(), shape
    assert retired  # the limit was hit, and the copies replaced
    assert not tfu._FAILED


def test_compiled_kernel_without_torch_names_the_extra(monkeypatch):
    """Asking for the compiled kernel where torch is missing is the extra's error."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails
    with pytest.raises(ModuleNotFoundError, match=r'pip install "floatfmt\[torch\]"'):
        ff.set_matmul_kernel("compiled")
    with pytest.raises(ModuleNotFoundError, match="compiled"):
        with ff.matmul_kernel("compiled"):
            pass
    assert ff.get_matmul_kernel() == "numpy"


# models of one's own: wide alignments (int64 terms and sums), long and short blocks, a
# lower zero floor, the e8m13 step format of FP8, c after
CUSTOM = [("F30-L64", PRESETS["h100/bf16"].replace(F=30, L=64)),
          ("F27-L32", PRESETS["b200/bf16"].replace(F=27, L=32)),
          ("F10-L2", PRESETS["a100/fp16"].replace(F=10, L=2, zero_exponent=-140)),
          ("e5m2-L8", PRESETS["h100/fp8_e5m2"].replace(L=8)),
          ("after-F22", PRESETS["b200/fp8_e4m3"].replace(F=22, L=16))]


@pytest.mark.parametrize("name,m", CUSTOM, ids=[n for n, _ in CUSTOM])
def test_compiled_custom_models_equal_slow_model(name, m):
    """The compiled kernel on models of one's own against the slow independent model
    (and the fast kernel), with an accumulator and a K tail."""
    pytest.importorskip("torch", reason="the compiled kernel needs torch")
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    M, N, K = 6, 7, 2 * m.L + 3
    a, b = _operands(m, (M, K), (K, N), rng)
    c = _random_c(m, M * N, rng).reshape(M, N)
    x, y, _ = _inputs(m, a, b)
    assert tfu.fused_ok(x, y, m, c)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = _kernel(m, a, b, c, "compiled")
    ref = np.array([[slow.dot(a[i], b[:, j], m, c[i, j]) for j in range(N)] for i in range(M)])
    bad = ~_same(got, ref)
    assert not bad.any(), (name, int(bad.sum()), np.argwhere(bad)[:4].tolist())
    assert _same(got, _kernel(m, a, b, c, "fast")).all()
