"""Elementwise arithmetic behaviour (the bit-for-bit MPFR comparison is in test_ops_oracle.py)
and the FPArray wrapper."""

from __future__ import annotations

import importlib.util
import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.core.formats import Format
from floatfmt.arith.ops import promote_formats
from conftest import DET_MODES


def _neg_zero(x):
    return x == 0 and math.copysign(1.0, x) < 0


# ----------------------------------------------------------------------------- the headline
def test_vanishing_update():
    assert ff.add(1.0, 0.0001, "fp16") == 1.0
    assert ff.add(1.0, 0.0001, "fp32") != 1.0
    assert ff.add(1.0, 0.0001, "bf16") == 1.0
    assert ff.add(1.0, 0.001, "fp16") == 1.0009765625  # 0.001 is more than half an ulp
    x = ff.scalar(1.0, "fp16") + 0.0001
    assert isinstance(x, ff.FPArray) and float(x) == 1.0 and repr(x) == "FPArray(1.0, fmt='fp16')"


def test_operands_are_cast_first_then_rounded_once():
    # 0.1 and 0.2 become bf16 values first; their exact sum is then rounded once
    a, b = ff.cast(0.1, "bf16"), ff.cast(0.2, "bf16")
    assert ff.add(0.1, 0.2, "bf16") == ff.cast(Fraction(a) + Fraction(b), "bf16")
    # strings and Fractions are exact inputs, rounded once on the way in
    assert ff.mul("0.1", Fraction(1, 3), "fp32") == ff.mul(ff.cast("0.1", "fp32"),
                                                           ff.cast(Fraction(1, 3), "fp32"), "fp32")
    # fma: one rounding of a*b + c (the product alone would round to 1 in fp16)
    a, b = 1 + 2 ** -10, 1 - 2 ** -10
    assert ff.mul(a, b, "fp16") == 1.0
    assert ff.fma(a, b, -1.0, "fp16") == -(2.0 ** -20)
    assert ff.add(ff.mul(a, b, "fp16"), -1.0, "fp16") == 0.0


def test_types_and_shapes():
    r = ff.add(1.0, 2.0, "fp16")
    assert type(r) is float
    r = ff.add(np.float32(1.0), 2, "fp16")
    assert type(r) is float
    r = ff.mul(np.ones((2, 3)), np.arange(3), "bf16")
    assert r.shape == (2, 3) and r.dtype == np.float64
    assert ff.fma([1.0, 2.0], 3.0, np.zeros((4, 1)), "fp16").shape == (4, 2)
    assert ff.sqrt([4.0, 9.0], "fp8_e4m3").tolist() == [2.0, 3.0]
    with pytest.raises(TypeError):
        ff.add({"a": 1}, 1.0, "fp16")
    with pytest.raises(ValueError, match="Did you mean"):
        ff.add(1.0, 1.0, "fp61")
    with pytest.raises(ValueError, match="nearest_even"):
        ff.add(1.0, 1.0, "fp16", rounding="round")


# ----------------------------------------------------------------------------- IEEE specials
def test_invalid_operations_give_nan():
    inf = math.inf
    assert math.isnan(ff.add(inf, -inf, "fp16"))
    assert math.isnan(ff.sub(inf, inf, "bf16"))
    assert math.isnan(ff.mul(0.0, inf, "fp32"))
    assert math.isnan(ff.div(0.0, 0.0, "fp16"))
    assert math.isnan(ff.div(inf, -inf, "fp16"))
    assert math.isnan(ff.sqrt(-1.0, "fp16"))
    assert math.isnan(ff.fma(0.0, inf, 1.0, "fp16"))
    assert math.isnan(ff.fma(inf, 1.0, -inf, "fp16"))
    assert math.isnan(ff.add(math.nan, 1.0, "fp8_e5m2"))


