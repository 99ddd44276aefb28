"""ff.mma: D = A.B + C with C entering the matrix unit, against the slow independent model
(tests/oracles/tensorcore_slow.py), the c-entry probe, the epilogue, and input checks."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith.matrixunit.tensorcore import get_model, tensorcore_models
from tests.oracles import tensorcore_slow as slow
from tests.test_tensorcore import _random_inputs, _same

PRESETS = tensorcore_models()
# T-FDPA (NVIDIA) presets; the AMD and block-scaled ones are tested in test_matrixunits.py
FLOAT_PRESETS = sorted(k for k, m in PRESETS.items() if m.fmt != "int8" and m.algorithm == "t_fdpa")


def _models():
    """Every float preset, its fp16-accumulator variant, and each preset with the other
    c_entry (so both rules run with every F, L and step format)."""
    out = []
    for name in FLOAT_PRESETS:
        m = PRESETS[name]
        out.append((name, m))
        other = "after" if m.c_entry == "aligned" else "aligned"
        out.append((f"{name}~{other}", m.replace(c_entry=other)))
        if m.fmt in ("fp16", "fp8_e4m3", "fp8_e5m2"):
            f16 = get_model(m, m.fmt, "fp16")
            out.append((f16.name, f16))
            if m.c_entry == "aligned":
                out.append((f16.name + "~after", f16.replace(c_entry="after")))
    return out


MODELS = _models()


def _random_c(m, n, rng):
    """Accumulator inputs: both signs, exponents over +-24 binades around 1, some zeros,
    values of the accumulator format."""
    e = rng.integers(-24, 25, n)
    c = np.ldexp(rng.uniform(1, 2, n), e) * rng.choice([-1.0, 1.0], n)
    c[rng.random(n) < 0.05] = 0.0
    if m.acc_fmt == "fp16":
        c = np.ldexp(c, -8)
    return np.asarray(ff.cast(c, m.acc_fmt, overflow="saturate"), np.float64)


@pytest.mark.parametrize("name,m", MODELS, ids=[n for n, _ in MODELS])
def test_mma_equals_slow_model(name, m):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    n = 3000
    k = m.L + m.L // 2 + 1  # a full step and a partial one: c enters, then a result chains
    a = _random_inputs(m.fmt, n, k, rng)
    b = _random_inputs(m.fmt, n, k, rng)
    if m.acc_fmt == "fp16":
        a, b = ff.cast(a * 2.0 ** -6, m.fmt), ff.cast(b * 2.0 ** -6, m.fmt)
    c = _random_c(m, n, rng)
    fmt = m.fmt
    got = ff.mma(a[:, None, :], b[:, :, None], c[:, None, None], fmt, m, acc_fmt=m.acc_fmt)[:, 0, 0]
    ref = np.array([slow.dot(a[i], b[i], m, c[i]) for i in range(n)])
    bad = ~_same(got, ref)
    assert not bad.any(), (name, int(bad.sum()),
                           [(a[i].tolist(), b[i].tolist(), c[i], got[i], ref[i])
                            for i in np.flatnonzero(bad)[:2]])
    # the inputs exercise c: the other entry rule changes many results
    flip = m.replace(c_entry="after" if m.c_entry == "aligned" else "aligned")
    other = ff.mma(a[:, None, :], b[:, :, None], c[:, None, None], fmt, flip, acc_fmt=m.acc_fmt)
    assert (~_same(other[:, 0, 0], got)).sum() > n // 100, name


SOME = [(n, m) for n, m in MODELS if m.fmt != "tf32"][::3]


@pytest.mark.parametrize("name,m", SOME, ids=[n for n, _ in SOME])
def test_mma_special_accumulators_equal_slow_model(name, m):
    """c = +-Inf, NaN, +-0, +-max of the accumulator, and products that overflow it."""
    acc = ff.info(m.acc_fmt)
    big = float(ff.info(m.fmt).max)
    cs = [np.inf, -np.inf, np.nan, 0.0, -0.0, float(acc.max), -float(acc.max)]
    rows = [([1.0, 1.0], [1.0, -1.0]), ([0.0, -0.0], [1.0, 1.0]), ([big, big], [big, big]),
            ([-0.0, 0.0], [0.0, 0.0]), ([big, -big], [big, big])]
    for c in cs:
        for av, bv in rows:
            a = np.array(ff.cast(av, m.fmt), np.float64)
            b = np.array(ff.cast(bv, m.fmt), np.float64)
            got = float(ff.mma(a[None, :], b[:, None], [[c]], m.fmt, m, acc_fmt=m.acc_fmt)[0, 0])
            want = slow.dot(a, b, m, c)
            assert _same(got, want), (name, av, bv, c, got, want)


# ----------------------------------------------------------------------------- c-entry probe
# c = 2**E and one product p = 1.5 * 2**(E - 24).  Aligned with c (F >= 23), p keeps at most
# 2**(E-24) and the fp32 sum is truncated back to c; added after the products with one
# round-to-nearest-even fp32 addition, p is more than half an fp32 ulp of c: c + 2**(E-23).
C_PROBE = {"fp16": (1.5 * 2.0 ** -12, 2.0 ** -12, 0), "bf16": (1.5 * 2.0 ** -12, 2.0 ** -12, 0),
           "tf32": (1.5 * 2.0 ** -12, 2.0 ** -12, 0), "fp8_e5m2": (1.5 * 2.0 ** -12, 2.0 ** -12, 0),
           "fp8_e4m3": (1.5 * 2.0 ** -6, 2.0 ** -9, 9)}


@pytest.mark.parametrize("name", [k for k in FLOAT_PRESETS if PRESETS[k].step_fmt is None])
def test_c_entry_probe(name):
    m = PRESETS[name]
    x, y, E = C_PROBE[m.fmt]
    assert x * y == 1.5 * 2.0 ** (E - 24)
    for sign in (1.0, -1.0):
        c = sign * 2.0 ** E
        A = np.zeros((64, 64))
        B = np.zeros((64, 64))
        A[0, 0], B[0, 0] = sign * x, y
        got = ff.mma(A, B, np.full((64, 64), c), m.fmt, m)[0, 0]
        want = c if m.c_entry == "aligned" else sign * (2.0 ** E + 2.0 ** (E - 23))
        assert got == want, (name, sign, got, want)
        assert got == slow.dot([sign * x], [y], m, c)
    expect_after = {k for k in FLOAT_PRESETS if k.startswith("b200/fp8")}
    assert (m.c_entry == "after") == (name in expect_after)


# ----------------------------------------------------------------------------- mma vs matmul
@pytest.mark.parametrize("name", FLOAT_PRESETS + ["h100/int8", "b200/int8"])
def test_mma_with_zero_c_is_matmul(name):
    m = PRESETS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    if m.fmt == "int8":
        A, B = rng.integers(-128, 128, (3, 5, 70)), rng.integers(-128, 128, (70, 4))
    else:
        A = _random_inputs(m.fmt, 15, 2 * m.L + 3, rng).reshape(3, 5, -1)
        B = _random_inputs(m.fmt, 2 * m.L + 3, 4, rng)
    got = ff.mma(A, B, 0.0, m.fmt, m)
    assert got.shape == (3, 5, 4)
    assert _same(got, ff.matmul(A, B, m.fmt, model=m)).all()


def test_mma_after_entry_is_the_fp32_epilogue():
    """With c_entry="after" and an fp32 accumulator, one step of mma is round-to-nearest-even
    (acc + c): matmul's epilogue computes the same through ops.fma, a separate code path."""
    rng = np.random.default_rng(21)
    for name in ("b200/fp8_e4m3", "b200/fp8_e5m2"):
        m = PRESETS[name]
        A = _random_inputs(m.fmt, 40, m.L, rng)
        B = _random_inputs(m.fmt, m.L, 30, rng)
        C = _random_c(m, 40 * 30, rng).reshape(40, 30)
        got = ff.mma(A, B, C, m.fmt, m)
        assert _same(got, ff.matmul(A, B, m.fmt, model=m, beta=1.0, c=C)).all()
        aligned = ff.mma(A, B, C, m.fmt, m.replace(c_entry="aligned"))
        assert (~_same(aligned, got)).sum() > 10


