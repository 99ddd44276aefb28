"""Block-scaled formats as data: OCP MX v1.0 and NVIDIA NVFP4.

A block format stores a tensor as elements of a narrow ``Format`` in blocks of
``block_size`` consecutive values along one axis; each block shares one scale,
stored in ``scale`` format (OCP MX: E8M0, a power of two ``2**(code - 127)``;
NVFP4: an E4M3 value whose sign bit is always 0).  NVFP4 adds one FP32 scale
for the whole tensor (``tensor_scale``), which multiplies every block scale.

The value of element ``q`` of a block with scale ``s`` is ``q * 2**-element_shift
* s`` (times the tensor scale, if any); ``element_shift`` is 6 for MXINT8, whose
8-bit two's-complement elements carry an implicit ``2**-6``, and 0 elsewhere.

Storage cost per element: ``element bits + scale bits / block_size`` (the tensor
scale's 32 bits are shared by the whole tensor and left out):
``mxfp8_*`` 8.25, ``mxfp6_*`` 6.25, ``mxfp4_e2m1`` 4.25, ``mxint8`` 8.25, ``nvfp4`` 4.5.

Every block format is one line of ``_BLOCK_REGISTRY``; the quantisation code
(``floatfmt.scaling.mx_nvfp4``) reads these records and has no table of its own.

    >>> get_block_format("mxfp4").bits_per_element
    4.25
    >>> b = get_block_format("nvfp4"); b.block_size, b.scale, b.tensor_scale
    (16, 'fp8_e4m3', 'fp32')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from .formats import Format, get_format
from .names import close_matches, unknown_name

__all__ = ["BlockFormat", "get_block_format", "block_formats", "is_block_format",
           "close_block_formats", "unknown_block_format"]


@dataclass(frozen=True)
class BlockFormat:
    """A block-scaled format (OCP MX, NVFP4).

    Fields
    ------
    name : canonical name (``"mxfp8_e4m3"``, ``"nvfp4"``).
    element : registry name of the element format (``"fp8_e4m3"``, ``"int8"``).
    block_size : elements sharing one scale (32 for MX, 16 for NVFP4).
    scale : registry name of the block-scale format (``"e8m0"``, ``"fp8_e4m3"``).
    tensor_scale : registry name of the per-tensor scale's format, or None.
    element_shift : element value = code value * 2**-element_shift (6 for MXINT8).
    emax_elem : exponent of the element format's largest binade, as the OCP MX
        spec defines it for the shared-exponent rule (0 for MXINT8).
    """

    name: str
    element: str
    block_size: int
    scale: str
    tensor_scale: str | None = None
    element_shift: int = 0
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise ValueError(f"block_size must be a positive integer, not {self.block_size!r}")
        for what in ("element", "scale", "tensor_scale"):
            name = getattr(self, what)
            if name is not None:
                get_format(name)  # a registry name: unknown ones raise here

    @property
    def element_format(self) -> Format:
        return get_format(self.element)

    @property
    def scale_format(self) -> Format:
        return get_format(self.scale)

    @property
    def tensor_scale_format(self) -> Format | None:
        return None if self.tensor_scale is None else get_format(self.tensor_scale)

    @property
    def emax_elem(self) -> int:
        """The spec's ``emax_elem``: the element format's largest exponent; 0 for an
        integer element with its implicit ``2**-element_shift`` (MXINT8)."""
        f = self.element_format
        return 0 if f.kind == "int" else f.emax

    @property
    def element_mbits(self) -> int:
        """Fraction bits of an element value (MXINT8: the 6 bits below its binary point)."""
        f = self.element_format
        return self.element_shift if f.kind == "int" else f.mbits

    @property
    def element_max(self) -> float:
        """Largest element value (before scaling): 448 for E4M3, 6 for E2M1, 127/64 for MXINT8."""
        return self.element_format.max * 2.0 ** -self.element_shift

    @property
    def element_bits(self) -> int:
        """Width of one element code."""
        return _width(self.element_format)

    @property
    def scale_bits(self) -> int:
        """Width of one block-scale code."""
        return _width(self.scale_format)

    @property
    def bits_per_element_exact(self) -> Fraction:
        """Element bits plus the block scale's share, exactly (the tensor scale excluded)."""
        return self.element_bits + Fraction(self.scale_bits, self.block_size)

    @property
    def bits_per_element(self) -> float:
        """Element bits plus the block scale's share (the tensor scale excluded)."""
        return float(self.bits_per_element_exact)

    def __str__(self) -> str:
        return self.name


def _width(f: Format) -> int:
    assert f.bits is not None  # Format.__post_init__ sets it for every format
    return f.bits


