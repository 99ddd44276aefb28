"""Exact intake (floatfmt/core/intake.py) against references that never call floatfmt.

Three classes of issue 9, each checked over the whole class:

* Integers next to and past 2**53 (class 5): every int64 / uint64 value, as an
  array, a numpy scalar or a list of Python ints, rounds in every mode, every
  overflow policy and every kind of format (fp64 included, integer formats with
  saturation and wrap-around) to what MPFR / Fraction arithmetic gives for the
  exact integer; ``next_up`` / ``next_down`` of such values are the exact
  neighbours; stochastic rounding lands on a neighbour with the right frequency.
* Hex strings (class 6): random hex floats with long mantissas, exact and
  near-midpoint tails, and exponents inside, at the edges of and far outside every
  format's range, compared with the rational value they were built from.
* Array-likes (class 1): random lists, tuples, nested lists and lists of arrays
  mixing Python ints of any size, floats, Fractions, Decimals, decimal and hex
  strings, numpy scalars of every kind, 0-d arrays and ml_dtypes scalars:
  ``cast(list)[i] == cast(list[i]) == MPFR(exact value of list[i])`` with the
  shape kept, and every public entry that takes an array-like (encode, the
  arithmetic, sum / dot / matmul, ff.array, quantize, the codec functions) gives
  for a list what it gives element by element.

The oracle values come from the exact rational value each input was built from
(tests/oracles/mpfr.py), not from parsing by floatfmt.  Mismatch counts are
printed (``pytest -s``) and must be zero.
"""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction

import ml_dtypes as md
import numpy as np
import pytest

import floatfmt as ff
from tests.oracles.compare import mismatches as bad
from floatfmt.core.intake import to_fraction
from conftest import mpfr as O

MODES = O.MODES  # the six deterministic modes
FORMATS = ["fp64", "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "e8m0",
           "int8", "uint8", "int4"]


def policies(name) -> list:
    f = ff.get_format(name)
    if f.kind == "int":
        return ["saturate", "wrap"]
    out = ["saturate"]
    if f.inf:
        out.append("inf")
    if f.has_nan:
        out.append("nan")
    return out




def report(what, counts: dict):
    total = sum(counts.values())
    print(f"{what}: {total} mismatches" + "".join(f"\n  {k}: {v}" for k, v in counts.items() if v))
    assert total == 0, {k: v for k, v in counts.items() if v}


# ============================================================== class 5: int64 / uint64
def _int_values(lo, hi, seed) -> list[int]:
    """Integers in [lo, hi]: powers of two 2**50 .. 2**64 and their neighbours, the
    midpoints (and one either side) between neighbours at the precisions of fp64,
    fp32, fp16, bf16, fp8 and fp4, the extremes, both signs, and random values of
    every bit length from 40 to 64."""
    vals = {0, 1, -1, 2, -2, 127, 128, -128, -129, 255, 256, 7, 8, -8, -9, 15, 16, lo, hi,
            lo + 1, hi - 1}
    for k in range(50, 65):
        p2 = 1 << k
        for d in range(-3, 4):
            vals |= {p2 + d, -(p2 + d)}
        for prec in (53, 24, 11, 8, 4, 2):
            if k - prec < 1:
                continue
            h = 1 << (k - prec)  # half an ulp of precision `prec` in the binade [2**k, 2**(k+1))
            for base in (p2 + h, p2 + 3 * h, 2 * p2 - h, p2 + (1 << (k - prec + 1)) * 5 + h):
                for d in (-1, 0, 1):
                    vals |= {base + d, -(base + d)}
    rng = random.Random(seed)
    for _ in range(800):
        bits = rng.randint(40, 64)
        v = rng.getrandbits(bits) | (1 << (bits - 1))
        vals |= {v, -v}
    return sorted(v for v in vals if lo <= v <= hi)


INT64 = _int_values(-(1 << 63), (1 << 63) - 1, 1)
UINT64 = _int_values(0, (1 << 64) - 1, 2)
_EX64 = O.prepare([Fraction(v) for v in INT64])
_EXU64 = O.prepare([Fraction(v) for v in UINT64])


