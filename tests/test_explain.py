"""explain() and compare(): content of the text and HTML, checked against values
computed here independently (numpy, ml_dtypes, struct, Fraction, Decimal)."""

import math
import re
import struct
from decimal import Decimal
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import floatfmt as ff
from floatfmt.teach.explain.block import explain_block
from floatfmt.teach.explain.value import Explanation
from floatfmt.teach.explain.array import ExplanationTable
from floatfmt.teach.numtext import exact_decimal

# name -> (sign?, ebits, mbits, bias, oracle dtype or None); written out here, not read from floatfmt.
LAYOUT = {
    "fp64": (1, 11, 52, 1023, None), "fp32": (1, 8, 23, 127, np.float32), "tf32": (1, 8, 10, 127, None),
    "fp16": (1, 5, 10, 15, np.float16), "bf16": (1, 8, 7, 127, ml_dtypes.bfloat16),
    "fp8_e4m3": (1, 4, 3, 7, ml_dtypes.float8_e4m3fn), "fp8_e5m2": (1, 5, 2, 15, ml_dtypes.float8_e5m2),
    "fp8_e4m3fnuz": (1, 4, 3, 8, ml_dtypes.float8_e4m3fnuz),
    "fp8_e5m2fnuz": (1, 5, 2, 16, ml_dtypes.float8_e5m2fnuz),
    "fp8_e4m3_ieee": (1, 4, 3, 7, ml_dtypes.float8_e4m3), "fp8_e3m4": (1, 3, 4, 3, ml_dtypes.float8_e3m4),
    "fp6_e2m3": (1, 2, 3, 1, ml_dtypes.float6_e2m3fn), "fp6_e3m2": (1, 3, 2, 3, ml_dtypes.float6_e3m2fn),
    "fp4_e2m1": (1, 2, 1, 1, ml_dtypes.float4_e2m1fn), "e8m0": (0, 8, 0, 127, None),
}
# One inexact float32-exact input per format (float32-exact, so ml_dtypes rounds it once).
VALUE = {"fp64": 0.1, "fp32": 0.1, "tf32": -0.1, "fp16": 3.14159, "bf16": -3.14159,
         "fp8_e4m3": 0.3, "fp8_e5m2": -0.3, "fp8_e4m3fnuz": 3.3, "fp8_e5m2fnuz": 3.3e-4,
         "fp8_e4m3_ieee": 100.5, "fp8_e3m4": -1.7, "fp6_e2m3": 2.7, "fp6_e3m2": -5.2,
         "fp4_e2m1": 2.7, "e8m0": 0.3}


def _input(name):
    """(input, its exact value): fp64 gets the decimal string "0.1", fp32 a float64,
    the rest a float32-exact float (so ml_dtypes rounds it once)."""
    x = VALUE[name]
    if name == "fp64":
        return "0.1", Fraction(1, 10)
    if name != "fp32":
        x = float(np.float32(x))
    return x, Fraction(x)


def _oracle(name, x):
    """(stored value, code) from numpy / ml_dtypes / struct / integer arithmetic."""
    s, eb, mb, bias, dt = LAYOUT[name]
    if name == "fp64":
        v = float(x)  # Python parses decimal strings correctly rounded
        return v, struct.unpack(">Q", struct.pack(">d", v))[0]
    if name == "fp32":
        v = np.float32(x)
        return float(v), int(v.view(np.uint32))
    x32 = np.float32(x)
    if name == "tf32":  # RNE on the fp32 bit pattern, keep 19 bits
        b = int(x32.view(np.uint32))
        r = (b + 0xFFF + ((b >> 13) & 1)) >> 13
        return float(np.uint32(r << 13).view(np.float32)), r
    if name == "e8m0":  # nearest power of two (not a tie here)
        k = round(math.log2(x))
        return 2.0 ** k, k + 127
    v = x32.astype(dt)
    code = int(v.view(np.uint8 if v.dtype.itemsize == 1 else np.uint16))
    return float(v), code


def _fields(name, code):
    s, eb, mb, bias, _ = LAYOUT[name]
    bits = s + eb + mb
    b = format(code, f"0{bits}b")
    return b[:s], b[s:s + eb], b[s + eb:]