def test_mma_chains_k_in_order_with_c_first():
    # K = 2L on an H100 bf16 unit: the block-size probe of reference/tensor_cores.md with a
    # nonzero C.  C = 2**-18 enters the first step, where the big pair sets e_max = 14 and
    # truncates it away with the small products; the second step's 16 products survive.
    m = PRESETS["h100/bf16"]
    a = np.full(32, 2.0 ** -9)
    b = np.full(32, 2.0 ** -9)
    a[:2], b[:2] = [2.0 ** 7, -2.0 ** 7], [2.0 ** 7, 2.0 ** 7]
    got = ff.mma(a[None, :], b[:, None], [[2.0 ** -18]], "bf16", m)[0, 0]
    assert got == 16 * 2.0 ** -18
    # the epilogue adds C after the chain: it survives
    assert ff.matmul(a[None, :], b[:, None], "bf16", model=m, beta=1.0, c=[[2.0 ** -18]])[0, 0] \
        == 17 * 2.0 ** -18


def test_mma_int8_adds_c_exactly_and_wraps():
    rng = np.random.default_rng(8)
    A, B = rng.integers(-128, 128, (4, 300)), rng.integers(-128, 128, (300, 3))
    C = rng.integers(-2 ** 31, 2 ** 31, (4, 3))
    got = ff.mma(A, B, C, "int8", "h100")
    want = [[slow.int8_dot(A[i], B[:, j]) + C[i, j] for j in range(3)] for i in range(4)]
    want = (np.array(want, dtype=object) + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert np.array_equal(got, want.astype(float))


def test_mma_fp16_accumulator_rounds_c_to_fp16():
    # c = 1 + 2**-12 is not an fp16 value: it is rounded (to nearest even, 1.0) on the way in
    got = ff.mma([[0.0]], [[0.0]], [[1.0 + 2.0 ** -12]], "fp16", "a100", acc_fmt="fp16")
    assert got[0, 0] == 1.0
    got32 = ff.mma([[0.0]], [[0.0]], [[1.0 + 2.0 ** -12]], "fp16", "a100")
    assert got32[0, 0] == 1.0 + 2.0 ** -12


def test_mma_shapes_and_broadcasting():
    rng = np.random.default_rng(9)
    A = _random_inputs("bf16", 2 * 3, 20, rng).reshape(2, 1, 3, 20)
    B = _random_inputs("bf16", 4 * 20, 5, rng).reshape(4, 20, 5)
    C = _random_c(PRESETS["h100/bf16"], 5, rng)  # one row of C for every output row
    got = ff.mma(A, B, C, "bf16", "h100")
    assert got.shape == (2, 4, 3, 5)
    for i in range(2):
        for j in range(4):
            want = ff.mma(A[i, 0], B[j], np.broadcast_to(C, (3, 5)), "bf16", "h100")
            assert _same(got[i, j], want).all()


def test_mma_errors():
    A, B, C = np.ones((2, 3)), np.ones((3, 4)), np.zeros((2, 4))
    with pytest.raises(ValueError, match="Did you mean 'h100'"):
        ff.mma(A, B, C, "bf16", "h10")
    with pytest.raises(ValueError, match="supports"):
        ff.mma(A, B, C, "bf16", "v100")
    with pytest.raises(TypeError, match="model"):
        ff.mma(A, B, C, "bf16", None)
    with pytest.raises(ValueError, match="2 dimensions"):
        ff.mma(np.ones(3), B, C, "bf16", "h100")
    with pytest.raises(ValueError, match="do not align"):
        ff.mma(A, np.ones((4, 4)), C, "bf16", "h100")
    with pytest.raises(ValueError, match="does not broadcast"):
        ff.mma(A, B, np.zeros((3, 4)), "bf16", "h100")
    with pytest.raises(ValueError, match="batch axes"):
        ff.mma(np.ones((2, 2, 3)), np.ones((3, 3, 4)), 0.0, "bf16", "h100")
    with pytest.raises(TypeError, match="c must be"):
        ff.mma(A, B, None, "bf16", "h100")
    with pytest.raises(ValueError, match="acc_fmt"):
        ff.mma(A, B, C, "bf16", "h100", acc_fmt="fp16")
    with pytest.raises(ValueError, match="int32"):
        ff.mma(A, B, C + 0.5, "int8", "h100")
    with pytest.raises(ValueError, match="c_entry"):
        PRESETS["h100/bf16"].replace(c_entry="late")
    assert math.isnan(ff.mma(A, B, np.full((2, 4), np.nan), "bf16", "h100")[0, 0])
