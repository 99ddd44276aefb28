"""Scaling and quantisation: INT8 / FP8 / MX / NVFP4, loss scaling, master weights.

Everything here divides by a scale and hands the exact quotient to the one
rounding routine (``floatfmt.rounding.round_values``); nothing rounds on its own.

Conventions (PyTorch's): a quantised tensor holds codes ``q``, a ``scale`` and a
``zero_point`` with ``x ~ (q - zero_point) * scale``, so

* integers (``int8 uint8 int4 uint4``): ``q = clamp(round(x / scale) + zero_point)``;
* float elements (``fp8_e4m3``, ``fp8_e5m2``, ``fp6_*``, ``fp4_e2m1``): ``q = round(x / scale)``
  to the format, saturating at its largest finite value;
* OCP MX blocks (``mxfp8_e4m3 mxfp8_e5m2 mxfp6_e2m3 mxfp6_e3m2 mxfp4_e2m1 mxint8``):
  blocks of 32 along ``axis`` share a power-of-two scale ``2**E`` stored as E8M0;
* ``nvfp4``: E2M1 elements in blocks of 16, an E4M3 block scale and an fp32 tensor scale.

Scales other than MX's powers of two are stored as fp32 values (rounded once with
``cast``), as real kernels keep them.  Quotients ``x / scale`` are rounded once:
exactly-representable cases are divided directly, others carry their remainder
class to the rounding routine (see ``_exact_quotient``).

    >>> import floatfmt as ff
    >>> q = ff.quantize([0.5, -1.0, 0.25], "int8")
    >>> q.codes.tolist(), q.scale
    ([64, -127, 32], 0.007874015718698502)
    >>> ff.fake_quant([0.1, 0.3, 7.0], "mxfp4_e2m1").tolist()
    [0.0, 0.5, 6.0]
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ._block_formats import (block_formats, close_block_formats, get_block_format,
                             is_block_format)
from ._cast import cast
from .codec import values_to_codes
from .eft import exact_product, exact_quotient
from .exact import fraction_rz, fraction_resid, to_exact, to_fraction
from ._formats import Format, get_format
from .rounding import make_rng, resolve_mode, round_values

__all__ = ["quantize", "dequantize", "fake_quant", "QuantizedTensor", "int_matmul",
           "IntMatmulResult", "DelayedScaling", "LossScaler", "compare_quantization",
           "quantization_error", "master_weights_demo", "MX_FORMATS", "mx_shared_exponent",
           "SCALE_ROUNDINGS", "CALIBRATIONS"]

_FP32 = get_format("fp32")
_WIDE_INT = Format("int62", kind="int", bits=62)  # holds round(x / scale) before the clamp
# the same for _round_int, narrow enough (<= 53 bits) for round_values' fast integer path;
# saturating at +-(2**52 - 1) instead of +-(2**61 - 1) before the clamp to qmin..qmax changes nothing
_ROUND_INT = Format("int53", kind="int", bits=53)

#: OCP MX v1.0 block formats: name -> element format name, read from the block registry
#: (``floatfmt._block_formats``, which holds block sizes, scale formats and ``emax_elem``).
MX_FORMATS = {n: get_block_format(n).element for n in block_formats()
              if get_block_format(n).scale == "e8m0"}
_NV = get_block_format("nvfp4")

#: Shared-exponent rules for MX scales (see ``mx_shared_exponent``).
SCALE_ROUNDINGS = ("floor", "ceil", "even", "rceil")
#: Calibration methods for integer and per-tensor float scales.
CALIBRATIONS = ("max", "percentile", "mse")
_SCHEMES = ("symmetric", "asymmetric")
_GRANULARITIES = ("tensor", "channel", "group", "block")


def _choice(kind, value, valid):
    if not isinstance(value, str):
        raise TypeError(f"{kind} must be a string, not {type(value).__name__}")
    key = value.strip().lower()
    if key not in valid:
        import difflib
        close = difflib.get_close_matches(key, valid, n=2, cutoff=0.4)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown {kind} {value!r}.{hint} Valid: {', '.join(valid)}.")
    return key


# ---------------------------------------------------------------------------------------------
# exact quotients and products, handed to the rounding routine with their remainder class

def _exact_product(a, b, fine=False):
    """(truncated float64, remainder class or None) of the exact products ``a * b``
    (``fine``: the int64 remainder itself, which stochastic rounding needs)."""
    t, cls = exact_product(a, b, fine=fine)
    return t, (cls if cls is not None and cls.any() else None)


def _rem(st):
    """round_values keyword for a remainder from this module: an int64 array is a
    ``resid`` (stochastic rounding), a uint8 one a class."""
    if st is not None and st.dtype == np.int64:
        return {"resid": st}
    return {"sticky": st}


def _sig_bits_at_most(s, bits):
    """True when every finite value of s has at most ``bits`` significant bits."""
    s = np.asarray(s, np.float64)
    m, _ = np.frexp(s[np.isfinite(s)])
    return bool(np.all(np.ldexp(m, bits) == np.trunc(np.ldexp(m, bits))))


def _exact_quotient(v, exact, s, narrow, target: Format, fine=False):
    """(truncated float64, remainder class or None) of the exact quotients ``v / s``
    (``fine``: the int64 remainder itself instead of its class, for stochastic
    rounding, which also rules out the shortcut for narrow inputs).

    ``s > 0``.  Cases, cheapest first:

    * ``s`` a power of two: the float64 quotient is exact.
    * ``v`` has at most 24 significant bits (fp32 and narrower inputs), ``s`` at most
      30 and the target at most 20 bits of precision: the float64 quotient is within
      2**-53 of the exact one, while the exact quotient is at least 2**-51 (relative)
      away from any tie or grid point of the target unless it lies on it, so rounding
      the float64 quotient once is the correct single rounding.
    * otherwise ``floatfmt.eft.exact_quotient`` (the exact residual's sign gives the
      remainder class).
    ``exact``: None, or an object array of the inputs as ``Fraction`` when float64
    does not hold them (Fractions, decimal strings, huge integers): divided exactly.
    """
    v = np.asarray(v, np.float64)
    s = np.asarray(s, np.float64)
    with np.errstate(all="ignore"):
        d = v / s
    if exact is not None:
        vals, cls = np.array(d, np.float64), np.zeros(d.shape, np.int64 if fine else np.uint8)
        fb, sb, vb = np.broadcast_arrays(exact, s, v)
        for i in np.ndindex(d.shape):
            if math.isfinite(vb[i]) and math.isfinite(sb[i]):
                fr = to_fraction(fb[i]) / Fraction(float(sb[i]))
                vals[i], cls[i] = fraction_rz(fr)
                if fine and cls[i]:
                    cls[i] = fraction_resid(fr, vals[i])
        return vals, (cls if cls.any() else None)
    m, _ = np.frexp(s)
    if np.all((m == 0.5) | ~np.isfinite(s)):
        return d, None
    if narrow and not fine and target.precision_bits <= 20 and _sig_bits_at_most(s, 30):
        return d, None
    t, cls = exact_quotient(v, s, fine=fine)
    return t, (cls if cls is not None and cls.any() else None)


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
        if "codes" not in self._cache:
            fmt = self.element_format
            if self.fmt == "mxint8":
                c = values_to_codes(np.ldexp(self.elements, get_block_format("mxint8").element_shift), fmt)
            elif fmt.kind == "int":
                c = self.elements.astype(_int_dtype(fmt))
            else:
                c = values_to_codes(self.elements, fmt)
            self._cache["codes"] = c
        return self._cache["codes"]

    def _expand(self, a):
        """Per-block array -> per-element array (shape of the input)."""
        a = np.asarray(a, np.float64)
        if self.block_shape is not None:
            return a if a.ndim == 0 else _tile_expand(a, self.block_shape, self.elements.shape)
        if self.granularity != "block":
            return a
        axis = self.axis
        rep = np.repeat(a, self.block_size, axis=axis)
        n = self.elements.shape[axis]
        return np.take(rep, np.arange(n), axis=axis) if rep.shape[axis] != n else rep

    def dequantize(self, dtype=np.float64) -> np.ndarray:
        """``(elements - zero_point) * scale`` as ``dtype`` (float64 holds it exactly)."""
        if self.granularity == "block":
            out = _block_dequantize(self)
        else:
            e = self.elements
            zp = self._expand(np.asarray(self.zero_point, np.float64))  # group / 2-D block
            sc = self._expand(np.asarray(self.scale, np.float64))  # grids: one per element
            out = (e - zp) * sc if zp.any() else e * sc
        return out.astype(dtype, copy=False)

    def limits(self):
        """Clipping thresholds (lo, hi), broadcastable to the input: values beyond them
        saturate, i.e. would round past the largest code if the range went on (the
        largest code plus half a step, the step of the top binade for floats)."""
        s = self._expand(self.scale)
        if self.tensor_scale is not None:
            s = s * self.tensor_scale
        if self.element_format.kind == "int" and self.fmt != "mxint8":
            zp = self._expand(np.asarray(self.zero_point, np.float64))
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
        n = max(self.elements.size, 1)
        eb = self.element_format.bits
        if self.granularity == "block":
            nscale = np.size(self.scale)
            extra = 8 * nscale + (32 if self.tensor_scale is not None else 0)
        else:
            nscale = np.size(self.scale)
            extra = 32 * nscale + (eb * np.size(self.zero_point)
                                   if np.any(np.asarray(self.zero_point) != 0) else 0)
        return eb + extra / n

    def __array__(self, dtype=None, copy=None):
        return self.dequantize(dtype or np.float64)

    def __repr__(self):
        g = self.granularity + (f", axis={self.axis}" if self.axis is not None else "")
        if self.block_size:
            g += f", block={self.block_size}"
        sc = np.asarray(self.scale)
        sdesc = f"scale={float(sc):.6g}" if sc.ndim == 0 else f"{sc.size} scales"
        return (f"QuantizedTensor({self.fmt}, shape={self.shape}, {g}, {sdesc}, "
                f"{self.bits_per_element:.3g} bits/element)")

    # -- packed storage (elements + scale codes), see floatfmt.packing ------------------------

    def to_packed(self, bitorder="little"):
        """The stored form of an MX or NVFP4 tensor: a ``floatfmt.packing.PackedTensor``
        holding the element codes packed by ``ff.pack`` (blocks consecutive: the
        blocked axis is moved last, C order) and one scale code a block (E8M0, or
        E4M3 and the fp32 tensor scale for NVFP4).  ``QuantizedTensor.from_packed``
        is the inverse; the rebuilt tensor dequantises to the same bits.

        >>> q = quantize(np.linspace(-6, 6, 32), "mxfp4_e2m1")
        >>> p = q.to_packed()
        >>> p.elements.size, p.scales.tolist(), p.nbytes
        (16, [127], 17)
        """
        from .packing import PackedTensor, pack
        if self.granularity != "block":
            raise ValueError(f"to_packed stores block-scaled tensors ({', '.join(MX_FORMATS)}, nvfp4), "
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

        >>> q = quantize(np.linspace(-6, 6, 40), "mxfp6_e3m2")
        >>> r = QuantizedTensor.from_packed(q.to_packed())
        >>> bool(np.array_equal(r.dequantize(), q.dequantize())), r.scale_codes.tolist()
        (True, [125, 125])
        """
        from .codec import codes_to_values
        from .packing import PackedTensor, unpack
        if not isinstance(p, PackedTensor):
            raise TypeError(f"from_packed needs a PackedTensor, not {type(p).__name__}")
        if not is_block_format(p.fmt):
            raise ValueError(f"unknown packed block format {p.fmt!r}. Valid: {', '.join(block_formats())}.")
        bf = get_block_format(p.fmt)
        elem, bs = bf.element_format, bf.block_size
        if p.block_size != bs:
            raise ValueError(f"{p.fmt} blocks hold {bs} elements, not {p.block_size}")
        shape = tuple(p.shape)
        axis = _norm_axis(p.axis, len(shape), "from_packed")
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