def test_issue_example_integer_past_2_53():
    assert ff.cast(np.array([2**53 + 1]), "fp64", "up")[0] == 2**53 + 2
    assert ff.cast(np.int64(2**53 + 1), "fp64", "up") == 2**53 + 2
    assert ff.cast(np.uint64(2**64 - 1), "fp64", "toward_zero") == 2**64 - 2**11
    assert ff.next_down(np.int64(2**53 + 1), "fp64") == 2**53


@pytest.mark.parametrize("name", FORMATS)
def test_int64_and_uint64_match_exact_rounding(name):
    """Arrays, lists of Python ints, lists of numpy scalars and numpy scalars."""
    counts = {}
    a64, au64 = np.array(INT64, np.int64), np.array(UINT64, np.uint64)
    sub = slice(None, None, 9)  # scalars one by one: every 9th value
    pols = policies(name)
    for mode in MODES:
        w64s = O.round_many(_EX64, ff.get_format(name), mode, pols)
        wu64s = O.round_many(_EXU64, ff.get_format(name), mode, pols)
        for pol in pols:
            w64, wu64 = w64s[pol], wu64s[pol]
            counts[f"{mode} {pol} int64 array"] = int(bad(ff.cast(a64, name, mode, pol), w64).sum())
            counts[f"{mode} {pol} uint64 array"] = int(bad(ff.cast(au64, name, mode, pol), wu64).sum())
            counts[f"{mode} {pol} list of ints"] = int(bad(ff.cast(INT64, name, mode, pol), w64).sum())
            counts[f"{mode} {pol} list of uints"] = int(bad(ff.cast(UINT64, name, mode, pol), wu64).sum())
            counts[f"{mode} {pol} 2-d int64"] = int(
                bad(ff.cast(a64[:1000].reshape(50, 20), name, mode, pol), w64[:1000].reshape(50, 20)).sum())
            s64 = [ff.cast(v, name, mode, pol) for v in a64[sub]]
            su64 = [ff.cast(v, name, mode, pol) for v in au64[sub]]
            counts[f"{mode} {pol} int64 scalars"] = int(bad(s64, w64[sub]).sum())
            counts[f"{mode} {pol} uint64 scalars"] = int(bad(su64, wu64[sub]).sum())
            lst = ff.cast(list(au64[sub]), name, mode, pol)  # np.uint64 elements in a list
            counts[f"{mode} {pol} list of np.uint64"] = int(bad(lst, wu64[sub]).sum())
    report(f"int64/uint64 -> {name}", counts)


@pytest.mark.parametrize("name", FORMATS)
def test_int64_stochastic_lands_on_a_neighbour(name):
    """Each result is the value rounded down or up (MPFR), and exact values stay."""
    counts = {}
    for arr, ex in ((np.array(INT64, np.int64), _EX64), (np.array(UINT64, np.uint64), _EXU64)):
        lo = O.round_many(ex, ff.get_format(name), "down")
        hi = O.round_many(ex, ff.get_format(name), "up")
        got = ff.cast(arr, name, "stochastic", rng=3)
        counts[str(arr.dtype)] = int((bad(got, lo) & bad(got, hi)).sum())
        # the vectorised integer intake and the per-element one draw the same way
        same_draws = ff.cast(arr.astype(object), name, "stochastic", rng=3)
        counts[f"{arr.dtype} vs object"] = int(bad(got, same_draws).sum())
    report(f"stochastic int64 -> {name}", counts)


@pytest.mark.parametrize("v", [2**53 + 1, 2**54 + 1, 2**54 + 2, 2**54 + 3, -(2**53 + 1),
                               -(2**54 + 3), 3 * 2**53 + 1])
def test_int64_stochastic_probability_into_fp64(v):
    """P(away from zero) = distance to the lower neighbour / gap, for values whose
    fraction float64 plus the remainder class holds exactly (below 2**55)."""
    n = 40_000
    down, up = O.neighbours(v, ff.get_format("fp64"), exact=True)
    p = float((abs(Fraction(v)) - min(abs(down), abs(up))) / abs(up - down))
    got = ff.cast(np.full(n, v, np.int64), "fp64", "stochastic", rng=11)
    away = max(abs(down), abs(up)) * (1 if v > 0 else -1)
    near = min(abs(down), abs(up)) * (1 if v > 0 else -1)
    assert np.isin(got, [float(away), float(near)]).all()
    freq = float((got == float(away)).mean())
    assert abs(freq - p) < 6 * math.sqrt(p * (1 - p) / n), (freq, p)


