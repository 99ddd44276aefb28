"""The registry: every row of the reference table, aliases, dtypes, custom formats."""

from __future__ import annotations

import dataclasses
import importlib
import re
from fractions import Fraction
from pathlib import Path

import ml_dtypes as md
import numpy as np
import pytest

import floatfmt as ff
formats_mod = importlib.import_module("floatfmt.core.formats")  # the module, not ff.formats()

# The reference table (shared/reference/formats.md), transcribed:
# name: (bits, exp, man, bias, inf, -0, max, min normal, min subnormal or None)
P = Fraction(2)
TABLE = {
    "fp64": (64, 11, 52, 1023, True, True, (2 - P**-52) * P**1023, P**-1022, P**-1074),
    "fp32": (32, 8, 23, 127, True, True, (2 - P**-23) * P**127, P**-126, P**-149),
    "tf32": (19, 8, 10, 127, True, True, (2 - P**-10) * P**127, P**-126, P**-136),
    "fp16": (16, 5, 10, 15, True, True, Fraction(65504), P**-14, P**-24),
    "bf16": (16, 8, 7, 127, True, True, (2 - P**-7) * P**127, P**-126, P**-133),
    "fp8_e4m3": (8, 4, 3, 7, False, True, Fraction(448), P**-6, P**-9),
    "fp8_e5m2": (8, 5, 2, 15, True, True, Fraction(57344), P**-14, P**-16),
    "fp8_e4m3fnuz": (8, 4, 3, 8, False, False, Fraction(240), P**-7, P**-10),
    "fp8_e5m2fnuz": (8, 5, 2, 16, False, False, Fraction(57344), P**-15, P**-17),
    "fp8_e3m4": (8, 3, 4, 3, True, True, Fraction(31, 2), P**-2, P**-6),
    "fp6_e2m3": (6, 2, 3, 1, False, True, Fraction(15, 2), Fraction(1), Fraction(1, 8)),
    "fp6_e3m2": (6, 3, 2, 3, False, True, Fraction(28), Fraction(1, 4), Fraction(1, 16)),
    "fp4_e2m1": (4, 2, 1, 1, False, True, Fraction(6), Fraction(1), Fraction(1, 2)),
    "e8m0": (8, 8, 0, 127, False, False, P**127, P**-127, None),
}
INTS = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15)}
REQUIRED = list(TABLE) + list(INTS)
REFERENCE_MD = Path(__file__).resolve().parents[2] / "shared" / "reference" / "formats.md"


def test_registry_has_every_required_format():
    names = ff.formats()
    assert set(REQUIRED) <= set(names)
    assert names[:5] == ["fp64", "fp32", "tf32", "fp16", "bf16"]
    assert len(names) == len(set(names))
    assert all(ff.get_format(n).name == n for n in names)


@pytest.mark.parametrize("name", list(TABLE))
def test_rows_of_the_reference_table(name):
    bits, e, m, bias, inf, negz, fmax, fmin, fsub = TABLE[name]
    f = ff.get_format(name)
    assert (f.bits, f.ebits, f.mbits, f.bias) == (bits, e, m, bias)
    assert (f.inf, f.negative_zero) == (inf, negz)
    assert f.max_exact == fmax and f.max == float(fmax)
    assert f.smallest_normal == float(fmin)
    assert f.smallest_subnormal == float(fsub if fsub is not None else fmin)
    # the value formula of the module docstring gives the same extremes
    top = ff.decode(f.max_code, f)
    assert top == float(fmax)


@pytest.mark.parametrize("name", list(INTS))
def test_integer_rows(name):
    lo, hi = INTS[name]
    f = ff.get_format(name)
    assert f.kind == "int" and (f.min, f.max) == (lo, hi)
    assert f.bits == (8 if "8" in name else 4)


def _md_value(text: str):
    text = text.strip().replace("^", "**")
    if text == "none":
        return None
    return Fraction(eval(text, {"__builtins__": {}}))  # dyadic, exact in float64


def test_table_matches_the_shared_reference_file():
    """The transcription above is the shared reference (checked when the file is present,
    as it is in the project workspace)."""
    if not REFERENCE_MD.exists():
        return  # the transcription above stands on its own
    rows = [r for r in REFERENCE_MD.read_text().splitlines() if r.startswith("| ") and "---" not in r]
    seen = set()
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        if cells[0] not in TABLE:
            continue
        seen.add(cells[0])
        bits, e, m, bias, inf, negz, fmax, fmin, fsub = TABLE[cells[0]]
        assert int(re.match(r"\d+", cells[2])[0]) == bits
        assert (int(cells[3]), int(cells[4]), int(cells[5])) == (e, m, bias)
        assert (cells[6] == "yes") == inf
        assert _md_value(cells[9]) == fmax and _md_value(cells[10]) == fmin
        assert _md_value(cells[11]) == fsub
    assert seen == set(TABLE)


