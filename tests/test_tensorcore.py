"""Tensor-core models: the published probes per preset, an independent slow model on
random dot products, specials, the epilogue, and models as data."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith.matrixunit.tensorcore import get_model, tensorcore_models
from conftest import same as _same
from tests.oracles import tensorcore_slow as slow

PRESETS = tensorcore_models()
# T-FDPA (NVIDIA) presets; the AMD and block-scaled ones are tested in test_matrixunits.py
FLOAT_PRESETS = sorted(k for k, m in PRESETS.items() if m.fmt != "int8" and m.algorithm == "t_fdpa")
PAD = 64


def _gemm_probe(a, b, name, **kw):
    """Put vectors a, b in row 0 / column 0 of 64 x 64 zero matrices, as the GPU probes do."""
    m = PRESETS[name]
    A = np.zeros((PAD, PAD))
    B = np.zeros((PAD, PAD))
    A[0, :len(a)] = a
    B[:len(b), 0] = b
    fmt = m.fmt
    return ff.matmul(A, B, fmt, model=m, **kw)[0, 0]


def _bits(x):
    return np.float64(x).view(np.int64)


def _split(v):
    """Two powers of two (as close as possible) whose product is 2**v."""
    return 2.0 ** (v // 2), 2.0 ** (v - v // 2)


# ----------------------------------------------------------------------------- presets
def test_preset_table_matches_reference():
    expect = {"v100/fp16": (23, 4), "t4/fp16": (24, 8), "a100/fp16": (24, 8),
              "a100/bf16": (24, 8), "a100/tf32": (24, 4), "ada/bf16": (24, 8),
              "ada/tf32": (24, 4), "ada/fp8_e4m3": (13, 16), "ada/fp8_e5m2": (13, 16),
              "h100/fp16": (25, 16), "h100/bf16": (25, 16), "h100/tf32": (25, 8),
              "h100/fp8_e4m3": (13, 32), "h100/fp8_e5m2": (13, 32), "b200/fp16": (25, 16),
              "b200/tf32": (25, 8), "b200/fp8_e4m3": (25, 32), "b200/fp8_e5m2": (25, 32)}
    for name, (F, L) in expect.items():
        assert (PRESETS[name].F, PRESETS[name].L) == (F, L), name
    assert PRESETS["h100/fp8_e4m3"].step_fmt == "e8m13"
    assert PRESETS["ada/fp8_e5m2"].step_fmt == "e8m13"
    assert PRESETS["b200/fp8_e4m3"].step_fmt is None
    # where c enters: after the products on B200 FP8 (measured data), aligned everywhere else
    after = sorted(k for k, m in PRESETS.items() if m.c_entry == "after")
    assert after == ["b200/fp8_e4m3", "b200/fp8_e5m2"]
    assert all(m.c_entry == "aligned" for k, m in PRESETS.items() if k not in after)
    assert "Khattak" in PRESETS["b200/fp8_e5m2"].description
    assert get_model("a2", "tf32") is PRESETS["a100/tf32"]
    assert get_model("h200", "bf16") is PRESETS["h100/bf16"]
    assert get_model("h100", "fp32").fmt == "tf32"


# ----------------------------------------------------------------------------- probes
@pytest.mark.parametrize("name", FLOAT_PRESETS)
def test_precision_probe_survives_while_d_le_F(name):
    m = PRESETS[name]
    for d in range(m.F - 3, m.F + 3):
        u1, u2 = _split(14 - d)
        r = _gemm_probe([2.0 ** 7, -(2.0 ** 7), u1], [2.0 ** 7, 2.0 ** 7, u2], name)
        want = 2.0 ** (14 - d) if d <= m.F else 0.0
        assert _same(r, want), (name, d, r, want)


@pytest.mark.parametrize("name", FLOAT_PRESETS)
def test_truncation_probe_rounds_toward_zero(name):
    m = PRESETS[name]
    F = m.F
    for d, want_units in ((F, 1.0), (F + 1, 0.0), (F - 1, 3.0)):
        u1, u2 = _split(14 - d)
        for sign in (1.0, -1.0):
            r = _gemm_probe([2.0 ** 7, -(2.0 ** 7), sign * 1.5 * u1], [2.0 ** 7, 2.0 ** 7, u2], name)
            want = sign * want_units * 2.0 ** (14 - F) if want_units else 0.0
            if d == F - 1:
                want = sign * 1.5 * 2.0 ** (14 - d)  # fits: exact
            assert _same(r, want), (name, d, sign, r, want)


@pytest.mark.parametrize("name", [k for k in FLOAT_PRESETS if not PRESETS[k].fmt.startswith("fp8")])
def test_final_rounding_probe_gives_2_under_rz(name):
    a, b = [1.0, 1.0, 1.0, 1.0], [2.0, 2.0 ** -23 + 2.0 ** -24, 0.0, 0.0]
    assert _gemm_probe(a, b, name) == 2.0
    assert _gemm_probe([-1.0] * 4, b, name) == -2.0
    # a round-to-nearest fp32 sum of the same products would give 2 + 2**-22
    assert ff.dot(a, b, PRESETS[name].fmt, acc_fmt="fp32", order="exact") == 2.0 + 2.0 ** -22


@pytest.mark.parametrize("name", FLOAT_PRESETS)
def test_block_size_probe_counts_unfused_terms(name):
    m = PRESETS[name]
    X = 2.0 ** 7
    a = np.full(PAD, 2.0 ** -9)
    b = np.full(PAD, 2.0 ** -9)
    a[:2], b[:2] = [X, -X], [X, X]
    A = np.zeros((PAD, PAD))
    B = np.zeros((PAD, PAD))
    A[0], B[:, 0] = a, b
    r = ff.matmul(A, B, m.fmt, model=m)[0, 0]
    count = r / 2.0 ** -18
    assert count == PAD - m.L, (name, count)


@pytest.mark.parametrize("rule,want", [
    ("truncate", [1.0, 1.0, 1.0 + 2 ** -10]),
    ("rne", [1.0, 1.0 + 2 ** -10, 1.0 + 2 ** -9]),
    ("rna", [1.0 + 2 ** -10, 1.0 + 2 ** -10, 1.0 + 2 ** -9]),
])
@pytest.mark.parametrize("gpu", ["a100", "ada", "h100", "b200"])
def test_tf32_operand_probes(gpu, rule, want):
    xs = [1 + 2 ** -11, 1 + 2 ** -11 + 2 ** -20, 1 + 3 * 2 ** -11]
    m = get_model(gpu, "tf32").replace(tf32_operands=rule)
    for x, w in zip(xs, want):
        for s in (1.0, -1.0):
            r = ff.matmul(np.array([[s * x]]), np.array([[1.0]]), "tf32", model=m)[0, 0]
            assert r == s * w, (gpu, rule, s * x, r)
    # the default is what the unit does: truncation
    assert get_model(gpu, "tf32").tf32_operands == "truncate"


@pytest.mark.parametrize("name", ["v100/fp16", "a100/bf16", "h100/bf16", "h100/fp8_e4m3",
                                  "b200/fp8_e5m2", "a100/tf32"])
def test_specials(name):
    m = PRESETS[name]
    f = m.fmt
    big = 2.0 ** 7
    nan = ff.dot([1.0, np.nan], [1.0, 1.0], f, model=m)
    assert math.isnan(nan)
    if ff.get_format(f).inf or f == "tf32":
        assert ff.dot([np.inf, 1.0], [1.0, 1.0], f, model=m) == np.inf
        assert ff.dot([-np.inf, 1.0], [1.0, 1.0], f, model=m) == -np.inf
        assert math.isnan(ff.dot([np.inf, np.inf], [1.0, -1.0], f, model=m))
        assert math.isnan(ff.dot([np.inf, 0.0], [0.0, 1.0], f, model=m))  # Inf * 0
    # all -0 inputs, and -0 products: +0
    for a, b in (([-0.0] * 5, [-0.0] * 5), ([-1.0, 0.0], [0.0, 1.0]), ([big, -big], [big, big])):
        r = ff.dot(a, b, f, model=m)
        assert r == 0 and not math.copysign(1.0, r) < 0, (a, b, r)
    r = ff.matmul(np.full((3, 4), -0.0), np.full((4, 2), 0.0), f, model=m)
    assert not np.signbit(r).any()


def test_subnormal_inputs_and_outputs():
    # fp16 subnormal inputs are used as they are: 2**-24 * 2**-24 = 2**-48 (fp32 normal)
    assert ff.dot([2.0 ** -24], [2.0 ** -24], "fp16", model="h100") == 2.0 ** -48
    # bf16 products below the fp32 normal range give fp32 subnormals, truncated
    assert ff.dot([2.0 ** -70], [2.0 ** -70], "bf16", model="h100") == 2.0 ** -140
    r = ff.dot([1.5 * 2.0 ** -75], [2.0 ** -74], "bf16", model="h100")  # 0.75 * 2**-148
    assert r == 2.0 ** -149  # 1.5 * 2**-149 truncated to the subnormal grid
    # the zero-term exponent floor: eight products 1.75 * 2**-152 and a zero accumulator
    # (floor -133): aligned to 2**-158 they add exactly to 1.75 * 2**-149 -> RZ 2**-149;
    # with a floor of -126 each would be truncated to 0 first
    a, b = [1.75 * 2.0 ** -76] * 8, [2.0 ** -76] * 8
    h = get_model("h100", "bf16")
    assert ff.dot(a, b, "bf16", model=h) == 2.0 ** -149 == slow.dot(a, b, h)
    h126 = h.replace(zero_exponent=-126)
    assert ff.dot(a, b, "bf16", model=h126) == 0.0 == slow.dot(a, b, h126)
    # a product past the fp32 range, cancelled by its partner: the 1 is lost in alignment
    r = ff.dot([2.0 ** 100, -(2.0 ** 100), 1.0], [2.0 ** 100, 2.0 ** 100, 1.0], "bf16", model="h100")
    assert r == 0.0 and not np.signbit(r)
    # ... and not cancelled: the fp32 result overflows to Inf
    assert ff.dot([2.0 ** 100], [2.0 ** 100], "bf16", model="h100") == np.inf
    sat = get_model("h100", "bf16").replace(overflow="saturate")
    assert ff.dot([2.0 ** 100], [-(2.0 ** 100)], "bf16", model=sat) == -ff.info("fp32").max


def test_fp16_accumulator_rounds_to_nearest():
    m = get_model("h100", "fp16", "fp16")
    assert (m.acc_fmt, m.rounding) == ("fp16", "nearest_even")
    # 1 + 2**-11 + 2**-12 (three quarters of an fp16 ulp above 1): RNE gives 1 + 2**-10
    r = ff.dot([1.0, 2.0 ** -11, 2.0 ** -12], [1.0, 1.0, 1.0], "fp16", acc_fmt="fp16", model="h100")
    assert r == 1.0 + 2.0 ** -10
    r32 = ff.dot([1.0, 2.0 ** -11, 2.0 ** -12], [1.0, 1.0, 1.0], "fp16", model="h100")
    assert r32 == 1.0 + 2.0 ** -11 + 2.0 ** -12
    assert ff.dot([256.0], [256.0], "fp16", acc_fmt="fp16", model="h100") == np.inf
    with pytest.raises(ValueError, match="acc_fmt"):
        get_model("h100", "bf16", "fp16")


def test_int8_exact_int32():
    rng = np.random.default_rng(3)
    A = rng.integers(-128, 128, (8, 300))
    B = rng.integers(-128, 128, (300, 5))
    r = ff.matmul(A, B, "int8", model="h100")
    assert np.array_equal(r, (A @ B).astype(float))
    # int32 wrap-around
    n = 2 ** 31 // (128 * 128) + 1
    r = ff.dot(np.full(n, -128), np.full(n, -128), "int8", model="a100")
    assert r == slow.int8_dot([-128] * n, [-128] * n) < 0


# ----------------------------------------------------------------------------- epilogue
def test_epilogue_out_fmt_is_a_second_rounding():
    # exact sum 1 + 2**-8 + 2**-30: the truncated fp32 accumulator holds 1 + 2**-8,
    # a tie for bf16 that goes to even (1.0); one rounding of the exact sum gives 1 + 2**-7
    a, b = [1.0, 2.0 ** -8, 2.0 ** -30], [1.0, 1.0, 1.0]
    assert ff.dot(a, b, "bf16", model="h100") == 1.0 + 2.0 ** -8
    assert ff.dot(a, b, "bf16", model="h100", out_fmt="bf16") == 1.0
    assert ff.dot(a, b, "bf16", order="exact", acc_fmt="fp32", out_fmt="bf16") == 1.0 + 2.0 ** -7


def test_epilogue_alpha_beta_c():
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((6, 40)), rng.standard_normal((40, 3))
    C = rng.standard_normal((6, 3))
    acc = ff.matmul(A, B, "bf16", model="h100")
    got = ff.matmul(A, B, "bf16", model="h100", alpha=0.5, beta=2.0, c=C, out_fmt="bf16")
    c_bf = ff.cast(C, "bf16")
    want = ff.cast(ff.fma(2.0, c_bf, ff.mul(0.5, acc, "fp32"), "fp32"), "bf16")
    assert np.array_equal(got, want)
    assert not np.array_equal(got, ff.matmul(A, B, "bf16", model="h100", out_fmt="bf16"))


# ----------------------------------------------------------------------------- models as data
def test_user_defined_model_and_errors():
    base = get_model("h100", "fp8_e4m3")
    wide = base.replace(name="mine/fp8_e4m3", F=25, step_fmt=None)
    # h100 keeps 13 bits, the user's GPU 25: 1 + 2**-18 survives only on the latter
    a, b = [1.0, 2.0 ** -9], [1.0, 2.0 ** -9]
    assert ff.dot(a, b, "fp8_e4m3", model=base) == 1.0
    assert ff.dot(a, b, "fp8_e4m3", model=wide) == 1.0 + 2.0 ** -18
    with pytest.raises(ValueError, match="h1000|Did you mean"):
        get_model("h1000", "bf16")
    with pytest.raises(ValueError, match="supports"):
        get_model("v100", "bf16")
    with pytest.raises(ValueError, match="takes"):
        ff.matmul(np.ones((2, 2)), np.ones((2, 2)), "fp16", model=get_model("h100", "bf16"))
    with pytest.raises(ValueError):
        base.replace(L=0)
    with pytest.raises(ValueError):
        base.replace(tf32_operands="round")
    with pytest.raises(TypeError):
        get_model(3, "bf16")
    with pytest.raises(ValueError, match="order"):
        ff.matmul(np.ones((2, 2)), np.ones((2, 2)), "bf16", model="h100", order="pairwise")


# ----------------------------------------------------------------------------- random vs slow model
def _random_inputs(fmt, n, k, rng):
    """Values of fmt with exponents over +-20 binades (clipped to the format), random signs,
    some zeros and subnormals."""
    if fmt == "tf32":  # tf32 models read fp32 operands: give them fp32 values
        mbits, emin, emax = 23, -126, 20
        target = "fp32"
    else:
        mbits, emin, emax = slow.FORMAT_FACTS[fmt]
        target = fmt
    lo, hi = max(-20, emin - mbits), min(20, emax)
    e = rng.integers(lo, hi + 1, (n, k))
    v = np.ldexp(rng.uniform(1, 2, (n, k)), e) * rng.choice([-1.0, 1.0], (n, k))
    v[rng.random((n, k)) < 0.05] = 0.0
    v = ff.cast(v, target, overflow="saturate")
    return np.asarray(v, np.float64)


def _models_for_random():
    out = []
    for name in FLOAT_PRESETS:
        out.append(name)
        if PRESETS[name].fmt == "fp16":
            out.append(name + "+fp16acc")
    return out


@pytest.mark.parametrize("name", _models_for_random())
def test_vectorised_model_equals_slow_model(name):
    base, _, acc = name.partition("+")
    m = PRESETS[base]
    if acc:
        m = get_model(m, m.fmt, "fp16")
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # reproducible
    n = 10_000
    k = m.L + m.L // 2 + 1  # a full block and a partial one
    a = _random_inputs(m.fmt, n, k, rng)
    b = _random_inputs(m.fmt, n, k, rng)
    if m.acc_fmt == "fp16":  # keep fp16 sums mostly in range
        a, b = a * 2.0 ** -6, b * 2.0 ** -6
        a, b = ff.cast(a, m.fmt), ff.cast(b, m.fmt)
    fast = ff.dot(a, b, m.fmt if m.fmt != "tf32" else "tf32", model=m,
                  acc_fmt=m.acc_fmt)
    ref = np.array([slow.dot(a[i], b[i], m) for i in range(n)])
    bad = ~_same(fast, ref)
    assert not bad.any(), (name, int(bad.sum()),
                           [(a[i].tolist(), b[i].tolist(), fast[i], ref[i])
                            for i in np.flatnonzero(bad)[:2]])
    # the inputs exercise the model: many results differ from a plain fp32 dot product
    plain = ff.dot(a, b, m.fmt if m.fmt != "tf32" else "tf32", acc_fmt=m.acc_fmt)
    assert (~_same(plain, fast)).sum() > n // 20


@pytest.mark.parametrize("name", ["a100/tf32", "h100/tf32"])
@pytest.mark.parametrize("rule", ["rne", "rna"])
def test_tf32_operand_rules_equal_slow_model(name, rule):
    m = PRESETS[name].replace(tf32_operands=rule)
    rng = np.random.default_rng(11)
    a = _random_inputs("tf32", 2000, m.L + 3, rng)
    b = _random_inputs("tf32", 2000, m.L + 3, rng)
    fast = ff.dot(a, b, "tf32", model=m)
    ref = np.array([slow.dot(a[i], b[i], m) for i in range(a.shape[0])])
    assert _same(fast, ref).all()


def test_matmul_equals_batched_dot():
    rng = np.random.default_rng(5)
    A = _random_inputs("bf16", 7, 50, rng)
    B = _random_inputs("bf16", 50, 9, rng)
    r = ff.matmul(A, B, "bf16", model="h100")
    d = ff.dot(A[:, None, :], B.T[None, :, :], "bf16", model="h100")
    assert _same(r, d).all()
    ref = np.array([[slow.dot(A[i], B[:, j], PRESETS["h100/bf16"]) for j in range(9)]
                    for i in range(7)])
    assert _same(r, ref).all()


def test_accumulator_mismatch_names_what_the_model_takes():
    """A model whose accumulator differs from acc_fmt: the ValueError names the model's
    accumulator and the formats it accepts, never the given value as the valid one."""
    from floatfmt.arith.matrixunit.tensorcore import get_model
    own = get_model("h100", "fp16", "fp16").replace(name="my_fp16acc")
    with pytest.raises(ValueError, match=r"accumulates in fp16: acc_fmt must be 'fp16', not 'fp32'"):
        ff.matmul(np.ones((2, 16)), np.ones((16, 2)), "fp16", model=own)
    with pytest.raises(ValueError, match=r"accumulates in fp32: acc_fmt must be 'fp32' or 'fp16', not 'bf16'"):
        ff.matmul(np.ones((2, 16)), np.ones((16, 2)), "fp16", model="h100", acc_fmt="bf16")