@pytest.mark.parametrize("name", ["fp64", "fp32", "bf16", "fp16"])
def test_next_up_next_down_of_int64_match_mpfr(name):
    """next_up(v) = RU(v + e), next_down(v) = RD(v - e) for e far below any gap."""
    eps = Fraction(1, 1 << 1100)
    counts = {}
    for vals, dt in ((INT64, np.int64), (UINT64, np.uint64)):
        arr = np.array(vals, dt)
        want_up = np.array([O.round_one(Fraction(v) + eps, ff.get_format(name), "up", "inf") for v in vals])
        want_dn = np.array([O.round_one(Fraction(v) - eps, ff.get_format(name), "down", "inf") for v in vals])
        counts[f"next_up {arr.dtype}"] = int(bad(ff.next_up(arr, name), want_up).sum())
        counts[f"next_down {arr.dtype}"] = int(bad(ff.next_down(arr, name), want_dn).sum())
        counts[f"next_up list {arr.dtype}"] = int(bad(ff.next_up(vals, name), want_up).sum())
        sub = slice(None, None, 17)
        counts[f"next_down scalars {arr.dtype}"] = int(
            bad([ff.next_down(v, name) for v in arr[sub]], want_dn[sub]).sum())
    report(f"next_up/next_down int64 -> {name}", counts)


