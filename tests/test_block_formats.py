"""MX and NVFP4 as registry data (issue 15, "Registry"): the block facts that
``ff.info``, ``ff.block_formats``, the CLI and the quantisation read.

Expected values are the published ones, written out here, not read from the code:
OCP Microscaling Formats (MX) v1.0, section 5 (Table 1: k = 32, scale E8M0 of 8 bits,
element widths 8 / 6 / 4 / 8; the shared-exponent rule's emax_elem 8, 15, 2, 4, 2, 0;
MXINT8 elements two's complement with an implicit 2**-6, max 127/64 = 1.984375) and
NVIDIA's NVFP4 (E2M1 elements in blocks of 16, an unsigned E4M3 block scale, one FP32
scale per tensor), as summarised in /work/shared/reference/formats.md.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.cli import main

# name: (element, element bits, emax_elem, element max, block size, scale, scale bits, tensor scale)
SPEC = {
    "mxfp8_e4m3": ("fp8_e4m3", 8, 8, 448.0, 32, "e8m0", 8, None),
    "mxfp8_e5m2": ("fp8_e5m2", 8, 15, 57344.0, 32, "e8m0", 8, None),
    "mxfp6_e2m3": ("fp6_e2m3", 6, 2, 7.5, 32, "e8m0", 8, None),
    "mxfp6_e3m2": ("fp6_e3m2", 6, 4, 28.0, 32, "e8m0", 8, None),
    "mxfp4_e2m1": ("fp4_e2m1", 4, 2, 6.0, 32, "e8m0", 8, None),
    "mxint8": ("int8", 8, 0, 1.984375, 32, "e8m0", 8, None),
    "nvfp4": ("fp4_e2m1", 4, 2, 6.0, 16, "fp8_e4m3", 8, "fp32"),
}


def test_block_formats_lists_exactly_the_published_ones():
    assert sorted(ff.block_formats()) == sorted(SPEC)
    assert not set(ff.block_formats()) & set(ff.formats())  # element formats stay apart


@pytest.mark.parametrize("name", list(SPEC))
def test_info_gives_the_published_block_facts(name):
    elem, ebits, emax, emax_val, k, scale, sbits, ts = SPEC[name]
    i = ff.info(name)
    assert isinstance(i, ff.BlockFormatInfo) and i.kind == "block" and i.name == name
    assert (i.element, i.element_bits, i.emax_elem, i.element_max) == (elem, ebits, emax, emax_val)
    assert (i.block_size, i.scale, i.scale_bits, i.tensor_scale) == (k, scale, sbits, ts)
    # storage per element: (k * d + w) / k bits for k elements of d bits and one w-bit scale
    assert Fraction(i.bits_per_element) == Fraction(k * ebits + sbits, k)
    assert name in repr(i) and "block_size = " + str(k) in repr(i)


def test_published_bits_per_element():
    assert {n: ff.info(n).bits_per_element for n in SPEC} == {
        "mxfp8_e4m3": 8.25, "mxfp8_e5m2": 8.25, "mxfp6_e2m3": 6.25, "mxfp6_e3m2": 6.25,
        "mxfp4_e2m1": 4.25, "mxint8": 8.25, "nvfp4": 4.5}


def test_scale_formats_are_the_published_ones():
    e8m0 = ff.info("e8m0")  # unsigned powers of two 2**-127 .. 2**127, NaN 0xFF
    assert (e8m0.bits, e8m0.max, e8m0.smallest_normal, e8m0.nan_codes) == (8, 2.0 ** 127, 2.0 ** -127, ("0xff",))
    e4m3 = ff.get_block_format("nvfp4").scale_format
    assert (e4m3.bits, e4m3.max) == (8, 448.0)


@pytest.mark.parametrize("alias, name", [("mxfp8", "mxfp8_e4m3"), ("MXFP6", "mxfp6_e2m3"),
                                         ("mxfp4", "mxfp4_e2m1"), ("mxint", "mxint8"),
                                         ("mxfp8_e4m3fn", "mxfp8_e4m3"), (" NVFP4 ", "nvfp4"),
                                         ("mxfp4-e2m1", "mxfp4_e2m1")])
def test_aliases(alias, name):
    assert ff.get_block_format(alias).name == name
    assert ff.info(alias).name == name


def test_unknown_block_name_teaches():
    with pytest.raises(ValueError) as err:
        ff.get_block_format("mxfp5")
    msg = str(err.value)
    # suggestions name listed names only (the alias mxfp4 as mxfp4_e2m1)
    assert "'mxfp5'" in msg and "'mxfp4_e2m1'" in msg
    for n in SPEC:
        assert n in msg
    with pytest.raises(ValueError) as err:
        ff.info("nvfp3")  # neither an element nor a block format
    assert "'nvfp4'" in str(err.value) and "fp16" in str(err.value)
    with pytest.raises(TypeError):
        ff.get_block_format(4)


def test_block_format_record_validates():
    with pytest.raises(ValueError):
        ff.BlockFormat("bad", "fp4_e2m1", 0, "e8m0")
    with pytest.raises(ValueError):
        ff.BlockFormat("bad", "fp4_e9m9", 32, "e8m0")  # not a format


@pytest.mark.parametrize("name", list(SPEC))
def test_quantize_uses_the_registry_facts(name):
    elem, _, _, emax_val, k, scale, _, ts = SPEC[name]
    x = np.linspace(-3.0, 5.0, 3 * k + 5)
    q = ff.quantize(x, name)
    assert q.block_size == k and q.element_format.name == elem and q.fmt == name
    assert q.scale.shape == (-(-x.size // k),)
    assert np.abs(q.elements).max() <= emax_val
    assert (q.tensor_scale is None) == (ts is None)
    if scale == "e8m0":  # powers of two, codes = biased exponents
        assert np.array_equal(q.scale, np.ldexp(1.0, q.scale_codes.astype(int) - 127))
    # storage: element bits + 8 per block (+ 32 for the tensor scale)
    nb = q.scale.size
    assert q.bits_per_element == pytest.approx(
        ff.info(name).element_bits + (8 * nb + (32 if ts else 0)) / x.size)


def test_cli_info_block_and_element(capsys):
    assert main(["info", "mxfp4"]) == 0
    out = capsys.readouterr().out
    assert "mxfp4_e2m1" in out and "block_size = 32" in out and "e8m0" in out and "4.25" in out
    assert main(["info", "nvfp4"]) == 0
    out = capsys.readouterr().out
    assert "block_size = 16" in out and "fp8_e4m3" in out and "fp32" in out and "4.5" in out
    assert main(["info", "fp16"]) == 0
    assert "65504" in capsys.readouterr().out
    assert main(["info", "mxfp5"]) == 2
    assert "'mxfp4'" in capsys.readouterr().err


def test_cli_formats_lists_block_formats(capsys):
    assert main(["formats"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in SPEC:
        row = next(ln for ln in lines if ln.split()[:1] == [name])
        assert str(SPEC[name][4]) in row.split()
