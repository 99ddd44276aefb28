"""OCP MX and NVFP4 block quantisation against an exact reference and against gfloat.

The exact reference below uses only Fractions and the element value sets of
ml_dtypes (an independent implementation), never floatfmt's rounding.
"""

import zlib
from bisect import bisect_left
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import floatfmt as ff
from floatfmt.scaling.mx_nvfp4 import MX_FORMATS, mx_shared_exponent

ELEMENT_DTYPES = {
    "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
    "fp6_e2m3": ml_dtypes.float6_e2m3fn, "fp6_e3m2": ml_dtypes.float6_e3m2fn,
    "fp4_e2m1": ml_dtypes.float4_e2m1fn,
}
# emax_elem of the OCP MX v1.0 spec (reference/formats.md)
SPEC_EMAX = {"mxfp8_e4m3": 8, "mxfp8_e5m2": 15, "mxfp6_e3m2": 4, "mxfp6_e2m3": 2,
             "mxfp4_e2m1": 2, "mxint8": 0}


# ----------------------------------------------------------------------------- exact reference
def _table(elem):
    """Sorted non-negative finite values of an element format, with codes (ml_dtypes)."""
    dt = ELEMENT_DTYPES[elem]
    bits = {"fp8_e4m3": 8, "fp8_e5m2": 8, "fp6_e2m3": 6, "fp6_e3m2": 6, "fp4_e2m1": 4}[elem]
    codes = np.arange(1 << (bits - 1), dtype=np.uint8)
    vals = codes.view(dt).astype(np.float64)
    keep = np.isfinite(vals)
    return [Fraction(float(v)) for v in vals[keep]], [int(c) for c in codes[keep]]


_TABLES = {e: _table(e) for e in ELEMENT_DTYPES}


def ref_round_sat(fr: Fraction, elem) -> Fraction:
    """Round to nearest, ties to the even code, saturating (exhaustive search)."""
    if elem == "int8":  # MXINT8: integers k/64, k in -128..127
        k = fr * 64
        n = round(k)  # Python rounds Fractions half to even
        return Fraction(min(max(n, -128), 127), 64)
    vals, codes = _TABLES[elem]
    a = abs(fr)
    if a >= vals[-1]:
        r = vals[-1]
    else:
        i = bisect_left(vals, a)
        if vals[i] == a:
            r = a
        else:
            lo, hi = vals[i - 1], vals[i]
            if a - lo < hi - a:
                r = lo
            elif a - lo > hi - a:
                r = hi
            else:
                r = lo if codes[i - 1] % 2 == 0 else hi
    return -r if fr < 0 else r


def floor_log2(fr: Fraction) -> int:
    n, d = fr.numerator, fr.denominator
    e = n.bit_length() - d.bit_length()
    if Fraction(2) ** e > fr:
        e -= 1
    assert Fraction(2) ** e <= fr < Fraction(2) ** (e + 1)
    return e


def ref_mx_block(block, name):
    """(E8M0 code, dequantised values) of one block by the spec, with Fractions."""
    elem = MX_FORMATS[name]
    if not all(np.isfinite(block)):
        return 255, [float("nan")] * len(block)
    fr = [Fraction(float(v)) for v in block]
    amax = max(abs(f) for f in fr)
    E = -127 if amax == 0 else max(floor_log2(amax) - SPEC_EMAX[name], -127)
    if E > 127:
        return 255, [float("nan")] * len(block)
    X = Fraction(2) ** E
    return E + 127, [float(ref_round_sat(f / X, elem) * X) for f in fr]


# ----------------------------------------------------------------------------- random blocks
def random_blocks(rng, n):
    """float64 blocks of 32 mixing normal data, zeros, tiny and huge values, exact ties,
    values just below powers of two, and whole-block specials."""
    out = []
    for i in range(n):
        kind = i % 8
        if kind == 0:
            b = rng.standard_normal(32)
        elif kind == 1:
            b = rng.standard_normal(32) * 2.0 ** rng.integers(-30, 30, 32)  # wide spread
        elif kind == 2:
            b = np.zeros(32)
            b[rng.integers(0, 32, 3)] = rng.standard_normal(3)  # mostly zeros
        elif kind == 3:
            b = rng.standard_normal(32) * 2.0 ** -135  # tiny: the scale clamps at 2**-127
        elif kind == 4:
            b = rng.standard_normal(32) * 2.0 ** rng.integers(90, 120)  # huge, in range
        elif kind == 5:
            # halfway points of a fine grid: ties for every element format
            b = (rng.integers(-64, 64, 32) + 0.5) * 2.0 ** rng.integers(-8, 0)
        elif kind == 6:
            b = rng.standard_normal(32)
            b[0] = np.nextafter(2.0 ** int(rng.integers(-20, 20)), 0)  # amax just below 2**k
            b[1:] *= 0.01
        else:
            b = np.float32(rng.standard_normal(32) * 100).astype(np.float64)
        out.append(b.astype(np.float64))
    return np.array(out)


