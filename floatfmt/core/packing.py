"""Packed storage of sub-byte codes: pack, unpack, PackedTensor.

Codes of formats narrower than a byte (FP4 E2M1, INT4 / UINT4, FP6 E2M3 / E3M2)
are stored back to back, as GPUs and the OCP MX kernels read them.

The rule (``bitorder="little"``, the default): the codes, in C order, form one
stream of bits in which code ``i`` of a ``w``-bit format holds stream bits
``w*i .. w*i + w - 1`` (its least significant bit first), and stream bit ``k`` is
bit ``k % 8`` of byte ``k // 8``.  So

* 4-bit formats: byte ``j`` holds element ``2j`` in bits 3..0 and element ``2j+1``
  in bits 7..4 (NVIDIA's ``__nv_fp4x2_e2m1`` and PyTorch's ``float4_e2m1fn_x2``,
  as MMA-Sim validated on hardware);
* 6-bit formats: four codes fill three bytes, ``e0`` in byte0 bits 5..0, ``e1`` in
  byte0 bits 7..6 (its low two bits) and byte1 bits 3..0, ``e2`` in byte1 bits
  7..4 and byte2 bits 1..0, ``e3`` in byte2 bits 7..2 (AMD rocRoller's FP6 layout);
* 8-bit formats: one code a byte (the codes themselves).

The OCP MX v1.0 text gives no bit order (see ``shared/reference``), so the order is
a parameter: ``bitorder="big"`` puts the first code in the most significant bits
(stream bit ``k`` is bit ``7 - k % 8`` of byte ``k // 8``, each code's most
significant bit first), as AMD Quark packs.

Length and padding: ``n`` codes of ``w`` bits take ``ceil(n * w / 8)`` bytes; the
bits of the last byte past the last code are zero, and ``unpack`` rejects data
whose padding bits are not zero (a sign that ``shape`` is not the packed one).
An array is packed as one stream (C order), so a row starts on a byte boundary
only when the row's bits are a whole number of bytes (an even last dimension for
FP4, a multiple of 4 for FP6): the layout ``float4_e2m1fn_x2`` tensors have.

    >>> import floatfmt as ff
    >>> ff.pack([0x1, 0x2, 0x3], "fp4_e2m1").tolist()    # 0x21, then 0x03 padded
    [33, 3]
    >>> ff.unpack(bytes([33, 3]), "fp4_e2m1", 3).tolist()
    [1, 2, 3]
    >>> ff.pack([1, 2, 3, 4], "fp6_e2m3").tolist()       # 1 | 2<<6 | 3<<12 | 4<<18
    [129, 48, 16]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from math import gcd

import numpy as np

from .codec import code_dtype
from ..backend.dispatch import tensor_entry
from ..backend.namespace import namespace
from .formats import Format, FormatLike, get_format
from .types import Values

__all__ = ["pack", "unpack", "packed_nbytes", "PackedTensor", "BITORDERS"]

#: Bit orders of the packed stream (see the module docstring).
BITORDERS = ("little", "big")


def _bitorder(bitorder) -> str:
    if not isinstance(bitorder, str):
        raise TypeError(f"bitorder must be a string, not {type(bitorder).__name__}")
    key = bitorder.strip().lower()
    if key not in BITORDERS:
        raise ValueError(f"unknown bitorder {bitorder!r}. Valid: {', '.join(BITORDERS)}.")
    return key


def _packable(fmt) -> Format:
    f = get_format(fmt)
    if f.bits > 8:
        raise ValueError(f"pack / unpack store formats of at most 8 bits a code; {f.name} has "
                         f"{f.bits} (its codes from ff.encode are already whole {code_dtype(f)} words)")
    return f


def _group(w: int) -> tuple[int, int, np.dtype]:
    """(codes, bytes, word dtype) of the smallest whole group: lcm(w, 8) bits, held in
    the narrowest unsigned integer that fits them (uint8 for 4-bit codes, uint32 for 6)."""
    bits = w * 8 // gcd(w, 8)
    dt = next(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64) if bits <= 8 * np.dtype(t).itemsize)
    return bits // w, bits // 8, dt


def _shifts(count: int, width: int, order: str) -> list[int]:
    """Bit offsets of ``count`` fields of ``width`` bits in one group word: the first
    field lowest (``"little"``) or highest (``"big"``)."""
    return [width * (i if order == "little" else count - 1 - i) for i in range(count)]


def _range_error(lo: int, hi: int, f: Format) -> ValueError | None:
    """The ValueError for codes outside 0 .. 2**bits - 1 (None when they fit)."""
    if lo >= 0 and hi < 1 << f.bits:
        return None
    bad = hi if hi >= 1 << f.bits else lo
    return ValueError(f"code {bad} does not fit {f.name}: codes are 0..{(1 << f.bits) - 1} "
                      f"({f.bits} bits; signed integer formats use two's-complement codes, "
                      f"int4 -1 is 15)")


def packed_nbytes(n, fmt) -> int:
    """Bytes that ``n`` codes of ``fmt`` take when packed: ``ceil(n * bits / 8)``.

    >>> packed_nbytes(32, "fp4_e2m1"), packed_nbytes(32, "fp6_e3m2"), packed_nbytes(5, "fp6_e3m2")
    (16, 24, 4)
    """
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative integer, not {n!r}")
    return -(-int(n) * _packable(fmt).bits // 8)


def _codes_in(codes, f: Format) -> np.ndarray:
    """The codes as an integer array, checked: each in 0 .. 2**bits - 1."""
    if isinstance(codes, (bytes, bytearray, memoryview)):
        raise TypeError("pack() takes codes (one integer per element, e.g. from ff.encode), "
                        "not bytes; unpack() reads packed bytes")
    arr = np.asarray(codes)
    if arr.dtype.kind == "b":
        raise TypeError("codes must be integers, not booleans")
    if arr.dtype.kind == "O":
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in arr.ravel()):
            raise TypeError("codes must be integers")
        if arr.size and (min(arr.ravel()) < 0 or max(arr.ravel()) >= 1 << 64):
            raise ValueError(f"codes of {f.name} are 0..{(1 << f.bits) - 1} ({f.bits} bits)")
        arr = arr.astype(np.uint64)  # every value checked below to fit
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"codes must be integers (e.g. from ff.encode), not {arr.dtype}")
    if arr.size:
        err = _range_error(int(arr.min()), int(arr.max()), f)
        if err is not None:
            raise err
    return arr


def _device_pack(codes: Any, fmt: FormatLike, *, bitorder: str = "little") -> Any:
    """``pack`` on a tensor of any device (torch ops there, the same layout): each group
    word is the sum of its codes shifted apart (disjoint bits), in int64."""
    f = _packable(fmt)
    order = _bitorder(bitorder)
    t = namespace(codes).t
    c = codes.reshape(-1).to(t.int64)
    if c.numel():
        err = _range_error(int(c.min()), int(c.max()), f)
        if err is not None:
            raise err
    w, n = f.bits, c.numel()
    if w == 8:
        return c.to(t.uint8)
    per, nbytes, _ = _group(w)
    groups = -(-n // per)
    c = t.cat([c, c.new_zeros(groups * per - n)]).reshape(groups, per)
    word = (c << c.new_tensor(_shifts(per, w, order))).sum(1)
    out = (word[:, None] >> c.new_tensor(_shifts(nbytes, 8, order))) & 0xFF
    return out.to(t.uint8).reshape(-1)[:-(-n * w // 8)]


@tensor_entry("pack", ("codes",), device_impl=_device_pack, codes=True)
def pack(codes: Values, fmt: FormatLike, *, bitorder: str = "little") -> np.ndarray:
    """Pack the codes of a format of at most 8 bits into bytes (a 1-d uint8 array).

    ``codes``: integers 0 .. 2**bits - 1 of any shape (``ff.encode`` output; signed
    integer formats in two's complement, int4 -1 is 15), taken in C order.  The
    result has ``ceil(codes.size * bits / 8)`` bytes, laid out as the module
    docstring states (``bitorder="little"``: the first code in the least
    significant bits; ``"big"``: in the most significant); unused bits of the last
    byte are zero.  8-bit formats pass through (one byte a code).  An integer torch
    tensor of codes gives a uint8 tensor on its device, packed there (CPU tensors
    from a view of their memory).

    >>> pack([0x7, 0xF], "fp4_e2m1").tolist(), pack([0x7, 0xF], "fp4_e2m1", bitorder="big").tolist()
    ([247], [127])
    """
    f = _packable(fmt)
    order = _bitorder(bitorder)
    c: np.ndarray = _codes_in(codes, f).reshape(-1)
    w = f.bits
    if w == 8:
        return c.astype(np.uint8)
    per, nbytes, dt = _group(w)
    n = c.size
    out_len = -(-n * w // 8)
    groups = -(-n // per)
    c = c.astype(dt)
    if groups * per != n:
        c = np.concatenate([c, np.zeros(groups * per - n, dt)])
    c = c.reshape(groups, per)
    # each group of `per` codes is one integer of per*w (<= 56) bits, then split into bytes
    word = np.zeros(groups, dt)
    for i, sh in enumerate(_shifts(per, w, order)):
        word |= c[:, i] << dt.type(sh)
    if nbytes == 1:
        return word[:out_len]
    out = np.empty((groups, nbytes), np.uint8)
    for j, sh in enumerate(_shifts(nbytes, 8, order)):
        out[:, j] = word >> dt.type(sh)  # the low byte (uint8 assignment keeps it)
    return out.reshape(-1)[:out_len]


def _shape_in(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be an integer or a tuple of integers, not {type(shape).__name__}") from None
    for d in shape:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
            raise TypeError(f"shape must hold integers, not {type(d).__name__}")
        if d < 0:
            raise ValueError(f"shape {shape} has a negative dimension")
    return tuple(int(d) for d in shape)


def _bytes_in(data) -> np.ndarray:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, np.uint8)
    arr = np.asarray(data)
    if arr.dtype != np.uint8:
        raise TypeError(f"data must be bytes, a bytearray or a uint8 array, not {arr.dtype} "
                        f"(pack() returns uint8)")
    return arr.reshape(-1)


def _check_packed(size: int, last_byte: Any, shp: tuple[int, ...], f: Format,
                  order: str) -> tuple[int, int]:
    """(codes, bits) of packed data of ``size`` bytes read as ``shp``: ValueError when the
    size is not ``ceil(n * bits / 8)`` or the last byte's padding bits are not zero
    (``last_byte()`` reads it; called only when there is padding)."""
    n = int(np.prod(shp, dtype=np.int64)) if shp else 1
    w = f.bits
    need = -(-n * w // 8)
    if size != need:
        raise ValueError(f"{size} bytes do not hold shape {shp} of {f.name}: {n} codes of {w} bits "
                         f"take {need} bytes")
    rem = n * w % 8
    if rem:
        last = last_byte()
        pad = last >> rem if order == "little" else last & ((1 << (8 - rem)) - 1)
        if pad:
            raise ValueError(f"the last byte 0x{last:02x} has non-zero padding bits past {n} codes of "
                             f"{f.name} (bitorder={order!r}): wrong shape or bit order?")
    return n, w


def _device_unpack(data: Any, fmt: FormatLike, shape: int | tuple[int, ...], *,
                   bitorder: str = "little") -> Any:
    """``unpack`` on a uint8 tensor of any device (torch ops there; the checks of the
    numpy path, with their messages)."""
    f = _packable(fmt)
    order = _bitorder(bitorder)
    shp = _shape_in(shape)
    t = namespace(data).t
    if data.dtype != t.uint8:
        raise TypeError(f"data must be bytes, a bytearray or a uint8 array, not {data.dtype} "
                        f"(pack() returns uint8)")
    b = data.reshape(-1)
    n, w = _check_packed(b.numel(), lambda: int(b[-1]), shp, f, order)
    need = -(-n * w // 8)
    if w == 8:
        return b.clone().reshape(shp)
    per, nbytes, _ = _group(w)
    groups = -(-n // per)
    g = b.to(t.int64)
    g = t.cat([g, g.new_zeros(groups * nbytes - need)]).reshape(groups, nbytes)
    word = (g << g.new_tensor(_shifts(nbytes, 8, order))).sum(1)
    out = (word[:, None] >> g.new_tensor(_shifts(per, w, order))) & ((1 << w) - 1)
    return out.to(t.uint8).reshape(-1)[:n].reshape(shp)


@tensor_entry("unpack", ("data",), device_impl=_device_unpack, codes=True)
def unpack(data: bytes | bytearray | memoryview | np.ndarray, fmt: FormatLike, shape: int | tuple[int, ...], *, bitorder: str = "little") -> np.ndarray:
    """Codes of ``fmt`` (uint8, shape ``shape``) from bytes that ``pack`` wrote.

    ``data``: bytes, bytearray, memoryview or a uint8 array of exactly
    ``ceil(prod(shape) * bits / 8)`` bytes; the padding bits of the last byte must
    be zero (``ValueError`` otherwise: a wrong ``shape`` or ``bitorder`` is the
    usual cause).  Inverse of ``pack``: ``unpack(pack(c, f), f, c.shape)`` equals
    ``c`` for every valid code array.  ``ff.decode`` turns the codes into values.
    A uint8 torch tensor gives a uint8 tensor of codes on its device (as ``pack``).

    >>> import floatfmt as ff
    >>> unpack(bytes([0xF7]), "fp4_e2m1", (2,)).tolist()
    [7, 15]
    >>> ff.decode(unpack(bytes([0xF7]), "fp4_e2m1", (2,)), "fp4_e2m1").tolist()
    [6.0, -6.0]
    """
    f = _packable(fmt)
    order = _bitorder(bitorder)
    shp = _shape_in(shape)
    b = _bytes_in(data)
    n, w = _check_packed(b.size, lambda: int(b[-1]), shp, f, order)
    if w == 8:
        return b.astype(np.uint8).reshape(shp)
    per, nbytes, dt = _group(w)
    groups = -(-n // per)
    if groups * nbytes != b.size:
        b = np.concatenate([b, np.zeros(groups * nbytes - b.size, np.uint8)])
    g = b.reshape(groups, nbytes).astype(dt)
    word = np.zeros(groups, dt)
    for j, sh in enumerate(_shifts(nbytes, 8, order)):
        word |= g[:, j] << dt.type(sh)
    out = np.empty((groups, per), np.uint8)
    mask = dt.type((1 << w) - 1)
    for i, sh in enumerate(_shifts(per, w, order)):
        out[:, i] = (word >> dt.type(sh)) & mask
    return out.reshape(-1)[:n].reshape(shp)


@dataclass(frozen=True, repr=False)
class PackedTensor:
    """A block-scaled tensor (OCP MX or NVFP4) in its stored form.

    Built by ``QuantizedTensor.to_packed()``; ``QuantizedTensor.from_packed(p)``
    rebuilds the quantised tensor (it dequantises to the same bits).

    Attributes
    ----------
    fmt : the block format's name (``"mxfp4_e2m1"``, ``"mxfp6_e3m2"``, ``"nvfp4"`` ...).
    shape : the tensor's shape.
    axis : the axis the blocks run along.
    block_size : elements a block (32 for MX, 16 for NVFP4).
    elements : uint8, the element codes packed by ``pack`` (``bitorder``), taken in C
        order of the tensor with ``axis`` moved last, so each block's codes are
        consecutive (an MXFP4 block of 32 is 16 bytes, MXFP6 24, MXFP8 32).
    scales : uint8, one scale code a block (E8M0 for MX, 0xFF the NaN scale; E4M3 for
        NVFP4), in C order of the block grid with ``axis`` last: the scale of block
        ``j`` of row ``r`` is ``scales[r * nblocks + j]``.
    tensor_scale : NVFP4's fp32 per-tensor scale, else None.
    bitorder : the element stream's bit order.
    """

    fmt: str
    shape: tuple
    axis: int
    block_size: int
    elements: np.ndarray
    scales: np.ndarray
    tensor_scale: float | None = None
    bitorder: str = "little"

    @property
    def nbytes(self) -> int:
        """Bytes stored: elements plus scales (plus 4 for an fp32 tensor scale)."""
        return int(self.elements.size + self.scales.size + (4 if self.tensor_scale is not None else 0))

    def __repr__(self):
        return (f"PackedTensor({self.fmt}, shape={self.shape}, axis={self.axis}, "
                f"{self.elements.size} element bytes + {self.scales.size} scale bytes)")