def _error_numbers(text):
    line = next(l for l in text.splitlines() if l.startswith("error"))
    m = re.search(r"absolute ([-+0-9.e]+), relative ([-+0-9.e]+), ([-+0-9.e]+) ulp", line)
    return [float(g) for g in m.groups()]


@pytest.mark.parametrize("name", list(LAYOUT))
def test_text_content_every_float_format(name):
    xin, X = _input(name)
    stored, code = _oracle(name, xin)
    e = ff.explain(xin, name)
    t = e.text(colour=False)
    s, eb, mb, bias, _ = LAYOUT[name]
    width = (s + eb + mb + 3) // 4
    assert e.value == stored and e.code == code
    assert f"0x{code:0{width}x}" in t
    sb, ebits, mbits = _fields(name, code)
    assert " ".join(p for p in (sb, ebits, mbits) if p) in t  # code in binary, split by field
    E = int(ebits, 2)
    unbiased = E - bias if E else 1 - bias
    assert f"E = {E}" in t and f"2^{unbiased}" in t
    assert e.exponent == unbiased
    if mb:
        sig = Fraction(int(mbits, 2) + (1 << mb if E else 0), 1 << mb)
        assert e.significand == sig
        assert str(Decimal(sig.numerator) / Decimal(sig.denominator)) in t
    # the stored value's exact decimal expansion, all digits (Decimal(float) is exact)
    assert str(Decimal(stored)).lower().replace("e", "E") in t or \
        format(Decimal(stored), "f") in t
    # the input's exact value
    exact_text = "0.1" if name == "fp64" else format(Decimal(float(X)), "f")  # Decimal(float) is exact
    assert f"(exactly {exact_text})" in t or f"input        {exact_text}  (exact value)" in t
    # class
    cls = "subnormal" if abs(stored) < 2.0 ** (1 - bias) and s else "normal"
    assert e.cls == cls and f"class        {cls}" in t
    # errors, computed here with Fractions
    err = Fraction(stored) - X
    a = abs(X)
    k = max(math.floor(math.log2(a)), 1 - bias if s else -bias) - mb
    ulps = err / Fraction(2) ** k
    got = _error_numbers(t)
    assert got[0] == pytest.approx(float(err), rel=1e-5)
    assert got[1] == pytest.approx(float(err / a), rel=1e-3)  # signed, like the absolute error
    assert got[2] == pytest.approx(float(ulps), rel=1e-3, abs=1e-4)
    assert e.abs_error == float(err) and e.ulp_error == pytest.approx(float(ulps), rel=1e-12)
    # both neighbours bracket the input, the stored value is one of them
    assert e.lower < X < e.upper and stored in (e.lower, e.upper)
    assert f"{e.lower!r}".rstrip("0").rstrip(".") in t or str(int(e.lower)) in t


@pytest.mark.parametrize("name", list(LAYOUT))
def test_html_boxes_every_float_format(name):
    xin, X = _input(name)
    stored, code = _oracle(name, xin)
    h = ff.explain(xin, name)._repr_html_()
    s, eb, mb, bias, _ = LAYOUT[name]
    boxes = re.findall(r'<span style="[^"]*background:(#[0-9a-f]{6})">([01])</span>', h)
    assert len(boxes) == s + eb + mb
    assert "".join(b for _, b in boxes) == format(code, f"0{s + eb + mb}b")
    colours = [c for c, _ in boxes]
    # one colour per field, runs of the right lengths in the right order
    runs = [len(list(g)) for _, g in __import__("itertools").groupby(colours)]
    assert runs == [n for n in (s, eb, mb) if n]
    assert ("<b>sign</b>" in h) == bool(s) and "<b>exponent</b>" in h
    assert ("<b>mantissa</b>" in h) == bool(mb)
    assert f"0x{code:0{(s + eb + mb + 3) // 4}x}" in h
    assert html_unescape(h).count(format(Decimal(stored), "f")) >= 1


def html_unescape(h):
    import html
    return html.unescape(h)