MX_NAMES = list(MX_FORMATS)


@pytest.mark.parametrize("name", MX_NAMES)
def test_emax_elem_matches_spec(name):
    q = ff.quantize(np.array([1.0] + [0.0] * 31), name)
    # amax = 1 = 2**0, so the shared exponent is -emax_elem
    assert int(q.scale_codes[0]) == 127 - SPEC_EMAX[name]


@pytest.mark.parametrize("name", MX_NAMES)
def test_mx_matches_exact_reference(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    blocks = random_blocks(rng, 96)
    blocks[7, 5] = np.nan
    blocks[15, 0] = -np.inf
    blocks[23, :] = 0.0
    blocks[31, 3] = 2.0 ** 200  # shared exponent above 127: NaN scale
    q = ff.quantize(blocks, name, axis=-1)
    got = q.dequantize()
    mismatches = 0
    for i, b in enumerate(blocks):
        code, vals = ref_mx_block(b, name)
        assert int(q.scale_codes[i, 0]) == code, (name, i, b)
        ok = np.array_equal(got[i], np.array(vals), equal_nan=True)
        mismatches += not ok
    assert mismatches == 0


def test_mx_saturates_and_rounds_ties_to_even():
    # amax 480 -> E = 8 - 8 = 0: 464 would overflow E4M3 without saturation
    b = np.zeros(32)
    b[:6] = [480.0, 464.0, 452.0, 9.0, 9.5, -13.0]
    v = ff.fake_quant(b, "mxfp8_e4m3")
    assert v[:6].tolist() == [448.0, 448.0, 448.0, 9.0, 10.0, -13.0]  # 9.5 tie -> 10 (even)
    # FP4: amax 7 -> E = 0; 5 is the tie between 4 and 6 -> 4 (even code)
    b[:6] = [7.0, 5.0, 2.5, 0.25, 0.2, -0.75]
    assert ff.fake_quant(b, "mxfp4_e2m1")[:6].tolist() == [6.0, 4.0, 2.0, 0.0, 0.0, -1.0]


def test_mxint8_implicit_scale_and_twos_complement_range():
    b = np.zeros(32)
    b[:5] = [1.0, 0.5, -1.995, 1.995, -1.99]  # amax 1.995 -> E = 0
    q = ff.quantize(b, "mxint8")
    assert int(q.scale_codes[0]) == 127
    # 1.995 * 64 = 127.68 saturates at 127; -127.68 -> -128 fits two's complement
    assert q.elements[:5].tolist() == [1.0, 0.5, -2.0, 127 / 64, -127 / 64]
    assert q.codes[:5].tolist() == [64, 32, 0x80, 127, 0x81]


def test_special_blocks():
    x = np.zeros((4, 32))
    x[1, 3] = np.nan
    x[2, 0] = np.inf
    x[3, :] = 2.0 ** -140
    q = ff.quantize(x, "mxfp8_e4m3")
    assert q.scale_codes[:, 0].tolist() == [0, 255, 255, 0]  # zero block: 2**-127
    d = q.dequantize()
    assert np.all(d[0] == 0) and np.all(np.isnan(d[1])) and np.all(np.isnan(d[2]))
    # 2**-140 / 2**-127 = 2**-13 is below E4M3's smallest subnormal 2**-9: flushed
    assert np.all(d[3] == 0)
    # E5M2 subnormals reach 2**-16: 2**-13 survives
    assert np.all(ff.fake_quant(x[3], "mxfp8_e5m2") == 2.0 ** -140)


# Blocks whose amax lies just below a power of two: float64 log2 rounds up to k,
# so gfloat (compute_scale_amax uses floor(log2(amax))) picks a scale twice too big.
GFLOAT_LOG2_CASES = [np.nextafter(2.0 ** k, 0) for k in (3, 10, -5, 100, 20)]


@pytest.mark.parametrize("amax", GFLOAT_LOG2_CASES)
def test_exponent_field_not_float_log2(amax):
    assert np.floor(np.log2(amax)) == np.round(np.log2(amax))  # the float log2 is wrong here
    E = mx_shared_exponent(amax, "mxfp8_e4m3")
    assert E == floor_log2(Fraction(amax)) - 8  # one below what log2 would give


@pytest.mark.parametrize("name", MX_NAMES)
def test_mx_matches_gfloat(name):
    gfloat = pytest.importorskip("gfloat")
    from gfloat.formats import all_block_formats
    fi = {f.name: f for f in all_block_formats}[name]
    rng = np.random.default_rng(7)
    blocks = random_blocks(rng, 64)[[i for i in range(64) if i % 8 != 3]]  # keep it quick
    log2_cases = np.array([np.r_[a, rng.standard_normal(31) * a / 4] for a in GFLOAT_LOG2_CASES])
    blocks = np.vstack([blocks, log2_cases])
    ours = ff.fake_quant(blocks, name)
    differ = []
    for i, b in enumerate(blocks):
        theirs = gfloat.quantize_block(fi, b, gfloat.compute_scale_amax)
        if not np.array_equal(ours[i], theirs):
            differ.append(i)
    # gfloat differs exactly on the blocks where float64 log2(amax) rounds up
    bad_log2 = [i for i, b in enumerate(blocks)
                if np.floor(np.log2(np.max(np.abs(b)))) != floor_log2(Fraction(np.max(np.abs(b))))]
    assert len(bad_log2) >= len(GFLOAT_LOG2_CASES)
    assert differ == bad_log2
    for i in differ:  # and there we agree with the exact reference
        assert np.array_equal(ours[i], ref_mx_block(blocks[i], name)[1])


def test_gfloat_also_wrong_for_huge_exponents_we_give_nan():
    gfloat = pytest.importorskip("gfloat")
    from gfloat.formats import format_info_mxfp8_e4m3
    b = np.full(32, 2.0 ** 140)
    # gfloat clamps the scale exponent to 127 and saturates; the spec says NaN scale
    theirs = gfloat.quantize_block(format_info_mxfp8_e4m3, b, gfloat.compute_scale_amax)
    assert np.all(theirs == 448 * 2.0 ** 127)
    assert np.all(np.isnan(ff.fake_quant(b, "mxfp8_e4m3")))


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp4_e2m1", "mxint8"])
def test_scale_roundings(name):
    elem_max = 127 / 64 if name == "mxint8" else ff.get_format(MX_FORMATS[name]).max
    emax = SPEC_EMAX[name]
    rng = np.random.default_rng(3)
    amax = np.abs(rng.standard_normal(2000)) * 2.0 ** rng.integers(-20, 20, 2000)
    mbits = 6 if name == "mxint8" else ff.get_format(MX_FORMATS[name]).mbits
    amax[:4] = [1.0, 2.0 ** 5, elem_max, (2 - 2.0 ** -(mbits + 1)) * 4]
    fl = mx_shared_exponent(amax, name, "floor")
    ce = mx_shared_exponent(amax, name, "ceil")
    rc = mx_shared_exponent(amax, name, "rceil")
    ev = mx_shared_exponent(amax, name, "even")
    ex = np.array([floor_log2(Fraction(a)) for a in amax]) - emax
    assert np.array_equal(fl, ex)
    is_pow2 = np.frexp(amax)[0] == 0.5
    assert np.array_equal(ce, ex + ~is_pow2)
    # rceil: the smallest exponent at which nothing saturates
    fits = lambda E: np.array([Fraction(a) <= Fraction(elem_max) * Fraction(2) ** int(e)  # noqa: E731
                               for a, e in zip(amax, E)])
    assert fits(rc).all() and not fits(rc - 1).any()
    # even: floor of amax rounded to the element precision, so it is floor or floor + 1
    assert np.all((ev == fl) | (ev == fl + 1))
    assert ev[2] == fl[2]  # the element max has the element precision: no change
    assert ev[3] == fl[3] + 1  # (2 - half an element ulp) * 4 rounds (ties away) up to 8


def test_scale_rounding_even_example():
    # E2M1 has one mantissa bit: 7 = 1.75 * 4 rounds (ties away) to 8, so the scale doubles
    assert mx_shared_exponent(7.0, "mxfp4_e2m1", "even") == 1
    assert mx_shared_exponent(6.5, "mxfp4_e2m1", "even") == 0
    assert mx_shared_exponent(7.0, "mxfp4_e2m1", "floor") == 0
    b = np.r_[7.0, np.zeros(31)]
    assert ff.fake_quant(b, "mxfp4_e2m1", scale_rounding="even")[0] == 8.0
    assert ff.fake_quant(b, "mxfp4_e2m1")[0] == 6.0


def test_axis_padding_and_dtypes():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 70)).astype(np.float32)
    a = ff.quantize(x, "mxfp6_e3m2", axis=1)
    assert a.scale.shape == (5, 3) and a.elements.shape == (5, 70)
    padded = np.zeros((5, 96), np.float32)
    padded[:, :70] = x
    assert np.array_equal(a.dequantize(), ff.fake_quant(padded, "mxfp6_e3m2")[:, :70])
    b = ff.quantize(x.T, "mxfp6_e3m2", axis=0)
    assert np.array_equal(b.dequantize(), a.dequantize().T)
    assert b.scale.shape == (3, 5)
    # float32 in, float32 out for fake_quant (the values are float32 values)
    f = ff.fake_quant(x, "mxfp8_e5m2")
    assert f.dtype == np.float32
    assert np.array_equal(f, ff.fake_quant(x.astype(np.float64), "mxfp8_e5m2"))
    h = ff.fake_quant(x.astype(np.float16), "mxfp4")
    assert np.array_equal(h, ff.fake_quant(x.astype(np.float16).astype(np.float64), "mxfp4"))
    assert a.bits_per_element == pytest.approx(6 + 8 * 15 / 350)