def _int_dtype(fmt: Format):
    return np.dtype(np.int8 if fmt.signed else np.uint8) if fmt.bits <= 8 else \
        np.dtype(np.int16 if fmt.signed else np.uint16)


def dequantize(q: QuantizedTensor, dtype=np.float64) -> np.ndarray:
    """Values of a ``QuantizedTensor`` (``q.dequantize()``)."""
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"dequantize() needs a QuantizedTensor, not {type(q).__name__}")
    return q.dequantize(dtype)


# ---------------------------------------------------------------------------------------------
# intake

def _intake(x):
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


def _norm_axis(axis, ndim, what):
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
            return ("mx" if b.name in MX_FORMATS else "nvfp4"), b.name
        try:
            f = get_format(fmt)
        except ValueError as err:
            close = close_block_formats(fmt)
            hint = f" Close block formats: {', '.join(map(repr, close))}." if close else ""
            raise ValueError(f"{err} Block formats: {', '.join(block_formats())}.{hint}") from None
    else:
        f = get_format(fmt)
    return ("int" if f.kind == "int" else "float"), f


# ---------------------------------------------------------------------------------------------
# OCP MX

def mx_shared_exponent(amax, fmt="mxfp8_e4m3", scale_rounding="floor"):
    """Shared exponent E of MX blocks whose largest magnitude is ``amax``; NaN marks a
    NaN scale (E8M0 code 0xFF).

    ``floor`` (OCP MX v1.0): ``E = floor(log2(amax)) - emax_elem``, taken exactly from
    the float64 exponent field (``np.frexp``), never from a floating-point ``log2``
    (``log2(2**k * (1 - 2**-53))`` rounds to ``k`` in float64).  Other rules
    (torchao's ``ScaleCalculationMode``): ``ceil`` uses ``ceil(log2(amax))``;
    ``even`` first rounds amax to the element precision (ties away, as torchao adds
    half an ulp); ``rceil`` is the smallest E with ``amax / 2**E <= max_elem``
    (nothing saturates; NVIDIA's round-up E8M0 conversion of ``amax / max_elem``).
    Then: ``E < -127`` (and all-zero blocks) clamp to -127; ``E > 127``, Inf and NaN
    give NaN.

    >>> mx_shared_exponent([1.0, 448.0, 449.0, 0.0], "mxfp8_e4m3").tolist()
    [-8.0, 0.0, 0.0, -127.0]
    >>> mx_shared_exponent([449.0, 480.0], "mxfp8_e4m3", "rceil").tolist()
    [1.0, 1.0]
    """
    kind, name = resolve_kind(fmt)
    if kind != "mx":
        raise ValueError(f"mx_shared_exponent needs an MX format ({', '.join(MX_FORMATS)}), not {fmt!r}")
    mode = _choice("scale_rounding", scale_rounding, SCALE_ROUNDINGS)
    elem = get_format(MX_FORMATS[name])
    a = np.abs(np.asarray(amax, np.float64))
    return _shared_exponent(a, name, elem, mode)


def mx_emax(name, elem: Format | None = None) -> int:
    """The OCP MX ``emax_elem`` of block format ``name`` (from the block registry)."""
    return get_block_format(name).emax_elem


def _mx_mbits(name, elem: Format):
    return get_block_format(name).element_mbits


def _mx_max(name, elem: Format):
    return get_block_format(name).element_max


def _shared_exponent(a, name, elem, mode):
    emax = mx_emax(name, elem)
    if mode == "even":
        # torchao EVEN: round amax to the element precision (half-ulp added: ties away)
        a = round_values(a, get_format(f"e11m{_mx_mbits(name, elem)}"), "nearest_away")
    m, e = np.frexp(a)
    E = (e - 1 - emax).astype(np.float64)
    if mode == "ceil":
        E += m != 0.5
    elif mode == "rceil":
        with np.errstate(all="ignore"):
            E += np.ldexp(a, (-E).clip(-2000, 2000).astype(np.int64)) > _mx_max(name, elem)
    E = np.where(a == 0, -127.0, np.maximum(E, -127.0))
    return np.where(np.isfinite(a) & (E <= 127), E, np.nan)