@pytest.mark.parametrize("name,x,code,bits", [
    ("int8", -3, 0xFD, "11111101"), ("int8", 100, 0x64, "01100100"), ("int4", -8, 0x8, "1000"),
    ("uint8", 200, 0xC8, "11001000"), ("uint4", 15, 0xF, "1111")])
def test_integer_formats_show_twos_complement(name, x, code, bits):
    assert int(np.array([x]).astype({"int8": np.int8, "uint8": np.uint8}.get(name, np.int64))[0]) & 0xFF \
        in (code, code | 0xF0)  # numpy agrees on the 8-bit ones
    e = ff.explain(x, name)
    t = e.text(colour=False)
    assert e.code == code and e.bits == bits
    assert f"0x{code:0{(len(bits) + 3) // 4}x}" in t and "two's complement" in t
    if x < 0:
        mag = format(-x, f"0{len(bits)}b")
        inv = "".join("1" if c == "0" else "0" for c in mag)
        assert f"|{x}| = {mag}, invert -> {inv}, add 1 -> {bits}" in t
        assert f"-{1 << (len(bits) - 1)}" in t  # the sign bit's negative weight
    h = e._repr_html_()
    assert h.count(">0</span>") + h.count(">1</span>") == len(bits)


def test_integer_rounding_ties_to_even():
    for x, want in ((2.5, 2), (3.5, 4), (-2.5, -2), (2.4, 2)):
        e = ff.explain(x, "int8")
        assert e.value == want
        assert e.tie == (x * 2 % 2 == 1)
        if e.tie:
            assert "tie" in e.text(colour=False)


def test_tie_and_sticky_wording():
    tie = ff.explain(1 + 2 ** -11, "fp16")  # halfway between 1 and 1 + 2^-10
    assert tie.value == 1.0 and tie.tie and tie.guard == 1 and tie.sticky == 0
    assert "tie" in tie.reason and "even" in tie.reason
    past = ff.explain(1 + 2 ** -11 + 2 ** -20, "fp16")
    assert past.value == 1 + 2 ** -10 and (past.guard, past.sticky) == (1, 1)
    assert "guard bit 1, sticky bit 1" in past.reason and past.direction == "away from zero"
    away = ff.explain(1 + 2 ** -11, "fp16", rounding="nearest_away")
    assert away.value == 1 + 2 ** -10 and "larger magnitude" in away.reason
    rtz = ff.explain(1.9999, "bf16", rounding="toward_zero")
    assert rtz.direction == "toward zero" and "discarded" in rtz.reason
    down = ff.explain(-1.1, "fp16", rounding="down")
    assert down.value == -(1 + 103 / 1024) and down.direction == "away from zero"


def test_position_and_neighbours():
    e = ff.explain(0.1, "bf16")
    # bf16 around 0.1: step 2^-11, neighbours 204/2048 and 205/2048; 0.1*2048 = 204.8
    assert (e.lower, e.upper) == (204 / 2048, 205 / 2048)
    assert e.gap == Fraction(1, 2048)
    assert float(e.position) == pytest.approx(0.8, abs=1e-12)
    t = e.text(colour=False)
    assert "0.099609375  <  x  <  0.10009765625" in t and "2^-11" in t
    assert "0.1000000000000000055511151231257827021181583404541015625" in t  # float64 0.1, exactly


def test_overflow_policies_e4m3():
    for x, policy, want in ((448, None, 448.0), (464, None, 448.0), (464, "saturate", 448.0),
                            (470, None, math.nan), (480, None, math.nan), (480, "saturate", 448.0),
                            (1e6, "saturate", 448.0)):
        e = ff.explain(x, "fp8_e4m3", overflow=policy)
        assert (math.isnan(e.value) and math.isnan(want)) or e.value == want
        t = e.text(colour=False)
        if x > 464:
            assert e.direction == "overflow" and "overflow" in e.reason
            assert (policy or "nan") in t
        if x == 464:
            assert e.tie and e.direction == "toward zero"
    e = ff.explain(65520, "fp16")
    assert e.value == math.inf and e.tie and e.direction == "overflow"
    e = ff.explain(70000, "fp16", rounding="toward_zero")
    assert e.value == 65504 and e.direction == "overflow" and "largest finite" in e.reason