def test_division_by_zero_gives_signed_inf():
    assert ff.div(1.0, 0.0, "fp16") == math.inf
    assert ff.div(-1.0, 0.0, "fp16") == -math.inf
    assert ff.div(1.0, -0.0, "bf16") == -math.inf
    assert ff.div(-3.0, -0.0, "fp32") == math.inf


@pytest.mark.parametrize("mode", ["nearest_even", "nearest_away", "toward_zero", "up", "odd",
                                  "stochastic"])
def test_exact_zero_sums_are_plus_zero_except_down(mode):
    for a, b in ((1.0, -1.0), (0.0, -0.0), (-0.5, 0.5)):
        r = ff.add(a, b, "fp16", rounding=mode, rng=0)
        assert r == 0 and not _neg_zero(r), (a, b, mode)
        r = ff.add(a, b, "fp16", rounding="down")
        assert _neg_zero(r), (a, b)
    assert _neg_zero(ff.add(-0.0, -0.0, "fp16", rounding=mode, rng=0))
    assert not _neg_zero(ff.add(0.0, 0.0, "fp16", rounding="down"))
    assert not _neg_zero(ff.sub(1.0, 1.0, "bf16", rounding=mode, rng=0))
    assert _neg_zero(ff.sub(1.0, 1.0, "bf16", rounding="down"))
    # fma: (+0) + (-0) products and sums follow the same rule
    assert _neg_zero(ff.fma(-1.0, 0.0, -0.0, "fp16"))
    assert not _neg_zero(ff.fma(-1.0, 0.0, 0.0, "fp16"))
    assert _neg_zero(ff.fma(-1.0, 0.0, 0.0, "fp16", rounding="down"))
    assert not _neg_zero(ff.fma(2.0, 3.0, -6.0, "fp16"))
    assert _neg_zero(ff.fma(2.0, 3.0, -6.0, "fp16", rounding="down"))


def test_signed_zero_of_products_and_tiny_results():
    assert _neg_zero(ff.mul(-0.0, 5.0, "fp16"))
    assert _neg_zero(ff.mul(-(2.0 ** -20), 2.0 ** -20, "fp16"))  # underflow keeps the sign
    assert _neg_zero(ff.sqrt(-0.0, "bf16"))
    assert ff.mul(-(2.0 ** -20), 2.0 ** -20, "fp16", rounding="down") == -(2.0 ** -24)
    # formats without -0 give +0
    assert not _neg_zero(ff.mul(-0.0, 5.0, "fp8_e4m3fnuz"))


def test_formats_without_inf_follow_their_overflow_policy():
    assert math.isnan(ff.div(1.0, 0.0, "fp8_e4m3"))  # e4m3: overflow gives NaN
    assert ff.div(1.0, 0.0, "fp8_e4m3", overflow="saturate") == 448.0
    assert ff.div(-1.0, 0.0, "fp4_e2m1") == -6.0  # fp4 saturates
    assert ff.mul(448.0, 2.0, "fp8_e4m3", overflow="saturate") == 448.0
    assert math.isnan(ff.mul(448.0, 2.0, "fp8_e4m3"))
    assert ff.add(6.0, 6.0, "fp4_e2m1") == 6.0
    assert ff.add(6.0, 6.0, "fp4_e2m1", rounding="toward_zero") == 6.0
    assert ff.mul(60000.0, 2.0, "fp16") == math.inf
    assert ff.mul(60000.0, 2.0, "fp16", rounding="toward_zero") == 65504.0


def test_formats_without_nan_raise_on_invalid_operations():
    with pytest.raises(ValueError, match="fp4_e2m1 has no NaN"):
        ff.div(0.0, 0.0, "fp4_e2m1")
    with pytest.raises(ValueError, match="no NaN"):
        ff.sqrt(-1.0, "fp6_e2m3")
    with pytest.raises(ValueError, match="no NaN"):
        ff.add(math.nan, 1.0, "fp6_e3m2")
    with pytest.raises(ValueError, match="no NaN"):
        ff.div([1.0, 0.0], [1.0, 0.0], "fp4_e2m1")
    with pytest.raises(ValueError, match="no NaN"):
        ff.array([0.0, 1.0], "fp4_e2m1") / 0.0
    # valid operations are fine
    assert ff.div([1.0, 3.0], [2.0, 2.0], "fp4_e2m1").tolist() == [0.5, 1.5]
    with pytest.raises(ValueError, match="int8 has no NaN"):
        ff.div(0, 0, "int8")


