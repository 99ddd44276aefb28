"""encode / decode beyond 16 bits, code containers, NaN codes, classify, next_up /
next_down / ulp against independent references (numpy's nextafter / spacing, and the
value sets decoded by ml_dtypes)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import floatfmt as ff
from conftest import FLOAT_DTYPES, INT_DTYPES, same

REF = {**FLOAT_DTYPES, **INT_DTYPES}  # every format of at most 16 bits with a reference dtype


def reference_set(name) -> np.ndarray:
    """Sorted distinct non-NaN values (Inf included) of a format, decoded by ml_dtypes/numpy."""
    bits = ff.get_format(name).bits
    codes = np.arange(1 << bits, dtype=np.uint16 if bits > 8 else np.uint8)
    with np.errstate(invalid="ignore"):
        v = codes.view(REF[name]).astype(np.float64)
    return np.unique(v[~np.isnan(v)] + 0.0)


# ------------------------------------------------------------------------------ encode/decode
@pytest.mark.parametrize("name, dtype", [("fp64", np.uint64), ("fp32", np.uint32), ("tf32", np.uint32),
                                         ("fp16", np.uint16), ("bf16", np.uint16), ("fp8_e4m3", np.uint8),
                                         ("fp6_e2m3", np.uint8), ("fp4_e2m1", np.uint8), ("e8m0", np.uint8),
                                         ("int8", np.uint8), ("int4", np.uint8)])
def test_code_dtype_is_the_smallest_unsigned(name, dtype):
    assert ff.encode(np.array([1.0, 2.0]), name).dtype == dtype
    assert type(ff.encode(1.0, name)) is int
    assert type(ff.decode(1, name)) is float


def test_known_codes():
    assert ff.encode(1.0, "fp16") == 0x3C00 and ff.encode(-2.0, "bf16") == 0xC000
    assert ff.encode(448, "fp8_e4m3") == 0x7E and ff.encode(57344, "fp8_e5m2") == 0x7B
    assert ff.encode(6.0, "fp4_e2m1") == 0b0111 and ff.encode(-0.5, "fp4_e2m1") == 0b1001
    assert ff.encode(7.5, "fp6_e2m3") == 0b011111 and ff.encode(28, "fp6_e3m2") == 0b011111
    assert ff.encode(1.0, "e8m0") == 127 and ff.encode(2.0**-127, "e8m0") == 0
    assert ff.encode(-1, "int8") == 0xFF and ff.encode(-8, "int4") == 0x8 and ff.encode(-1, "int4") == 0xF
    assert ff.encode(1.0, "tf32") == 127 << 10 and ff.encode(-0.0, "fp32") == 0x80000000
    assert ff.decode(0x7C00, "fp16") == math.inf and ff.decode(0x7F, "fp8_e4m3") != ff.decode(0x7F, "fp8_e4m3")


def test_nan_codes_and_signs():
    nan = float("nan")
    assert ff.encode(nan, "fp16") == 0x7E00 and ff.encode(-nan, "fp16") == 0xFE00
    assert ff.encode(nan, "bf16") == 0x7FC0 and ff.encode(nan, "fp32") == 0x7FC00000
    assert ff.encode(nan, "fp8_e4m3") == 0x7F and ff.encode(-nan, "fp8_e4m3") == 0xFF
    assert ff.encode(nan, "fp8_e4m3fnuz") == 0x80 and ff.encode(-nan, "fp8_e5m2fnuz") == 0x80
    assert ff.encode(nan, "e8m0") == 0xFF and ff.encode(-1.0, "e8m0") == 0xFF
    assert ff.encode(465, "fp8_e4m3") == 0x7F  # overflow to NaN keeps the sign
    assert ff.encode(-465, "fp8_e4m3") == 0xFF
    assert ff.encode(nan, "fp64") == 0x7FF8000000000000


@pytest.mark.parametrize("name, view, shift", [("fp32", np.float32, 0), ("fp64", np.float64, 0),
                                               ("tf32", np.float32, 13)])
def test_wide_formats_decode_and_round_trip(name, view, shift):
    rng = np.random.default_rng(1)
    f = ff.get_format(name)
    hi = 1 << f.bits
    codes = np.concatenate([rng.integers(0, hi, 20000, dtype=np.uint64),
                            np.array([0, 1, hi - 1, hi >> 1, (hi >> 1) + 1], np.uint64)])
    word = (codes << np.uint64(shift)).astype(np.uint32 if view is np.float32 else np.uint64)
    with np.errstate(invalid="ignore"):  # signalling NaN payloads
        want = word.view(view).astype(np.float64)
    got = ff.decode(codes, name)
    assert same(got, want).all()
    fin = ~np.isnan(want)
    assert (ff.encode(want[fin], name).astype(np.uint64) == codes[fin]).all()


def test_tf32_container_is_the_fp32_word():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(5000) * 10.0 ** rng.integers(-30, 30, 5000)
    code19 = ff.encode(x, "tf32").astype(np.uint64)
    word = ff.encode(x, "tf32", container="fp32")
    assert word.dtype == np.uint32
    assert ((word & 0x1FFF) == 0).all()
    assert (word.astype(np.uint64) == code19 << np.uint64(13)).all()
    assert np.array_equal(word.view(np.float32).astype(np.float64), ff.cast(x, "tf32"))
    bf = ff.encode(x, "bf16", container="fp32")
    assert ((bf & 0xFFFF) == 0).all() and ((bf >> 16) == ff.encode(x, "bf16")).all()


@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up", "down", "odd", "nearest_away"])
@pytest.mark.parametrize("name", ["bf16", "fp8_e5m2", "fp6_e3m2", "tf32", "int4"])
def test_encode_is_cast_then_code(name, mode):
    x = np.random.default_rng(3).standard_normal(3000) * 50
    codes = ff.encode(x, name, mode)
    assert np.array_equal(ff.decode(codes, name), ff.cast(x, name, mode))


def test_decode_accepts_python_and_numpy_integers():
    assert ff.decode([0x3C00, 0xC000], "fp16").tolist() == [1.0, -2.0]
    assert ff.decode(np.uint8(0x7E), "e4m3") == 448.0
    assert ff.decode(np.array([[1, 2], [3, 4]], np.int32), "fp4_e2m1").shape == (2, 2)
    assert ff.decode(2**64 - 1, "fp64") != ff.decode(2**64 - 1, "fp64")  # a NaN code


# ---------------------------------------------------------------------------------- classify
def test_classify():
    assert ff.classify(1e-5, "fp16") == "subnormal" and ff.classify(1e-5, "bf16") == "normal"
    assert ff.classify(1e5, "fp16") == "inf" and ff.classify(1e5, "fp8_e4m3") == "nan"
    assert ff.classify(1e5, "fp8_e4m3", overflow="saturate") == "normal"
    assert ff.classify(1e-9, "fp16") == "zero" and ff.classify(-0.0, "fp32") == "zero"
    assert ff.classify(0.4, "int8") == "zero" and ff.classify(3, "int8") == "normal"
    assert ff.classify(2**-133, "bf16") == "subnormal" and ff.classify(2**-134, "bf16") == "zero"
    assert ff.classify(2**-134, "bf16", rounding="up") == "subnormal"
    assert ff.classify(0.25, "fp6_e2m3") == "subnormal"
    assert ff.classify(1e-3, "e8m0") == "normal"
    arr = ff.classify(np.array([0.0, 1e-6, 1.0, np.inf, np.nan]), "fp16")
    assert arr.tolist() == ["zero", "subnormal", "normal", "inf", "nan"]


# ------------------------------------------------------------------------- next_up/down, ulp
SMALL = list(REF)


@pytest.mark.parametrize("name", SMALL)
def test_next_up_down_against_the_value_set(name):
    """next_up(x) is the smallest value of the format > x (NaN if none, Inf only where the
    format has it); next_down mirrors it.  Checked at every value, every midpoint and
    random points, against the value set decoded by ml_dtypes."""
    ref = reference_set(name)
    fin = ref[np.isfinite(ref)]
    rng = np.random.default_rng(5)
    span = max(abs(fin[0]), abs(fin[-1]))
    x = np.concatenate([fin, (fin[1:] + fin[:-1]) / 2, rng.uniform(-1.5 * span, 1.5 * span, 3000),
                        np.ldexp(rng.uniform(-1, 1, 2000), rng.integers(-140, 5, 2000)),
                        [np.inf, -np.inf, 2 * span, -2 * span]])
    i_up = np.searchsorted(ref, x, side="right")
    want_up = np.where(i_up < ref.size, ref[np.minimum(i_up, ref.size - 1)], np.nan)
    i_dn = np.searchsorted(ref, x, side="left") - 1
    want_dn = np.where(i_dn >= 0, ref[np.maximum(i_dn, 0)], np.nan)
    # IEEE nextUp(+Inf) = +Inf and nextDown(-Inf) = -Inf
    want_up = np.where(x == np.inf, np.inf if np.isinf(ref).any() else np.nan, want_up)
    want_dn = np.where(x == -np.inf, -np.inf if np.isinf(ref).any() else np.nan, want_dn)
    got_up, got_dn = ff.next_up(x, name), ff.next_down(x, name)
    ok_up = (got_up == want_up) | (np.isnan(got_up) & np.isnan(want_up))
    ok_dn = (got_dn == want_dn) | (np.isnan(got_dn) & np.isnan(want_dn))
    assert ok_up.all(), list(zip(x[~ok_up][:5], got_up[~ok_up][:5], want_up[~ok_up][:5]))
    assert ok_dn.all(), list(zip(x[~ok_dn][:5], got_dn[~ok_dn][:5], want_dn[~ok_dn][:5]))
    assert np.isnan(ff.next_up(np.nan, name)) and np.isnan(ff.next_down(np.nan, name))


@pytest.mark.parametrize("name, dtype", [("fp32", np.float32), ("fp64", np.float64), ("fp16", np.float16)])
def test_next_up_down_match_numpy_nextafter(name, dtype):
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.standard_normal(5000) * 10.0 ** rng.integers(-40, 38, 5000),
                        [0.0, -0.0, np.finfo(dtype).max, -np.finfo(dtype).max,
                         np.finfo(dtype).smallest_subnormal, np.inf, -np.inf]])
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    x = x[np.isfinite(x) | np.isinf(x)]
    with np.errstate(over="ignore"):
        up = np.nextafter(x, dtype(np.inf)).astype(np.float64)
        dn = np.nextafter(x, dtype(-np.inf)).astype(np.float64)
    gu, gd = ff.next_up(x, name), ff.next_down(x, name)
    assert ((gu == up) | (x == np.inf)).all() and ((gd == dn) | (x == -np.inf)).all()
    assert np.all(gu[x == np.inf] == np.inf) and np.all(gd[x == -np.inf] == -np.inf)


def test_next_up_of_exact_inputs_past_float64():
    assert ff.next_up(2**53 + 1, "fp64") == 2.0**53 + 2
    assert ff.next_down(2**53 + 1, "fp64") == 2.0**53
    assert ff.next_up("0.1", "fp64") == 0.1  # the decimal 0.1 lies below the double 0.1
    assert ff.next_down("0.1", "fp64") == np.nextafter(0.1, 0)


@pytest.mark.parametrize("name, dtype", [("fp16", np.float16), ("fp32", np.float32), ("fp64", np.float64)])
def test_ulp_matches_numpy_spacing(name, dtype):
    rng = np.random.default_rng(7)
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(5000) * 10.0 ** rng.integers(-40, 38, 5000)).astype(dtype)
    x = np.concatenate([x[np.isfinite(x) & (x != 0)], [np.finfo(dtype).smallest_subnormal]])
    x = x[np.abs(x) < np.finfo(dtype).max]
    assert (ff.ulp(x, name) == np.spacing(np.abs(x)).astype(np.float64)).all()
    assert ff.ulp(0.0, name) == float(np.finfo(dtype).smallest_subnormal)


@pytest.mark.parametrize("name", SMALL)
def test_ulp_is_the_gap_to_the_next_magnitude(name):
    f = ff.get_format(name)
    v = ff.values(name)
    v = v[(v >= 0) & (v < f.max)]
    assert (ff.ulp(v, name) == ff.next_up(v, name) - v).all()
    assert np.isnan(ff.ulp(np.nan, name)) and np.isnan(ff.ulp(np.inf, name))


def test_values_of_small_formats():
    assert ff.values("fp4_e2m1").tolist() == [-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert ff.values("int4").tolist() == list(range(-8, 8))
    assert ff.values("e8m0").size == 255 and ff.values("e8m0")[0] == 2.0**-127
    assert ff.values("fp8_e4m3").size == 253 and ff.values("fp16").size == 2 * 31743 + 1