@pytest.mark.parametrize("alias, name", [
    ("binary64", "fp64"), ("float64", "fp64"), ("double", "fp64"), ("binary32", "fp32"),
    ("float32", "fp32"), ("single", "fp32"), ("TensorFloat-32", "tf32"), ("tensorfloat32", "tf32"),
    ("binary16", "fp16"), ("half", "fp16"), ("float16", "fp16"), ("FP16", "fp16"),
    ("bfloat16", "bf16"), ("BF16", "bf16"), ("e4m3", "fp8_e4m3"), ("E4M3", "fp8_e4m3"),
    ("float8_e4m3fn", "fp8_e4m3"), ("e4m3fn", "fp8_e4m3"), ("e5m2", "fp8_e5m2"),
    ("float8_e5m2", "fp8_e5m2"), ("float8_e4m3fnuz", "fp8_e4m3fnuz"), ("e4m3fnuz", "fp8_e4m3fnuz"),
    ("float8_e5m2fnuz", "fp8_e5m2fnuz"), ("e5m2fnuz", "fp8_e5m2fnuz"), ("float8_e3m4", "fp8_e3m4"),
    ("e3m4", "fp8_e3m4"), ("float8_e4m3", "fp8_e4m3_ieee"), ("e2m3", "fp6_e2m3"),
    ("float6_e2m3fn", "fp6_e2m3"), ("e3m2", "fp6_e3m2"), ("float6_e3m2fn", "fp6_e3m2"),
    ("e2m1", "fp4_e2m1"), ("float4_e2m1fn", "fp4_e2m1"), ("fp4", "fp4_e2m1"),
    ("float8_e8m0fnu", "e8m0"), ("e8m0fnu", "e8m0"), (" bf16 ", "bf16"),
    ("e5m10", "fp16"), ("e8m7", "bf16"), ("e8m23", "fp32"), ("e11m52", "fp64"), ("e8m10", "tf32"),
    ("fp8_e5m2", "fp8_e5m2"), ("fp16_e5m10", "fp16"),
])
def test_aliases(alias, name):
    assert ff.get_format(alias) is ff.get_format(name)


@pytest.mark.parametrize("dtype, name", [
    (np.float16, "fp16"), (np.float32, "fp32"), (np.float64, "fp64"), (np.dtype("float16"), "fp16"),
    (np.dtype(">f4"), "fp32"), (md.bfloat16, "bf16"), (md.float8_e4m3fn, "fp8_e4m3"),
    (md.float8_e5m2, "fp8_e5m2"), (md.float8_e4m3fnuz, "fp8_e4m3fnuz"),
    (md.float8_e5m2fnuz, "fp8_e5m2fnuz"), (md.float8_e4m3, "fp8_e4m3_ieee"),
    (md.float8_e3m4, "fp8_e3m4"), (md.float6_e2m3fn, "fp6_e2m3"), (md.float6_e3m2fn, "fp6_e3m2"),
    (md.float4_e2m1fn, "fp4_e2m1"), (md.float8_e8m0fnu, "e8m0"), (np.dtype(md.bfloat16), "bf16"),
    (np.int8, "int8"), (np.uint8, "uint8"), (md.int4, "int4"), (md.uint4, "uint4"),
])
def test_numpy_and_ml_dtypes_dtypes(dtype, name):
    assert ff.get_format(dtype) is ff.get_format(name)
    # and casting with the dtype as the format works end to end
    assert ff.cast(1.0, dtype) == 1.0


def test_dtype_values_agree_with_the_registry():
    """The dtype an alias points to has the same value set (max, tiny, eps) as the format."""
    for dt, name in [(md.bfloat16, "bf16"), (md.float8_e4m3fn, "fp8_e4m3"),
                     (md.float8_e4m3fnuz, "fp8_e4m3fnuz"), (md.float8_e4m3, "fp8_e4m3_ieee"),
                     (md.float6_e3m2fn, "fp6_e3m2"), (md.float8_e8m0fnu, "e8m0")]:
        fi, f = md.finfo(dt), ff.get_format(name)
        assert (float(fi.max), float(fi.smallest_normal), float(fi.eps)) == \
            (f.max, f.smallest_normal, 2.0 ** -f.mbits)