def test_underflow_and_subnormal_notes():
    e = ff.explain(1e-9, "fp16")
    assert e.value == 0 and e.cls == "zero" and "Underflow" in e.text(colour=False)
    e = ff.explain(1e-7, "fp16")
    assert e.value == 2 * 2.0 ** -24 and e.cls == "subnormal" and "E = 0" in e.text(colour=False)


def test_tf32_shows_19_bit_code_and_fp32_word():
    e = ff.explain(1 + 2 ** -10, "tf32")
    b = int(np.float32(1 + 2 ** -10).view(np.uint32))
    assert e.code == b >> 13 and len(e.bits) == 19
    t = e.text(colour=False)
    assert f"0x{b >> 13:05x}" in t and f"0x{b:08x}" in t and "19-bit" in t


def test_specials():
    e = ff.explain(float("inf"), "fp8_e4m3")
    assert math.isnan(e.value) and "no Inf" in e.reason
    e = ff.explain(float("inf"), "fp8_e4m3", overflow="saturate")
    assert e.value == 448
    e = ff.explain(float("nan"), "fp4_e2m1")
    assert e.code is None and "no NaN" in e.text(colour=False)
    e = ff.explain(-1.0, "e8m0")
    assert math.isnan(e.value) and e.direction == "invalid"
    e = ff.explain(-0.0, "fp16")
    assert e.code == 0x8000 and e.cls == "zero"