# ----------------------------------------------------------------------------- options
def test_directed_modes_and_correct_rounding_of_div_sqrt():
    third_dn = ff.div(1.0, 3.0, "bf16", rounding="down")
    third_up = ff.div(1.0, 3.0, "bf16", rounding="up")
    assert third_dn < 1 / 3 < third_up
    assert ff.next_up(third_dn, "bf16") == third_up
    assert ff.sqrt(2.0, "fp16", rounding="down") ** 2 < 2 < ff.sqrt(2.0, "fp16", rounding="up") ** 2
    assert ff.sqrt(4.0, "fp16", rounding="up") == 2.0  # exact stays exact
    assert ff.div(1.0, 4.0, "fp8_e5m2", rounding="odd") == 0.25


def test_ftz_and_daz():
    tiny = 2.0 ** -20  # subnormal in fp16
    assert ff.mul(tiny, 1.0, "fp16") == tiny
    assert ff.mul(tiny, 1.0, "fp16", daz=True) == 0.0  # operand treated as zero
    assert ff.mul(2.0 ** -7, 2.0 ** -10, "fp16") == 2.0 ** -17
    assert ff.mul(2.0 ** -7, 2.0 ** -10, "fp16", ftz=True) == 0.0  # result flushed
    assert _neg_zero(ff.mul(-(2.0 ** -7), 2.0 ** -10, "fp16", ftz=True))
    assert ff.add(tiny, 1.0, "fp32", daz=True) == 1.0 + tiny  # normal in fp32


def test_stochastic_rounding():
    x = np.full(20000, 1.0)
    r = ff.add(x, 2.0 ** -12, "fp16", rounding="stochastic", rng=1)
    assert set(np.unique(r)) == {1.0, 1.0 + 2.0 ** -10}
    assert abs(np.mean(r) - (1 + 2.0 ** -12)) < 2.0 ** -10 * 0.02
    r2 = ff.add(x, 2.0 ** -12, "fp16", rounding="stochastic", rng=1)
    assert np.array_equal(r, r2)
    assert ff.add(1.0, 2.0 ** -12, "fp16", rounding="stochastic", rng=1, sr_bits=1) in (1.0, 1.0009765625)
    with pytest.raises(ValueError):
        ff.add(1.0, 1.0, "fp16", sr_bits=3)


def test_integer_formats():
    assert ff.add(100, 100, "int8") == 127.0
    assert ff.add(100, 100, "int8", overflow="wrap") == -56.0
    assert ff.neg(-128, "int8") == 127.0
    assert ff.neg(-128, "int8", overflow="wrap") == -128.0
    assert ff.mul(-7, 9, "int8") == -63.0
    assert ff.div(7, 2, "int8") == 4.0  # 3.5 to nearest even
    assert ff.div(7, 2, "int8", rounding="toward_zero") == 3.0


def test_neg_abs_minimum_maximum():
    assert ff.neg(0.1, "bf16") == -ff.cast(0.1, "bf16")
    assert ff.abs(-0.1, "fp16") == ff.cast(0.1, "fp16")
    assert not _neg_zero(ff.abs(-0.0, "fp16"))
    assert _neg_zero(ff.minimum(0.0, -0.0, "fp16")) and _neg_zero(ff.minimum(-0.0, 0.0, "fp16"))
    assert not _neg_zero(ff.maximum(0.0, -0.0, "fp16"))
    assert not _neg_zero(ff.maximum(-0.0, 0.0, "fp16"))
    assert math.isnan(ff.minimum(math.nan, 1.0, "fp16")) and math.isnan(ff.maximum(1.0, math.nan, "fp16"))
    assert ff.minimum([1.0, 5.0], [3.0, 2.0], "bf16").tolist() == [1.0, 2.0]
    assert ff.maximum(1000.0, 1e9, "fp16") == math.inf  # operands cast first
    assert math.isnan(ff.neg(2.0, "e8m0"))  # no negative values in an unsigned format