def test_torch_dtypes():
    torch = pytest.importorskip("torch", reason="torch is optional; dtype aliases need it")
    pairs = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
             torch.float64: "fp64", torch.int8: "int8", torch.uint8: "uint8"}
    for name in ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]:
        if hasattr(torch, name):
            pairs[getattr(torch, name)] = ff.get_format(name).name
    for dt, name in pairs.items():
        assert ff.get_format(dt) is ff.get_format(name)


@pytest.mark.parametrize("e", range(2, 12))
@pytest.mark.parametrize("m", [0, 1, 2, 3, 7, 10, 23, 52])
def test_eXmY_strings_build_ieee_like_formats(e, m):
    taken = {"e8m0": "e8m0", "e2m1": "fp4_e2m1", "e3m2": "fp6_e3m2", "e2m3": "fp6_e2m3",
             "e4m3": "fp8_e4m3"}  # names of registered non-IEEE formats win
    if f"e{e}m{m}" in taken:
        assert ff.get_format(f"e{e}m{m}").name == taken[f"e{e}m{m}"]
        return
    f = ff.get_format(f"e{e}m{m}")
    bias = (1 << (e - 1)) - 1
    assert (f.ebits, f.mbits, f.bias, f.bits, f.inf) == (e, m, bias, 1 + e + m, True)
    emax = (1 << e) - 2 - bias
    assert f.max_exact == (2 - Fraction(1, 1 << m)) * Fraction(2) ** emax
    assert f.smallest_subnormal == 2.0 ** (1 - bias - m)
    assert f.has_nan == (m > 0)  # with no mantissa bits the top exponent holds only Inf
    assert ff.cast(1.0, f) == 1.0


@pytest.mark.parametrize("spec, bias, maxval", [("e4m3fn", 7, 448), ("e5m2fnuz", 16, 57344),
                                                ("e4m3fnuz", 8, 240), ("e3m3fn", 3, 28),
                                                ("e5m3fn", 15, 114688), ("e6m9b31", 31, None),
                                                ("e4m3fnb6", 6, 896)])
def test_fn_fnuz_and_bias_strings(spec, bias, maxval):
    f = ff.get_format(spec)
    assert f.bias == bias
    if maxval is not None:
        assert f.max == maxval
    if "fn" in spec:
        assert not f.inf
    if "fnuz" in spec:
        assert not f.negative_zero and f.nan == "negative_zero"


def test_custom_format_objects():
    f = ff.Format("mine", ebits=6, mbits=9)
    assert f.bits == 16 and f.bias == 31 and f.max_exact == (2 - Fraction(1, 512)) * Fraction(2) ** 31
    assert ff.get_format(f) is f
    assert ff.cast(1 / 3, f) == ff.cast(1 / 3, "e6m9")
    assert dataclasses.replace(f, name="e6m9") == ff.get_format("e6m9")  # equal but for the name
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.ebits = 3
    assert hash(f) == hash(ff.Format("mine", ebits=6, mbits=9))
    g = ff.Format("u8", ebits=5, mbits=3, signed=False)
    assert g.bits == 8 and not g.negative_zero
    i = ff.Format("int12", kind="int", bits=12)
    assert (i.min, i.max) == (-2048, 2047) and ff.cast(5000, i) == 2047


def test_register_adds_a_name(monkeypatch):
    monkeypatch.setattr(formats_mod, "_REGISTRY", dict(formats_mod._REGISTRY))
    monkeypatch.setattr(formats_mod, "_ALIASES", dict(formats_mod._ALIASES))
    f = ff.register(ff.Format("myfp", ebits=3, mbits=3), "my_alias")
    assert ff.get_format("myfp") is f and ff.get_format("MY_ALIAS") is f
    assert "myfp" in ff.formats()


def test_repr_and_str_are_readable():
    r = repr(ff.get_format("fp8_e4m3"))
    assert "fp8_e4m3" in r and "e4m3" in r and "bias=7" in r and "no inf" in r
    assert repr(ff.get_format("int8")).startswith("Format('int8'")
    assert "unsigned" in repr(ff.get_format("e8m0"))
    assert str(ff.get_format("bf16")) == "bf16"


