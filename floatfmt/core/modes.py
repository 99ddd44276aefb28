"""Rounding modes and overflow policies: their names, aliases and checks.

``MODES`` and ``OVERFLOWS`` are the public lists (``ff.MODES``, ``ff.OVERFLOWS``);
``resolve_mode`` and ``resolve_overflow`` turn a user's name or alias into the canonical
one (or raise the error that lists the valid names); ``make_rng`` makes the generator the
stochastic modes draw from.  The rounding routine (``rounding``), its fast plan
(``rounding_fast``) and every entry point read them from here.
"""

from __future__ import annotations

import numpy as np

from .formats import Format
from .names import unknown_name

__all__ = ["MODES", "STOCHASTIC", "P3109_SR", "MODE_ALIASES", "OVERFLOWS", "OVERFLOW_ALIASES",
           "CHUNK", "resolve_mode", "resolve_overflow", "make_rng"]

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic",
         "stochastic_a", "stochastic_b", "stochastic_c")
# Every stochastic mode: floatfmt's own, and IEEE P3109's variants A, B, C (section 4.7.4),
# which need sr_bits = N and decide from N-bit random integers R (see ``_away``).
STOCHASTIC = ("stochastic", "stochastic_a", "stochastic_b", "stochastic_c")
P3109_SR = STOCHASTIC[1:]
MODE_ALIASES = {
    "rne": "nearest_even", "rn": "nearest_even", "nearest": "nearest_even",
    "rna": "nearest_away", "rtz": "toward_zero", "rz": "toward_zero", "trunc": "toward_zero",
    "rup": "up", "ru": "up", "ceil": "up", "rdn": "down", "rd": "down", "floor": "down",
    "rto": "odd", "ro": "odd", "sr": "stochastic",
    "sr_a": "stochastic_a", "sr_b": "stochastic_b", "sr_c": "stochastic_c",
    "stochastica": "stochastic_a", "stochasticb": "stochastic_b", "stochasticc": "stochastic_c",
    # P3109 (section 4.2) names
    "nearesttieseven": "nearest_even", "nearesttiestoeven": "nearest_even",
    "nearesttiestoaway": "nearest_away", "towardzero": "toward_zero",
    "towardpositive": "up", "towardnegative": "down", "toodd": "odd",
}
OVERFLOWS = ("inf", "saturate", "nan", "wrap", "propagate", "satnone")
# IEEE P3109 saturation modes (section 4.7.5) under floatfmt's policy names:
# SatFinite is "saturate", SatPropagate is "propagate", SatNone is "satnone".
OVERFLOW_ALIASES = {"satfinite": "saturate", "sat_finite": "saturate",
                     "satpropagate": "propagate", "sat_propagate": "propagate",
                     "sat_none": "satnone"}

CHUNK = 1 << 17


def resolve_mode(mode) -> str:
    """Canonical rounding-mode name for a name or alias (``"rne"`` -> ``"nearest_even"``)."""
    if not isinstance(mode, str):
        raise TypeError(f"rounding must be a string, not {type(mode).__name__}")
    key = mode.strip().lower()
    if key in MODES:
        return key
    if key in MODE_ALIASES:
        return MODE_ALIASES[key]
    raise unknown_name("rounding mode", mode, MODES, also=MODE_ALIASES)


def resolve_overflow(overflow, fmt: Format) -> str:
    """The overflow policy to use for ``fmt`` (``None`` -> the format's own default).

    ``inf``: values past max become +-Inf where IEEE 754 would (nearest modes, and
    the directed mode pointing away); other directed modes give +-max.
    ``nan``: the same, with NaN where ``inf`` would give Inf.
    ``saturate``: +-max for every overflow, Inf inputs included (PTX ``.satfinite``;
    IEEE P3109 SatFinite, alias ``satfinite``).
    ``propagate``: finite values past the range give +-max, +-Inf inputs stay +-Inf
    where the format has them, else +-max (P3109 SatPropagate, alias ``satpropagate``).
    ``satnone``: P3109 SatNone (section 4.7.5): ``inf`` on formats with Inf, except
    that round-to-odd overflows to whichever of max and Inf has an odd code (Inf in
    a signed P3109 format, whose Inf is 0x7F; max in IEEE and unsigned P3109
    formats, so IEEE formats see exactly ``inf``); ``saturate`` on formats without
    Inf.  The default of the P3109 formats.
    ``wrap``: integers only, two's complement wrap-around.

    Unsigned P3109 formats have MinFinite 0 and take negative values as out of
    range below: ``saturate`` and ``propagate`` give 0, the others NaN, except
    ``toward_zero`` and ``up`` (which point back into the range) give 0 for a
    finite input (P3109 section 4.7.5).
    """
    if overflow is None:
        return fmt.default_overflow
    if not isinstance(overflow, str):
        raise TypeError(f"overflow must be a string or None, not {type(overflow).__name__}")
    key = overflow.strip().lower()
    key = OVERFLOW_ALIASES.get(key, key)
    if key not in OVERFLOWS:
        raise unknown_name("overflow policy", overflow, OVERFLOWS + ("None",), also=OVERFLOW_ALIASES)
    if key in ("propagate", "satnone") and fmt.kind != "float":
        raise ValueError(f"overflow={key!r} applies to float formats only; {fmt.name} is an "
                         "integer format (valid: 'saturate', 'wrap')")
    if key == "inf" and not fmt.inf:
        raise ValueError(f"{fmt.name} has no Inf, so overflow='inf' is impossible; "
                         "use 'saturate'" + (" or 'nan'" if fmt.has_nan else ""))
    if key == "nan" and not fmt.has_nan:
        raise ValueError(f"{fmt.name} has no NaN, so overflow='nan' is impossible; use 'saturate'")
    if key == "wrap" and fmt.kind != "int":
        raise ValueError("overflow='wrap' applies to integer formats only")
    return key


def make_rng(rng):
    """A ``numpy.random.Generator`` from a Generator, a seed, or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be a numpy Generator, an int seed or None, not {type(rng).__name__}")
