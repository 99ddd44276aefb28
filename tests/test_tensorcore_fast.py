"""The fast tensor-core GEMM kernel (tiles of L x outputs, int16 exponents, truncation only
where a scaled product has bits below the unit) against the slow independent model
(tests/oracles/tensorcore_slow.py) and against the general vectorised path, for every
preset, both c-entry rules and the fp16 accumulator."""

from __future__ import annotations

import sys
import zlib

import numpy as np
import pytest

import floatfmt as ff
import floatfmt.arith.matrixunit.tensorcore  # noqa: F401  (the module, not the lazy names)
from floatfmt.arith.matrixunit.tensorcore import get_model, tensorcore_models
from tests.oracles import tensorcore_slow as slow
from tests.test_mma import _random_c
from tests.test_tensorcore import _random_inputs, _same

tc = sys.modules["floatfmt.arith.matrixunit.tensorcore"]
tcf = sys.modules["floatfmt.arith.matrixunit.tensorcore_fast"]
PRESETS = tensorcore_models()


def _models():
    out = []
    for name in sorted(k for k, m in PRESETS.items() if m.fmt != "int8" and m.algorithm == "t_fdpa"):
        m = PRESETS[name]
        out.append((name, m))
        out.append((name + "~flip", m.replace(c_entry="after" if m.c_entry == "aligned"
                                               else "aligned")))
        if m.fmt in ("fp16", "fp8_e4m3", "fp8_e5m2"):
            out.append((name + "+fp16acc", get_model(m, m.fmt, "fp16")))
    return out


MODELS = _models()


def _operands(m, shape_a, shape_b, rng):
    a = _random_inputs(m.fmt, shape_a[0], shape_a[1], rng)
    b = _random_inputs(m.fmt, shape_b[0], shape_b[1], rng)
    if m.acc_fmt == "fp16":  # keep fp16 sums mostly in range
        a, b = ff.cast(a * 2.0 ** -6, m.fmt), ff.cast(b * 2.0 ** -6, m.fmt)
    return np.asarray(a, np.float64), np.asarray(b, np.float64)