# ----------------------------------------------------------------------------- FPArray
def test_fparray_basics():
    x = ff.array([0.1, 0.2, 0.3], "bf16")
    assert x.fmt.name == "bf16" and x.shape == (3,) and x.ndim == 1 and len(x) == 3
    assert np.array_equal(x.values, ff.cast([0.1, 0.2, 0.3], "bf16"))
    assert np.array_equal(x.codes, ff.encode([0.1, 0.2, 0.3], "bf16"))
    assert repr(x) == "FPArray([0.10009765625, 0.2001953125, 0.30078125], fmt='bf16')"
    assert repr(ff.array([1.0], "fp16", rounding="up")) == \
        "FPArray([1.0], fmt='fp16', rounding='up')"
    v = x.values
    v[0] = 99  # .values is a copy
    assert x.values[0] != 99
    assert isinstance(x[0], ff.FPArray) and float(x[0]) == x.values[0]
    assert x[1:].values.tolist() == x.values[1:].tolist()
    x[0] = 0.5000001  # setitem casts into the format
    assert x.values[0] == 0.5
    assert np.asarray(x).dtype == np.float64
    assert [float(e) for e in x] == x.values.tolist()
    assert x.tolist() == x.values.tolist()
    assert ff.scalar(0.1, "fp16").codes == ff.encode(0.1, "fp16")
    with pytest.raises(TypeError):
        ff.scalar([1.0, 2.0], "fp16")


def test_fparray_arithmetic_matches_functions():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(50), rng.standard_normal(50)
    x, y = ff.array(a, "fp16"), ff.array(b, "fp16")
    ca, cb = ff.cast(a, "fp16"), ff.cast(b, "fp16")
    assert np.array_equal((x + y).values, ff.add(ca, cb, "fp16"))
    assert np.array_equal((x - y).values, ff.sub(ca, cb, "fp16"))
    assert np.array_equal((x * y).values, ff.mul(ca, cb, "fp16"))
    assert np.array_equal((x / y).values, ff.div(ca, cb, "fp16"))
    assert np.array_equal((x ** 2).values, ff.mul(ca, ca, "fp16"))
    assert np.array_equal(abs(x).values, np.abs(ca)) and np.array_equal((-x).values, -ca)
    assert np.array_equal((+x).values, ca)
    assert np.array_equal((abs(x) ** 0.5).values, ff.sqrt(np.abs(ca), "fp16"))
    assert np.array_equal((x ** -1).values, ff.div(1.0, ca, "fp16"))
    with pytest.raises(ValueError, match=r"\*\*"):
        x ** 3
    # scalars (Python and numpy) and arrays mix in, cast first, on either side
    assert np.array_equal((1 - x).values, ff.sub(1.0, ca, "fp16"))
    assert np.array_equal((2 / x).values, ff.div(2.0, ca, "fp16"))
    assert np.array_equal((np.float64(0.1) + x).values, ff.add(0.1, ca, "fp16"))
    assert np.array_equal((b + x).values, ff.add(cb, ca, "fp16"))
    assert isinstance(b + x, ff.FPArray) and isinstance(np.float32(2) * x, ff.FPArray)
    # the options travel with the array
    u = ff.array([1.0], "fp16", rounding="up") + 2.0 ** -12
    assert u.values[0] == 1.0 + 2.0 ** -10


