"""Packed storage of 4- and 6-bit codes (ff.pack / ff.unpack) and of MX / NVFP4 tensors.

Two independent references for the byte layout:
* a Python-integer bit stream (code i at bits w*i.. of one big integer, written out
  with int.to_bytes), and
* numpy.packbits over the codes' bits;
plus the published layouts themselves (NVIDIA / PyTorch FP4: element 2j in bits 3..0;
AMD rocRoller FP6: e0 = b0[5:0], e1 = b0[7:6] | b1[3:0] << 2, e2 = b1[7:4] | b2[1:0] << 4,
e3 = b2[7:2]; see shared/reference/matrix_units_and_formats.md section 11).
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

import floatfmt as ff
from floatfmt.core.packing import BITORDERS, PackedTensor, packed_nbytes
from floatfmt.scaling.mx_nvfp4 import MX_FORMATS
from floatfmt.scaling.quantized_tensor import QuantizedTensor

SUB_BYTE = ("fp4_e2m1", "int4", "uint4", "fp6_e2m3", "fp6_e3m2")
WIDTH = {"fp4_e2m1": 4, "int4": 4, "uint4": 4, "fp6_e2m3": 6, "fp6_e3m2": 6}


# ----------------------------------------------------------------------------- references
def ref_pack_int(codes, w, order):
    """Bytes of the codes as one Python integer bit stream."""
    codes = [int(c) for c in codes]
    n = len(codes)
    nbytes = -(-n * w // 8)
    if order == "little":
        acc = 0
        for i, c in enumerate(codes):
            acc |= c << (w * i)
        return list(acc.to_bytes(nbytes, "little"))
    acc = 0
    for c in codes:
        acc = (acc << w) | c
    acc <<= nbytes * 8 - n * w
    return list(acc.to_bytes(nbytes, "big"))


def ref_pack_bits(codes, w, order):
    """Bytes of the codes through numpy.packbits (each code's bits in stream order)."""
    c = np.asarray(codes, np.int64).reshape(-1)
    if order == "little":
        bits = (c[:, None] >> np.arange(w)) & 1
    else:
        bits = (c[:, None] >> np.arange(w - 1, -1, -1)) & 1
    return np.packbits(bits.reshape(-1).astype(np.uint8), bitorder=order)


def rocroller_fp6(b):
    """The four 6-bit codes of three bytes as AMD rocRoller's getFp6 reads them."""
    b0, b1, b2 = (int(x) for x in b)
    return [b0 & 0x3F, (b0 >> 6) | ((b1 & 0xF) << 2), (b1 >> 4) | ((b2 & 0x3) << 4), b2 >> 2]


# ----------------------------------------------------------------------------- exhaustive layout
@pytest.mark.parametrize("fmt", SUB_BYTE)
@pytest.mark.parametrize("order", BITORDERS)
def test_every_code_at_every_position_and_length(fmt, order):
    """Every code at every position of arrays of every length up to three whole groups
    (odd lengths and partial groups included), the other positions random: the bytes
    equal the integer bit-stream reference and unpack gives the codes back."""
    w = WIDTH[fmt]
    per = 2 if w == 4 else 4
    rng = np.random.default_rng(w)
    bad = 0
    for n in range(1, 3 * per + 2):
        for pos in range(n):
            for c in range(1 << w):
                codes = rng.integers(0, 1 << w, n)
                codes[pos] = c
                got = ff.pack(codes, fmt, bitorder=order)
                bad += got.dtype != np.uint8 or got.tolist() != ref_pack_int(codes, w, order)
                back = ff.unpack(got, fmt, n, bitorder=order)
                bad += back.tolist() != codes.tolist()
    assert bad == 0


@pytest.mark.parametrize("order", BITORDERS)
def test_fp4_byte_map_is_the_published_one(order):
    """All 256 pairs: little order is NVIDIA's / PyTorch's (first element in bits 3..0),
    big order AMD Quark's (first element in bits 7..4); each a bijection pairs <-> bytes."""
    pairs = np.array(list(itertools.product(range(16), repeat=2)))
    got = ff.pack(pairs, "fp4_e2m1", bitorder=order)
    a, b = pairs[:, 0], pairs[:, 1]
    want = a | (b << 4) if order == "little" else (a << 4) | b
    assert got.tolist() == want.tolist()
    assert sorted(got.tolist()) == list(range(256))
    assert ff.unpack(got, "fp4_e2m1", pairs.shape, bitorder=order).tolist() == pairs.tolist()


def test_fp6_layout_is_rocrollers():
    """Four FP6 codes in three bytes, read back by rocRoller's formula: every code at each
    of the four positions, and all 64 x 64 pairs at each pair of adjacent positions."""
    rng = np.random.default_rng(6)
    bad = 0
    for pos in range(4):
        for c in range(64):
            codes = rng.integers(0, 64, 4)
            codes[pos] = c
            bad += rocroller_fp6(ff.pack(codes, "fp6_e3m2")) != codes.tolist()
    grid = np.array(list(itertools.product(range(64), repeat=2)))
    for pos in range(3):
        codes = rng.integers(0, 64, (grid.shape[0], 4))
        codes[:, pos:pos + 2] = grid
        packed = ff.pack(codes, "fp6_e2m3").reshape(-1, 3)
        bad += sum(rocroller_fp6(p) != q.tolist() for p, q in zip(packed, codes))
    assert bad == 0
    # positions 3 and 0 of the next group meet at a byte boundary
    codes = np.zeros((grid.shape[0], 8), np.int64)
    codes[:, 3:5] = grid
    packed = ff.pack(codes, "fp6_e2m3").reshape(-1, 6)
    assert all(rocroller_fp6(p[:3])[3] == q[0] and rocroller_fp6(p[3:])[0] == q[1]
               for p, q in zip(packed, grid))


@pytest.mark.parametrize("fmt", SUB_BYTE)
@pytest.mark.parametrize("order", BITORDERS)
def test_random_arrays_against_packbits(fmt, order):
    """Large random arrays of many shapes: bytes equal numpy.packbits of the codes' bits,
    the byte count is ceil(n * bits / 8), and unpack restores codes and shape."""
    w = WIDTH[fmt]
    rng = np.random.default_rng(100 + w)
    for shape in [(1,), (7,), (3, 5), (2, 3, 7), (64, 33), (4097,), (5, 0), ()]:
        codes = rng.integers(0, 1 << w, shape).astype(np.uint8)
        got = ff.pack(codes, fmt, bitorder=order)
        assert got.size == packed_nbytes(codes.size, fmt) == -(-codes.size * w // 8)
        np.testing.assert_array_equal(got, ref_pack_bits(codes, w, order))
        back = ff.unpack(got, fmt, shape, bitorder=order)
        assert back.shape == shape and back.dtype == np.uint8
        np.testing.assert_array_equal(back, codes)


@pytest.mark.parametrize("fmt", ["e2m0", "e2m2", "e3m3"])
@pytest.mark.parametrize("order", BITORDERS)
def test_other_widths_follow_the_same_stream_rule(fmt, order):
    """3-, 5- and 7-bit formats (parsed names): the same bit-stream rule, checked against
    the integer reference for every code at every position of two whole groups."""
    w = ff.get_format(fmt).bits
    rng = np.random.default_rng(w)
    bad = 0
    for n in (1, 7, 9, 17):
        for pos in range(n):
            for c in range(1 << w):
                codes = rng.integers(0, 1 << w, n)
                codes[pos] = c
                got = ff.pack(codes, fmt, bitorder=order)
                bad += got.tolist() != ref_pack_int(codes, w, order)
                bad += ff.unpack(got, fmt, n, bitorder=order).tolist() != codes.tolist()
    assert bad == 0


@pytest.mark.parametrize("fmt", SUB_BYTE)
def test_padding_bits_are_zero_and_checked(fmt):
    """The rule for lengths that do not fill the last byte: the unused bits are zero;
    unpack refuses a last byte with non-zero padding (usually a wrong shape)."""
    w = WIDTH[fmt]
    top = (1 << w) - 1
    for n in range(1, 9):
        if n * w % 8 == 0:
            continue
        used = n * w % 8
        little = ff.pack([top] * n, fmt)
        assert int(little[-1]) >> used == 0 and int(little[-1]) == (1 << used) - 1
        big = ff.pack([top] * n, fmt, bitorder="big")
        assert int(big[-1]) & ((1 << (8 - used)) - 1) == 0
        spoiled = little.copy()
        spoiled[-1] |= 1 << used
        with pytest.raises(ValueError, match="padding"):
            ff.unpack(spoiled, fmt, n)
    # four fp4 codes read as three: the top nibble of byte 1 is not padding
    with pytest.raises(ValueError, match="padding"):
        ff.unpack(ff.pack([1, 2, 3, 4], "fp4_e2m1"), "fp4_e2m1", 3)


def test_eight_bit_formats_pass_through():
    x = np.array([0.1, -2.5, 448.0, -0.0, 1e-3])
    for fmt in ("fp8_e4m3", "fp8_e5m2", "int8", "uint8", "e8m0"):
        if fmt in ("int8",):
            codes = ff.encode(np.array([-128, -1, 0, 5, 127]), fmt)
        elif fmt in ("uint8", "e8m0"):
            codes = np.array([0, 1, 127, 200, 254], np.uint8)
        else:
            codes = ff.encode(x, fmt)
        got = ff.pack(codes.reshape(5, 1), fmt)
        assert got.dtype == np.uint8 and got.tolist() == codes.tolist()
        assert ff.unpack(bytes(got), fmt, (5, 1)).reshape(-1).tolist() == codes.tolist()


@pytest.mark.parametrize("fmt", ["fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "int4", "uint4"])
def test_values_survive_encode_pack_unpack_decode(fmt):
    """Every code of the format, through bytes and back to values: the values of decode."""
    f = ff.get_format(fmt)
    codes = np.arange(1 << f.bits)
    data = bytes(ff.pack(codes, fmt))
    got = ff.decode(ff.unpack(data, fmt, codes.shape), fmt)
    np.testing.assert_array_equal(got, ff.decode(codes, fmt))


def test_bad_input():
    with pytest.raises(ValueError, match=r"code 16 does not fit fp4_e2m1: codes are 0\.\.15"):
        ff.pack([1, 16], "fp4_e2m1")
    with pytest.raises(ValueError, match="code -1 does not fit int4.*int4 -1 is 15"):
        ff.pack([-1], "int4")
    with pytest.raises(ValueError, match="code 64 does not fit fp6_e3m2"):
        ff.pack(np.array([64], np.uint16), "fp6_e3m2")
    with pytest.raises(TypeError, match="integers"):
        ff.pack([0.5, 1.0], "fp4_e2m1")
    with pytest.raises(TypeError, match="booleans"):
        ff.pack([True, False], "fp4_e2m1")
    with pytest.raises(TypeError, match="not bytes"):
        ff.pack(b"\x01", "fp4_e2m1")
    with pytest.raises(ValueError, match="at most 8 bits.*fp16 has 16"):
        ff.pack([1], "fp16")
    with pytest.raises(ValueError, match="fp4"):
        ff.pack([1], "fp4_e9m9")
    with pytest.raises(ValueError, match="unknown bitorder 'middle'. Valid: little, big"):
        ff.pack([1], "fp4_e2m1", bitorder="middle")
    with pytest.raises(TypeError, match="bitorder must be a string"):
        ff.unpack(b"\x01", "fp4_e2m1", 1, bitorder=0)
    with pytest.raises(ValueError, match=r"3 bytes do not hold shape \(4,\) of fp4_e2m1: 4 codes of 4 bits take 2"):
        ff.unpack(b"\x01\x02\x03", "fp4_e2m1", (4,))
    with pytest.raises(ValueError, match="take 3 bytes"):
        ff.unpack(b"\x01\x02", "fp6_e2m3", 4)
    with pytest.raises(TypeError, match="uint8"):
        ff.unpack(np.array([1, 2], np.int16), "fp4_e2m1", 4)
    with pytest.raises(TypeError, match="shape"):
        ff.unpack(b"\x01", "fp4_e2m1", 1.5)
    with pytest.raises(TypeError, match="shape must hold integers"):
        ff.unpack(b"\x01", "fp4_e2m1", (2.0,))
    with pytest.raises(ValueError, match="negative"):
        ff.unpack(b"", "fp4_e2m1", (-2,))
    with pytest.raises(ValueError, match="non-negative"):
        packed_nbytes(-1, "fp4_e2m1")


# ----------------------------------------------------------------------------- MX / NVFP4 tensors
BLOCK_ELEMS = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
               "fp6_e2m3": ml_dtypes.float6_e2m3fn, "fp6_e3m2": ml_dtypes.float6_e3m2fn,
               "fp4_e2m1": ml_dtypes.float4_e2m1fn}


def _ml_codes(values, elem):
    """Element codes from ml_dtypes (independent of floatfmt's encoder)."""
    if elem == "int8":  # MXINT8: the int8 k of k / 64, two's complement
        return (np.round(np.asarray(values) * 64).astype(np.int64) & 0xFF).astype(np.uint8)
    return np.asarray(values, np.float64).astype(BLOCK_ELEMS[elem]).view(np.uint8)


def _same_bits(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def _tensors(rng):
    x = rng.standard_normal((3, 70)) * 2.0 ** rng.integers(-20, 20, (3, 1))
    x[0, :5] = [0.0, -0.0, 1e-30, -1e30, 3.0]
    yield x, -1
    yield rng.standard_normal((64, 3, 5)), 0            # blocks along axis 0, partial block
    yield rng.standard_normal(33), 0
    y = rng.standard_normal((2, 96))
    y[1, 40] = np.inf                                   # one NaN-scale block
    y[0, 0] = np.nan
    yield y, 1


@pytest.mark.parametrize("fmt", [*MX_FORMATS, "nvfp4"])
@pytest.mark.parametrize("order", BITORDERS)
def test_block_tensor_round_trip(fmt, order):
    """quantize -> to_packed -> from_packed: the same elements, scale codes, scales and
    dequantised bits; the element bytes are the packbits of ml_dtypes' codes of the
    elements with the blocked axis last, and the scales are the scale codes in that order."""
    rng = np.random.default_rng(7)
    elem = "fp4_e2m1" if fmt == "nvfp4" else MX_FORMATS[fmt]
    w = ff.get_format(elem).bits
    for x, axis in _tensors(rng):
        if fmt == "nvfp4" and not np.isfinite(x).all():
            continue  # NVFP4 has no NaN scale
        q = ff.quantize(x, fmt, axis=axis)
        p = q.to_packed(bitorder=order)
        assert isinstance(p, PackedTensor) and p.shape == x.shape and p.bitorder == order
        moved = np.moveaxis(q.elements, q.axis, -1)
        np.testing.assert_array_equal(p.elements, ref_pack_bits(_ml_codes(moved, elem), w, order))
        np.testing.assert_array_equal(p.scales, np.moveaxis(q.scale_codes, q.axis, -1).reshape(-1))
        assert p.nbytes == p.elements.size + p.scales.size + (4 if fmt == "nvfp4" else 0)
        r = QuantizedTensor.from_packed(p)
        assert _same_bits(r.elements, q.elements)
        assert _same_bits(r.scale, q.scale)
        np.testing.assert_array_equal(r.scale_codes, q.scale_codes)
        assert r.tensor_scale == q.tensor_scale and r.axis == q.axis and r.fmt == q.fmt
        assert _same_bits(r.dequantize(), q.dequantize())


def test_packed_sizes_are_the_storage_cost():
    x = np.random.default_rng(1).standard_normal((8, 64))
    for fmt, elem_bytes in [("mxfp4_e2m1", 256), ("mxfp6_e2m3", 384), ("mxfp8_e4m3", 512), ("nvfp4", 256)]:
        p = ff.quantize(x, fmt).to_packed()
        nscales = 8 * (2 if fmt.startswith("mx") else 4)
        assert (p.elements.size, p.scales.size) == (elem_bytes, nscales)
        assert p.nbytes * 8 / x.size == pytest.approx(ff.quantize(x, fmt).bits_per_element)


def test_packed_tensor_bad_input():
    x = np.linspace(-1, 1, 64)
    with pytest.raises(ValueError, match="to_packed stores block-scaled tensors.*not int8 per tensor"):
        ff.quantize(x, "int8").to_packed()
    with pytest.raises(ValueError, match="unknown bitorder"):
        ff.quantize(x, "mxfp4").to_packed(bitorder="le")
    p = ff.quantize(x, "mxfp4").to_packed()
    with pytest.raises(TypeError, match="PackedTensor"):
        QuantizedTensor.from_packed(p.elements)
    from dataclasses import replace
    with pytest.raises(ValueError, match="3 scale codes do not match shape"):
        QuantizedTensor.from_packed(replace(p, scales=np.zeros(3, np.uint8)))
    with pytest.raises(ValueError, match="bytes do not hold shape"):
        QuantizedTensor.from_packed(replace(p, elements=p.elements[:-1]))
    with pytest.raises(ValueError, match="unknown packed block format 'mxfp5'"):
        QuantizedTensor.from_packed(replace(p, fmt="mxfp5"))
    with pytest.raises(ValueError, match="blocks hold 32 elements, not 16"):
        QuantizedTensor.from_packed(replace(p, block_size=16))
    with pytest.raises(TypeError, match="scales must be uint8"):
        QuantizedTensor.from_packed(replace(p, scales=p.scales.astype(np.int32)))
    pn = ff.quantize(x, "nvfp4").to_packed()
    with pytest.raises(ValueError, match="needs its fp32 tensor_scale"):
        QuantizedTensor.from_packed(replace(pn, tensor_scale=None))