def test_decimal_and_fraction_inputs_stay_exact():
    e = ff.explain("0.1", "fp32")
    assert e.exact == Fraction(1, 10)
    assert e.value == float(np.float32(0.1))
    assert "0.100000001490116119384765625" in e.text(colour=False)  # Decimal of the float32
    third = ff.explain(Fraction(1, 3), "fp16")
    assert "…" in third.text(colour=False) and third.value == float(np.float16(1 / 3))


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    e = ff.explain(0.1, "bf16")
    assert "\033[" in e.text(colour=True) and "\033[" not in e.text(colour=False)

    class Tty:
        def isatty(self):
            return True

        def write(self, s):
            pass

    monkeypatch.setattr("sys.stdout", Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\033[31m" in str(e) and "\033[34m" in str(e) and "\033[32m" in str(e)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\033[" not in str(e)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr("sys.stdout", __import__("io").StringIO())
    assert "\033[" not in str(e)


def test_array_gives_compact_table():
    x = np.array([0.1, 1e-7, 7e4, -3.5, np.nan])
    t = ff.explain(x, "fp16")
    assert isinstance(t, ExplanationTable) and len(t) == 5
    with np.errstate(over="ignore"):
        codes = np.float16(x).view(np.uint16)  # numpy's own fp16 codes (7e4 -> inf)
    text = str(t)
    for c in codes[:4]:
        assert f"0x{int(c):04x}" in text
    assert t.counts == {"nan": 1, "inf": 1, "zero": 0, "subnormal": 1, "normal": 2}
    assert isinstance(t[1], Explanation) and t[1].cls == "subnormal"
    assert "<table>" in t._repr_html_() and t._repr_html_().count("<tr>") == 6
    big = ff.explain(np.linspace(0, 1, 50), "fp8_e4m3", max_rows=5)
    assert "45 more" in str(big) and len(big.rows()) == 5


def test_exact_decimal_matches_decimal():
    for v in (0.1, 2.0 ** -149, 1e300, -7.25, 3.0):
        assert exact_decimal(v) == format(Decimal(v), "f")


def test_errors_on_bad_input():
    with pytest.raises(ValueError, match="unknown format"):
        ff.explain(1.0, "fp17")
    with pytest.raises(ValueError, match="rounding"):
        ff.explain(1.0, "fp16", rounding="sideways")
    with pytest.raises(TypeError):
        ff.explain(object(), "fp16")


# ------------------------------------------------------------------ compare
def test_compare_columns_and_values():
    t = ff.compare(["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8"])
    cols = ("bits", "layout", "bias", "max", "smallest normal", "smallest subnormal", "eps",
            "decimal digits", "dynamic range (decades)", "Inf/NaN")
    text = t.text()
    for c in cols:
        assert c in text
    rows = {r["format"]: r for r in t.rows}
    assert rows["fp16"]["max"] == "65504" and rows["fp8_e4m3"]["max"] == "448"
    assert rows["fp8_e5m2"]["max"] == "57344"
    assert rows["bf16"]["smallest normal"].startswith("2^-126")
    assert rows["fp16"]["smallest subnormal"].startswith("2^-24")
    assert rows["tf32"]["bits"] == 19 and rows["tf32"]["layout"] == "s1 e8 m10"
    assert rows["bf16"]["eps"].startswith("2^-7")
    assert rows["fp16"]["decimal digits"] == f"{11 * math.log10(2):.2f}"
    assert rows["fp16"]["dynamic range (decades)"] == f"{math.log10(65504 / 2 ** -24):.1f}"
    assert rows["fp32"]["dynamic range (decades)"] == \
        f"{math.log10(float(np.finfo(np.float32).max)) + 149 * math.log10(2):.1f}"
    assert rows["fp8_e4m3"]["Inf/NaN"] == "NaN" and rows["fp16"]["Inf/NaN"] == "Inf, NaN"
    assert rows["int8"]["max"] == "127" and "two's complement" in rows["int8"]["layout"]
    md = t.markdown().splitlines()
    assert len(md) == 9 and md[1].startswith("|---") and md[0].count("|") == len(cols) + 2
    h = t._repr_html_()
    assert h.count("<tr>") == 8 and "<th>eps</th>" in h
    assert t._repr_markdown_() == t.markdown() and repr(t) == text


def test_compare_default_and_single():
    assert [r["format"] for r in ff.compare().rows][:4] == ["fp32", "tf32", "fp16", "bf16"]
    assert len(ff.compare("fp4").rows) == 1
    with pytest.raises(ValueError):
        ff.compare(["fp16", "nope"])


def test_explorer_with_and_without_widgets(monkeypatch):
    import builtins
    from floatfmt.teach.explorer_widget import explorer
    pytest.importorskip("ipywidgets")
    box = explorer("fp8_e4m3", 0.3)
    assert type(box).__name__ == "VBox"
    fsel, mode = box.children[0].children
    text, code = box.children[1].children
    code.value = 0x7E  # the slider sets the value from a code
    assert text.value == "448.0"
    fsel.value = "fp32"
    assert code.max == 0xFFFF
    real_import = builtins.__import__

    def no_widgets(name, *args, **kw):
        if name.startswith("ipywidgets"):
            raise ImportError(name)
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_widgets)
    static = explorer("bf16", 0.1)
    assert isinstance(static, Explanation) and static.code == 0x3DCD


@pytest.mark.parametrize("name", ff.formats())
def test_every_registered_format_explains(name):
    """Smoke test that also covers formats registered later: the explanation's
    value and code agree with cast / encode, and both renderings build."""
    f = ff.get_format(name)
    x = 3 if f.kind == "int" else 0.3
    e = ff.explain(x, name)
    assert e.value == ff.cast(x, name) and e.code == ff.encode(x, name)
    assert e.bits == format(e.code, f"0{f.bits}b")
    assert f"0x{e.code:0{(f.bits + 3) // 4}x}" in e.text(colour=False)
    assert e._repr_html_().count("</span>") == f.bits


def test_array_table_uses_one_draw_for_stochastic_rounding():
    x = np.full(8, 1 + 2 ** -12)
    t = ff.explain(x, "fp16", rounding="stochastic", rng=3)
    assert [t[i].value for i in range(8)] == t.stored.tolist()
    assert set(t.stored.tolist()) <= {1.0, 1 + 2 ** -10}


# ----------------------------------------------------------------------------- MX / NVFP4 blocks
# Expected numbers computed here from the OCP rules (reference/formats.md), with Fractions.
_FIELD_BG = {"sign": "#f6b8c0", "exponent": "#b7d3f2", "mantissa": "#bfe5b4"}


def _grid(ebits, mbits, bias, nan_codes=()):
    """{code: Fraction value} of the non-negative codes of a small float format."""
    out = {}
    for c in range(1 << (ebits + mbits)):
        if c in nan_codes:
            continue
        e, m = c >> mbits, c & ((1 << mbits) - 1)
        out[c] = (Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias) if e == 0
                  else (1 + Fraction(m, 1 << mbits)) * Fraction(2) ** (e - bias))
    return out


E2M1 = _grid(2, 1, 1)
E4M3 = _grid(4, 3, 7, nan_codes=(0x7F,))


def _rne(y: Fraction, grid, sbit):
    """(code, value) of y rounded to nearest (ties to the even code), saturating."""
    mag = abs(y)
    best = min(grid, key=lambda c: (abs(grid[c] - mag), c & 1))
    code = best | (sbit if y < 0 else 0)
    return code, (-grid[best] if y < 0 else grid[best])


def _floor_log2_frac(a: Fraction) -> int:
    k = a.numerator.bit_length() - a.denominator.bit_length()
    return k - 1 if Fraction(2) ** k > a else k


def _element_rows(h):
    """HTML element table rows: (monospace cell texts, [(colour, bit)]) per row."""
    table = h.split("<table>")[-1]
    out = []
    for row in table.split("<tr")[2:]:
        cells = re.findall(r'<td style="font-family:monospace">([^<]*)</td>', row)
        boxes = re.findall(r'<span style="[^"]*background:(#[0-9a-f]{6})">([01])</span>', row)
        out.append((cells, boxes, 'background:#fde2c8"' in row.split(">")[0] + '"'))
    return out


def _check_block(b, x, fmt_bits, grid, emax, sbit, layout):
    """Compare text and HTML of a BlockExplanation of an MX block with expectations."""
    X = [Fraction(v) for v in x]
    amax = max(abs(v) for v in X)
    k = _floor_log2_frac(amax)
    E = k - emax
    scale = Fraction(2) ** E
    t, h = b.text(colour=False), b._repr_html_()
    scode = E + 127
    assert f"0x{scode:02x} = {scode:08b}" in t and f"0x{scode:02x} = {scode:08b}" in h
    assert f"2^({scode}-127) = 2^{E}" in t
    assert f"shared exponent E = {E}" in t
    assert f"floor(log2 amax) = {k}" in t and f"minus emax = {emax}" in t
    assert (b.scale_code, b.shared_exponent, b.amax) == (scode, E, amax)
    # the scale's 8 bits as boxes, all exponent-coloured
    head_boxes = re.findall(r'<span style="[^"]*background:(#[0-9a-f]{6})">([01])</span>',
                            h.split("<table>")[0])
    assert head_boxes == [(_FIELD_BG["exponent"], c) for c in f"{scode:08b}"]
    lines = t.splitlines()
    start = next(i for i, s in enumerate(lines) if s.lstrip().startswith("#")) + 2
    html_rows = _element_rows(h)
    assert len(html_rows) == len(x)
    flags = {"sat": [], "ftz": []}
    for i, v in enumerate(X):
        y = v / scale
        code, val = _rne(y, grid, sbit)
        bits = format(code, f"0{fmt_bits}b")
        s, e, m = bits[0], bits[1:1 + layout[0]], bits[1 + layout[0]:]
        sat, ftz = abs(y) > max(grid.values()), y != 0 and val == 0
        flags["sat"].append(sat)
        flags["ftz"].append(ftz)
        note = "saturated (clipped to ±max)" if sat else "flushed to zero" if ftz else ""
        cols = re.split(r"\s{2,}", lines[start + i].strip())
        width = (fmt_bits + 3) // 4
        assert cols[0] == str(b.positions[i]) and float(cols[1]) == x[i]
        assert float(cols[2]) == float(y)
        assert cols[3] == f"0x{code:0{width}x}" and cols[4] == f"{s} {e} {m}"
        assert float(cols[5]) == val and float(cols[6]) == val * scale
        assert (cols[8] if len(cols) > 8 else "") == note
        cells, boxes, flagged = html_rows[i]
        assert cells[3] == cols[3] and float(cells[4]) == val and float(cells[5]) == val * scale  # bits td apart
        assert boxes == ([(_FIELD_BG["sign"], s)] + [(_FIELD_BG["exponent"], c) for c in e]
                         + [(_FIELD_BG["mantissa"], c) for c in m])
        assert flagged == bool(note) and (note in cells[-1] if note else cells[-1] == "")
        assert b.codes[i] == code and Fraction(b.elements[i]) == val
        assert b.errors[i] == float(val * scale - v)
    assert b.saturated == flags["sat"] and b.flushed == flags["ftz"]
    return flags


def test_explain_block_mxfp4():
    # amax 1.75 -> floor(log2) 0, E = 0 - 2 = -2; 1.75/0.25 = 7 saturates to 6, 0.05 -> 0.2 flushes,
    # 1.25 -> 5 is a tie (4 or 6: even code gives 4), -0.65 -> -2.6 -> -3
    x = [1.75, 1.25, -0.65, 0.05, 0.375, -0.125, 0.3] + [0.0] * 25
    q = ff.quantize(np.array(x), "mxfp4_e2m1")
    flags = _check_block(ff.explain(np.array(x), "mxfp4_e2m1"), x, 4, E2M1, 2, 0b1000, (2, 1))
    assert flags["sat"][0] and flags["ftz"][3] and sum(flags["sat"]) == 1 and sum(flags["ftz"]) == 1
    b = explain_block(q, x=x)
    assert b.elements[:3] == [6.0, 4.0, -3.0]
    # without the originals: codes and scale still there, x unknown
    t = str(ff.explain(q))
    assert "0x7d = 01111101" in t and "x unknown" in t and "flushed" not in t


def test_explain_block_mxfp8_second_block_and_axis():
    # block 1 of each row runs along axis 0 here; amax 1000 -> floor(log2) 9, E = 9 - 8 = 1:
    # 1000/2 = 500 saturates to 448, 0.0005/2 flushes (below half of 2^-9), 0.006/2 is subnormal
    col = [1000.0, 3.3, 0.0005, -17.3, 0.006, -0.75] + [0.0] * 26
    x = np.zeros((64, 2))
    x[32:, 1] = col
    x[:32, 0] = 1.0
    q = ff.quantize(x, "mxfp8_e4m3", axis=0)
    # storage order: blocks along axis 0 for column 0 (0, 1), then column 1 (2, 3)
    b = explain_block(q, 3, x=x)
    assert b.positions == list(range(32, 64))
    flags = _check_block(b, col, 8, E4M3, 8, 0x80, (4, 3))
    assert flags["sat"][0] and flags["ftz"][2] and not flags["ftz"][4]
    assert b.elements[4] == 2.0 ** -9 * 2 and b.codes[4] == 0x02


def test_explain_block_nvfp4_scales():
    x = np.array([3.0, -0.1, 1.0, 0.5] + [0.0] * 12 + [100.0] + [1.0] * 15)
    b = ff.explain(x, "nvfp4", block=0)
    ts = Fraction(float(np.float32(100.0 / 2688)))  # fp32 tensor scale: amax / (6 * 448)
    code, bscale = _rne(Fraction(3) / (6 * ts), E4M3, 0x80)
    t = b.text(colour=False)
    assert b.scale_code == code and Fraction(b.scale) == bscale and Fraction(b.tensor_scale) == ts
    bits = format(code, "08b")
    assert f"0x{code:02x} = {bits[0]} {bits[1:5]} {bits[5:]}" in t and "(E4M3)" in t
    assert f"tensor scale {float(ts)!r} (fp32)" in t and "amax(tensor) 100 / (6 × 448)" in t
    for i, v in enumerate(x[:16]):
        c, val = _rne(Fraction(v) / (bscale * ts), E2M1, 0b1000)
        assert b.codes[i] == c and Fraction(b.dequantized[i]) == val * bscale * ts


def test_explain_block_colour_errors_and_nan_scale():
    x = np.array([np.inf] + [1.0] * 31)
    b = ff.explain(x, "mxfp4_e2m1")
    t = b.text(colour=True)
    assert "0xff = 11111111" in b.text(colour=False) and "NaN scale" in t and "\033[31m0\033[0m \033[34m00\033[0m" in t
    assert all(math.isnan(d) for d in b.dequantized)
    assert "nan" not in b.text(colour=False).split("\n")[0]
    q = ff.quantize(np.ones(40), "mxfp4_e2m1")
    assert explain_block(q, -1).positions == list(range(32, 40))
    with pytest.raises(IndexError):
        explain_block(q, 2)
    with pytest.raises(TypeError):
        explain_block(q, 1.0)
    with pytest.raises(TypeError):
        ff.explain(q, "fp8_e4m3")
    with pytest.raises(ValueError):
        explain_block(ff.quantize([1.0, 2.0], "int8"))
    with pytest.raises(ValueError):
        explain_block(q, 0, x=np.ones(39))


# ----------------------------------------------------------------------------- issue 12 wording
def _html_rows(h):
    """{label: text} of an explanation's HTML table (the cell's text, without its tags)."""
    import html as _html
    return {k: _html.unescape(re.sub(r"<[^>]+>", "", v)) for k, v in
            re.findall(r"<th[^>]*>([^<]*)</th><td[^>]*>(.*?)</td>", h)}


@pytest.mark.parametrize("mode", ["nearest_even", "nearest_away"])
@pytest.mark.parametrize("x,fmt", [(0.1, "bf16"), (-0.1, "bf16"), (1 + 2 ** -11, "fp16"), (-2.5, "int8"),
                                   (0.3, "fp8_e4m3"), (-127.6, "int8"), (1e-40, "bf16"), (2.7, "fp4_e2m1")])
def test_nearest_modes_do_not_use_other_modes_names(x, fmt, mode):
    """The label and reason of a nearest mode name the nearer neighbour (and why), never
    "toward zero" / "away from zero", which read as the names of other modes."""
    e = ff.explain(x, fmt, mode)
    line = next(l for l in e.text(colour=False).splitlines() if l.startswith("rounding"))
    html_line = _html_rows(e._repr_html_())["rounding"]
    for text in (line, html_line):
        assert "toward zero" not in text and "away from zero" not in text, text
    X = Fraction(x)
    lo, hi = Fraction(e.lower), Fraction(e.upper)
    if 2 * X == lo + hi:
        assert "a tie" in line and "midpoint" in line
    else:
        nearer = min((lo, hi), key=lambda n: abs(n - X))
        side = "below" if X < (lo + hi) / 2 else "above"
        v = float(nearer)
        shown = str(int(v)) if v == int(v) else repr(v)
        assert f"x lies {side} the midpoint" in line and f"nearer neighbour is {shown}" in line


@pytest.mark.parametrize("x,fmt", [(0.1, "bf16"), (-0.1, "bf16"), (-3.14159, "fp16"), (-2.6, "int8"),
                                   (2.6, "int8"), (-1e-40, "bf16")])
def test_relative_error_signed_like_absolute(x, fmt):
    e = ff.explain(x, fmt)
    err = Fraction(e.value) - Fraction(x)
    want = err / abs(Fraction(x))
    assert e.rel_error == pytest.approx(float(want), rel=1e-12) and (e.rel_error < 0) == (err < 0)
    for text in (e.text(colour=False), _html_rows(e._repr_html_())["error"]):
        got = re.search(r"absolute ([-+][0-9.e+-]+), relative ([-+][0-9.e+-]+)", text)
        assert got and got.group(1)[0] == got.group(2)[0] == ("-" if err < 0 else "+"), text
    row = ff.explain(np.array([x]), fmt).rows()[0]
    assert row[7][0] == ("-" if err < 0 else "+")


def test_html_reason_and_notes_are_separate_sentences():
    e = ff.explain(1e-40, "bf16")  # subnormal result: the reason is followed by a note
    assert e.notes
    row = _html_rows(e._repr_html_())["rounding"]
    assert re.search(r"\.[A-Z]", row) is None, row  # "e-41.Subnormal" had no space
    assert e.notes[0] in row
