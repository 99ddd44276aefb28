"""The quantised tensor: ``QuantizedTensor``, ``dequantize`` and the layout helpers.

A ``QuantizedTensor`` holds element values, scales, zero points and the format, with
``x ~ (q - zero_point) * scale`` (PyTorch's convention).  Every quantisation scheme
(``floatfmt.scaling.quantize``, ``floatfmt.scaling.tiles``, ``floatfmt.scaling.mx_nvfp4``) returns
one.  This module also holds what those schemes share: input intake, option
checking (``choose``, ``normalize_axis``), the format-kind dispatch (``resolve_kind``)
and the block / tile layouts (``split_blocks``, ``unsplit_blocks``,
``block_scale_layout``, ``tile_expand``), a documented internal API of the lab layer.

    >>> import floatfmt as ff
    >>> q = ff.quantize([0.5, -1.0, 0.25], "int8")
    >>> q.codes.tolist(), dequantize(q).tolist()
    ([64, -127, 32], [0.5039370059967041, -0.9999999962747097, 0.25196850299835205])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backend.fpu import ieee_entry
from ..core.block_formats import block_formats, element_format, get_block_format, is_block_format
from ..core.formats import Format, get_format
from ..core.names import unknown_name
from ..core.codec import values_to_codes
from ..backend.namespace import is_tensor, namespace
from ..backend.dispatch import fields_device, tensor_method
from ..core.intake import to_exact

__all__ = ["QuantizedTensor", "dequantize"]


def choose(kind, value, valid):
    if not isinstance(value, str):
        raise TypeError(f"{kind} must be a string, not {type(value).__name__}")
    key = value.strip().lower()
    if key not in valid:
        raise unknown_name(kind, value, valid, n=2)
    return key



def intake(x):
    """(float64 values, exact Fractions or None, narrow?, Exact) of any numeric input."""
    ex = to_exact(x)
    v = ex.values
    frac = None
    if ex.sticky is not None:  # float64 does not hold some inputs: keep them exactly
        frac = np.empty(v.shape, object)
        frac[...] = np.asarray(x, dtype=object) if not ex.scalar else x
        if frac.shape != v.shape:
            raise TypeError("cannot keep this input exactly")
    if ex.src.kind == "float" and ex.src.precision_bits <= 24:
        narrow = True
    elif ex.sticky is None and ex.float_dtype is not None:
        # float64 data whose values all fit fp32 (e.g. bf16 / fp16 values kept in float64)
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = bool(np.array_equal(v, v.astype(np.float32), equal_nan=True))
    else:
        fin = np.abs(v[np.isfinite(v)])
        narrow = ex.sticky is None and bool(np.all(fin == np.trunc(fin))) and \
            (fin.size == 0 or fin.max() <= 2.0 ** 24)
    return v, frac, narrow, ex


def normalize_axis(axis, ndim, what):
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis must be an integer, not {type(axis).__name__}")
    if ndim == 0:
        raise ValueError(f"{what} needs an array with at least one dimension")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return int(axis) % ndim


def resolve_kind(fmt):
    """('mx', name) | ('nvfp4', 'nvfp4') | ('int', Format) | ('float', Format)."""
    if isinstance(fmt, str):
        if is_block_format(fmt):
            b = get_block_format(fmt)
            return ("mx" if b.scale == "e8m0" else "nvfp4"), b.name
        f = element_format(fmt)
    else:
        f = get_format(fmt)
    return ("int" if f.kind == "int" else "float"), f



# The block / tile layouts below are written once over the array namespace ``xp``
# (numpy arrays and tensors of any device alike).

def split_blocks(v, axis, bs):
    """Move ``axis`` last, pad it to a multiple of bs with zeros, return (rows, meta):
    ``rows`` holds one block of bs a row, ``meta`` = (lead shape, n, blocks)."""
    xp = namespace(v)
    xm = xp.moveaxis(v, axis, -1)
    n = xm.shape[-1]
    nb = -(-n // bs)
    if nb * bs != n:
        pad = xp.zeros_as(tuple(xm.shape[:-1]) + (nb * bs - n,), xm)
        xm = xp.concatenate([xm, pad], -1)
    lead = tuple(xm.shape[:-1])
    return xp.contiguous(xm).reshape(-1, bs), (lead, n, nb)


def unsplit_blocks(rows, meta, axis, bs):
    """The inverse of ``split_blocks`` (the padding dropped)."""
    lead, n, nb = meta
    xp = namespace(rows)
    out = rows.reshape(lead + (nb * bs,))
    if nb * bs != n:
        out = xp.narrow(out, out.ndim - 1, n)
    return xp.moveaxis(out, -1, axis)


def block_scale_layout(per_block, meta, axis):
    """One value a block (``split_blocks``' row order) in the input's layout, the
    blocked axis replaced by the number of blocks."""
    lead, n, nb = meta
    return namespace(per_block).moveaxis(per_block.reshape(lead + (nb,)), -1, axis)



def tile_expand(a, tile, shape):
    """One value a tile (the grid) -> one value an element (``shape``)."""
    xp = namespace(a)
    for d, t in enumerate(tile):
        if t > 1:
            a = xp.repeat(a, t, d)
    return a[tuple(slice(0, n) for n in shape)]



# ---------------------------------------------------------------------------------------------
# the quantised tensor

@dataclass(repr=False)
class QuantizedTensor:
    """Result of ``quantize``: element values, scales, zero points and the format.

    Attributes
    ----------
    elements : float64 array, shape of the input: the element values in the element
        format's own units (integers for int formats, ``k / 64`` for MXINT8).
    scale : dequantisation multiplier(s).  Scalar per tensor; per channel an array
        broadcastable to the input; MX / NVFP4 one per block, with the blocked axis
        replaced by the number of blocks; group-wise and 2-D blocks one per group or
        block (the tile grid, ``ceil(shape / block_shape)``).
    zero_point : integer(s), same layout as ``scale`` (0 for symmetric and float formats).
    fmt : the quantisation format's name (``"int8"``, ``"fp8_e4m3"``, ``"mxfp4_e2m1"``, ``"nvfp4"``).
    element_format : the ``Format`` of the elements.
    granularity : ``"tensor"``, ``"channel"``, ``"block"`` (MX / NVFP4), ``"group"``
        (groups of ``block_size`` along ``axis``) or ``"block2d"`` (2-D blocks
        ``block_size = (rows, cols)`` of the last two axes).
    axis : the channel axis, or the axis the blocks run along.
    block_size : 32 (MX), 16 (NVFP4), the group size, the 2-D block shape, or None.
    scale_codes : E8M0 codes (MX) or E4M3 codes (NVFP4) of the block scales, else None.
    tensor_scale : NVFP4's fp32 per-tensor scale (the block scales multiply it), else None.
    qmin, qmax : integer code range used (integer formats).
    block_shape : group-wise and 2-D blocks: the tile, one size per dimension (a group
        of 128 along axis 1 of a 2-D tensor is ``(1, 128)``); else None.
    """

    elements: np.ndarray
    scale: np.ndarray | float
    zero_point: np.ndarray | int
    fmt: str
    element_format: Format
    granularity: str = "tensor"
    axis: int | None = None
    block_size: int | None = None
    scale_codes: np.ndarray | None = None
    tensor_scale: float | None = None
    qmin: int | None = None
    qmax: int | None = None
    scheme: str = "symmetric"
    _cache: dict = field(default_factory=dict)
    block_shape: tuple | None = None

    @property
    def shape(self):
        return self.elements.shape

    @property
    def codes(self) -> np.ndarray:
        """Integer codes: the integers themselves for int formats (int8 / uint8 /
        int16 / int32 arrays as needed), bit patterns (uint8) for float elements
        and MXINT8 (its two's-complement byte)."""
        if fields_device(self) is not None:
            return tensor_method(self, "_codes_of", portable=True)
        return self._codes_of()

    def _codes_of(self):
        """The body of ``codes``, written once over the array namespace (numpy arrays,
        tensors of any device: ``dispatch.tensor_method``)."""
        if "codes" not in self._cache:
            fmt = self.element_format
            xp = namespace(self.elements)
            e = xp.asfloat(self.elements)
            if self.fmt == "mxint8":
                c = values_to_codes(xp.ldexp(e, get_block_format("mxint8").element_shift), fmt)
            elif fmt.kind == "int":
                c = xp.astype(e, xp.dtype_of(int_dtype(fmt)))
            else:
                c = values_to_codes(e, fmt)
            self._cache["codes"] = c
        return self._cache["codes"]

    def _expand(self, a):
        """Per-block values (an array, a tensor or a number) -> per-element values, as
        float64 broadcastable to ``elements`` (over the array namespace)."""
        xp = namespace(self.elements)
        a = xp.asfloat(a, self.elements)
        if self.block_shape is not None:
            return a if a.ndim == 0 else tile_expand(a, self.block_shape, self.elements.shape)
        if self.granularity != "block":
            return a
        axis = self.axis
        rep = xp.repeat(a, self.block_size, axis)
        n = self.elements.shape[axis]
        return xp.narrow(rep, axis, n) if rep.shape[axis] != n else rep

    def dequantize(self, dtype=np.float64) -> np.ndarray:
        """``(elements - zero_point) * scale`` as ``dtype``.  Float64 holds it exactly when
        the element format has at most 29 bits of precision (integers: at most 29 bits),
        its smallest positive value is at least 2**-925 and its largest below 2**896, as
        for every built-in format narrower than fp64 (fp32 scales: 24 bits, 2**-149 to
        2**128; MX / NVFP4 scales narrower still); for wider element formats (fp64, wide
        custom ones) it is the float64 product rounded to nearest even, which may round
        into the subnormals.  A narrower ``dtype`` is numpy's cast of that (nearest even).
        Made from a tensor: a tensor on its device (``dispatch.tensor_method``; the
        body, ``_dequantize``, is written once over the array namespace)."""
        if fields_device(self) is not None:
            return tensor_method(self, "dequantize", dtype, portable=True)
        return self._dequantize(dtype)

    def _dequantize(self, dtype=np.float64):
        xp = namespace(self.elements)
        if self.granularity == "block":
            out = _block_dequantize(self)
        else:
            e = xp.asfloat(self.elements)
            zp = self._expand(self.zero_point)  # group / 2-D block
            sc = self._expand(self.scale)  # grids: one per element
            out = (e - zp) * sc if xp.any(zp != 0) else e * sc
        return xp.astype(out, xp.dtype_of(dtype))

    def limits(self):
        """Clipping thresholds (lo, hi), broadcastable to the input: values beyond them
        saturate, i.e. would round past the largest code if the range went on (the
        largest code plus half a step, the step of the top binade for floats).
        Made from a tensor: tensors on its device (the body, ``_limits``, is written
        once over the array namespace)."""
        if fields_device(self) is not None:
            return tensor_method(self, "limits", portable=True)
        return self._limits()

    def _limits(self):
        s = self._expand(self.scale)
        if self.tensor_scale is not None:
            s = s * self.tensor_scale
        if self.element_format.kind == "int" and self.fmt != "mxint8":
            zp = self._expand(self.zero_point)
            return (self.qmin - 0.5 - zp) * s, (self.qmax + 0.5 - zp) * s
        if self.fmt == "mxint8":
            top = (127 + 0.5) / 64
        else:
            f = self.element_format
            top = f.max + 2.0 ** (f.emax - f.mbits) / 2
        return -top * s, top * s

    @property
    def bits_per_element(self) -> float:
        """Storage cost: element bits plus the scales' (and zero points') share."""
        n = max(_count(self.elements), 1)
        eb = width(self.element_format)
        if self.granularity == "block":
            extra = 8 * _count(self.scale) + (32 if self.tensor_scale is not None else 0)
        else:
            zp: Any = self.zero_point
            nonzero = bool((zp != 0).any()) if is_tensor(zp) else bool(np.any(np.asarray(zp) != 0))
            extra = 32 * _count(self.scale) + (eb * _count(zp) if nonzero else 0)
        return eb + extra / n

    def __array__(self, dtype=None, copy=None):
        return self.dequantize(dtype or np.float64)

    def __repr__(self):
        g = self.granularity + (f", axis={self.axis}" if self.axis is not None else "")
        if self.block_size:
            g += f", block={self.block_size}"
        sc = self.scale
        scalar = sc.ndim == 0 if is_tensor(sc) else np.ndim(sc) == 0
        sdesc = f"scale={float(sc):.6g}" if scalar else f"{_count(sc)} scales"
        return (f"QuantizedTensor({self.fmt}, shape={tuple(self.shape)}, {g}, {sdesc}, "
                f"{self.bits_per_element:.3g} bits/element)")

    # -- packed storage (elements + scale codes), see floatfmt.core.packing ------------------------

    def to_packed(self, bitorder="little"):
        """The stored form of an MX or NVFP4 tensor: a ``floatfmt.core.packing.PackedTensor``
        holding the element codes packed by ``ff.pack`` (blocks consecutive: the
        blocked axis is moved last, C order) and one scale code a block (E8M0, or
        E4M3 and the fp32 tensor scale for NVFP4).  ``QuantizedTensor.from_packed``
        is the inverse; the rebuilt tensor dequantises to the same bits.

        >>> import floatfmt as ff
        >>> q = ff.quantize(np.linspace(-6, 6, 32), "mxfp4_e2m1")
        >>> p = q.to_packed()
        >>> p.elements.size, p.scales.tolist(), p.nbytes
        (16, [127], 17)
        """
        from ..core.packing import PackedTensor, pack
        if self.granularity != "block":
            raise ValueError(f"to_packed stores block-scaled tensors ({', '.join(block_formats())}), "
                             f"not {self.fmt} per {self.granularity}; ff.pack(q.codes, fmt) packs "
                             "element codes alone")
        codes = np.moveaxis(self.codes, self.axis, -1)
        data = pack(codes, self.element_format, bitorder=bitorder)  # checks bitorder
        scales = np.moveaxis(np.asarray(self.scale_codes, np.uint8), self.axis, -1).reshape(-1)
        return PackedTensor(self.fmt, tuple(self.shape), self.axis, self.block_size, data,
                            scales.copy(), self.tensor_scale, bitorder.strip().lower())

    @classmethod
    def from_packed(cls, p) -> QuantizedTensor:
        """Rebuild the ``QuantizedTensor`` of a ``PackedTensor`` (see ``to_packed``):
        element values decoded from their codes (MXINT8: the int8 code / 64), block
        scales from their codes (E8M0 ``c`` is ``2**(c - 127)``, 0xFF the NaN scale;
        NVFP4: the E4M3 value).  Raises ``ValueError`` when the byte counts do not
        match the shape.

        >>> import floatfmt as ff
        >>> q = ff.quantize(np.linspace(-6, 6, 40), "mxfp6_e3m2")
        >>> r = QuantizedTensor.from_packed(q.to_packed())
        >>> bool(np.array_equal(r.dequantize(), q.dequantize())), r.scale_codes.tolist()
        (True, [125, 125])
        """
        from ..core.codec import codes_to_values
        from ..core.packing import PackedTensor, unpack
        if not isinstance(p, PackedTensor):
            raise TypeError(f"from_packed needs a PackedTensor, not {type(p).__name__}")
        if not is_block_format(p.fmt):
            raise ValueError(f"unknown packed block format {p.fmt!r}. Valid: {', '.join(block_formats())}.")
        bf = get_block_format(p.fmt)
        elem, bs = bf.element_format, bf.block_size
        if p.block_size != bs:
            raise ValueError(f"{p.fmt} blocks hold {bs} elements, not {p.block_size}")
        shape = tuple(p.shape)
        axis = normalize_axis(p.axis, len(shape), "from_packed")
        moved = shape[:axis] + shape[axis + 1:] + (shape[axis],)
        codes = np.moveaxis(unpack(p.elements, elem, moved, bitorder=p.bitorder), -1, axis)
        nb = -(-shape[axis] // bs)
        grid = moved[:-1] + (nb,)
        sc = np.asarray(p.scales)
        if sc.dtype != np.uint8:
            raise TypeError(f"scales must be uint8 codes, not {sc.dtype}")
        if sc.size != int(np.prod(grid, dtype=np.int64)):
            raise ValueError(f"{sc.size} scale codes do not match shape {shape} of {p.fmt} "
                             f"({int(np.prod(grid, dtype=np.int64))} blocks of {bs} along axis {axis})")
        scodes = np.moveaxis(sc.reshape(grid), -1, axis)
        values = codes_to_values(codes.astype(np.int64), elem)
        if p.fmt == "mxint8":
            values = np.ldexp(values, -bf.element_shift)
        if p.fmt == "nvfp4":
            if p.tensor_scale is None:
                raise ValueError("an nvfp4 PackedTensor needs its fp32 tensor_scale")
            scale = codes_to_values(scodes.astype(np.int64), bf.scale_format)
            ts = float(p.tensor_scale)
        else:
            ci = scodes.astype(np.int64)
            scale = np.where(ci == 255, np.nan, np.ldexp(1.0, np.where(ci == 255, 0, ci - 127)))
            ts = None
        return cls(elements=values, scale=scale, zero_point=0, fmt=p.fmt, element_format=elem,
                   granularity="block", axis=axis, block_size=bs, scale_codes=scodes.astype(np.uint8),
                   tensor_scale=ts, scheme="symmetric")


def _count(a: Any) -> int:
    """Elements of an array, tensor or number (``np.size`` reads a tensor's ``size`` method)."""
    return int(a.numel()) if is_tensor(a) else int(np.size(a))


def width(fmt: Format) -> int:
    """A format's width in bits (``Format.bits``, always set once the format is built)."""
    assert fmt.bits is not None
    return fmt.bits


def int_dtype(fmt: Format):
    return np.dtype(np.int8 if fmt.signed else np.uint8) if width(fmt) <= 8 else \
        np.dtype(np.int16 if fmt.signed else np.uint16)


@ieee_entry
def dequantize(q: QuantizedTensor, dtype: Any = np.float64) -> np.ndarray:
    """Values of a ``QuantizedTensor`` (``q.dequantize()``)."""
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"dequantize() needs a QuantizedTensor, not {type(q).__name__}")
    return q.dequantize(dtype)



def _block_dequantize(q: QuantizedTensor):
    """Elements times their block's scale (over the array namespace): blocks as rows
    (``split_blocks``), each row times its scale; a NaN scale makes its block NaN."""
    axis = q.axis
    assert axis is not None  # block-scaled tensors always have their axis
    xp = namespace(q.elements)
    # the elements as they are (float32 for MX of float32 data): rows times the float64
    # per-block scales (a 2-D by 1-D product, float64 on numpy and torch alike) is exact
    rows, meta = split_blocks(q.elements, axis, q.block_size)
    s = xp.moveaxis(xp.asfloat(q.scale, rows), axis, -1).reshape(-1)
    if q.tensor_scale is not None:
        s = s * q.tensor_scale  # e4m3 * fp32: exact in float64
    out = rows * s[:, None]
    nan = xp.isnan(s)
    if xp.some(nan):  # a NaN scale makes its whole block NaN (as the product gives it)
        out = xp.where(nan[:, None], np.nan, out)
    return unsplit_blocks(out, meta, axis, q.block_size)
