"""``ff.explain`` and ``ff.compare`` with the block formats of the registry
(``ff.block_formats()``: OCP MX and NVFP4, and their aliases).

A scalar explained in a block format is a block of one: its shared scale is chosen
from the value alone, and the element is the value divided by the scale, rounded
to the element format.  The expected scale and element are worked out here from
the specs' rules with the core ``cast`` (one rounding, no block-scaling code), so
a wrong scale rule or a wrong element rounding in the quantiser or the explanation
shows up as a mismatch.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

import floatfmt as ff
from floatfmt.core.block_formats import get_block_format

MX = [n for n in ff.block_formats() if n.startswith("mx")]


def _values(seed: int, n: int = 60) -> list[float]:
    rnd = random.Random(seed)
    out = [0.3, -0.3, 1.0, 6.0, 7.0, 448.0, 1e-3, -2.6, 1e5, 2.0 ** -20]
    while len(out) < n:
        out.append(rnd.choice((-1, 1)) * rnd.uniform(1, 10) * 10.0 ** rnd.randint(-6, 6))
    return out


def _mx_expected(x: float, name: str) -> tuple[int, float]:
    """(shared exponent, element value) of x as an MX block of one (OCP MX v1.0:
    E = floor(log2 |x|) - emax_elem, clamped to E8M0's [-127, 127]; the element is
    x / 2^E rounded to nearest even in the element format, saturating)."""
    b = get_block_format(name)
    elem = b.element_format
    emax = 0 if elem.kind == "int" else elem.emax
    if x == 0:
        E = -127
    else:
        k = math.frexp(abs(x))[1] - 1  # floor(log2 |x|), exact for a float
        E = max(min(k - emax, 127), -127)
    q = Fraction(x) / Fraction(2) ** E * 2 ** b.element_shift
    v = ff.cast(q, elem, overflow="saturate")
    return E, v / 2 ** b.element_shift


@pytest.mark.parametrize("name", MX)
def test_scalar_in_an_mx_format_is_a_block_of_one(name):
    bad = []
    for x in _values(len(name)):
        b = ff.explain(x, name)
        E, elem = _mx_expected(x, name)
        got = (b.size, b.shared_exponent, b.elements[0], b.dequantized[0])
        want = (1, E, elem, elem * 2.0 ** E)
        if got != want:
            bad.append(f"{x!r}: got {got}, want {want}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:10])


def test_scalar_in_nvfp4_is_a_block_of_one():
    """NVFP4: tensor scale = fp32(amax / (6 * 448)); block scale = e4m3(amax / (6 *
    tensor scale)), saturating; element = x / (block scale * tensor scale) rounded to
    fp4_e2m1, saturating.  For a block of one, amax = |x|."""
    bad = []
    for x in _values(4):
        if x == 0:
            continue
        b = ff.explain(x, "nvfp4")
        ts = ff.cast(Fraction(abs(x)) / 2688, "fp32")
        bs = ff.cast(Fraction(abs(x)) / (6 * Fraction(ts)), "fp8_e4m3", overflow="saturate")
        elem = ff.cast(Fraction(x) / (Fraction(bs) * Fraction(ts)), "fp4_e2m1", overflow="saturate")
        got = (b.size, b.tensor_scale, b.scale, b.elements[0])
        if got != (1, ts, bs, elem):
            bad.append(f"{x!r}: got {got}, want {(1, ts, bs, elem)}")
    assert not bad, "\n".join(bad[:10])


def test_aliases_and_block_format_objects_are_accepted():
    x = [7.0, 0.2, -2.6] + [0.0] * 29
    want = ff.explain(x, "mxfp4_e2m1").text(colour=False)
    assert ff.explain(x, "mxfp4").text(colour=False) == want
    assert ff.explain(x, get_block_format("mxfp4")).text(colour=False) == want
    assert ff.explain(0.3, "MXFP8").fmt == "mxfp8_e4m3"


def test_unknown_block_name_lists_the_block_formats():
    with pytest.raises(ValueError, match="mxfp4_e2m1"):
        ff.explain(1.0, "mxfp5")
    with pytest.raises(ValueError, match="nvfp4"):
        ff.compare(["nvfp5"])


@pytest.mark.parametrize("name", ff.block_formats())
def test_compare_rows_of_block_formats(name):
    b = get_block_format(name)
    elem, scale = ff.get_format(b.element), ff.get_format(b.scale)
    row = ff.compare([name]).rows[0]
    plain = ff.compare([b.element]).rows[0]
    assert row["format"] == name
    assert Fraction(row["bits"]) == elem.bits + Fraction(scale.bits, b.block_size)
    assert row["layout"].startswith(f"{b.element} ×{b.block_size} + {b.scale} scale")
    assert ("tensor scale" in row["layout"]) == (b.tensor_scale is not None)
    # precision is the element's; magnitudes are multiples of the block's scale
    assert row["decimal digits"] == plain["decimal digits"]
    assert row["max"].endswith("× scale")
    top = row["max"].removesuffix(" × scale").strip("()").split(" ≈ ")[-1]
    assert float(top) == pytest.approx(elem.max / 2 ** b.element_shift, rel=1e-3)
    assert row["dynamic range (decades)"] == plain["dynamic range (decades)"] + " per block"
    assert ("NaN scale (0xff)" in row["Inf/NaN"]) == (b.scale == "e8m0")


def test_compare_mixes_block_and_element_formats():
    t = ff.compare(["fp4_e2m1", "mxfp4_e2m1", "nvfp4"])
    assert [r["format"] for r in t.rows] == ["fp4_e2m1", "mxfp4_e2m1", "nvfp4"]
    assert [r["bits"] for r in t.rows] == [4, "4.25", "4.5"]
    assert t.markdown().count("\n") == 4 and "<td>mxfp4_e2m1</td>" in t.html()