def test_fparray_comparisons_cast_the_other_operand():
    x = ff.array([0.1, 0.5], "bf16")
    assert (x == 0.1).tolist() == [True, False]  # 0.1 becomes bf16's 0.1 first
    assert (x < 0.3).tolist() == [True, False]
    assert (x >= x).all() and not (x != x).any()
    assert (ff.scalar(1.0, "fp16") == 1.0001) is True
    assert (ff.scalar(1.0, "fp32") == 1.0001) is False


def test_fparray_promotion_like_pytorch():
    h = ff.array([1.0 + 2 ** -10], "fp16")
    b = ff.array([1.0 + 2 ** -7], "bf16")
    s = h + b
    assert s.fmt.name == "fp32" and s.values[0] == 2 + 2 ** -10 + 2 ** -7
    assert (b + h).fmt.name == "fp32"
    assert (h + ff.array([1.0], "fp32")).fmt.name == "fp32"
    assert (ff.array([1.0], "fp8_e4m3") * h).fmt.name == "fp16"
    table = {("fp16", "bf16"): "fp32", ("bf16", "fp32"): "fp32", ("fp32", "fp64"): "fp64",
             ("fp8_e4m3", "fp8_e5m2"): "fp16", ("fp8_e5m2", "bf16"): "bf16",
             ("tf32", "fp16"): "tf32", ("tf32", "fp32"): "fp32", ("fp4_e2m1", "fp8_e4m3"): "fp8_e4m3",
             ("int8", "fp16"): "fp16", ("int8", "uint8"): "fp16", ("int4", "int8"): "int8",
             ("fp16", "fp16"): "fp16"}
    for (p, q), want in table.items():
        assert promote_formats(p, q).name == want, (p, q)
        assert promote_formats(q, p).name == want, (q, p)


def test_fparray_reductions_and_matmul():
    x = ff.array([1.0] + [2.0 ** -11] * 8, "fp16")
    assert float(x.sum()) == 1.0  # every partial sum rounded to fp16
    s32 = x.sum(acc_fmt="fp32")
    assert float(s32) == 1.00390625 and s32.fmt.name == "fp32"
    assert float(x.sum(order="kahan")) == 1.00390625
    A = ff.array(np.full((2, 3), 0.1), "bf16")
    B = ff.array(np.ones((3, 2)), "bf16")
    C = A @ B
    assert C.fmt.name == "bf16"
    want = ff.cast(ff.matmul(A.values, B.values, "bf16", acc_fmt="fp32"), "bf16")
    assert np.array_equal(C.values, want)
    assert np.array_equal((A @ np.ones((3, 2))).values, want)
    m = A.matmul(B, model="h100")
    assert m.fmt.name == "fp32"
    assert A.T.shape == (3, 2)


def test_fparray_explain():
    x = ff.scalar(0.1, "bf16")
    if importlib.util.find_spec("floatfmt.teach.explain.entry") is None:
        with pytest.raises(NotImplementedError):
            x.explain()
    else:
        e = x.explain()
        assert "0.10009765625" in str(e)


def test_fparray_astype():
    x = ff.array([0.1], "fp32")
    y = x.astype("bf16")
    assert y.fmt.name == "bf16" and y.values[0] == ff.cast(0.1, "bf16")
    z = x.astype("bf16", rounding="up")
    assert z.values[0] >= x.values[0]