# ==================================================================== class 6: hex strings
HEX_TARGETS = ["fp64", "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "e8m0", "int8"]


def _hex_text(sig: int, e2: int, rng: random.Random) -> str:
    """A hex float string (no sign) for sig * 2**e2: random point position, case,
    leading / trailing zeros and exponent spelling."""
    digits = format(sig, "x")
    if rng.random() < 0.3:
        digits = "0" * rng.randint(1, 3) + digits
    if rng.random() < 0.3:
        k = rng.randint(1, 3)
        digits += "0" * k  # 16**k times larger: compensate in the exponent
        e2 -= 4 * k
    point = rng.randint(0, len(digits))
    whole, frac = digits[:point], digits[point:]
    exp = e2 + 4 * len(frac)  # value = int(whole + frac, 16) * 2**(exp - 4 * len(frac))
    body = whole + ("." + frac if frac or rng.random() < 0.5 else "")
    if rng.random() < 0.5:
        body = body.upper()
    pfx = rng.choice(["0x", "0X"])
    if exp == 0 and rng.random() < 0.5:
        return pfx + body
    plus = "+" if exp >= 0 and rng.random() < 0.5 else ""
    return f"{pfx}{body}{rng.choice(['p', 'P'])}{plus}{exp}"


def _hex_cases(n: int, seed: int):
    """(strings, exact Fractions): values built near the rounding decisions of a random
    target format (exact, midpoint, a hair either side of it, a hair above a value,
    random tails of up to 120 extra bits) in its normal, subnormal and overflow range."""
    rng = random.Random(seed)
    strings, exact = [], []
    for _ in range(n):
        f = ff.get_format(rng.choice(HEX_TARGETS))
        prec = f.mbits + 1 if f.kind == "float" else 1
        t = rng.randint(1, 120)  # bits below the format's last place
        head = rng.getrandbits(prec) | (1 << (prec - 1))
        tail = rng.choice([0, 1 << (t - 1), (1 << (t - 1)) | 1, (1 << (t - 1)) - 1, 1,
                           rng.getrandbits(t)])
        sig = (head << t) | tail
        if f.kind == "float":
            top = rng.randint(f.emin - f.mbits - 3, f.emax + 2)
        else:
            top = rng.randint(-3, f.bits + 1)
        e2 = top - (sig.bit_length() - 1)
        neg = rng.random() < 0.5
        val = Fraction(sig) * Fraction(2) ** e2
        strings.append(("-" if neg else rng.choice(["", "+"])) + _hex_text(sig, e2, rng))
        exact.append(-val if neg else val)
    return strings, exact


HEX_STR, HEX_EXACT = _hex_cases(2500, 5)
_HEX_EX = O.prepare(HEX_EXACT)


def test_hex_generator_builds_what_it_claims():
    """The test's own strings, read by Python's float.fromhex where that is exact."""
    checked = 0
    for s, q in zip(HEX_STR, HEX_EXACT):
        if q != 0 and abs(q) < 2**1000 and abs(q) > 2**-1000:
            v = float.fromhex(s)
            if Fraction(v) == q:
                checked += 1
            else:
                assert abs(Fraction(v) - q) <= abs(q) * Fraction(1, 2**52), s
    assert checked > 100


def test_issue_examples_hex():
    assert ff.cast("0x1.00000000000018p0", "fp64", "toward_zero") == 1 + 2**-52
    assert ff.cast("0x1.8p-1075", "fp64", "toward_zero") == 0.0
    assert ff.cast("0x1p2000", "fp64") == math.inf == ff.cast("1e400", "fp64")
    assert ff.cast("-0x1p2000", "fp64", "toward_zero") == -ff.get_format("fp64").max


@pytest.mark.parametrize("name", HEX_TARGETS)
def test_hex_strings_match_exact_rounding(name):
    counts = {}
    arr = np.array(HEX_STR)  # a numpy string array
    obj = np.array(HEX_STR, dtype=object)
    for mode in MODES:
        for pol in policies(name):
            want = O.round_many(_HEX_EX, ff.get_format(name), mode, pol)
            counts[f"{mode} {pol} str array"] = int(bad(ff.cast(arr, name, mode, pol), want).sum())
            counts[f"{mode} {pol} object array"] = int(bad(ff.cast(obj, name, mode, pol), want).sum())
            counts[f"{mode} {pol} list"] = int(bad(ff.cast(HEX_STR, name, mode, pol), want).sum())
            sub = slice(None, None, 23)
            got = [ff.cast(s, name, mode, pol) for s in HEX_STR[sub]]
            counts[f"{mode} {pol} scalars"] = int(bad(got, want[sub]).sum())
    report(f"hex strings -> {name}", counts)


# Far outside float64: (string, stand-in with the same rounding in every mode and every
# format of at most 53 bits).  Past 2**1024 every value overflows alike; below a quarter
# of 2**-1074 every positive value sits strictly between 0 and half the smallest step.
_BIG, _TINY = Fraction(2) ** 1500, Fraction(1, 2**1500)
FAR = [("0x1p2000", 2 ** 2000), ("-0x1.fffp+1024", -Fraction(0x1fff, 2**12) * 2**1024),
       ("0x1p1024", 2**1024), ("0x1.fffffffffffff8p1023", Fraction(2**54 - 1, 2**53) * 2**1023),
       ("0x1.fffffffffffff7ffp1023", Fraction(0x1fffffffffffff7ff, 2**64) * 2**1023),
       ("0x1p+99999999999", _BIG), ("-0X1P99999999999999999999", -_BIG),
       ("0x1p-99999999999", _TINY), ("-0x1p-99999999999", -_TINY),
       ("0x1p-1075", Fraction(1, 2**1075)), ("0x1.8p-1075", Fraction(3, 2**1076)),
       ("0x1.0000001p-1075", Fraction(0x10000001, 2**28) / 2**1075),
       ("0x0.0000001p-1050", Fraction(1, 2**1078)), ("0x1p-1076", Fraction(1, 2**1076)),
       ("0x1p-1100", Fraction(1, 2**1100)), ("0x3p-1076", Fraction(3, 2**1076)),
       ("0x0p99999999", 0.0), ("-0x0.000p-5", -0.0), ("0x.8", Fraction(1, 2)),
       ("0X1P-1", Fraction(1, 2)), ("1.8p1", 3), (" 0x1_0p0 ", 16), ("0x1.", 1)]


@pytest.mark.parametrize("name", HEX_TARGETS)
def test_hex_strings_far_outside_float64(name):
    strings = [s for s, _ in FAR]
    ex = O.prepare([v if isinstance(v, float) else Fraction(v) for _, v in FAR])
    counts = {}
    for mode in MODES:
        for pol in policies(name):
            want = O.round_many(ex, ff.get_format(name), mode, pol)
            got = [ff.cast(s, name, mode, pol) for s in strings]
            for s, g, w in zip(strings, got, want):
                counts[f"{mode} {pol} {s!r}"] = int(bad(g, w))
            counts[f"{mode} {pol} array"] = int(bad(ff.cast(np.array(strings), name, mode, pol), want).sum())
    report(f"hex strings far outside float64 -> {name}", counts)


def test_hex_strings_like_decimal_strings():
    """Specials and bad input behave as for decimal strings; to_fraction is exact."""
    assert ff.cast("0x1p2000", "fp16") == ff.cast("1e400", "fp16") == math.inf
    assert ff.cast("-0x1p-99999", "fp32") == ff.cast("-1e-99999", "fp32") == 0.0
    assert math.copysign(1, ff.cast("-0x1p-99999", "fp32")) == -1
    # wrap-around reduces modulo 2**bits exactly, also for exponents far too large to expand
    for s, want in [("0x1p99999999999", 0), ("1e99999999999", 0), ("-0x1.01p9", -2), ("-1e3", 24),
                    ("0x3p7", -128), ("-0x1p-99999999999", 0), ("257.5", 2)]:
        assert ff.cast(s, "int8", overflow="wrap") == want, s
    for s in ["0x", "0x.", "0x.p1", "0x1p", "0x1.2.3", "0xg", "0x1p1.5", "--0x1", "0x1p+-1", "0xp1"]:
        with pytest.raises(TypeError):
            ff.cast(s, "fp64")
    for s, q in zip(HEX_STR[:400], HEX_EXACT[:400]):
        assert to_fraction(s) == q, s


def test_hex_strings_in_other_entry_points():
    s = "0x1.00000000000018p0"  # 1 + 2**-52 + 2**-53: the midpoint float.fromhex rounds up
    assert ff.encode(s, "fp64", "toward_zero") == 0x3FF0000000000001
    assert ff.next_down(s, "fp64") == 1 + 2**-52 and ff.next_up(s, "fp64") == 1 + 2**-51
    assert ff.add(s, 0.0, "fp64", rounding="toward_zero") == 1 + 2**-52
    q = ff.quantize([s, "0x1.8p-1075"], "fp8_e4m3", scale=2.0**-8, rounding="toward_zero")
    assert q.elements.tolist() == [256.0, 0.0]


# ================================================================ class 1: array-likes
def _random_float(rng: random.Random) -> float:
    r = rng.random()
    if r < 0.05:
        return rng.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308])
    return rng.choice([-1, 1]) * math.ldexp(1 + rng.random(), rng.randint(-1080, 1022))


