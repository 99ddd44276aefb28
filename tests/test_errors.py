"""Every error path of the core: the right exception type, a message that teaches (valid
names, the closest match, the offending type), raised from floatfmt itself rather than
from deep inside numpy."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import floatfmt as ff


def raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    frames = traceback.extract_tb(info.value.__traceback__)
    # raised by floatfmt's own code, not by numpy / Python internals underneath
    assert "/floatfmt/" in frames[-1].filename.replace("\\", "/"), frames[-1].filename
    assert len(frames) <= 10
    return info.value


@pytest.mark.parametrize("bad, close", [("bf61", "bf16"), ("fp8_e4m4", "fp8_e4m3"),
                                        ("flaot16", "fp16"), ("e4m3fnu", "fp8_e4m3"),  # aliases suggested as their listed name
                                        ("int9", "int8")])
def test_unknown_format_lists_valid_names_and_closest(bad, close):
    err = raised(lambda: ff.cast(1.0, bad))
    assert isinstance(err, ValueError)
    msg = str(err)
    assert repr(bad) in msg and repr(close) in msg
    for name in ("fp16", "bf16", "fp8_e4m3", "fp4_e2m1", "int8"):
        assert name in msg


@pytest.mark.parametrize("fn", [ff.encode, ff.decode, ff.info, ff.get_format, ff.values,
                                ff.classify, ff.next_up, ff.ulp])
def test_every_entry_point_rejects_unknown_formats(fn):
    args = (1,) if fn in (ff.encode, ff.decode, ff.classify, ff.next_up, ff.ulp) else ()
    err = raised(lambda: fn(*args, "fp7"))
    assert isinstance(err, ValueError) and "fp16" in str(err)


def test_unknown_mode_lists_valid_ones():
    err = raised(lambda: ff.cast(1.0, "bf16", rounding="nearest_eve"))
    assert isinstance(err, ValueError)
    msg = str(err)
    assert "'nearest_even'" in msg
    for m in ff.MODES:
        assert m in msg
    err = raised(lambda: ff.encode(1.0, "bf16", "stochastik"))
    assert "'stochastic'" in str(err)


def test_unknown_overflow_lists_valid_ones():
    err = raised(lambda: ff.cast(1.0, "bf16", overflow="saturat"))
    assert isinstance(err, ValueError)
    assert "'saturate'" in str(err) and "inf" in str(err) and "nan" in str(err)


@pytest.mark.parametrize("fmt, pol, hint", [("fp8_e4m3", "inf", "saturate"),
                                            ("fp8_e4m3fnuz", "inf", "nan"),
                                            ("fp4_e2m1", "inf", "saturate"),
                                            ("fp6_e2m3", "nan", "saturate"),
                                            ("e8m0", "inf", "saturate"),
                                            ("fp16", "wrap", "integer"),
                                            ("e3m0", "nan", "saturate")])
def test_overflow_policy_the_format_cannot_do(fmt, pol, hint):
    err = raised(lambda: ff.cast(1.0, fmt, overflow=pol))
    assert isinstance(err, ValueError)
    assert hint in str(err)


@pytest.mark.parametrize("x, what", [
    (1 + 2j, "complex"), (np.complex64(1), "complex"), (np.array([1j, 2]), "complex"),
    ([1, 2j], "complex"), ("abc", "'abc'"), ("1.2.3", "1.2.3"), (["1", "x"], "'x'"),
    (np.array(["0.5", "half"]), "half"), (np.array([object(), 1], dtype=object), "object"),
    (None, "NoneType"), ({1: 2}, "dict"), (b"1.5", "bytes"), ([1, [2, 3]], "rectangular"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime64"), ({1.0}, "set"),
])
def test_non_numbers_are_type_errors(x, what):
    for fn in (lambda: ff.cast(x, "bf16"), lambda: ff.encode(x, "fp8_e4m3")):
        err = raised(fn)
        assert isinstance(err, TypeError), type(err)
        assert what in str(err), str(err)


def test_wrong_option_types():
    assert isinstance(raised(lambda: ff.cast(1.0, "bf16", rounding=3)), TypeError)
    assert isinstance(raised(lambda: ff.cast(1.0, "bf16", overflow=1)), TypeError)
    assert isinstance(raised(lambda: ff.cast(1.0, None)), TypeError)
    assert isinstance(raised(lambda: ff.get_format(3.5)), TypeError)
    assert isinstance(raised(lambda: ff.cast(1.0, "bf16", "sr", rng="x")), TypeError)
    assert isinstance(raised(lambda: ff.register("fp16")), TypeError)


@pytest.mark.parametrize("codes, fmt", [(256, "fp8_e4m3"), (-1, "fp8_e4m3"), ([1, 16], "fp4_e2m1"),
                                        ([64], "fp6_e2m3"), (2**19, "tf32"), (2**16, "fp16"),
                                        (np.array([0, 300], np.uint16), "e8m0"), (16, "int4")])
def test_decode_codes_that_do_not_fit(codes, fmt):
    err = raised(lambda: ff.decode(codes, fmt))
    assert isinstance(err, ValueError)
    assert "does not fit" in str(err) and fmt in str(err)


@pytest.mark.parametrize("codes", [1.0, np.array([1.5]), [True], "0x3c00"])
def test_decode_needs_integer_codes(codes):
    assert isinstance(raised(lambda: ff.decode(codes, "fp16")), TypeError)


@pytest.mark.parametrize("fmt", ["fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "int8", "uint4", "e3m0"])
def test_encode_nan_into_a_format_without_nan(fmt):
    for x in (float("nan"), [1.0, float("nan")]):
        err = raised(lambda: ff.encode(x, fmt))
        assert isinstance(err, ValueError) and "NaN" in str(err)


def test_encode_inf_overflow_into_fp4_saturates_not_raises():
    assert ff.encode(float("inf"), "fp4_e2m1") == 0b0111
    assert ff.encode(-1e9, "fp6_e3m2") == 0b111111


def test_other_value_errors():
    assert isinstance(raised(lambda: ff.values("fp32")), ValueError)
    assert isinstance(raised(lambda: ff.encode(1.0, "bf16", container="fp16")), ValueError)
    assert isinstance(raised(lambda: ff.cast(1.0, "e1m3")), ValueError)
    assert isinstance(raised(lambda: ff.cast(1.0, "e12m3")), ValueError)
    assert isinstance(raised(lambda: ff.cast(1.0, "e4m0fn")), ValueError)
    assert isinstance(raised(lambda: ff.cast(1.0, "bf16", "nearest_even", sr_bits=3)), ValueError)
    assert isinstance(raised(lambda: ff.cast(1.0, "bf16", "sr", rng=0, sr_bits=60)), ValueError)


@pytest.mark.parametrize("kwargs", [dict(ebits=0, mbits=3), dict(ebits=12, mbits=3),
                                    dict(ebits=4, mbits=53), dict(ebits=4, mbits=3, kind="fixed"),
                                    dict(ebits=4, mbits=3, nan="sometimes"),
                                    dict(ebits=4, mbits=3, bits=9),
                                    # (inf with nan="all_ones" / "negative_zero" is P3109's
                                    # layout now; Inf without any NaN code is still refused)
                                    dict(ebits=4, mbits=3, inf=True, nan="none"),
                                    dict(ebits=4, mbits=3, rules="p3108"),
                                    dict(kind="int", bits=0), dict(kind="int", bits=64)])
def test_bad_format_definitions(kwargs):
    err = raised(lambda: ff.Format("bad", **kwargs))
    assert isinstance(err, ValueError)


def test_unknown_flag_names_list_valid_ones():
    def open_block():
        with ff.flags(raise_on=("overflw",)):
            pass
    err = raised(open_block)
    assert isinstance(err, ValueError)
    msg = str(err)
    assert "'overflw'" in msg and "'overflow'" in msg and "divide_by_zero" in msg
    with ff.flags() as fl:
        pass
    err = raised(lambda: fl.count("inexakt"))
    assert isinstance(err, ValueError) and "'inexact'" in str(err)


# ---------------------------------------------------------------- issue 27 item 9: small API edges
def test_fp8_suggests_the_fp8_formats_and_only_listed_names():
    import floatfmt as ff
    with pytest.raises(ValueError) as e:
        ff.get_format("fp8")
    msg = str(e.value)
    hint = msg.split("Did you mean ")[1].split("?")[0]
    named = [h.strip(" '") for h in hint.split(",")]
    assert named and all(n.startswith("fp8_") for n in named), msg
    listed = msg.split("Valid formats: ")[1].split(" (or")[0].split(", ")
    for bad in ("fp8", "fp8_e4m3f", "bf61", "float6", "e4m3fnz", "binary3", "half_", "fp16_"):
        with pytest.raises(ValueError) as e:
            ff.get_format(bad)
        m = str(e.value)
        if "Did you mean " in m:
            hint = [h.strip(" '") for h in m.split("Did you mean ")[1].split("?")[0].split(",")]
            assert set(hint) <= set(listed), (bad, hint)


def test_rng_without_stochastic_rounding_is_refused():
    import floatfmt as ff
    assert ff.cast(0.1, "bf16", "stochastic", rng=1) in (0.099609375, 0.10009765625)
    for call in (lambda: ff.cast(0.1, "bf16", rng=1), lambda: ff.cast([0.1], "bf16", "rtz", rng=1),
                 lambda: ff.explain(0.1, "bf16", rng=np.random.default_rng(0))):
        with pytest.raises(ValueError, match="stochastic"):
            call()


class _FakeSeries:
    """Duck-typed like pandas.Series (pandas is not a dependency of floatfmt)."""

    def __init__(self, values, index=None, name=None):
        self._v = np.asarray(values)
        self.index = list(range(len(self._v))) if index is None else index
        self.name = name

    def to_numpy(self):
        return self._v

    def __len__(self):
        return len(self._v)


_FakeSeries.__module__ = "pandas.core.series"


def test_pandas_series_keeps_its_index_and_explain_says_one_value():
    import floatfmt as ff
    s = _FakeSeries([0.1, 70000.0, 1.0], index=["a", "b", "c"], name="w")
    r = ff.cast(s, "fp16")
    assert type(r) is _FakeSeries and r.index == ["a", "b", "c"] and r.name == "w"
    assert r.to_numpy().tolist() == [float(np.float16(0.1)), np.inf, 1.0]
    with pytest.raises(TypeError, match="pandas _FakeSeries of 3 values.*iloc"):
        ff.explain(s, "fp16")


def test_real_pandas_series_when_installed():
    pd = pytest.importorskip("pandas")  # the fake-object test above proves the rule without pandas
    import floatfmt as ff
    s = pd.Series([0.1, 2.0], index=[10, 20], name="x", dtype="float32")
    r = ff.cast(s, "bf16")
    assert isinstance(r, pd.Series) and list(r.index) == [10, 20] and r.name == "x"
    assert r.dtype == np.float32