def test_stochastic_rounding_is_unbiased_and_seeded():
    x = np.r_[4.0, np.full(31, 0.3)]  # E = 0 for E2M1; 0.3 sits between 0 and 0.5
    a = np.mean([ff.fake_quant(x, "mxfp4_e2m1", rounding="stochastic", rng=i)[1:] for i in range(200)])
    assert abs(a - 0.3) < 0.01
    r1 = ff.fake_quant(x, "mxfp4", rounding="sr", rng=5)
    r2 = ff.fake_quant(x, "mxfp4", rounding="sr", rng=5)
    assert np.array_equal(r1, r2)


def test_mx_errors():
    with pytest.raises(ValueError, match="scale_rounding"):
        ff.quantize(np.ones(32), "mxfp8", scale_rounding="flor")
    with pytest.raises(ValueError, match="mxfp4_e2m1"):
        ff.quantize(np.ones(32), "mxfp5")
    with pytest.raises(ValueError, match="out of bounds"):
        ff.quantize(np.ones(32), "mxfp8", axis=2)
    with pytest.raises(ValueError, match="at least one dimension"):
        ff.quantize(1.0, "mxfp8")
    with pytest.raises(TypeError):
        ff.fake_quant(np.ones(32), "mxfp8", granularty="tensor")


# ----------------------------------------------------------------------------- NVFP4
def _nearest_e4m3(fr):
    return ref_round_sat(fr, "fp8_e4m3")


