"""Names for the types the public API takes and gives (used in annotations only).

(``FormatLike``, what names a format, lives beside ``Format`` in ``_formats``.)

``Values``
    what the functions take and give: a Python number, a decimal or hex string,
    a ``Fraction`` or ``Decimal``, a list or tuple of those, a numpy or ml_dtypes
    array, or a torch tensor. Array type in, array type out: a scalar gives a
    Python float, a numpy array a numpy array, a tensor a tensor on its own
    device. Written ``Any`` because the result type follows the input's.
``RngLike``
    the random source of stochastic rounding: a ``numpy.random.Generator``, an
    int seed, or None (fresh entropy).
``Overflow``
    an overflow policy name (``"inf"``, ``"saturate"``, ``"nan"``; ``"wrap"`` for
    integer formats), or None for the format's own default.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

__all__ = ["Values", "RngLike", "Overflow"]

Values = Any
RngLike = Union[np.random.Generator, int, None]
Overflow = Union[str, None]