def _b(name: str, element: str, block_size: int, scale: str, desc: str, **kw) -> BlockFormat:
    return BlockFormat(name, element, block_size, scale, description=desc, **kw)


# The block registry: every block format on one screen.
_BLOCK_REGISTRY: dict[str, BlockFormat] = {b.name: b for b in [
    _b("mxfp8_e4m3", "fp8_e4m3", 32, "e8m0", "OCP MX v1.0 MXFP8 (E4M3 elements)"),
    _b("mxfp8_e5m2", "fp8_e5m2", 32, "e8m0", "OCP MX v1.0 MXFP8 (E5M2 elements)"),
    _b("mxfp6_e2m3", "fp6_e2m3", 32, "e8m0", "OCP MX v1.0 MXFP6 (E2M3 elements)"),
    _b("mxfp6_e3m2", "fp6_e3m2", 32, "e8m0", "OCP MX v1.0 MXFP6 (E3M2 elements)"),
    _b("mxfp4_e2m1", "fp4_e2m1", 32, "e8m0", "OCP MX v1.0 MXFP4 (E2M1 elements)"),
    _b("mxint8", "int8", 32, "e8m0", "OCP MX v1.0 MXINT8 (two's-complement int8 * 2**-6)",
       element_shift=6),
    _b("nvfp4", "fp4_e2m1", 16, "fp8_e4m3",
       "NVIDIA NVFP4 (Blackwell): E2M1 elements, unsigned E4M3 block scale, FP32 tensor scale",
       tensor_scale="fp32"),
]}

_BLOCK_ALIASES: dict[str, str] = {
    "mxfp8": "mxfp8_e4m3", "mxfp6": "mxfp6_e2m3", "mxfp4": "mxfp4_e2m1",
    "mxfp8_e4m3fn": "mxfp8_e4m3", "mxint": "mxint8",
}


def block_formats() -> list[str]:
    """Canonical names of every block-scaled format (OCP MX, NVFP4), in registry order.

    ``ff.formats()`` lists the element formats; this is its sibling for block formats.

    >>> block_formats()
    ['mxfp8_e4m3', 'mxfp8_e5m2', 'mxfp6_e2m3', 'mxfp6_e3m2', 'mxfp4_e2m1', 'mxint8', 'nvfp4']
    """
    return list(_BLOCK_REGISTRY)


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def is_block_format(fmt: object) -> bool:
    """True for a ``BlockFormat`` or a name (or alias) of one; False for anything else."""
    if isinstance(fmt, BlockFormat):
        return True
    if not isinstance(fmt, str):
        return False
    key = _key(fmt)
    return key in _BLOCK_REGISTRY or key in _BLOCK_ALIASES


def get_block_format(fmt: str | BlockFormat) -> BlockFormat:
    """The ``BlockFormat`` of a name or alias (``"mxfp4"`` is ``"mxfp4_e2m1"``).

    An unknown name raises ``ValueError`` listing the close matches and every block
    format; a non-string raises ``TypeError``.

    >>> get_block_format("MXFP8").name, get_block_format("mxint8").element_max
    ('mxfp8_e4m3', 1.984375)
    """
    if isinstance(fmt, BlockFormat):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"a block format must be a name or a BlockFormat, not {type(fmt).__name__}")
    key = _key(fmt)
    key = _BLOCK_ALIASES.get(key, key)
    if key in _BLOCK_REGISTRY:
        return _BLOCK_REGISTRY[key]
    raise unknown_block_format(fmt)


def close_block_formats(name: str) -> list[str]:
    """Block-format names and aliases close to ``name`` (for "did you mean" hints)."""
    return close_matches(_key(name), [*_BLOCK_REGISTRY, *_BLOCK_ALIASES], n=3, cutoff=0.6)


def element_format(fmt) -> Format:
    """``get_format(fmt)`` for a name that is not a block format; an unknown name's
    ValueError also lists the block formats (and the close ones), since the caller
    accepts both kinds."""
    try:
        return get_format(fmt)
    except ValueError as err:
        if not isinstance(fmt, str):
            raise
        close = close_block_formats(fmt)
        hint = f" Close block formats: {', '.join(map(repr, close))}." if close else ""
        raise ValueError(f"{err} Block formats: {', '.join(block_formats())}.{hint}") from None


def unknown_block_format(name: str) -> ValueError:
    """The error for an unknown block-format name: close matches, then every valid name."""
    return unknown_name("block format", name, _BLOCK_REGISTRY, also=_BLOCK_ALIASES, cutoff=0.6,
                        listed_as="Block formats", match=_key(name))
