"""``info``: the facts of a format under ``numpy.finfo`` names."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, overload

from ..backend.fpu import ieee_entry
from .block_formats import (BlockFormat, element_format, get_block_format,
                             is_block_format)
from .formats import Format, FormatLike, hex_code

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FormatInfo", "BlockFormatInfo", "info"]


@dataclass(frozen=True)
class FormatInfo:
    """Facts about a format.  Float fields follow ``numpy.finfo``:

    ``eps`` = 2**-nmant (gap from 1 to the next value), ``max``,
    ``smallest_normal`` (alias ``tiny``), ``smallest_subnormal``, ``nmant``,
    ``nexp``, ``minexp`` (exponent of smallest_normal), ``maxexp`` (first
    exponent that overflows), ``precision`` = floor(-log10(eps)) decimal digits,
    ``resolution`` = 10**-precision.  Extras: ``bits``, ``bias``, ``has_inf``,
    ``nan_codes`` (hex strings), ``has_negative_zero``, ``unit_roundoff``
    (2**-(nmant+1)), ``dynamic_range_decades`` (log10(max / smallest
    positive)), ``num_finite`` (codes with a finite value).

    ``precision`` follows numpy's rule for every format: ``numpy.finfo`` defines it
    as ``int(-log10(eps))``, i.e. floor(nmant * log10(2)) (float16 3, float32 6,
    float64 15; C's ``FLT_DIG`` / ``DBL_DIG``).  ml_dtypes (0.5 to 0.7) follows the same rule
    for bfloat16, float8_e3m4 and its FP6 / FP4 types, but its ``finfo`` states
    precision 1 (resolution 0.1) for the other float8 types (E4M3, E5M2 and, from 0.7,
    E5M3 variants, eps 1/8 or 1/4) and for float8_e8m0fnu (eps 1), where the rule gives 0: there
    floatfmt says 0 (resolution 1.0), the same as for FP6 E2M3, whose eps is also
    1/8.  Every other field equals ``ml_dtypes.finfo`` / ``numpy.finfo``.
    """

    name: str
    kind: str
    bits: int
    nexp: int
    nmant: int
    bias: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    smallest_subnormal: float
    minexp: int | None
    maxexp: int | None
    precision: int
    resolution: float
    unit_roundoff: float
    has_inf: bool
    nan_codes: tuple
    has_negative_zero: bool
    signed: bool
    dynamic_range_decades: float
    num_finite: int
    description: str

    @property
    def tiny(self) -> float:
        return self.smallest_normal

    def __repr__(self) -> str:
        rows = [f"{f.name} = {getattr(self, f.name)!r}" for f in fields(self) if f.name != "name"]
        return f"FormatInfo({self.name}:\n  " + "\n  ".join(rows) + ")"

    def _repr_markdown_(self) -> str:
        return "| field | value |\n|---|---|\n" + "\n".join(
            f"| {f.name} | {getattr(self, f.name)} |" for f in fields(self))


def _nan_codes(f: Format) -> tuple:
    h = lambda c: hex_code(c, f)  # noqa: E731
    sign = 1 << (f.bits - 1)
    if not f.has_nan:
        return ()
    if f.nan == "negative_zero":
        return (h(sign),)
    if f.nan == "all_ones":
        top = (1 << (f.ebits + f.mbits)) - 1
        return (h(top), h(top | sign)) if f.signed else (h(top),)
    lo = (((1 << f.ebits) - 1) << f.mbits) + 1
    hi = ((1 << f.ebits) << f.mbits) - 1
    span = f"{h(lo)}..{h(hi)}"
    return (span, f"{h(lo | sign)}..{h(hi | sign)}") if f.signed else (span,)


def _num_finite(f: Format) -> int:
    if f.kind == "int":
        return 1 << f.bits
    mags = f.max_code + 1  # magnitude codes 0..max_code are finite
    total = mags * 2 if f.signed else mags
    if f.nan == "negative_zero":
        total -= 1  # the -0 code is NaN
    return total


@dataclass(frozen=True)
class BlockFormatInfo:
    """Facts about a block-scaled format (OCP MX, NVFP4; see ``floatfmt.core.block_formats``).

    ``element`` / ``scale`` / ``tensor_scale``: registry names of the element, block-scale
    and per-tensor-scale formats (``tensor_scale`` None for MX); ``block_size``: elements
    per scale; ``element_bits``, ``scale_bits``; ``bits_per_element`` = element_bits +
    scale_bits / block_size (the tensor scale, shared by the whole tensor, left out);
    ``element_max``: largest element value before scaling (127/64 for MXINT8);
    ``emax_elem``: the OCP MX shared-exponent rule's element exponent
    (``E = floor(log2(amax)) - emax_elem``).
    """

    name: str
    kind: str
    element: str
    block_size: int
    scale: str
    tensor_scale: str | None
    element_bits: int
    scale_bits: int
    bits_per_element: float
    element_max: float
    emax_elem: int
    description: str

    def __repr__(self) -> str:
        rows = [f"{f.name} = {getattr(self, f.name)!r}" for f in fields(self) if f.name != "name"]
        return f"BlockFormatInfo({self.name}:\n  " + "\n  ".join(rows) + ")"

    def _repr_markdown_(self) -> str:
        return "| field | value |\n|---|---|\n" + "\n".join(
            f"| {f.name} | {getattr(self, f.name)} |" for f in fields(self))


def _block_info(b: BlockFormat) -> BlockFormatInfo:
    return BlockFormatInfo(
        name=b.name, kind="block", element=b.element, block_size=b.block_size, scale=b.scale,
        tensor_scale=b.tensor_scale, element_bits=b.element_bits,
        scale_bits=b.scale_bits, bits_per_element=b.bits_per_element,
        element_max=b.element_max, emax_elem=b.emax_elem, description=b.description)


@overload
def info(fmt: BlockFormat) -> BlockFormatInfo: ...


@overload
def info(fmt: Format | np.dtype | type) -> FormatInfo: ...


@overload
def info(fmt: str) -> FormatInfo | BlockFormatInfo: ...


@ieee_entry
def info(fmt: FormatLike | BlockFormat) -> FormatInfo | BlockFormatInfo:
    """Facts of a format (``numpy.finfo``-style names); for a block-scaled format
    (``block_formats()``: OCP MX, NVFP4) its block facts as a ``BlockFormatInfo``.

    >>> i = info("fp16"); i.max, i.eps, i.smallest_subnormal, i.precision
    (65504.0, 0.0009765625, 5.960464477539063e-08, 3)
    >>> info("fp8_e4m3").max, info("bf16").eps
    (448.0, 0.0078125)
    >>> b = info("mxfp4_e2m1"); b.block_size, b.scale, b.bits_per_element
    (32, 'e8m0', 4.25)
    """
    if isinstance(fmt, BlockFormat):
        return _block_info(fmt)
    if isinstance(fmt, str) and is_block_format(fmt):
        return _block_info(get_block_format(fmt))
    f = element_format(fmt)
    if f.kind == "int":
        return FormatInfo(f.name, "int", f.bits, 0, 0, 0, 1.0, f.max, f.min, 1.0, 1.0, None, None,
                          0, 1.0, 0.5, False, (), False, f.signed,
                          math.log10(max(abs(f.max), abs(f.min))), _num_finite(f), f.description)
    eps = 2.0 ** -f.mbits
    precision = len(str(1 << f.mbits)) - 1  # floor(log10(2**nmant)) = floor(-log10(eps)), exactly
    return FormatInfo(
        name=f.name, kind="float", bits=f.bits, nexp=f.ebits, nmant=f.mbits, bias=f.bias,
        eps=eps, max=f.max, min=f.min, smallest_normal=f.smallest_normal,
        smallest_subnormal=f.smallest_subnormal, minexp=f.emin, maxexp=f.emax + 1,
        precision=precision, resolution=10.0 ** -precision, unit_roundoff=2.0 ** -(f.mbits + 1),
        has_inf=f.inf, nan_codes=_nan_codes(f), has_negative_zero=f.negative_zero,
        signed=f.signed, dynamic_range_decades=math.log10(f.max) - math.log10(f.smallest_subnormal),
        num_finite=_num_finite(f), description=f.description)
