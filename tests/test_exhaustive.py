"""Every code of every format of 16 bits or fewer.

* ``decode`` agrees with ml_dtypes / numpy wherever that dtype exists (NaN by
  class: both NaN; zeros by sign);
* ``encode(decode(c)) == c`` for every non-NaN code, and NaN codes come back as
  a NaN code of the same sign where the format has signed NaNs;
* ``encode`` of every exact value agrees with ml_dtypes' own bit pattern;
* ``values`` lists every finite value once, sorted.
"""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from conftest import FLOAT_DTYPES, INT_DTYPES, ML_DTYPES_LACKS, same

# floatfmt name -> the numpy / ml_dtypes dtype with the same value set.
REFERENCE_DTYPES = {**FLOAT_DTYPES, **INT_DTYPES}
SMALL = [n for n in ff.formats() if ff.get_format(n).bits <= 16]


def test_every_small_format_has_a_reference_dtype():
    """(but those whose ml_dtypes type the installed ml_dtypes lacks, named there)"""
    assert sorted(SMALL) == sorted({**REFERENCE_DTYPES, **ML_DTYPES_LACKS})
    assert set(ML_DTYPES_LACKS) <= {"fp8_e5m3fnu"}  # ml_dtypes before 0.7


def all_codes(fmt):
    f = ff.get_format(fmt)
    return np.arange(1 << f.bits, dtype=np.uint16 if f.bits > 8 else np.uint8)


def reference_values(name) -> np.ndarray:
    """float64 values of every code, decoded by numpy / ml_dtypes."""
    if name in ML_DTYPES_LACKS:
        pytest.skip(ML_DTYPES_LACKS[name])
    codes = all_codes(name)
    with np.errstate(invalid="ignore"):  # ml_dtypes warns on NaN codes
        return codes.view(REFERENCE_DTYPES[name]).astype(np.float64)


@pytest.mark.parametrize("name", SMALL)
def test_decode_matches_reference(name):
    got = ff.decode(all_codes(name), name)
    assert got.dtype == np.float64
    want = reference_values(name)
    ok = same(got, want)
    assert ok.all(), [(hex(c), g, w) for c, g, w in zip(np.flatnonzero(~ok)[:5], got[~ok], want[~ok])]


@pytest.mark.parametrize("name", SMALL)
def test_encode_decode_round_trip(name):
    f = ff.get_format(name)
    codes = all_codes(name)
    v = ff.decode(codes, name)
    fin = ~np.isnan(v)
    back = ff.encode(v[fin], name)
    assert back.dtype == (np.uint8 if f.bits <= 8 else np.uint16)
    bad = back != codes[fin]
    assert not bad.any(), [(hex(c), hex(b)) for c, b in zip(codes[fin][bad][:5], back[bad][:5])]
    if f.has_nan:
        # NaN codes: encode(decode(c)) is a NaN code; its sign follows c's where NaN is signed.
        nan_codes = codes[~fin]
        again = ff.encode(v[~fin], name)
        assert np.isnan(ff.decode(again, name)).all()
        if f.nan in ("ieee", "all_ones") and f.signed:
            sign = 1 << (f.bits - 1)
            assert ((again & sign) == (nan_codes & sign)).all()
        if f.nan == "negative_zero":
            assert (again == 1 << (f.bits - 1)).all()


@pytest.mark.parametrize("name", SMALL)
def test_encode_agrees_with_reference_bit_patterns(name):
    """floatfmt's code for each exact value is ml_dtypes' / numpy's own code for it."""
    if ff.get_format(name).kind == "int":
        codes = all_codes(name)
        vals = reference_values(name)
        assert (ff.encode(vals, name) == codes).all()
        return
    vals = reference_values(name)
    vals = vals[~np.isnan(vals)]
    ref = vals.astype(np.float32).astype(REFERENCE_DTYPES[name])
    ref_codes = ref.view(np.uint16 if ref.dtype.itemsize == 2 else np.uint8)
    assert (ff.encode(vals, name) == ref_codes).all()


@pytest.mark.parametrize("name", SMALL)
def test_values_lists_each_finite_value_once(name):
    f = ff.get_format(name)
    v = ff.values(name)
    ref = reference_values(name)
    ref = np.unique(ref[np.isfinite(ref)] + 0.0)
    assert np.array_equal(v, ref)
    assert np.all(np.diff(v) > 0)
    info = ff.info(name)
    # num_finite counts codes: +0 and -0 are two codes but one value
    assert info.num_finite == v.size + (1 if f.negative_zero else 0)
    assert v.max() == info.max


@pytest.mark.parametrize("name", SMALL)
def test_cast_of_every_value_is_the_value(name):
    """Every finite value of the format is its own rounding, in every mode."""
    v = ff.values(name)
    for mode in ("nearest_even", "toward_zero", "up", "down", "odd", "nearest_away"):
        assert np.array_equal(ff.cast(v, name, mode), v)


@pytest.mark.parametrize("name", SMALL)
def test_classify_every_code(name):
    f = ff.get_format(name)
    v = ff.decode(all_codes(name), name)
    cls = ff.classify(v, name)
    a = np.abs(v)
    want = np.where(np.isnan(v), "nan", np.where(np.isinf(v), "inf", np.where(
        a == 0, "zero", np.where(a < (f.smallest_normal if f.kind == "float" else 1), "subnormal",
                                 "normal"))))
    assert (cls == want).all()
    if f.kind == "float" and f.zero:
        assert (cls == "subnormal").sum() == (2 if f.signed else 1) * ((1 << f.mbits) - 1)