def test_nvfp4_matches_exact_reference():
    gmpy2 = pytest.importorskip("gmpy2")
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((6, 48)) * 2.0 ** rng.integers(-6, 6, (6, 1))).astype(np.float32)
    x[2, 16:32] = 0.0
    x[3, :16] *= 1e-4  # a block far below the tensor amax: its E4M3 scale underflows
    q = ff.quantize(x, "nvfp4")
    amax = Fraction(float(np.max(np.abs(x))))
    with gmpy2.context(gmpy2.get_context(), precision=24):  # fp32, correctly rounded (RNE)
        ts = Fraction(*gmpy2.mpfr(amax / (6 * 448)).as_integer_ratio())
    assert q.tensor_scale == float(ts)
    got = q.dequantize()
    for r in range(6):
        for b in range(3):
            blk = [Fraction(float(v)) for v in x[r, 16 * b:16 * b + 16]]
            s = _nearest_e4m3(max(abs(v) for v in blk) / (6 * ts))
            assert q.scale[r, b] == float(s)
            want = [0.0 if s == 0 else float(ref_round_sat(v / (s * ts), "fp4_e2m1") * s * ts)
                    for v in blk]
            assert got[r, 16 * b:16 * b + 16].tolist() == want
    assert q.scale_codes.dtype == np.uint8
    assert q.bits_per_element == pytest.approx(4 + 8 / 16 + 32 / x.size)


def test_nvfp4_rejects_nonfinite():
    with pytest.raises(ValueError, match="non-finite"):
        ff.quantize(np.array([1.0, np.nan]), "nvfp4")