def test_default_overflow_per_format():
    want = {"fp16": "inf", "bf16": "inf", "fp8_e5m2": "inf", "fp8_e4m3": "nan", "fp8_e4m3fnuz": "nan",
            "fp8_e5m2fnuz": "nan", "fp6_e2m3": "saturate", "fp4_e2m1": "saturate", "e8m0": "nan",
            "int8": "saturate", "uint4": "saturate"}
    for name, pol in want.items():
        assert ff.get_format(name).default_overflow == pol


# ---------------------------------------------------------------- ml_dtypes type names
ML_FLOATS = sorted(n for n in dir(md) if n.startswith("float") and not n.startswith("finfo"))


@pytest.mark.parametrize("ml_name", ML_FLOATS)
def test_ml_dtypes_names_mean_ml_dtypes_value_sets(ml_name):
    """The ml_dtypes name, the dtype, the name without its floatN_ prefix and the fpN_
    spelling all decode every code as ml_dtypes does (NaN where it has NaN).  The one
    documented exception: "e4m3" alone is OCP E4M3FN, not ml_dtypes' float8_e4m3."""
    t = getattr(md, ml_name)
    bits = md.finfo(t).bits
    short = ml_name.split("_", 1)[1]
    codes = np.arange(1 << bits, dtype=np.uint8)
    with np.errstate(invalid="ignore"):
        want = codes.view(t).astype(np.float64)
    spellings = [ml_name, t, np.dtype(t), short, f"fp{bits}_{short}", ml_name.upper()]
    if short == "e4m3":  # floatfmt's "e4m3" and canonical "fp8_e4m3" are OCP E4M3FN
        assert ff.get_format("e4m3") is ff.get_format("fp8_e4m3") is ff.get_format("float8_e4m3fn")
        spellings = [s for s in spellings if s not in ("e4m3", "fp8_e4m3")]
    for spelling in spellings:
        f = ff.get_format(spelling)
        assert f.bits == bits, spelling
        got = ff.decode(codes, f)
        same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (spelling, [(hex(c), g, w) for c, g, w in zip(codes[~same], got[~same], want[~same])][:4])
        assert f is ff.get_format(ml_name), spelling  # one Format, whatever the spelling


def test_issue_example_e2m1fn():
    assert ff.get_format("e2m1fn").max == ff.get_format("float4_e2m1fn").max == 6.0
    assert ff.cast(np.nan, "e2m1fn") != ff.cast(np.nan, "e2m1fn")  # NaN in, NaN out (no code)
    with pytest.raises(ValueError):
        ff.encode(np.nan, "e2m1fn")  # OCP FP4 has no NaN code


@pytest.mark.parametrize("spec, bits, signed", [("int2", 2, True), ("uint2", 2, False), ("int1", 1, True),
                                                ("uint1", 1, False), ("int16", 16, True), ("uint32", 32, False)])
def test_integer_names(spec, bits, signed):
    f = ff.get_format(spec)
    assert (f.kind, f.bits, f.signed) == ("int", bits, signed)
    assert ff.cast(10**12, f) == (2 ** (bits - 1) - 1 if signed else 2**bits - 1)
    with pytest.raises(ValueError, match="1 to 63"):
        ff.get_format("int64")


@pytest.mark.parametrize("ebits", [8, 10, 11])
@pytest.mark.parametrize("mbits", [0, 3, 52])
@pytest.mark.parametrize("shift", [-1200, -1050, -3, 0, 3, 40, 1000])
def test_format_values_must_be_float64_numbers(ebits, mbits, shift):
    """A custom Format is accepted exactly when its binades are float64's normal ones;
    then its extremes cast to themselves.  Otherwise a ValueError at construction that
    names the limit (not an OverflowError, or a subnormal rounded to 0, later)."""
    bias = (1 << (ebits - 1)) - 1 + shift
    top_field = (1 << ebits) - 2   # IEEE: the all-ones field holds Inf / NaN
    emax, emin = top_field - bias, 1 - bias   # largest and smallest normal binade
    low = emin - mbits   # smallest step
    fits = emax <= 1023 and emin >= -1022
    if not fits:
        with pytest.raises(ValueError, match="must be float64"):
            ff.Format("wide", ebits, mbits, bias=bias)
        return
    f = ff.Format("wide", ebits, mbits, bias=bias)
    top = Fraction(2) ** emax * (2 - Fraction(1, 2 ** mbits))
    step = Fraction(2) ** low
    assert Fraction(f.max) == top and Fraction(ff.info(f).smallest_subnormal) == step
    assert ff.cast(f.max, f) == f.max and ff.cast(float(step), f) == float(step)