@pytest.mark.parametrize("name,m", MODELS, ids=[n for n, _ in MODELS])
def test_fast_matmul_and_mma_equal_slow_model(name, m, monkeypatch):
    """Several row tiles (a small tile budget), full and partial blocks of L, zeros,
    subnormals and products 40 binades apart (so both sides of the truncation threshold
    occur); with and without an accumulator input."""
    monkeypatch.setattr(tcf, "_TILE_TERMS", 4 * m.L * 7)  # 4 rows of 7 columns per tile
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    M, N, K = (9, 7, 2 * m.L + m.L // 2 + 1) if len(name) % 2 else (7, 9, 2 * m.L + 3)
    a, b = _operands(m, (M, K), (K, N), rng)
    x, y, in_fmt = tc._cast_inputs(a, b, m.fmt, m, "nearest_even", None, False, False, None)
    assert tc.fast_ok(x, y, m)  # this test is about the fast kernel
    got = ff.matmul(a, b, m.fmt, model=m, acc_fmt=m.acc_fmt)
    ref = np.array([[slow.dot(a[i], b[:, j], m) for j in range(N)] for i in range(M)])
    bad = ~_same(got, ref)
    assert not bad.any(), (name, int(bad.sum()))
    c = _random_c(m, M * N, rng).reshape(M, N)
    got = ff.mma(a, b, c, m.fmt, m, acc_fmt=m.acc_fmt)
    ref = np.array([[slow.dot(a[i], b[:, j], m, c[i, j]) for j in range(N)] for i in range(M)])
    bad = ~_same(got, ref)
    assert not bad.any(), (name, int(bad.sum()))


@pytest.mark.parametrize("name,m", MODELS[::2], ids=[n for n, _ in MODELS[::2]])
def test_fast_kernel_equals_general_path(name, m, monkeypatch):
    """Bit for bit the general vectorised path (itself checked against the slow model),
    on 48 x 40 x (3 L + 5) products, with batch axes that broadcast."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    K = 3 * m.L + 5
    rows, cols = (48, 40) if len(name) % 2 else (40, 48)  # few columns: the transposed work
    a, b = _operands(m, (2 * rows, K), (K, cols), rng)
    a = a.reshape(2, rows, K)
    c = _random_c(m, rows * cols, rng).reshape(rows, cols)
    fast = ff.mma(a, b, c, m.fmt, m, acc_fmt=m.acc_fmt)
    fast0 = ff.matmul(a, b, m.fmt, model=m, acc_fmt=m.acc_fmt)
    monkeypatch.setattr(tc, "fast_ok", lambda *args: False)
    general = ff.mma(a, b, c, m.fmt, m, acc_fmt=m.acc_fmt)
    general0 = ff.matmul(a, b, m.fmt, model=m, acc_fmt=m.acc_fmt)
    assert fast.shape == (2, rows, cols)
    assert _same(fast, general).all(), (name, int((~_same(fast, general)).sum()))
    assert _same(fast0, general0).all(), (name, int((~_same(fast0, general0)).sum()))


def test_fast_kernel_special_accumulator_and_fallbacks():
    """Inf / NaN in C pass through the fast kernel as the slow model says; Inf or NaN
    inputs and a zero-term floor above the accumulator's smallest exponent take the
    general path."""
    m = PRESETS["h100/bf16"]
    a = np.array([[1.0, 2.0], [3.0, -4.0]])
    b = np.array([[0.5, 1.0], [0.25, -1.0]])
    C = np.array([[np.inf, -np.inf], [np.nan, 1.0]])
    got = ff.mma(a, b, C, "bf16", m)
    for i in range(2):
        for j in range(2):
            assert _same(got[i, j], slow.dot(a[i], b[:, j], m, C[i, j]))
    x = a.copy()
    x[0, 0] = np.inf
    assert not tc.fast_ok(x, b, m)
    assert not tc.fast_ok(a, b, m.replace(zero_exponent=-100))
    assert tc.fast_ok(a, b, m)


# (model, wide): wide inputs only where the format reaches beyond 2**+-50 (bf16, tf32)
EDGE_CASES = [("h100/bf16", False), ("h100/bf16", True), ("b200/fp8_e4m3", False),
              ("h100/fp8_e4m3", False), ("a100/tf32", False), ("a100/tf32", True),
              ("h100/fp16+fp16acc", False)]


@pytest.mark.parametrize("name,wide", EDGE_CASES,
                         ids=[f"{n}-{'wide' if w else 'narrow'}" for n, w in EDGE_CASES])
def test_fast_kernel_edges_equal_slow_model(name, wide):
    """The kernel's own paths against the slow model: products in float32 (inputs within
    2**+-50) and in float64 (inputs beyond: ``product_dtype``), all-zero blocks of
    products beside a zero, a subnormal, a huge and an infinite or NaN accumulator
    (the per-output fixes: the floor, emin, overflow to Inf, c passed through), and
    sums that cancel to an exact zero."""
    base, _, acc = name.partition("+")
    m = PRESETS[base] if not acc else get_model(PRESETS[base], PRESETS[base].fmt, "fp16")
    rng = np.random.default_rng(zlib.crc32(name.encode()) + wide)
    M, N, K = 6, 7, 2 * m.L + 3
    a, b = _operands(m, (M, K), (K, N), rng)
    a[0] = 0.0  # an all-zero row: every block of its products is zero
    b[:, 1] = 0.0
    a[1, :m.L] = 0.0  # a zero first block for row 1
    a[2], b[:, 2] = 1.0, 0.0
    b[:m.L, 2], b[m.L:2 * m.L, 2] = 2.0 ** -4, -(2.0 ** -4)  # row 2, col 2: sums cancel
    if wide:
        big = ff.info(m.fmt if m.fmt != "tf32" else "fp32").max
        a[3, 0], b[0, 3] = big, 2.0 ** -60
        # a product -(1 + 2**-7) 2**-149 beside c = 4 * 2**-149 (subnormal): c's exponent
        # is emin = -126, so e_max = -126 and the product truncates to -2**-149 (sum
        # 3 * 2**-149); without emin it would not (sum just below, RZ: 2 * 2**-149)
        a[4], a[4, 1], b[1, 4] = 0.0, -(1 + 2.0 ** -7) * 2.0 ** -75, 2.0 ** -74
    x, y, in_fmt = tc._cast_inputs(a, b, m.fmt, m, "nearest_even", None, False, False, None)
    assert tc.fast_ok(x, y, m)
    want_dtype = np.float64 if wide or in_fmt.mbits > 11 else np.float32
    assert tcf.product_dtype(x, y, in_fmt, m.F) is want_dtype
    acc = ff.info(m.acc_fmt)
    c = _random_c(m, M * N, rng).reshape(M, N)
    c[0, :4] = [0.0, acc.smallest_subnormal, acc.max, -acc.max]
    c[1, :3] = [np.inf, -np.inf, np.nan]
    c[5, :2] = [-0.0, -acc.smallest_subnormal * 3]
    if wide:
        c[4, 4] = 4 * 2.0 ** -149
    with np.errstate(all="ignore"):
        got = ff.mma(a, b, c, m.fmt, m, acc_fmt=m.acc_fmt)
        ref = np.array([[slow.dot(a[i], b[:, j], m, c[i, j]) for j in range(N)] for i in range(M)])
    bad = ~_same(got, ref)
    assert not bad.any(), (name, int(bad.sum()), np.argwhere(bad)[:5].tolist())


def test_fast_kernel_steps_aside_for_flags():
    """Inside ``ff.flags()`` the reference steps run (the flags count the rounding
    routine's calls, which the fast kernel does not make), with the same bits."""
    m = PRESETS["h100/bf16"]
    f = ff.get_format("bf16")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((5, 40)), rng.standard_normal((40, 6))
    x, y, _ = tc._cast_inputs(a, b, "bf16", m, "nearest_even", None, False, False, None)
    assert tc.choose_kernel(x, y, m, f) == "fast"
    plain = ff.matmul(a, b, "bf16", model="h100")
    with ff.flags() as fl:
        assert tc.choose_kernel(x, y, m, f) == "general"
        inside = ff.matmul(a, b, "bf16", model="h100")
    assert _same(plain, inside).all()
    assert fl.inexact > 0