def split_blocks(v, axis, bs):
    """Move ``axis`` last, pad it to a multiple of bs with zeros, return (rows, meta)."""
    xm = np.moveaxis(v, axis, -1)
    n = xm.shape[-1]
    nb = -(-n // bs)
    if nb * bs != n:
        pad = np.zeros(xm.shape[:-1] + (nb * bs - n,), xm.dtype)
        xm = np.concatenate([xm, pad], axis=-1)
    lead = xm.shape[:-1]
    return np.ascontiguousarray(xm).reshape(-1, bs), (lead, n, nb)


def _unblock(rows, meta, axis, bs):
    lead, n, nb = meta
    out = rows.reshape(lead + (nb * bs,))
    if nb * bs != n:
        out = out[..., :n]
    return np.moveaxis(out, -1, axis)


def _scale_layout(per_block, meta, axis):
    lead, n, nb = meta
    return np.moveaxis(per_block.reshape(lead + (nb,)), -1, axis)


_CHUNK_ROWS = 4096  # 2**17 elements a chunk: fewer round_values calls, passes stay in cache
_SIGNLESS = {2: (np.int16, 0x7FFF), 4: (np.int32, 0x7FFFFFFF), 8: (np.int64, 0x7FFFFFFFFFFFFFFF)}
# (exponent shift, exponent-field mask, bias) of the float dtypes whose floor(log2) is read
# from the exponent field directly (float16 amaxes go through _shared_exponent)
_EXP_FIELD = {4: (23, 0xFF, 127), 8: (52, 0x7FF, 1023)}


def _block_amax_bits(blk, ibuf, mbuf):
    """Sign-cleared bit pattern of the largest magnitude of each row of ``blk`` (a
    contiguous (rows, 32) float array), as integers of the same width.

    With the sign bit cleared, integer order is magnitude order for IEEE floats, with
    NaN patterns above Inf (NaN-safe, no abs temporary).  The row maximum is a fold:
    max of the even and odd elements, five times, each a single numpy call over the
    whole chunk (a reduction along rows of 32 pays numpy's per-row overhead)."""
    it, mask = _SIGNLESS[blk.dtype.itemsize]
    k = blk.size
    src = np.bitwise_and(blk.reshape(-1).view(it), it(mask), out=ibuf.view(it)[:k])
    dst = mbuf.view(it)
    h = k // 2
    while h >= blk.shape[0]:
        np.maximum(src[0:2 * h:2], src[1:2 * h:2], out=dst[:h])
        src, dst = dst[:h], src
        h //= 2
    return src


def _floor_exponent(bits, dtype, emax):
    """(E as int64, NaN-scale mask) of the ``floor`` rule from sign-cleared amax bits of
    float32 or float64 data: floor(log2 amax) is the unbiased exponent field (zero
    and subnormal amaxes sit below -127 - emax, so they clamp to -127 like zero)."""
    sh, fmask, bias = _EXP_FIELD[dtype.itemsize]
    e = (bits >> sh).astype(np.int64)
    E = e - (bias + emax)
    bad = (e == fmask) | (E > 127)  # Inf / NaN, or a scale past E8M0's range
    np.maximum(E, -127, out=E)
    E[bad] = 0
    return E, bad


def _pow2(k):
    """2.0**k as float64 for int64 k in -1022..1023, built from the exponent bits."""
    return ((k + 1023) << 52).view(np.float64)


def _quantize_mx(v, sticky, name, axis, scale_rounding, mode, rng, fake=False):
    """MX quantisation of ``v`` (a float16/32/64 array, or float64 values with an
    optional remainder class); with ``fake`` returns the dequantised values instead
    (fused, in v's dtype when that holds them: float32 and float64 inputs always do,
    as MX values of a float32 input are float32 values).

    Works through chunks of ``_CHUNK_ROWS`` blocks with reused scratch buffers (fresh
    large temporaries cost page faults): block amax by a fold of integer maxima, E
    from the exponent bits, scaling by exact powers of two built from bits, one
    ``round_values`` call per chunk, one multiply back."""
    bf = get_block_format(name)
    elem, bs = bf.element_format, bf.block_size
    if v.ndim == 0:
        raise ValueError("MX quantisation needs an array with at least one dimension")
    rows, meta = split_blocks(v, axis, bs)
    st_rows = None if sticky is None else split_blocks(sticky, axis, bs)[0]
    shift = bf.element_shift
    emax = bf.emax_elem
    out_dtype = v.dtype if (fake and v.dtype in (np.float32, np.float64)) else np.float64
    q = np.empty(rows.shape, out_dtype)
    E = None if fake else np.empty(rows.shape[0], np.float64)
    int_exp = scale_rounding == "floor" and rows.dtype.itemsize in _EXP_FIELD
    # scratch buffers reused by every chunk
    nrow = min(_CHUNK_ROWS, rows.shape[0])
    ybuf = np.empty((nrow, bs), np.float64)
    rbuf = np.empty((nrow, bs), np.float64)
    ibuf = np.empty(nrow * bs * rows.dtype.itemsize, np.uint8)
    mbuf = np.empty(nrow * bs // 2 * rows.dtype.itemsize, np.uint8)
    # float32 data in nearest / toward-zero modes: scale in float32 (half the bytes)
    f32_scale = (rows.dtype == np.float32 and not shift and st_rows is None
                 and mode in ("nearest_even", "nearest_away", "toward_zero"))
    fbuf = np.empty((nrow, bs), np.float32) if f32_scale else None
    for i in range(0, rows.shape[0], _CHUNK_ROWS):
        blk = rows[i:i + _CHUNK_ROWS]
        nb = blk.shape[0]
        bits = _block_amax_bits(blk, ibuf, mbuf)
        if int_exp:
            Ek, bad = _floor_exponent(bits, rows.dtype, emax)
        else:
            amax = bits.view(rows.dtype).astype(np.float64)
            Ei = _shared_exponent(amax, name, elem, scale_rounding)
            bad = np.isnan(Ei)
            Ek = np.where(bad, 0.0, Ei).astype(np.int64)
        any_bad = bool(bad.any())
        # 2**(shift - E): an exact power of two (E in -127..127), so y is exact
        y = ybuf[:nb]
        if rows.dtype == np.float64:
            np.multiply(blk, _pow2(shift - Ek)[:, None], out=y)
        elif f32_scale:
            # float32 product: exact except below 2**-126, which rounds to (signed) zero
            # in these modes anyway (element formats' subnormals are >= 2**-17)
            s32 = fbuf[:nb]
            np.multiply(blk, _pow2(shift - Ek).astype(np.float32)[:, None], out=s32)
            np.copyto(y, s32)
        else:
            np.copyto(y, blk)
            np.multiply(y, _pow2(shift - Ek)[:, None], out=y)
        if any_bad:
            y[bad] = 0.0
        # a power-of-two scaling keeps an input's remainder class (if any) valid
        st = None if st_rows is None else st_rows[i:i + _CHUNK_ROWS]
        qi = q[i:i + _CHUNK_ROWS]
        if not fake and not shift:
            round_values(y, elem, mode, "saturate", rng=rng, **_rem(st), out=qi)
        else:
            r = round_values(y, elem, mode, "saturate", rng=rng, **_rem(st), out=rbuf[:nb])
            if not fake:
                np.multiply(r, 2.0 ** -shift, out=qi)
            elif out_dtype == np.float32:
                # exact: element values and 2**(E - shift) >= 2**-133 are float32 values,
                # and so are their products (MX values of float32 data)
                np.copyto(qi, r, casting="same_kind")
                np.multiply(qi, _pow2(Ek - shift).astype(np.float32)[:, None], out=qi)
            else:
                np.multiply(r, _pow2(Ek - shift)[:, None], out=qi)
        if not fake:
            E[i:i + _CHUNK_ROWS] = np.where(bad, np.nan, Ek)
        elif any_bad:
            qi[bad] = np.nan  # a NaN scale makes its whole block NaN
    if fake:
        return _unblock(q, meta, axis, bs)
    bad = np.isnan(E)
    Ek = np.where(bad, 0.0, E).astype(np.int64)
    scale = np.where(bad, np.nan, np.ldexp(1.0, Ek))
    codes = np.where(bad, 255, Ek + 127).astype(np.uint8)  # E8M0: biased exponent, 0xFF NaN
    return QuantizedTensor(
        elements=_unblock(q, meta, axis, bs), scale=_scale_layout(scale, meta, axis),
        zero_point=0, fmt=name, element_format=elem, granularity="block", axis=axis,
        block_size=bs, scale_codes=_scale_layout(codes, meta, axis), scheme="symmetric")


def _block_dequantize(q: QuantizedTensor):
    rows, meta = split_blocks(q.elements, q.axis, q.block_size)
    s = np.moveaxis(np.asarray(q.scale, np.float64), q.axis, -1).reshape(-1)
    if q.tensor_scale is not None:
        s = s * q.tensor_scale  # e4m3 * fp32: exact in float64
    out = rows * s[:, None]
    if np.isnan(s).any():
        out[np.isnan(s)] = np.nan  # a NaN scale makes its whole block NaN
    return _unblock(out, meta, q.axis, q.block_size)


# ---------------------------------------------------------------------------------------------
# NVFP4

def _quantize_nvfp4(v, frac, narrow, axis, mode, rng, tensor_scale=None):
    elem, bs, sfmt, tfmt = _NV.element_format, _NV.block_size, _NV.scale_format, _NV.tensor_scale_format
    if v.ndim == 0:
        raise ValueError("NVFP4 quantisation needs an array with at least one dimension")
    fin = np.isfinite(v)
    if not fin.all():
        raise ValueError("NVFP4 has no NaN or Inf encoding; the input holds non-finite values")
    rows, meta = split_blocks(v, axis, bs)
    amax_b = np.max(np.abs(rows), axis=1)
    if tensor_scale is None:
        amax = float(amax_b.max()) if amax_b.size else 0.0
        # per-tensor fp32 scale so that the largest block scale is E4M3's max
        ts = cast(amax / (elem.max * sfmt.max), tfmt) if amax > 0 else 1.0
        if ts == 0.0:
            ts = tfmt.smallest_subnormal
    else:
        ts = float(cast(tensor_scale, tfmt))
        if not ts > 0:
            raise ValueError(f"tensor_scale must be a positive number, not {tensor_scale!r}")
    # block scale: amax_b / (6 * ts) rounded once to E4M3 (saturating)
    bq, bst = _exact_quotient(amax_b, None, elem.max * ts, False, sfmt)
    bscale = round_values(bq, sfmt, "nearest_even", "saturate", sticky=bst)
    denom = bscale * ts  # E4M3 (4 bits) * fp32 (24 bits): exact
    zero = denom == 0
    frows = None if frac is None else split_blocks(frac, axis, bs)[0]
    yq, yst = _exact_quotient(rows, frows, np.where(zero, 1.0, denom)[:, None], narrow, elem,
                              mode == "stochastic")
    q = round_values(yq, elem, mode, "saturate", rng=rng, **_rem(yst))
    q[zero] = 0.0
    return QuantizedTensor(
        elements=_unblock(q, meta, axis, bs), scale=_scale_layout(bscale, meta, axis),
        zero_point=0, fmt="nvfp4", element_format=elem, granularity="block", axis=axis,
        block_size=bs, scale_codes=_scale_layout(values_to_codes(bscale, sfmt), meta, axis),
        tensor_scale=float(ts), scheme="symmetric")


# ---------------------------------------------------------------------------------------------
# per-tensor / per-channel scales

def _reduce_axes(ndim, axis, granularity):
    if granularity == "tensor":
        return None
    return tuple(i for i in range(ndim) if i != axis)


def _ranges(v, granularity, axis, calibration, percentile, symmetric):
    """(lo, hi) of the calibrated range, keepdims layout (scalars per tensor)."""
    red = _reduce_axes(v.ndim, axis, granularity)
    kd = granularity == "channel"
    fin = np.where(np.isfinite(v), v, 0.0) if not np.isfinite(v).all() else v
    if calibration == "percentile" and not (isinstance(percentile, (int, float))
                                            and 0 < percentile <= 100):
        raise ValueError(f"percentile must be in (0, 100], not {percentile!r}")
    if fin.size == 0:  # no elements: the range of nothing is [0, 0], as for all zeros
        zero = np.sum(fin, axis=red, keepdims=kd)  # +0 in the layout of the result
        return zero, zero
    if calibration == "percentile":
        if symmetric:
            hi = np.percentile(np.abs(fin), percentile, axis=red, keepdims=kd)
            return -hi, hi
        return (np.percentile(fin, 100 - percentile, axis=red, keepdims=kd),
                np.percentile(fin, percentile, axis=red, keepdims=kd))
    if symmetric:
        hi = np.max(np.abs(fin), axis=red, keepdims=kd)
        return -hi, hi
    return np.min(fin, axis=red, keepdims=kd), np.max(fin, axis=red, keepdims=kd)


def _int_params(lo, hi, fmt: Format, symmetric, narrow_range, pow2):
    """(scale fp32, zero_point, qmin, qmax) for an integer format and a range."""
    n = fmt.bits
    if fmt.signed:
        qmin, qmax = -(1 << (n - 1)), (1 << (n - 1)) - 1
    else:
        qmin, qmax = 0, (1 << n) - 1
    if symmetric:
        if narrow_range:
            qmin = qmin + 1 if fmt.signed else qmin + 1
        half = (1 << (n - 1)) - 1  # 127 for 8 bits
        if not fmt.signed and not narrow_range:
            half = (qmax - qmin) / 2  # 127.5 for uint8, as PyTorch's observers
        amax = np.maximum(np.abs(lo), np.abs(hi))
        scale = _fp32_scale(amax / half, pow2)
        zp = np.zeros(np.shape(scale), np.int64) if fmt.signed else \
            np.full(np.shape(scale), 1 << (n - 1), np.int64)
    else:
        lo = np.minimum(lo, 0.0)
        hi = np.maximum(hi, 0.0)
        scale = _fp32_scale((hi - lo) / (qmax - qmin), pow2)
        zp = qmin - round_values(np.asarray(lo / scale, np.float64), _WIDE_INT)
        zp = np.clip(zp, qmin, qmax).astype(np.int64)
    return scale, zp, qmin, qmax


def _fp32_scale(raw, pow2):
    """A positive fp32 scale (1.0 where the range is empty); ``pow2`` rounds it up
    to a power of two (so nothing new clips)."""
    raw = np.asarray(raw, np.float64)
    raw = np.where((raw > 0) & np.isfinite(raw), raw, 1.0)
    if pow2:
        s = round_values(raw, get_format("e11m0"), "up")
    else:
        s = round_values(raw, _FP32, "nearest_even", "saturate")
    s = np.where(s > 0, s, _FP32.smallest_subnormal)
    return float(s) if s.ndim == 0 else s


def _round_int(v, frac, narrow, scale, zp, qmin, qmax, mode, rng):
    yq, yst = _exact_quotient(v, frac, scale, narrow, _ROUND_INT, mode == "stochastic")
    own = isinstance(yq, np.ndarray) and yq is not v and yq.flags.writeable  # a fresh quotient
    n = round_values(yq, _ROUND_INT, mode, "saturate", rng=rng, **_rem(yst),
                     out=yq if own else None)
    if np.any(zp):
        if np.broadcast_shapes(np.shape(zp), n.shape) == n.shape:
            n += zp
        else:
            n = n + zp
    np.clip(n, qmin, qmax, out=n)
    if np.isnan(v).any():
        raise ValueError("integer formats have no NaN; the input holds NaN")
    return n


def _round_float(v, frac, sticky, narrow, scale, elem, mode, overflow, rng):
    class_only = mode == "stochastic" and sticky is not None and sticky.dtype != np.int64
    if np.ndim(scale) == 0 and float(scale) == 1.0 and not (class_only and frac is not None):
        return round_values(v, elem, mode, overflow, rng=rng, **_rem(sticky))
    yq, yst = _exact_quotient(v, frac, scale, narrow, elem, mode == "stochastic")
    return round_values(yq, elem, mode, overflow, rng=rng, **_rem(yst))


def _mse_search(v, fmt, granularity, axis, symmetric, narrow_range, pow2, narrow, mode, rng,
                grid=40):
    """Clip range minimising the mean squared error of fake quantisation: try
    ``amax * t`` for ``grid`` values of t in [0.2, 1] (per channel independently)."""
    lo0, hi0 = _ranges(v, granularity, axis, "max", None, symmetric)
    if v.size == 0:
        return lo0, hi0  # no elements, no error to minimise: the range of nothing, [0, 0]
    red = _reduce_axes(v.ndim, axis, granularity)
    best_err = best_lo = best_hi = None
    for t in np.linspace(0.2, 1.0, grid):
        lo, hi = lo0 * t, hi0 * t
        xq = _fake_with_range(v, fmt, lo, hi, symmetric, narrow_range, pow2, narrow, mode, rng)
        err = np.mean((xq - v) ** 2, axis=red, keepdims=granularity == "channel")
        if best_err is None:
            best_err, best_lo, best_hi = err, lo, hi
        else:
            better = err < best_err
            best_err = np.where(better, err, best_err)
            best_lo = np.where(better, lo, best_lo)
            best_hi = np.where(better, hi, best_hi)
    return best_lo, best_hi


def _fake_with_range(v, fmt, lo, hi, symmetric, narrow_range, pow2, narrow, mode, rng):
    if fmt.kind == "int":
        scale, zp, qmin, qmax = _int_params(lo, hi, fmt, symmetric, narrow_range, pow2)
        return (_round_int(v, None, narrow, scale, zp, qmin, qmax, mode, rng) - zp) * scale
    scale = _fp32_scale(np.maximum(np.abs(lo), np.abs(hi)) / fmt.max, pow2)
    return _round_float(v, None, None, narrow, scale, fmt, mode, "saturate", rng) * scale


# ---------------------------------------------------------------------------------------------
# group-wise and 2-D block scales: the per-tensor rules applied tile by tile

def _is_int(n):
    return isinstance(n, (int, np.integer)) and not isinstance(n, bool)


def _tiled_request(kind, f, granularity, group_size, block):
    """True for ``granularity="group"`` / ``"block"``; rejects ``group_size`` / ``block``
    given with anything else (and with MX / NVFP4, whose blocks are fixed)."""
    key = granularity.strip().lower() if isinstance(granularity, str) else granularity
    if kind in ("mx", "nvfp4") and (key in ("group", "block") or group_size is not None
                                    or block is not None):
        name = f if isinstance(f, str) else f.name
        raise ValueError(f"{name} has its own blocks ({get_block_format(name).block_size} "
                         f"along axis); granularity={granularity!r}, group_size and block do not apply. "
                         "Group-wise and 2-D block scaling take integer formats (int8 uint8 int4 uint4) "
                         "and float formats (fp8_e4m3 fp8_e5m2 ...).")
    if group_size is not None and key != "group":
        raise ValueError(f"group_size={group_size!r} applies to granularity='group', not "
                         f"granularity={granularity!r}")
    if block is not None and key != "block":
        raise ValueError(f"block={block!r} applies to granularity='block', not granularity={granularity!r}")
    return key in ("group", "block")


def _tile_shape(shape, granularity, group_size, block, axis):
    """(tile: one size per dimension, normalised axis or None) of a group / block request."""
    ndim = len(shape)
    if granularity == "group":
        if group_size is None:
            raise ValueError("granularity='group' needs group_size= (elements per group, e.g. 32, 64 or 128)")
        if not _is_int(group_size):
            raise TypeError(f"group_size must be an integer, not {type(group_size).__name__}")
        ax = _norm_axis(-1 if axis is None else axis, ndim, "group-wise quantisation")
        n = shape[ax]
        if not (0 < group_size and (group_size <= n or n == 0)):  # an empty axis has no groups
            raise ValueError(f"group_size={group_size} is not a group of axis {ax} ({n} elements); "
                             f"valid: 1..{n}")
        tile = [1] * ndim
        tile[ax] = int(group_size)
        return tuple(tile), ax
    if block is None:
        raise ValueError("granularity='block' needs block=(rows, cols), e.g. block=(128, 128)")
    if axis is not None:
        raise ValueError(f"axis={axis!r} does not apply to granularity='block' (2-D blocks tile the "
                         "last two axes); valid: axis=None")
    if isinstance(block, (str, bytes)) or not hasattr(block, "__len__"):
        raise TypeError(f"block must be a pair of integers (rows, cols), not {type(block).__name__}")
    if len(block) != 2:
        raise ValueError(f"block={tuple(block)!r} must be a pair (rows, cols), e.g. (128, 128)")
    if not all(_is_int(b) for b in block):
        raise TypeError(f"block must hold integers, not {tuple(type(b).__name__ for b in block)}")
    if ndim < 2:
        raise ValueError(f"granularity='block' needs an array of at least 2 dimensions, not {ndim}")
    rows, cols = shape[-2:]
    # a zero-length axis has no blocks, so any positive size fits it
    if not all(0 < b and (b <= d or d == 0) for b, d in zip(block, (rows, cols))):
        raise ValueError(f"block={tuple(int(b) for b in block)} does not fit the last two dimensions "
                         f"({rows}, {cols}); valid: 1..{rows} rows, 1..{cols} columns")
    return (1,) * (ndim - 2) + (int(block[0]), int(block[1])), None


def _tile_reduce(a, tile, fn):
    """``fn`` (np.max or np.min) over each tile of ``a``, on the grid ``ceil(shape / tile)``;
    partial edge tiles are padded with zeros first (the documented rule)."""
    nt = tuple(-(-d // t) for d, t in zip(a.shape, tile))
    pad = [(0, n * t - d) for n, t, d in zip(nt, tile, a.shape)]
    if any(p for _, p in pad):
        a = np.pad(a, pad)
    a = a.reshape(tuple(x for n, t in zip(nt, tile) for x in (n, t)))
    return fn(a, axis=tuple(range(1, 2 * len(tile), 2)))


def _tile_expand(a, tile, shape):
    """One value a tile (the grid) -> one value an element (``shape``)."""
    for d, t in enumerate(tile):
        if t > 1:
            a = np.repeat(a, t, axis=d)
    return a[tuple(slice(0, n) for n in shape)]


def _quantize_tiled(v, frac, sticky, narrow, f, granularity, group_size, block, axis, symmetric,
                    calibration, scale, zero_point, margin, pow2, narrow_range, mode, overflow, rng):
    """Group-wise / 2-D block quantisation: each tile's range by ``calibration="max"``,
    then the per-tensor scale rule of its format (``_int_params`` / ``_fp32_scale``),
    then one rounding of every ``x / scale`` (``_round_int`` / ``_round_float``)."""
    tile, ax = _tile_shape(v.shape, granularity, group_size, block, axis)
    if calibration != "max":
        raise ValueError(f"calibration={calibration!r} is not available with granularity="
                         f"{granularity!r}; valid: max")
    if zero_point is not None or not (scale is None or (isinstance(scale, str) and scale == "amax")):
        raise ValueError(f"granularity={granularity!r} computes a scale{'' if symmetric else ' and zero point'} "
                         f"per {granularity} from its elements; valid: scale=None (or 'amax'), "
                         f"zero_point=None")
    scheme = "symmetric" if symmetric else "asymmetric"
    if f.kind != "int" and not symmetric:
        raise ValueError(f"scheme={scheme!r} does not apply to float formats ({f.name}); valid: symmetric")
    fin = v if np.isfinite(v).all() else np.where(np.isfinite(v), v, 0.0)
    if symmetric:
        hi = _tile_reduce(np.abs(fin), tile, np.max).astype(np.float64)
        lo = -hi
    else:
        lo = _tile_reduce(fin, tile, np.min).astype(np.float64)
        hi = _tile_reduce(fin, tile, np.max).astype(np.float64)
    label = "group" if granularity == "group" else "block2d"
    size = int(group_size) if granularity == "group" else tile[-2:]

    def full(a):
        return _tile_expand(np.asarray(a), tile, v.shape)

    if f.kind == "int":
        sc, zp, qmin, qmax = _int_params(lo, hi, f, symmetric, narrow_range, pow2)
        if margin:
            sc = _fp32_scale(np.asarray(sc) * 2.0 ** margin, pow2)
        n = _round_int(v, frac, narrow, full(sc), full(zp), qmin, qmax, mode, rng)
        return QuantizedTensor(n, sc, zp, f.name, f, label, ax, size, None, None, qmin, qmax,
                               scheme, block_shape=tile)
    sc = _fp32_scale(hi * 2.0 ** margin / f.max, pow2)
    r = _round_float(v, frac, sticky, narrow, full(sc), f, mode, overflow, rng)
    return QuantizedTensor(r, sc, 0, f.name, f, label, ax, size, scheme=scheme, block_shape=tile)


# ---------------------------------------------------------------------------------------------
# the public entry

def quantize(x, fmt="int8", *, scheme="symmetric", granularity="tensor", axis=None,
             calibration="max", percentile=99.99, rounding="nearest_even", scale=None,
             zero_point=None, margin=0, pow2_scale=False, narrow_range=None,
             scale_rounding="floor", overflow="saturate", tensor_scale=None, rng=None,
             group_size=None, block=None):
    """Quantise ``x`` to ``fmt`` and return a ``QuantizedTensor`` (``.dequantize()``).

    Formats
    -------
    ``int8 uint8 int4 uint4``: affine, ``q = clamp(round(x / scale) + zero_point, qmin, qmax)``.
        ``scheme="symmetric"``: zero point 0 (unsigned: 2**(bits-1)), ``scale = amax / 127``
        for int8 with codes -127..127 (``narrow_range=False``: -128..127).
        ``scheme="asymmetric"``: the range [min(lo, 0), max(hi, 0)] maps onto qmin..qmax,
        ``scale = (hi - lo) / (qmax - qmin)``, ``zero_point = qmin - round(lo / scale)``.
    float formats (``fp8_e4m3``, ``fp8_e5m2``, ``fp6_*``, ``fp4_e2m1``, ``bf16`` ...):
        ``q = round(x / scale)`` in the format, saturating.  ``scale="amax"`` (the default
        for formats of at most 8 bits; 1.0 for wider ones) is ``amax * 2**margin / max``,
        FP8 per-tensor scaling as Transformer Engine computes it.
    ``mxfp8_e4m3 mxfp8_e5m2 mxfp6_e2m3 mxfp6_e3m2 mxfp4_e2m1 mxint8`` (``mxfp8``,
        ``mxfp6``, ``mxfp4``): OCP MX, blocks of 32 along ``axis`` (default -1), see
        ``mx_shared_exponent`` for the E8M0 scale; elements rounded with saturation.
        A block holding Inf or NaN gets the NaN scale (its values decode to NaN).
    ``nvfp4``: E2M1 in blocks of 16 along ``axis``; block scale
        ``round_e4m3(amax_block / (6 * ts))``, ``ts = amax / (6 * 448)`` in fp32
        (or ``tensor_scale=``); elements ``round_e2m1(x / (block * ts))``.

    Options
    -------
    granularity : ``"tensor"``, ``"channel"`` (one scale per index of ``axis``, default 0),
        ``"group"`` (one scale, and zero point, per ``group_size`` consecutive elements
        along ``axis``, default -1: GPTQ / AWQ-style weight groups) or ``"block"`` (one per
        2-D block ``block=(rows, cols)`` of the last two axes, e.g. ``(128, 128)``).  Each
        group or block gets the per-tensor rule applied to its own elements (same scale
        formula, the same single rounding of ``x / scale``); ``calibration="max"`` only.
        When ``group_size`` (or a block side) does not divide its axis, the last group is
        partial: its scale comes from the elements it has, which is what padding it with
        zeros to full size gives (a zero never raises amax nor widens ``[min(lo, 0),
        max(hi, 0)]``), as DeepSeek-V3 pads edge blocks.  A group or block larger than its
        axis is an error.  Result: ``granularity="group"`` or ``"block2d"``, scales on the
        grid of groups / blocks (``block_shape`` gives the tile).
    calibration : how the range is found: ``"max"``, ``"percentile"`` (of |x|, or of x
        at both ends for asymmetric), ``"mse"`` (clip range minimising the MSE).
    scale, zero_point : give them instead of calibrating (numbers, or per-channel arrays);
        with an explicit zero point the codes span the format's whole range, as in
        ``torch.quantize_per_tensor``.
    pow2_scale : round the scale up to a power of two.
    rounding : element rounding mode (``"stochastic"`` uses ``rng``).
    Scales are fp32 values (rounded once); every quotient ``x / scale`` is rounded once.

    >>> q = quantize([-1.0, 0.0, 2.0], "uint8", scheme="asymmetric")
    >>> q.codes.tolist(), q.zero_point, q.scale
    ([0, 85, 255], 85, 0.0117647061124444)
    >>> quantize([[1.0, 2.0], [30.0, 40.0]], "int8", granularity="channel").codes.tolist()
    [[64, 127], [95, 127]]
    >>> q = quantize(np.arange(1.0, 33.0), "mxfp8_e4m3")
    >>> int(q.scale_codes[0]), q.dequantize()[-3:].tolist()
    (124, [30.0, 32.0, 32.0])
    >>> q = quantize([[1.0, -2.0, 30.0, 40.0, 5.0]], "int8", granularity="group", group_size=2)
    >>> q.codes.tolist(), q.scale.shape      # groups [1, -2], [30, 40], [5]
    ([[64, -127, 95, 127, 127]], (1, 3))
    """
    return _quantize(x, fmt, False, scheme=scheme, granularity=granularity, axis=axis,
                     calibration=calibration, percentile=percentile, rounding=rounding,
                     scale=scale, zero_point=zero_point, margin=margin, pow2_scale=pow2_scale,
                     narrow_range=narrow_range, scale_rounding=scale_rounding,
                     overflow=overflow, tensor_scale=tensor_scale, rng=rng,
                     group_size=group_size, block=block)


_RAW_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _quantize(x, fmt, fake, *, scheme, granularity, axis, calibration, percentile, rounding,
              scale, zero_point, margin, pow2_scale, narrow_range, scale_rounding, overflow,
              tensor_scale, rng, group_size=None, block=None):
    kind, f = resolve_kind(fmt)
    tiled = _tiled_request(kind, f, granularity, group_size, block)
    mode = resolve_mode(rounding)
    if mode == "stochastic":
        rng = make_rng(rng)
    if kind == "mx":
        sr = _choice("scale_rounding", scale_rounding, SCALE_ROUNDINGS)
        if isinstance(x, np.ndarray) and x.dtype in _RAW_FLOATS:
            v, st = x, None  # blocks are converted to float64 chunk by chunk
        else:
            ex = to_exact(x)
            v, st = ex.values, (ex.resid if mode == "stochastic" else ex.sticky)
        ax = _norm_axis(-1 if axis is None else axis, v.ndim, "MX quantisation")
        return _quantize_mx(v, st, f, ax, sr, mode, rng, fake=fake)
    if (fake and kind == "int" and isinstance(x, np.ndarray) and x.dtype == np.float32
            and (calibration == "max" or (scale is not None and not isinstance(scale, str)))):
        v, frac, narrow = x, None, True  # float32 data: no float64 copy of the whole input
    else:
        v, frac, narrow, ex = _intake(x)
    if kind == "nvfp4":
        ax = _norm_axis(-1 if axis is None else axis, v.ndim, "NVFP4 quantisation")
        return _quantize_nvfp4(v, frac, narrow, ax, mode, rng, tensor_scale)

    scheme = _choice("scheme", scheme, _SCHEMES)
    granularity = _choice("granularity", granularity, _GRANULARITIES)
    calibration = _choice("calibration", calibration, CALIBRATIONS)
    symmetric = scheme == "symmetric"
    ax = None
    if granularity == "channel":
        ax = _norm_axis(0 if axis is None else axis, v.ndim, "per-channel quantisation")
    if narrow_range is None:
        narrow_range = symmetric
    if not isinstance(margin, (int, np.integer)) or isinstance(margin, bool):
        raise TypeError(f"margin must be an integer (a power of two), not {type(margin).__name__}")
    if tiled:
        q = _quantize_tiled(v, frac, None if kind == "int" else ex.sticky, narrow, f, granularity,
                            group_size, block, axis, symmetric, calibration, scale, zero_point,
                            margin, pow2_scale, narrow_range, mode, overflow, rng)
        return q.dequantize() if fake else q

    if kind == "int":
        if scale is not None and not isinstance(scale, str):
            # given scale: zero point as given (default 0, or 2**(bits-1) for a symmetric
            # unsigned format); codes span the format's range (-127..127 for a signed
            # symmetric scheme with narrow_range, as without a given scale)
            sc = _given(scale, "scale", v, ax)
            default_zp = 0 if (f.signed or not symmetric) else 1 << (f.bits - 1)
            zp = np.asarray(default_zp if zero_point is None else zero_point)
            if zp.dtype.kind not in "iu":
                raise TypeError("zero_point must be an integer or an integer array")
            zp = _given_layout(zp.astype(np.int64), v, ax)
            qmin, qmax = (int(f.min), int(f.max)) if f.signed else (0, (1 << f.bits) - 1)
            if f.signed and symmetric and narrow_range and zero_point is None:
                qmin += 1
        else:
            if scale is not None and scale != "amax":
                raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
            if calibration == "mse":
                lo, hi = _mse_search(v, f, granularity, ax, symmetric, narrow_range, pow2_scale,
                                     narrow, mode, rng)
            else:
                lo, hi = _ranges(v, granularity, ax, calibration, percentile, symmetric)
                if v.dtype != np.float64:  # float32 extremes, exact in float64
                    lo, hi = lo.astype(np.float64), hi.astype(np.float64)
            sc, zp, qmin, qmax = _int_params(lo, hi, f, symmetric, narrow_range, pow2_scale)
            if margin:
                sc = _fp32_scale(np.asarray(sc) * 2.0 ** margin, pow2_scale)
        if fake and frac is None and mode != "stochastic" and v.ndim and v.size:
            return _fake_int(v, narrow, sc, zp, qmin, qmax, mode)
        n = _round_int(v, frac, narrow, sc, zp, qmin, qmax, mode, rng)
        if fake:
            return QuantizedTensor(n, sc, zp, f.name, f).dequantize()
        zp_out = int(zp) if np.ndim(zp) == 0 else zp
        return QuantizedTensor(n, sc, zp_out, f.name, f, granularity, ax, None, None, None,
                               qmin, qmax, scheme)

    # float element formats, per tensor or per channel
    if not symmetric:
        raise ValueError("float formats are quantised symmetrically (scheme='symmetric')")
    if scale is None:
        scale = "amax" if f.bits <= 8 else 1.0
    if isinstance(scale, str):
        if scale != "amax":
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        if calibration == "mse":
            lo, hi = _mse_search(v, f, granularity, ax, True, True, pow2_scale, narrow, mode, rng)
        else:
            lo, hi = _ranges(v, granularity, ax, calibration, percentile, True)
        sc = _fp32_scale(hi * 2.0 ** margin / f.max, pow2_scale)
    else:
        sc = _given(scale, "scale", v, ax)
    ov = overflow if overflow is not None else None
    r = _round_float(v, frac, ex.resid if mode == "stochastic" else ex.sticky, narrow, sc, f,
                     mode, ov, rng)
    return QuantizedTensor(r, sc, 0, f.name, f, granularity, ax, scheme=scheme)


def _given_layout(a, v, ax):
    """A 1-D per-channel array reshaped to broadcast along axis ``ax`` of v."""
    if a.ndim == 1 and ax is not None and v.ndim > 1:
        shape = [1] * v.ndim
        shape[ax] = a.size
        a = a.reshape(shape)
    return a


def _given(scale, what, v, ax):
    s = np.asarray(scale)
    if s.dtype.kind not in "fiu":
        raise TypeError(f"{what} must be a number or an array of numbers")
    s = s.astype(np.float64)
    if np.any(~(s > 0)) or not np.all(np.isfinite(s)):
        raise ValueError(f"{what} must be positive and finite")
    s = _given_layout(s, v, ax)
    return float(s) if s.ndim == 0 else s


_QUANTIZE_DEFAULTS = {k: v.default for k, v in __import__("inspect").signature(quantize).parameters.items()
                      if v.kind is v.KEYWORD_ONLY}


def fake_quant(x, fmt="int8", **options) -> np.ndarray:
    """Quantise then dequantise (the forward pass of quantisation-aware training);
    same options as ``quantize``.  Returns float64 (it holds every result exactly);
    MX formats keep a float32 input's dtype (MX values of float32 data are float32 values).

    >>> fake_quant([0.1, 0.26, -1.0], "int8").tolist()
    [0.10236220434308052, 0.25984251871705055, -0.9999999962747097]
    """
    kind, _ = resolve_kind(fmt)
    if kind in ("mx", "int"):  # fused and chunked: quantize(x, fmt, **options).dequantize()
        opts = dict(_QUANTIZE_DEFAULTS)
        unknown = set(options) - set(opts)
        if unknown:
            raise TypeError(f"fake_quant() got unexpected keyword argument(s) {sorted(unknown)}")
        opts.update(options)
        return _quantize(x, fmt, True, **opts)
    return quantize(x, fmt, **options).dequantize()


_FAKE_CHUNK = 1 << 17  # elements a chunk of _fake_int


def _fake_int(v, narrow, sc, zp, qmin, qmax, mode):
    """``(_round_int(v, ...) - zp) * sc`` as float64, chunk by chunk along axis 0 (the
    same elementwise operations as quantize + dequantize, without whole-size temporaries)."""
    out = np.empty(v.shape, np.float64)
    sc_a, zp_a = np.asarray(sc, np.float64), np.asarray(zp)
    step = max(1, _FAKE_CHUNK // (v.size // v.shape[0] or 1))

    def part(a, sl):  # the slice of a per-channel array that broadcasts onto v[sl]
        return a[sl] if a.ndim == v.ndim and a.shape[0] > 1 else a

    for i in range(0, v.shape[0], step):
        sl = slice(i, i + step)
        s_i, z_i = part(sc_a, sl), part(zp_a, sl)
        n = _round_int(v[sl], None, narrow, s_i, z_i, qmin, qmax, mode, None)
        if z_i.any():
            n -= z_i
        np.multiply(n, s_i, out=out[sl])
    return out


# ---------------------------------------------------------------------------------------------
# integer matmul with an exact int32 accumulator

def _round_fp64(vals, sticky):
    return round_values(vals, get_format("fp64"), sticky=sticky)


def _mul_fp64(a, b):
    """``a * b`` correctly rounded to float64 (one rounding, through the routine)."""
    a = np.asarray(a, np.float64)
    if np.ndim(b) == 0 and np.isfinite(b) and b != 0 and np.frexp(b)[0] == 0.5:
        # a power of two: the float64 product is exact unless it leaves the normal range
        with np.errstate(all="ignore"):
            p = a * b
            ap = np.abs(p)
        if not np.any((ap < 2.0 ** -1022) & (p != 0) | (np.isinf(ap) & np.isfinite(a))):
            return p
    p, st = _exact_product(a, b)
    return p if st is None else _round_fp64(p, st)


@dataclass(repr=False)
class IntMatmulResult:
    """Result of ``int_matmul``.

    acc : int32 accumulator as the hardware holds it (two's-complement wrapped).
    exact : the exact integer sums (int64).
    overflowed : bool mask, True where the exact sum does not fit int32 (acc is wrong there).
    may_overflow : bool mask, True where some summation order could pass through an
        out-of-range partial sum (sum of |products| beyond int32).
    acc_scale : the accumulator's scale ``scale_a * scale_b`` (float64, exact).
    out : the requantised ``QuantizedTensor`` when an output scale was given, else None.
    """

    acc: np.ndarray
    exact: np.ndarray
    overflowed: np.ndarray
    may_overflow: np.ndarray
    acc_scale: np.ndarray | float
    out: QuantizedTensor | None = None

    @property
    def n_overflow(self) -> int:
        return int(self.overflowed.sum())

    def dequantize(self) -> np.ndarray:
        """The requantised output's values, or ``acc * acc_scale`` (rounded once to float64)."""
        if self.out is not None:
            return self.out.dequantize()
        return _mul_fp64(self.acc.astype(np.float64), self.acc_scale)

    def __repr__(self):
        o = f", out={self.out!r}" if self.out is not None else ""
        return (f"IntMatmulResult(shape={self.acc.shape}, int32 overflows={self.n_overflow}, "
                f"possible={int(self.may_overflow.sum())}{o})")


def _matmul_operand(q, name, allowed_axis):
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"int_matmul needs QuantizedTensor operands; {name} is {type(q).__name__}")
    if q.element_format.kind != "int":
        raise ValueError(f"int_matmul multiplies integer-quantised tensors; {name} is {q.fmt}")
    if q.elements.ndim != 2:
        raise ValueError(f"int_matmul needs 2-D operands; {name} has shape {q.shape}")
    if q.granularity in ("group", "block2d"):
        raise ValueError(f"int_matmul needs scales that factor out of the sums (per tensor or per "
                         f"channel); {name} has {q.granularity} scales")
    if q.granularity == "channel" and q.axis != allowed_axis:
        raise ValueError(f"per-channel scales of {name} must run along axis {allowed_axis} "
                         "(rows of A, columns of B) so they factor out of the sums")
    return (q.elements.astype(np.int64) - np.asarray(q.zero_point, np.int64),
            np.asarray(q.scale, np.float64))


def int_matmul(qa: QuantizedTensor, qb: QuantizedTensor, out_scale=None, out_zero_point=0,
               out_fmt="int8", rounding="nearest_even") -> IntMatmulResult:
    """Integer matrix product with an int32 accumulator, as INT8 tensor cores do it.

    ``acc[i, j] = sum_k (qa[i, k] - za) * (qb[k, j] - zb)`` is computed exactly; an
    int32 accumulator holds it modulo 2**32, so where the exact sum leaves
    [-2**31, 2**31 - 1] the result is flagged (``overflowed``) and a ``RuntimeWarning``
    says how many.  The accumulator's scale is ``scale_a * scale_b`` (per-row scales of
    A and per-column scales of B factor out).  With ``out_scale`` the accumulator is
    requantised: ``q = clamp(round(acc * m) + out_zero_point)`` with the multiplier
    ``m = fp32(scale_a * scale_b / out_scale)``, the product ``acc * m`` rounded once.

    >>> a = quantize([[1.0, 1.5]], "int8", scale=1/64)
    >>> b = quantize([[1.0], [1.0]], "int8", scale=1/64)
    >>> r = int_matmul(a, b)
    >>> int(r.acc[0, 0]), r.dequantize().tolist()
    (10240, [[2.5]])
    """
    a, sa = _matmul_operand(qa, "qa", 0)
    b, sb = _matmul_operand(qb, "qb", 1)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"shapes {qa.shape} and {qb.shape} do not align for a matrix product")
    if max(np.abs(a).max(initial=0), np.abs(b).max(initial=0)) ** 2 * max(a.shape[1], 1) >= 2 ** 62:
        raise ValueError("operands too large for an exact int64 check")
    exact = a @ b
    bound = np.abs(a) @ np.abs(b)
    lo, hi = -(1 << 31), (1 << 31) - 1
    overflowed = (exact < lo) | (exact > hi)
    may = bound > hi
    acc = ((exact - lo) % (1 << 32) + lo).astype(np.int32)
    if overflowed.any():
        warnings.warn(f"int_matmul: {int(overflowed.sum())} int32 accumulator(s) overflowed "
                      "(the wrapped results are wrong)", RuntimeWarning, stacklevel=2)
    acc_scale = _mul_fp64(sa, sb)  # 24-bit * 24-bit: exact
    res = IntMatmulResult(acc, exact, overflowed, may,
                          float(acc_scale) if np.ndim(acc_scale) == 0 else acc_scale)
    if out_scale is not None:
        of = get_format(out_fmt)
        if of.kind != "int":
            raise ValueError(f"out_fmt must be an integer format, not {of.name}")
        so = _given(out_scale, "out_scale", exact, None)
        mq, mst = _exact_quotient(np.asarray(acc_scale, np.float64), None, so, False, _FP32)
        m = round_values(mq, _FP32, sticky=mst)
        rmode = resolve_mode(rounding)
        p, pst = _exact_product(acc.astype(np.float64), m, rmode == "stochastic")
        n = round_values(p, _WIDE_INT, rmode, "saturate", **_rem(pst))
        qmin, qmax = (int(of.min), int(of.max)) if of.signed else (0, (1 << of.bits) - 1)
        n = np.clip(n + out_zero_point, qmin, qmax)
        res.out = QuantizedTensor(n, so, int(out_zero_point), of.name, of, "tensor", None,
                                  qmin=qmin, qmax=qmax,
                                  scheme="symmetric" if out_zero_point == 0 else "asymmetric")
    return res


# ---------------------------------------------------------------------------------------------
# FP8 delayed scaling (Transformer Engine style)

class DelayedScaling:
    """Per-tensor FP8 scales from an amax history, as Transformer Engine's
    ``DelayedScaling`` recipe keeps them.

    Each named tensor has a scale (dequantisation multiplier, initially 1) and a
    window of the last ``history_len`` amax values.  ``quantize(name, x)`` casts with
    the *current* scale (values past the format's range saturate) and records
    ``amax(x)``; ``update()`` (once per training step) pushes the recorded amax into
    the window and sets ``scale = amax_ref * 2**margin / fmt.max`` (fp32), where
    ``amax_ref`` is the window's maximum (``algo="max"``) or its newest entry
    (``"most_recent"``).  Forward tensors use ``fwd_format`` (E4M3), gradients
    ``bwd_format`` (E5M2): TE's HYBRID format.  (TE's default window is 1024 steps.)

    Non-finite and empty tensors follow TE's amax kernel and its
    ``amax_and_scale_update``: ``amax(x)`` is the largest ``|x|`` over the elements
    that are not NaN (NaN elements are skipped, as ``fmaxf`` skips them; an Inf makes
    amax Inf; a tensor with no elements, or only NaN, has amax 0).  That amax enters
    the window as it is, Inf included.  ``update`` keeps the previous scale whenever
    ``amax_ref`` is not a finite positive number: after an Inf, for as long as the
    Inf stays in the window under ``"max"`` (``history_len`` updates), and for one
    update under ``"most_recent"``; after an all-zero or empty step while the
    reference is 0.

    >>> ds = DelayedScaling(history_len=4)
    >>> q = ds.quantize("w", [1.0, -2.0, 896.0])   # scale 1: 896 saturates to 448
    >>> q.dequantize().tolist(), ds.update()["w"]
    ([1.0, -2.0, 448.0], 2.0)
    >>> ds.quantize("w", [1.0, -2.0, 896.0]).dequantize().tolist()
    [1.0, -2.0, 896.0]
    """

    ALGOS = ("max", "most_recent")

    def __init__(self, history_len=16, algo="max", margin=0, fwd_format="fp8_e4m3",
                 bwd_format="fp8_e5m2", pow2_scale=False):
        if not isinstance(history_len, (int, np.integer)) or history_len < 1:
            raise ValueError(f"history_len must be a positive integer, not {history_len!r}")
        self.history_len = int(history_len)
        self.algo = _choice("algo", algo, self.ALGOS)
        if not isinstance(margin, (int, np.integer)) or isinstance(margin, bool):
            raise TypeError(f"margin must be an integer, not {type(margin).__name__}")
        self.margin = int(margin)
        self.formats = {"forward": get_format(fwd_format), "backward": get_format(bwd_format)}
        self.pow2_scale = bool(pow2_scale)
        self._scale: dict[str, float] = {}
        self._history: dict[str, list[float]] = {}
        self._pending: dict[str, float] = {}
        self._role: dict[str, str] = {}
        self.clip_fraction: dict[str, float] = {}

    def scale(self, name) -> float:
        """Current dequantisation scale of tensor ``name`` (1.0 before its first update)."""
        return self._scale.get(name, 1.0)

    def history(self, name) -> list[float]:
        """The amax window of ``name``, oldest first."""
        return list(self._history.get(name, []))

    def quantize(self, name, x, role="forward", rounding="nearest_even", rng=None):
        """Quantise ``x`` with ``name``'s current scale; record its amax for ``update``."""
        role = _choice("role", role, ("forward", "backward"))
        if self._role.setdefault(name, role) != role:
            raise ValueError(f"tensor {name!r} was registered as {self._role[name]}, not {role}")
        fmt = self.formats[role]
        s = self.scale(name)
        v = np.asarray(to_exact(x).values)
        amax = float(np.fmax.reduce(np.abs(v), axis=None, initial=0.0))  # NaN skipped, Inf kept
        self._pending[name] = max(self._pending.get(name, 0.0), amax)
        q = quantize(x, fmt, scale=s, rounding=rounding, rng=rng)
        self.clip_fraction[name] = float(np.mean(np.abs(v) > fmt.max * s)) if v.size else 0.0
        return q

    def update(self) -> dict[str, float]:
        """End of a step: roll every window, recompute the scales; returns them."""
        for name, amax in self._pending.items():
            h = self._history.setdefault(name, [])
            h.append(amax)
            del h[:-self.history_len]
            ref = max(h) if self.algo == "max" else h[-1]
            if ref > 0 and math.isfinite(ref):  # else the previous scale stays (as TE)
                fmt = self.formats[self._role[name]]
                self._scale[name] = float(_fp32_scale(ref * 2.0 ** self.margin / fmt.max,
                                                      self.pow2_scale))
        self._pending.clear()
        return dict(self._scale)

    def __repr__(self):
        return (f"DelayedScaling(history_len={self.history_len}, algo={self.algo!r}, "
                f"margin={self.margin}, tensors={sorted(self._scale)})")


# ---------------------------------------------------------------------------------------------
# loss scaling

class LossScaler:
    """Loss scaling with the state machine of PyTorch's ``torch.amp.GradScaler``.

    ``scale(loss)`` multiplies by the current scale S; backpropagate the scaled loss;
    ``unscale(grads)`` returns the gradients times 1/S and whether any is Inf/NaN;
    ``update()`` then (dynamic mode):

    * overflow found: ``S *= backoff_factor``, the growth counter resets, and the step
      must be skipped (``skip`` is True);
    * otherwise the counter grows; when it reaches ``growth_interval``,
      ``S *= growth_factor`` (kept only if finite in fp32) and the counter resets.

    S is an fp32 value, as in PyTorch.  ``dynamic=False`` keeps S fixed (a static
    loss scale) but still reports overflow so the step can be skipped.

    >>> ls = LossScaler(init_scale=2.0**16, growth_interval=2)
    >>> ls.scale(0.5)
    32768.0
    >>> _, bad = ls.unscale([np.array([np.inf])]); ls.update(); ls.get_scale()
    32768.0
    >>> for _ in range(2): _ = ls.unscale([np.array([1.0])]); ls.update()
    >>> ls.get_scale()
    65536.0
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, dynamic=True):
        if not (isinstance(init_scale, (int, float, np.floating, np.integer)) and init_scale > 0):
            raise ValueError(f"init_scale must be a positive number, not {init_scale!r}")
        if not growth_factor > 1.0:
            raise ValueError(f"growth_factor must be > 1, not {growth_factor!r}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"backoff_factor must be in (0, 1), not {backoff_factor!r}")
        if not isinstance(growth_interval, (int, np.integer)) or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive integer, not {growth_interval!r}")
        self._scale = float(cast(init_scale, _FP32))
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.dynamic = bool(dynamic)
        self.growth_tracker = 0
        self._found_inf: bool | None = None
        self.history: list[dict] = []

    def get_scale(self) -> float:
        return self._scale

    def scale(self, loss):
        """``loss * S`` (rounded once to float64; exact for power-of-two S)."""
        out = _mul_fp64(np.asarray(loss, np.float64), self._scale)
        return float(out) if np.ndim(out) == 0 else out

    def unscale(self, grads):
        """(grads * fp32(1/S), found_inf).  ``grads``: an array or a list of arrays."""
        single = isinstance(grads, np.ndarray) or np.isscalar(grads)
        gl = [grads] if single else list(grads)
        inv = float(cast(Fraction(1) / Fraction(self._scale), _FP32)) if self._scale else math.inf
        out, found = [], False
        for g in gl:
            u = _mul_fp64(np.asarray(g, np.float64), inv)
            found = found or not bool(np.all(np.isfinite(u)))
            out.append(u)
        self._found_inf = found
        return (out[0] if single else out), found

    @property
    def skip(self) -> bool:
        """Whether the last ``unscale`` found Inf/NaN (the optimizer step must be skipped)."""
        return bool(self._found_inf)

    def update(self, found_inf=None):
        """Advance the state machine (call once per step, after ``unscale``)."""
        found = self._found_inf if found_inf is None else bool(found_inf)
        if found is None:
            raise RuntimeError("update() needs found_inf: call unscale() first or pass it")
        before = self._scale
        if self.dynamic:
            if found:
                self._scale = float(cast(Fraction(self._scale) * Fraction(self.backoff_factor), _FP32))
                self.growth_tracker = 0
            else:
                self.growth_tracker += 1
                if self.growth_tracker == self.growth_interval:
                    new = float(cast(Fraction(self._scale) * Fraction(self.growth_factor), _FP32))
                    if math.isfinite(new):
                        self._scale = new
                    self.growth_tracker = 0
        self.history.append({"scale": before, "found_inf": found, "new_scale": self._scale,
                             "growth_tracker": self.growth_tracker})
        self._found_inf = None

    def state_dict(self) -> dict:
        return {"scale": self._scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self.growth_tracker}

    def __repr__(self):
        mode = "dynamic" if self.dynamic else "static"
        return f"LossScaler({mode}, scale={self._scale:g}, growth_tracker={self.growth_tracker})"


# ---------------------------------------------------------------------------------------------
# error metrics

def quantization_error(x, q, **options) -> dict:
    """Error of a quantisation of ``x``: ``q`` is a ``QuantizedTensor``, an array of
    dequantised values, or a format name (quantised here with ``options``).

    Returns a dict: ``mse``, ``sqnr_db`` (10 log10 of mean(x**2) / mse), ``max_abs_err``,
    ``max_rel_err`` (over nonzero x), ``frac_clipped`` (x that saturated: beyond the
    largest code by more than half a step, see ``QuantizedTensor.limits``; NaN when
    ``q`` is a plain array), ``frac_flushed`` (nonzero x that became 0),
    ``bits_per_element``.

    >>> e = quantization_error([0.001, 0.5, 1.0], "int8")
    >>> e["frac_flushed"], round(e["sqnr_db"], 1)
    (0.3333333333333333, 48.8)
    """
    xv = np.asarray(to_exact(x).values, np.float64)
    if isinstance(q, (str, Format)):
        q = quantize(x, q, **options)
    elif options:
        raise TypeError("options apply only when q is a format name")
    if isinstance(q, QuantizedTensor):
        xh = q.dequantize()
        lo, hi = q.limits()
        clipped = float(np.mean((xv < lo) | (xv > hi))) if xv.size else 0.0
        bits = q.bits_per_element
    else:
        xh = np.asarray(q, np.float64)
        clipped, bits = float("nan"), float("nan")
    if xh.shape != xv.shape:
        raise ValueError(f"shapes differ: x {xv.shape}, quantised {xh.shape}")
    fin = np.isfinite(xv)
    err = xh[fin] - xv[fin]
    xs = xv[fin]
    mse = float(np.mean(err ** 2)) if err.size else 0.0
    sig = float(np.mean(xs ** 2)) if xs.size else 0.0
    sqnr = float("inf") if mse == 0 else (10 * math.log10(sig / mse) if sig > 0 else float("-inf"))
    nz = xs != 0
    rel = float(np.max(np.abs(err[nz]) / np.abs(xs[nz]))) if nz.any() else 0.0
    return {"mse": mse, "sqnr_db": sqnr,
            "max_abs_err": float(np.max(np.abs(err))) if err.size else 0.0,
            "max_rel_err": rel, "frac_clipped": clipped,
            "frac_flushed": float(np.mean((xh[fin] == 0) & nz)) if xs.size else 0.0,
            "bits_per_element": bits}


_DEFAULT_COMPARE = ("int8", ("int8 per-channel", "int8", {"granularity": "channel"}),
                    "fp8_e4m3", "fp8_e5m2", "mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8",
                    "nvfp4", "int4")


def compare_quantization(x, formats=_DEFAULT_COMPARE, show=True, **options) -> list[dict]:
    """Quantise ``x`` in each format and print a table of the errors; returns the rows.

    Entries of ``formats``: a name (``"int8"``, ``"fp8_e4m3"``, ``"mxfp4"``, ``"nvfp4"``),
    or ``(label, name, {options})``.  ``options`` apply to every entry.

    >>> rows = compare_quantization(np.linspace(-1, 1, 64), ["int8", "mxfp4"], show=False)
    >>> [r["format"] for r in rows], rows[0]["sqnr_db"] > rows[1]["sqnr_db"]
    (['int8', 'mxfp4'], True)
    """
    rows = []
    for entry in formats:
        if isinstance(entry, str):
            label, name, opts = entry, entry, {}
        elif isinstance(entry, tuple) and len(entry) == 3:
            label, name, opts = entry
        elif isinstance(entry, tuple) and len(entry) == 2:
            name, opts = entry
            label = name
        else:
            raise TypeError(f"a format entry is a name or (label, name, options), not {entry!r}")
        e = quantization_error(x, quantize(x, name, **{**options, **opts}))
        rows.append({"format": label, **e})
    if show:
        print(format_table(rows))
    return rows


def format_table(rows) -> str:
    """Text table of ``compare_quantization`` rows."""
    head = (f"{'format':<18}{'bits/el':>8}{'MSE':>11}{'SQNR dB':>9}{'max abs':>11}"
            f"{'max rel':>10}{'clipped':>9}{'flushed':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        pct = lambda v: "n/a" if v != v else f"{100 * v:.2f}%"  # noqa: E731
        lines.append(f"{r['format']:<18}{r['bits_per_element']:>8.3g}{r['mse']:>11.3e}"
                     f"{r['sqnr_db']:>9.2f}{r['max_abs_err']:>11.3e}{r['max_rel_err']:>10.3g}"
                     f"{pct(r['frac_clipped']):>9}{pct(r['frac_flushed']):>9}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# master weights

def master_weights_demo(w0=1.0, update=1e-4, steps=10, fmt="fp16", master="fp32", show=True):
    """Add ``update`` to a weight ``steps`` times, three ways, each sum rounded once:

    * ``low``: the weight lives in ``fmt`` (``w = fmt(w + update)``);
    * ``master``: an fp32 master copy takes the update (``m = fp32(m + update)``);
    * ``from_master``: the ``fmt`` copy used by the next forward pass, ``fmt(m)``.

    With the defaults, ``1 + 0.0001`` is 1 in FP16 (half the gap above 1 is 2**-11,
    about 0.00049), so the FP16 weight never moves, while the master copy
    accumulates the updates and its FP16 copy steps up once it passes the midpoint.
    Returns a dict of lists (step 0 = the start).

    >>> d = master_weights_demo(show=False)
    >>> d["low"][-1], round(d["master"][-1], 6), d["from_master"][-1]
    (1.0, 1.001, 1.0009765625)
    """
    f, mf = get_format(fmt), get_format(master)
    u = Fraction(update)
    w = m = float(cast(w0, f))
    m = float(cast(w0, mf))
    low, mas, fm = [w], [m], [float(cast(m, f))]
    for _ in range(int(steps)):
        w = float(cast(Fraction(w) + u, f))
        m = float(cast(Fraction(m) + u, mf))
        low.append(w)
        mas.append(m)
        fm.append(float(cast(m, f)))
    if show:
        print(f"adding {update:g} to {w0:g}, {steps} times (exact sum: {float(Fraction(w0) + steps * u):.10g})")
        print(f"{'step':>5} {f.name + ' only':>16} {mf.name + ' master':>18} {f.name + '(master)':>16}")
        for i in range(len(low)):
            print(f"{i:>5} {low[i]:>16.10g} {mas[i]:>18.10g} {fm[i]:>16.10g}")
    return {"low": low, "master": mas, "from_master": fm}
