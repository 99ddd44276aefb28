"""Numbers and bit fields as text, for the explanations (teaching layer).

Every helper here turns a value the core already computed into words: the full
decimal expansion of a binary number, ``2^k`` for powers of two, short and
scientific forms, binary digits of a fraction, and the code's bits grouped by
field (painted with ANSI colours on a terminal: sign red, exponent blue,
mantissa green).  Nothing here rounds to a format.

    >>> exact_decimal(0.1)
    '0.1000000000000000055511151231257827021181583404541015625'
    >>> num_text(2.0), num_text(-0.0), pow2_text(0.125), sci_text(1e-7)
    ('2', '-0', '2^-3', '1.000e-07')
"""

from __future__ import annotations

import math
import os
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np

from ..core.intake import floor_log2

__all__ = ["FIELD_COLOURS", "use_colour", "paint", "exact_decimal", "num_text", "pow2_text",
           "sci_text", "signed_sci_text", "field_bits", "input_text", "to_float", "binary_fraction", "binary_sci"]

# Colours per field: (ANSI SGR code, HTML background of the bit boxes).
FIELD_COLOURS = {"sign": ("31", "#f6b8c0"), "exponent": ("34", "#b7d3f2"),
                 "mantissa": ("32", "#bfe5b4"), "value": ("33", "#f8df9b")}


def use_colour() -> bool:
    """Whether to paint text: stdout is a terminal and ``NO_COLOR`` is not set."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def paint(text: str, field: str, colour: bool) -> str:
    """``text`` in the ANSI colour of ``field`` when ``colour``, else unchanged."""
    return f"\033[{FIELD_COLOURS[field][0]}m{text}\033[0m" if colour else text


# ----------------------------------------------------------------------------- numbers as text
def exact_decimal(v, max_digits: int | None = None) -> str:
    """Every decimal digit of a finite binary (dyadic) number, or of any rational
    whose expansion terminates; otherwise the first ``max_digits`` (default 60)
    followed by ``…``.

    >>> exact_decimal(0.1)
    '0.1000000000000000055511151231257827021181583404541015625'
    >>> exact_decimal(Fraction(1, 3), 8)
    '0.33333333…'
    """
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    fr = Fraction(v)
    neg = fr < 0 or (isinstance(v, float) and v == 0 and math.copysign(1.0, v) < 0)
    fr = abs(fr)
    den = fr.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    terminating = den == 1
    limit = None if terminating else (60 if max_digits is None else max_digits)
    whole, rest = divmod(fr.numerator, fr.denominator)
    digits: list[str] = []
    while rest and (limit is None or len(digits) < limit):
        rest *= 10
        d, rest = divmod(rest, fr.denominator)
        digits.append(str(d))
    out = ("-" if neg else "") + str(whole) + ("." + "".join(digits) if digits else "")
    return out + ("…" if rest else "")


def num_text(v) -> str:
    """Short text for a value: Python's shortest repr, ``-0.0`` kept, ints plain."""
    if v is None:
        return "none"
    if isinstance(v, Fraction):
        try:
            v = float(v)
        except OverflowError:  # past float64: 2^1024 (fp64's virtual neighbour), 10**400 ...
            p2 = pow2_text(v)
            return (("-" if v < 0 else "") + p2 if p2 else
                    f"{Decimal(v.numerator) / Decimal(v.denominator):.17g}".lower())
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and abs(v) < 1e16:
        return f"{int(v)}" if v != 0 or math.copysign(1, v) > 0 else "-0"
    return repr(float(v))


def pow2_text(v) -> str | None:
    """``2^k`` when |v| (a float, int or Fraction) is a power of two, else None."""
    if not v or isinstance(v, float) and not math.isfinite(v):
        return None
    a: Fraction = abs(Fraction(v) if isinstance(v, (int, Fraction)) else Fraction(float(v)))
    k = floor_log2(a)
    return f"2^{k}" if a == Fraction(2) ** k else None


def sci_text(v, digits: int = 4) -> str:
    """``v`` with ``digits`` significant digits: plain between 1e-3 and 1e6, else
    scientific; ``n/a`` for None."""
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    return f"{float(v):.{digits}g}" if 1e-3 <= abs(v) < 1e6 else f"{float(v):.{digits - 1}e}"


def signed_sci_text(v, digits: int = 4) -> str:
    """``sci_text`` with an explicit sign (``+`` / ``-``; none for zero)."""
    if v is None:
        return "n/a"
    return ("+" if v > 0 else "-" if v < 0 else "") + sci_text(abs(v), digits)


def field_bits(fields, colour: bool = False) -> str:
    """The code's bits, one group per field separated by spaces (painted when ``colour``)."""
    return " ".join(paint(b, name, colour) for name, b, _ in fields)


def to_float(v: Fraction) -> float:
    """A Fraction as a float, +-Inf past float64's range (fp64's virtual neighbour
    2**1024, the error of a huge input)."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def binary_fraction(t: Fraction, nbits: int = 24) -> str:
    """Binary digits of t in [0, 1) after the point, ``…`` when more follow."""
    out: list[str] = []
    while t and len(out) < nbits:
        t *= 2
        out.append("1" if t >= 1 else "0")
        t -= int(t >= 1)
    return "".join(out) + ("…" if t else "") if out else "0"


def binary_sci(a: Fraction) -> str:
    """``a`` (positive) as ``m × 2^e`` with 1 <= m < 2.

    >>> binary_sci(Fraction(7))
    '1.75 × 2^2'
    """
    e = floor_log2(a)
    return f"{num_text(a / Fraction(2) ** e)} × 2^{e}"


def input_text(x, short: bool = False) -> str:
    """The input as the user wrote it: a string as given, a Fraction as ``p/q``, numpy
    scalars with their type (``short``: as a plain Python number).
    """
    if short and isinstance(x, np.floating) and x.dtype.itemsize <= 8:
        return repr(float(x))
    if short and isinstance(x, np.integer):
        return str(int(x))
    if isinstance(x, (str, np.str_)):
        return str(x)
    if isinstance(x, Fraction):
        return str(x)
    if isinstance(x, np.generic):
        return f"{x!r}"
    return repr(x)