# ----------------------------------------------------------------------------- large arrays
@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3", "fp16", "fp4_e2m1", "fp64"])
def test_large_arrays_are_processed_in_slices_with_the_same_results(fmt):
    """Arrays above two slices go through the sliced path (and skip the cast of operands
    already in the format): results equal the one-shot path on small pieces."""
    from floatfmt.arith import ops_fast as ops
    rng = np.random.default_rng(9)
    n = 3 * ops._OP_CHUNK + 123
    raw = [np.ldexp(rng.uniform(-2, 2, n), rng.integers(-12, 12, n)) for _ in range(3)]
    f = ff.get_format(fmt)
    inf = [ff.cast(r, fmt, overflow="saturate") for r in raw]  # already in the format
    inf[0][::97] = 0.0
    mixed = [inf[0], raw[1], inf[2]]  # the raw operand needs the cast
    piece = 20000  # below the slicing threshold: the one-shot path
    for mode in ("nearest_even",) if fmt == "fp64" else ("nearest_even", "toward_zero", "odd"):
        for args in (inf, mixed):
            for name, k in (("add", 2), ("sub", 2), ("mul", 2), ("div", 2), ("fma", 3), ("sqrt", 1)):
                a = [np.abs(x) for x in args[:k]] if name == "sqrt" else args[:k]
                if name == "div" and not f.has_nan:  # 0/0 would raise
                    a = [a[0], np.where(ff.cast(a[1], fmt, mode) == 0, 1.0, a[1])]
                big = getattr(ff, name)(*a, fmt, rounding=mode)
                small = np.concatenate([getattr(ff, name)(*[x[i:i + piece] for x in a], fmt,
                                                          rounding=mode)
                                        for i in range(0, n, piece)])
                same = (big == small) | (np.isnan(big) & np.isnan(small))
                assert same.all() and np.array_equal(np.signbit(big), np.signbit(small)), (name, mode)
    # an FPArray operand (known to be in the format) gives the same as its values
    x = ff.array(inf[0], fmt)
    assert np.array_equal((x + inf[1]).values, ff.add(inf[0], inf[1], fmt), equal_nan=True)


def test_in_format_test_agrees_with_cast():
    from floatfmt.arith.ops_fast import _in_format
    rng = np.random.default_rng(10)
    for name in ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1", "tf32", "fp32",
                 "fp8_e4m3fnuz"):
        f = ff.get_format(name)
        x = np.ldexp(rng.uniform(-2, 2, 3000), rng.integers(-30, 30, 3000))
        x[::7], x[::11] = 0.0, -0.0
        with np.errstate(invalid="ignore"):
            c = ff.cast(x, f, overflow="saturate")
        for v in list(x[:400]) + list(c[:400]) + [np.inf, np.nan, f.max, f.smallest_subnormal]:
            cv = ff.cast(v, f)  # the test answers True exactly for finite values of the format
            want = bool(cv == v and np.signbit(cv) == np.signbit(v) and np.isfinite(v))
            assert _in_format(np.array([v]), f) == want, (name, v)
        assert _in_format(np.where(np.isnan(c), 0.0, c), f)


_FAST_FORMATS = ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "tf32", "fp32", "fp8_e4m3fnuz"]
_FAST_MODES = DET_MODES


