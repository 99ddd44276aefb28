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

import numpy as np

from ._formats import get_format
from .block_explanation import BlockExplanation, explain_block
from .explanation import Explanation
from .explanation_table import ExplanationTable

__all__ = ["explain", "is_block_format_name"]


def explain(x, fmt=None, rounding="nearest_even", overflow=None, ftz=False, daz=False, rng=None, *,
            sr_bits=None, max_rows=20, block=0) -> Explanation | ExplanationTable | BlockExplanation:
    """Round ``x`` to ``fmt`` (as ``cast`` does) and explain every step.

    A scalar gives an ``Explanation``: print it (coloured on a terminal) or let
    Jupyter render it (one box per bit).  An array or list gives an
    ``ExplanationTable`` (one row per element, the first ``max_rows`` shown).
    The options are those of ``cast``.

    Block formats: ``explain(q)`` with a block-scaled ``QuantizedTensor`` (MX or
    NVFP4) is ``explain_block(q, block)``; ``explain(x, "mxfp4_e2m1")`` (any MX
    name or ``"nvfp4"``) quantises ``x`` along its last axis first and explains
    block ``block`` with the original values.

    >>> e = explain(1.0 + 2**-11, "fp16")
    >>> e.tie, e.direction, e.value
    (True, 'toward zero', 1.0)
    >>> explain(-3, "int8").bits
    '11111101'
    """
    scaling = sys.modules.get("floatfmt.scaling")  # no QuantizedTensor exists before it loads
    if scaling is not None and isinstance(x, scaling.QuantizedTensor):
        if fmt is not None:
            raise TypeError("explain(q) takes the format from the QuantizedTensor; do not pass fmt")
        return explain_block(x, block, rounding=rounding)
    if fmt is None:
        raise TypeError("explain(x, fmt) needs a format (or a QuantizedTensor as x)")
    if isinstance(fmt, str) and is_block_format_name(fmt):
        from .scaling import quantize
        return explain_block(quantize(x, fmt, rounding=rounding, rng=rng), block, x=x,
                             rounding=rounding)
    fmt = get_format(fmt)
    if isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim > 0):
        return ExplanationTable(x, fmt, rounding, overflow, ftz, daz, rng, sr_bits, max_rows)
    return Explanation(x, fmt, rounding, overflow, ftz, daz, rng, sr_bits)


def is_block_format_name(fmt: str) -> bool:
    """Whether ``fmt`` names a block-scaled format (MX or NVFP4)."""
    if not fmt.strip().lower().startswith(("mx", "nvfp")):
        return False  # not a block format: do not load floatfmt.scaling
    from .scaling import resolve_kind
    return resolve_kind(fmt)[0] in ("mx", "nvfp4")  # unknown: ValueError naming block formats too