def _element(rng: random.Random):
    """(element, its exact value: a Fraction, or a float for zeros / Inf / NaN)."""
    kind = rng.choice(["float", "float", "int", "bigint", "hugeint", "np_int64", "np_uint64",
                       "np_float32", "np_float16", "bool", "fraction", "decimal", "dec_str",
                       "hex_str", "bf16", "zero_d_int", "zero_d_float", "longdouble", "np_float64"])
    if kind in ("float", "np_float64"):
        v = _random_float(rng)
        el = v if kind == "float" else np.float64(v)
    elif kind == "int":
        el = rng.randint(-2**53, 2**53)
        v = Fraction(el)
    elif kind == "bigint":
        el = rng.choice([-1, 1]) * ((1 << rng.randint(53, 63)) + rng.getrandbits(rng.randint(0, 52)))
        v = Fraction(el)
    elif kind == "hugeint":
        el = rng.choice([-1, 1]) * ((1 << rng.randint(64, 1100)) + rng.getrandbits(rng.randint(0, 200)))
        v = Fraction(el)
    elif kind == "np_int64":
        el = np.int64(rng.randint(-2**63, 2**63 - 1))
        v = Fraction(int(el))
    elif kind == "np_uint64":
        el = np.uint64(rng.randint(2**52, 2**64 - 1))
        v = Fraction(int(el))
    elif kind in ("np_float32", "np_float16", "bf16"):
        t = {"np_float32": np.float32, "np_float16": np.float16, "bf16": md.bfloat16}[kind]
        with np.errstate(over="ignore"):
            el = t(rng.choice([-1, 1]) * math.ldexp(1 + rng.random(), rng.randint(-30, 30)))
        v = float(el)
    elif kind == "bool":
        el = rng.random() < 0.5
        v = Fraction(int(el))
    elif kind == "fraction":
        el = Fraction(rng.randint(-10**30, 10**30), rng.randint(1, 10**30))
        v = el
    elif kind in ("decimal", "dec_str"):
        text = f"{rng.choice(['', '-'])}{rng.randint(0, 10**25)}e{rng.randint(-340, 320)}"
        el = Decimal(text) if kind == "decimal" else text
        v = Fraction(Decimal(text))
        if v == 0:
            v = -0.0 if text.startswith("-") else 0.0
    elif kind == "hex_str":
        i = rng.randrange(len(HEX_STR))
        el, v = HEX_STR[i], HEX_EXACT[i]
    elif kind == "zero_d_int":
        el = np.array(rng.choice([-1, 1]) * ((1 << 60) + rng.getrandbits(40)), np.int64)
        v = Fraction(int(el))
    elif kind == "zero_d_float":
        el = np.array(_random_float(rng))
        v = float(el)
    else:  # long double: 64 significant bits where the platform has them
        el = np.longdouble(rng.randint(2**40, 2**41)) * np.longdouble(2**20) + np.longdouble(rng.randint(1, 2**19))
        v = Fraction(*el.as_integer_ratio())
    if isinstance(v, Fraction) and v == 0:
        v = 0.0
    if isinstance(v, float) and math.isfinite(v) and v != 0:
        v = Fraction(v)
    return el, v