def _fast_path_operands(f, seed):
    """Operand arrays in (and a few out of) format f, over several chunks, one partial."""
    from floatfmt.arith import ops_fast as ops
    rng = np.random.default_rng(seed)
    n = 2 * ops._FAST_CHUNK + 77

    def draw(lo, hi):
        return ff.cast(np.ldexp(rng.uniform(-2, 2, n), rng.integers(lo, hi, n)), f,
                       overflow="saturate")
    narrow = [draw(-4, 4) for _ in range(3)]
    wide = [draw(f.emin - f.mbits, f.emax) for _ in range(3)]  # sums need TwoSum, products
    tiny = [ff.cast(rng.uniform(-4, 4, n) * f.smallest_normal, f) for _ in range(3)]  # underflow
    big = [draw(f.emax // 2, f.emax) for _ in range(3)]  # products overflow the format
    narrow[0][::13], narrow[1][::17], tiny[0][::5], big[2][::3] = 0.0, -0.0, -0.0, -0.0
    off = narrow[0].copy()
    off[n // 2] = f.smallest_subnormal * 1.5  # off the subnormal grid: this chunk needs the cast
    off[n - 3] = 1.0 + 2.0 ** -(f.mbits + 1)  # one significand bit too many
    special = narrow[1].copy()
    special[[7, n - 2 * ops._FAST_CHUNK // 3]] = [np.inf, np.nan] if f.inf else [np.nan, np.nan]
    # c = -(a*b rounded): exact zeros and tiny residuals in fma
    cancel = -ff.mul(narrow[0], narrow[1], f, overflow="saturate")
    # (2 - ulp) + 2**-22 * (1 + 2**-7 + 2**-mbits): a carry and a low bit at 2**(-22 - mbits),
    # 54 bits in e8m30, where float64 would make the sum a tie of the format
    y = ff.cast(np.full(n, 2.0 ** -22 * (1 + 2.0 ** -7 + 2.0 ** -f.mbits)), f)
    carry = [np.full(n, 2.0 - 2.0 ** -f.mbits), y, np.full(n, 1.0)]
    return [narrow, wide, tiny, big, [off, narrow[1], narrow[2]], [narrow[0], special, narrow[2]],
            [narrow[0], narrow[1], special], [narrow[0], narrow[0], narrow[0]],
            [narrow[0], narrow[1], cancel], [tiny[0], big[1], narrow[2]],
            [wide[0], narrow[1], tiny[2]], carry]


def _check_fast_path(fmt, names, seed):
    """Each op in ``names`` on float64 arrays (and on FPArrays) equals, bit for bit, the
    general path (cast, exact result with remainder class, round) applied per chunk."""
    from floatfmt.arith import ops_fast as ops
    f = ff.get_format(fmt)
    impls = {"add": ops._add_impl, "sub": ops._sub_impl, "mul": ops._mul_impl,
             "fma": ops._fma_impl}
    sets = _fast_path_operands(f, seed)
    for k, args in enumerate(sets):
        for mode in _FAST_MODES:
            ctx = ops.make_ctx(f, mode, "saturate" if not f.inf else None, False, False, None)
            for name in names:
                a = args[:3 if name == "fma" else 2]
                c = ops._FAST_CHUNK
                want = np.concatenate([impls[name](ctx, *[x[i:i + c] for x in a])[0]
                                       for i in range(0, a[0].size, c)])
                got = getattr(ff, name)(*a, f, rounding=mode, overflow=ctx.overflow)
                assert np.array_equal(got, want, equal_nan=True), (fmt, k, mode, name)
                assert np.array_equal(np.signbit(got), np.signbit(want)), (fmt, k, mode, name)
                if k in (0, 1, 8):  # FPArray operands: known to be in the format
                    fa = [ff.array(x, f) for x in a]
                    got = getattr(ff, name)(*fa, f, rounding=mode, overflow=ctx.overflow)
                    assert np.array_equal(got, want, equal_nan=True), (fmt, k, mode, name)
                    assert np.array_equal(np.signbit(got), np.signbit(want)), (fmt, k, mode)
    return sets


@pytest.mark.parametrize("fmt", _FAST_FORMATS + ["e8m30"])
def test_add_fast_path_equals_general_path(fmt, monkeypatch):
    """ff.add / ff.sub on float64 arrays take a fast path (no TwoSum when the chunk's exponent
    span makes every float64 sum exact, bit-pattern range checks instead of a cast); it must
    give exactly what the general path (cast, TwoSum + remainder class) gives, per chunk."""
    from floatfmt.arith import ops_fast as ops
    # chunks of 2**15 (2**11 below): several per operand, some fast and some not, and
    # those retried in pieces of a quarter
    monkeypatch.setattr(ops, "_FAST_CHUNK", 1 << 15)
    monkeypatch.setattr(ops, "_SUB_CHUNK", 1 << 13)
    if fmt == "e8m30":  # sums can need 54 bits with a carry
        fmt = Format(fmt, ebits=8, mbits=30)
        monkeypatch.setattr(ops, "_OP_CHUNK", 2048)
        monkeypatch.setattr(ops, "_FAST_CHUNK", 2048)
        monkeypatch.setattr(ops, "_SUB_CHUNK", 512)
    f = ff.get_format(fmt)
    sets = _check_fast_path(fmt, ("add", "sub"), 11)
    # the range test rejects exactly the chunks that are not in the format
    sc = ops._Scratch(4096)
    narrow, wide, tiny, _, (off, _, _), (_, special, _) = sets[:6]
    for v in (narrow[0][:4096], wide[0][:4096], tiny[0][:4096], off[4096:8192], special[:4096]):
        if ops._fast_ok(f):
            for tight in (True, False):  # (not tight: the format's bounds, for exact ops)
                assert ((ops._chunk_range(v, f, sc, True, tight) is not None)
                        == ops._in_format(v, f)), tight


@pytest.mark.parametrize("fmt", _FAST_FORMATS + [
    "e10m7_bias300",  # products can overflow/underflow float64: not exact from the bounds
    "e8m30",          # 2 * 31 significant bits: products never exact in float64
])
def test_mul_fma_fast_path_equals_general_path(fmt, monkeypatch):
    """ff.mul / ff.fma take the same fast path: the float64 product of two values of fmt
    is exact when 2 * (mbits + 1) <= 53 and the chunk's exponent bounds keep it inside the
    float64 range; fma then needs the exponent-span test of add.  Bit-identical to the
    general path over formats, modes, zeros, subnormals, Inf/NaN, off-grid operands and
    products that underflow or overflow the format."""
    from floatfmt.arith import ops_fast as ops
    monkeypatch.setattr(ops, "_FAST_CHUNK", 1 << 15)  # several chunks per operand
    monkeypatch.setattr(ops, "_SUB_CHUNK", 1 << 13)  # and pieces of those
    if fmt in ("e10m7_bias300", "e8m30"):
        fmt = (Format(fmt, ebits=10, mbits=7, bias=300) if fmt == "e10m7_bias300"
               else Format(fmt, ebits=8, mbits=30))
        monkeypatch.setattr(ops, "_OP_CHUNK", 2048)  # small chunks: their slow paths are slow
        monkeypatch.setattr(ops, "_FAST_CHUNK", 2048)
        monkeypatch.setattr(ops, "_SUB_CHUNK", 512)
    _check_fast_path(fmt, ("mul", "fma"), 12)


def test_fast_path_bounds():
    """The chunk bounds and the exactness rules the fast path relies on."""
    from floatfmt.arith import ops_fast as ops
    f = ff.get_format("bf16")
    sc = ops._Scratch(8)
    e, g = ops._chunk_range(np.array([0.0, -3.0, 0.25, -0.0]), f, sc, True)
    assert (e, g) == (2, -2 - f.mbits)  # |v| < 4, multiples of 2**-9
    assert ops._chunk_range(np.array([0.0, -0.0]), f, sc, True) == ops._ZEROS
    assert ops._chunk_range(np.array([1.0, np.inf]), f, sc, False) is None  # even if known
    assert ops._chunk_range(np.array([1.0 + 2**-9]), f, sc, True) is None
    assert ops._chunk_range(np.array([1.0 + 2**-9]), f, sc, False) is not None  # trusted
    assert ops._fits(53, 0) and not ops._fits(54, 0) and not ops._fits(1025, 990)
    assert not ops._fits(-1000, -1075)
    b = (1, -f.mbits)  # the values 1.0 .. 2 - ulp
    assert ops._product_exact(b, b, f) and ops._product_exact(b, ops._ZEROS, f)
    assert not ops._product_exact(b, b, Format("e8m30", ebits=8, mbits=30))
    assert not ops._product_exact((600, 500), (600, 500), f)  # past the float64 range


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "minimum", "maximum"])
def test_shape_mismatch_names_the_operation_and_shapes(op):
    with pytest.raises(ValueError, match=rf"^{op}: operand shapes \(2,\) and \(3,\) do not broadcast"):
        getattr(ff, op)([1.0, 2.0], [1.0, 2.0, 3.0], "fp16")
    with pytest.raises(ValueError, match=r"^fma: operand shapes"):
        ff.fma([1.0, 2.0], [1.0, 2.0], [1.0, 2.0, 3.0], "bf16")
