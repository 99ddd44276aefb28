"""``explain``: the entry point that picks the right explanation for its input.

A scalar gives an ``Explanation`` (one value), a list or array an
``ExplanationTable`` (one row per element), a block-scaled ``QuantizedTensor``
or an MX / NVFP4 format name a ``BlockExplanation`` (one block).

    >>> e = explain(0.1, "bf16")
    >>> e.value, e.lower, e.upper
    (0.10009765625, 0.099609375, 0.10009765625)
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ...backend.fpu import ieee_entry
from ...core.cast import refuse_unused_rng
from ...core.block_formats import BlockFormat, get_block_format, is_block_format
from ...core.formats import FormatLike, get_format
from ...core.types import Overflow, RngLike, Values
from .block import explain_block
from .value import Explanation
from .array import ExplanationTable

__all__ = ["explain", "is_block_format_name", "Explained"]


# The result's type follows the input (a scalar, an array, a block format), as ``Values``
# does for ``cast``: an ``Explanation``, an ``ExplanationTable`` or a ``BlockExplanation``.
Explained = Any


@ieee_entry
def explain(x: Values, fmt: FormatLike | BlockFormat | None = None, rounding: str = "nearest_even",
            overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
            sr_bits: int | None = None, max_rows: int = 20, block: int = 0) -> Explained:
    """Round ``x`` to ``fmt`` (as ``cast`` does) and explain every step.

    A scalar gives an ``Explanation``: print it (coloured on a terminal) or let
    Jupyter render it (one box per bit).  An array or list gives an
    ``ExplanationTable`` (one row per element, the first ``max_rows`` shown).
    The options are those of ``cast``.

    Block formats: ``explain(q)`` with a block-scaled ``QuantizedTensor`` (MX or
    NVFP4) is ``explain_block(q, block)``; ``explain(x, "mxfp4_e2m1")`` (any name
    of ``ff.block_formats()`` or its aliases, or a ``BlockFormat``) quantises ``x``
    along its last axis first and explains block ``block`` with the original
    values; a scalar ``x`` is a block of one (the scale is chosen from x alone).

    >>> e = explain(1.0 + 2**-11, "fp16")
    >>> e.tie, e.direction, e.value
    (True, 'toward zero', 1.0)
    >>> explain(-3, "int8").bits
    '11111101'
    >>> b = explain(0.3, "mxfp4"); b.size, b.shared_exponent, b.elements, b.dequantized
    (1, -4, [4.0], [0.25])
    """
    quantized = sys.modules.get("floatfmt.scaling.quantized_tensor")  # no QuantizedTensor exists before it loads
    if quantized is not None and isinstance(x, quantized.QuantizedTensor):
        if fmt is not None:
            raise TypeError("explain(q) takes the format from the QuantizedTensor; do not pass fmt")
        return explain_block(x, block, rounding=rounding)
    if fmt is None:
        raise TypeError("explain(x, fmt) needs a format (or a QuantizedTensor as x)")
    refuse_unused_rng(rounding, rng)
    if isinstance(fmt, BlockFormat) or (isinstance(fmt, str) and is_block_format_name(fmt)):
        from ...scaling.quantize import quantize
        name = get_block_format(fmt).name
        if np.ndim(x) == 0 and not isinstance(x, (list, tuple)):
            x = [x]  # a block of one
        return explain_block(quantize(x, name, rounding=rounding, rng=rng), block, x=x,
                             rounding=rounding)
    f = get_format(fmt)
    if isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim > 0):
        return ExplanationTable(x, f, rounding, overflow, ftz, daz, rng, sr_bits, max_rows)
    return Explanation(x, f, rounding, overflow, ftz, daz, rng, sr_bits)


def is_block_format_name(fmt: object) -> bool:
    """Whether ``fmt`` is a block-scaled format (a ``BlockFormat``, or a name or alias of
    the block registry: OCP MX, NVFP4).  A name that starts like one (``mx...``,
    ``nvfp...``) but is not raises ``ValueError`` listing the close block formats."""
    if is_block_format(fmt):
        return True
    if isinstance(fmt, str) and fmt.strip().lower().startswith(("mx", "nvfp")):
        get_block_format(fmt)  # raises the ValueError that names the block formats
    return False