def _random_array_like(rng: random.Random):
    """(array-like, shape, flat elements, flat exact values)."""
    shape_kind = rng.choice(["list", "tuple", "nested", "rows_of_arrays", "mix_pair"])
    if shape_kind == "mix_pair":  # the issue's pattern: a float and an integer past 2**53
        pairs = [(0.5, Fraction(1, 2)), _element(rng)]
        big = rng.choice([2**60 + 2**52 + 1, np.int64(2**62 + 2**9 + 1), np.uint64(2**64 - 1), 2**53 + 1])
        pairs.append((big, Fraction(int(big))))
        rng.shuffle(pairs)
        return [p[0] for p in pairs], (3,), [p[0] for p in pairs], [p[1] for p in pairs]
    if shape_kind in ("list", "tuple"):
        n = rng.randint(1, 8)
        pairs = [_element(rng) for _ in range(n)]
        els = [p[0] for p in pairs]
        return (els if shape_kind == "list" else tuple(els)), (n,), els, [p[1] for p in pairs]
    r, c = rng.randint(1, 4), rng.randint(1, 4)
    rows = [[_element(rng) for _ in range(c)] for _ in range(r)]
    if shape_kind == "rows_of_arrays":
        # some rows as int64 / float64 arrays, the rest as lists
        out, flat_el, flat_v = [], [], []
        for row in rows:
            pick = rng.random()
            if pick < 0.4:
                vals = [rng.choice([-1, 1]) * ((1 << rng.randint(53, 62)) + rng.getrandbits(30)) for _ in range(c)]
                out.append(np.array(vals, np.int64))
                flat_el += vals
                flat_v += [Fraction(v) for v in vals]
            elif pick < 0.6:
                vals = [_random_float(rng) for _ in range(c)]
                out.append(np.array(vals))
                flat_el += vals
                flat_v += [Fraction(v) if math.isfinite(v) and v != 0 else v for v in vals]
            else:
                out.append([p[0] for p in row])
                flat_el += [p[0] for p in row]
                flat_v += [p[1] for p in row]
        return out, (r, c), flat_el, flat_v
    return [[p[0] for p in row] for row in rows], (r, c), [p[0] for row in rows for p in row], \
        [p[1] for row in rows for p in row]


ARRAY_LIKES = [_random_array_like(random.Random(1000 + i)) for i in range(250)]
LIST_FORMATS = ["fp64", "fp32", "bf16", "fp16", "fp8_e4m3", "fp4_e2m1", "int8"]


def test_issue_example_list():
    assert ff.cast([0.5, 2**60 + 2**52 + 1], "bf16")[1] == 2**60 + 2**53
    assert ff.cast([0.1, "0.1"], "fp64").tolist() == [0.1, 0.1]
    assert ff.cast([np.float32(0.1), "1"], "fp32")[0] == float(np.float32(0.1))
    assert ff.cast([np.uint64(2**64 - 1), -1], "fp64", "toward_zero")[0] == 2**64 - 2**11


@pytest.mark.parametrize("name", LIST_FORMATS)
def test_array_likes_round_each_element_as_a_scalar(name):
    """cast(list)[i] == cast(list[i]) == MPFR(exact list[i]); shapes kept."""
    flat_el = [e for _, _, els, _ in ARRAY_LIKES for e in els]
    ex = O.prepare([v for _, _, _, vals in ARRAY_LIKES for v in vals])
    counts = {"shape": 0}
    for mode in MODES:
        for pol in policies(name):
            want = O.round_many(ex, ff.get_format(name), mode, pol)
            got = []
            for x, shape, _, _ in ARRAY_LIKES:
                r = ff.cast(x, name, mode, pol)
                counts["shape"] += r.shape != shape
                got.extend(np.ravel(r).tolist())
            scal = [ff.cast(e, name, mode, pol) for e in flat_el]
            counts[f"{mode} {pol} list vs oracle"] = int(bad(got, want).sum())
            counts[f"{mode} {pol} scalar vs oracle"] = int(bad(scal, want).sum())
            counts[f"{mode} {pol} list vs scalar"] = int(bad(got, scal).sum())
    report(f"array-likes -> {name} ({len(flat_el)} elements in {len(ARRAY_LIKES)} array-likes)", counts)


@pytest.mark.parametrize("name", LIST_FORMATS)
def test_array_likes_stochastic_lands_on_a_neighbour(name):
    flat_el = [e for _, _, els, _ in ARRAY_LIKES for e in els]
    ex = O.prepare([v for _, _, _, vals in ARRAY_LIKES for v in vals])
    lo, hi = O.round_many(ex, ff.get_format(name), "down"), O.round_many(ex, ff.get_format(name), "up")
    got = []
    for i, (x, shape, _, _) in enumerate(ARRAY_LIKES):
        r = ff.cast(x, name, "stochastic", rng=i)
        assert r.shape == shape
        got.extend(np.ravel(r).tolist())
    report(f"stochastic array-likes -> {name} ({len(flat_el)} elements)",
           {"off both neighbours": int((bad(got, lo) & bad(got, hi)).sum())})


# Lists numpy converts with rounding (or into strings), and their exact elements.
TRICKY = [
    [0.5, 2**60 + 2**52 + 1],
    [np.uint64(2**64 - 1), -1],
    [2**63 + 1, 1],
    [0.1, "0.1", 2**53 + 1],
    [np.float32(0.1), "1", "0x1.00000000000018p0"],
    (np.int64(2**60 + 1), 1.5, np.int64(-(2**62) - 1)),
    [Fraction(1, 3), 0.5, 2**70 + 1, Decimal("0.1")],
    [np.array(2**60 + 1), 0.25, np.array(-(2**55) - 3)],
    [np.uint64(2**63 + 2**11 + 1), np.int64(-5), True],
    [md.bfloat16(1.5), 2**54 + 1, np.float16(0.1)],
]
TRICKY_2D = [[[2**53 + 1, 0.25], [3, -(2**62) - 1]],
             [np.array([2**60 + 1, 3], np.int64), [0.5, 0.25]],
             [[0.1, "0.1"], [Fraction(2, 3), np.uint64(2**64 - 1)]]]


def _exact_of(e) -> Fraction:
    """The exact value of a finite TRICKY element, computed without floatfmt."""
    if isinstance(e, np.ndarray):
        e = e[()]
    if isinstance(e, str):
        hexes = {"0x1.00000000000018p0": 1 + Fraction(3, 2**53)}
        return hexes[e] if e in hexes else Fraction(Decimal(e))
    if isinstance(e, (bool, np.bool_, int, np.integer)):
        return Fraction(int(e))
    if isinstance(e, (Fraction, Decimal)):
        return Fraction(e)
    return Fraction(float(e))  # float, numpy floats, bfloat16: exact in a Python float


@pytest.mark.parametrize("fmt", ["bf16", "fp64"])
@pytest.mark.parametrize("i", range(len(TRICKY)))
def test_every_entry_point_takes_array_likes_exactly(fmt, i):
    L = TRICKY[i]
    n = len(L)
    each = list(L)
    C = np.array([ff.cast(e, fmt) for e in each])  # the elements rounded once to fmt

    def elementwise(f, *rest, **kw):
        got = np.asarray(f(L, *rest, **kw))
        want = [f(e, *rest, **kw) for e in each]
        return got, want

    checks = {
        "cast up": elementwise(lambda x: ff.cast(x, fmt, "up")),
        "encode": elementwise(lambda x: ff.encode(x, fmt, "toward_zero")),
        "next_up": elementwise(lambda x: ff.next_up(x, fmt)),
        "next_down": elementwise(lambda x: ff.next_down(x, fmt)),
        "ulp": elementwise(lambda x: ff.ulp(x, fmt)),
        "classify": elementwise(lambda x: ff.classify(x, fmt, "odd")),
        "add": elementwise(lambda x: ff.add(x, 0.0, fmt, rounding="down")),
        "sub": elementwise(lambda x: ff.sub(x, 1.0, fmt)),
        "mul": elementwise(lambda x: ff.mul(x, 3.0, fmt, rounding="nearest_away")),
        "div": elementwise(lambda x: ff.div(x, 3.0, fmt)),
        "fma": elementwise(lambda x: ff.fma(x, 1.0, 0.5, fmt)),
        "sqrt": elementwise(lambda x: ff.sqrt(x, fmt)),
        "array": (ff.array(L, fmt).values, C),
        "sum": (ff.sum(L, fmt, acc_fmt="fp64"), ff.sum(C, fmt, acc_fmt="fp64")),
        "sum exact": (ff.sum(L, fmt, acc_fmt=fmt, order="exact"),
                      ff.sum(C, fmt, acc_fmt=fmt, order="exact")),
        "dot": (ff.dot(L, np.ones(n), fmt, acc_fmt="fp64"), ff.dot(C, np.ones(n), fmt, acc_fmt="fp64")),
        "matmul": (ff.matmul([L], np.ones((n, 1)), fmt, acc_fmt="fp64"),
                   ff.matmul(C[None, :], np.ones((n, 1)), fmt, acc_fmt="fp64")),
    }
    # quantize with a power-of-two scale: elements = round(x / s) exactly (MPFR), per element
    s = 2.0 ** 50
    for q in ("int8", "fp8_e4m3"):
        want = [O.round_one(_exact_of(e) / Fraction(s), ff.get_format(q), "up", "saturate") for e in each]
        got = ff.quantize(L, q, scale=s, rounding="up", narrow_range=False if q == "int8" else None)
        checks[f"quantize {q}"] = (got.elements, want)
    mism = {k: int(bad(g, w).sum()) for k, (g, w) in checks.items() if k not in ("classify", "encode")}
    mism["shapes"] = sum(np.shape(g) != np.shape(w) for k, (g, w) in checks.items()
                         if k not in ("sum", "sum exact", "dot", "matmul"))
    mism["classify"] = int(sum(a != b for a, b in zip(*checks["classify"])))
    mism["encode"] = int(sum(int(a) != int(b) for a, b in zip(*checks["encode"])))
    # and the exact elements themselves, rounded by MPFR
    up = [O.round_one(_exact_of(e), ff.get_format(fmt), "up") for e in each]
    mism["cast up vs MPFR"] = int(bad(checks["cast up"][0], up).sum())
    report(f"entry points, {fmt}, {L!r}", mism)


@pytest.mark.parametrize("fmt", ["bf16", "fp64"])
@pytest.mark.parametrize("i", range(len(TRICKY_2D)))
def test_nested_array_likes_in_matmul_and_cast(fmt, i):
    L = TRICKY_2D[i]
    flat = [e for row in L for e in row]
    C = np.array([ff.cast(e, fmt, "down") for e in flat]).reshape(2, 2)
    got = ff.cast(L, fmt, "down")
    assert got.shape == (2, 2) and not bad(got, C).any()
    Cn = np.array([ff.cast(e, fmt) for e in flat]).reshape(2, 2)
    assert not bad(ff.matmul(L, np.eye(2), fmt, acc_fmt="fp64"),
                   ff.matmul(Cn, np.eye(2), fmt, acc_fmt="fp64")).any()
