"""The one rounding routine.

``round_values(x, fmt, ...)`` maps exact values (a float64 array, plus an
optional *sticky* mask saying "the exact value is a hair larger in magnitude
than this float64") to values of a format.  Casting, encoding, arithmetic,
accumulation, scaling and the tensor-core models all end here.

How it works, for a float format with ``mbits`` fraction bits and smallest
normal exponent ``emin``: each value x has a quantum ``q = 2**k`` with
``k = max(floor(log2|x|), emin) - mbits``; ``y = x / q`` is exact in float64,
its integer part is the kept significand and its fractional part plus the
sticky flag decide the rounding.  The rounded integer times ``q`` is exact.
The exponent range is unbounded while rounding, so overflow is judged on the
rounded value as IEEE 754 requires.  Integers use ``q = 1``.

Two implementations of that one rule live here.  ``_fast_chunk`` handles
float64 input without a sticky part (the common case) with a handful of
in-place numpy passes over cache-sized chunks: ``q`` and ``1/q`` are built
from the exponent bits, one of ``rint``/``trunc``/``ceil``/``floor`` rounds,
and overflow is found with reductions, a clip, or (for Inf) a scaling that
makes exactly the values past the format overflow the double.
``_general_chunk`` handles everything (sticky input, unusual formats, Inf in
nearest-away or stochastic chunks) with explicit fraction tests.  The oracle
tests run every case through both.

``_general_chunk`` and its helpers are written once over an array namespace
``xp`` (``_xp``: numpy, or torch when given a tensor; torch is never imported
here).  A CUDA tensor (or a CPU tensor under ``dispatch.force_namespace``, and any
tensor in stochastic mode) takes ``_general_chunk`` whole, with torch ops on its
own device; a CPU tensor otherwise runs the numpy routine on a view of its memory
(``floatfmt.backend.dispatch``: torch CPU equals numpy by construction, and as fast).
The fast path stays numpy-only because its speed comes from numpy
specifics (in-place ufuncs with ``out=`` into reused cache-sized buffers, the
clip ufunc, reductions to skip work per chunk) that have no portable torch
form, and a second statement of the rule in torch ops would be a second
rounding routine.  tests/test_torch.py shows the namespace (device) path equal to
the numpy path (fast and general) bit for bit on every format, mode and policy.

What a GPU pays for the namespace code is one kernel per array operation and the
bytes each moves, so ``_general_chunk`` keeps both few (``benchmarks/bench_kernels.py``
counts them): the scales are built in the exponent field's place, masks are made
only for the modes that read them, overflow is a clip, two exact scalings (``_fold``)
or one selection, and nothing is read back to the host (``xp.some`` answers True on
tensors: a ``bool(t.any())`` stalls a GPU and stops ``torch.compile(fullgraph=True)``),
tests/test_torch_namespace_cost.py checks that for every format, mode and policy.
"""

# size: the one rounding routine: its general path, the fast path that must stay bit-identical
# to it, and decide (which reads the routine's decisions) share private helpers; keeping
# them in one module keeps a second statement of the rule from growing elsewhere
from __future__ import annotations

import enum
import math
import struct
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..backend.namespace import NUMPY, is_tensor, namespace
from ..backend.dispatch import from_host, host_kernels, to_host
from .formats import Format
from . import threads
from .names import unknown_name

__all__ = ["MODES", "OVERFLOWS", "STOCHASTIC", "resolve_mode", "resolve_overflow", "make_rng",
           "round_values", "round_block", "Decision", "decide", "resid_class", "OBSERVER"]

#: Set only inside a ``floatfmt.flags()`` block (by ``floatfmt.core.flags``): a callable that
#: ``round_values`` calls after each rounding as ``observer(x, fmt, mode, policy, ftz,
#: daz_below, sticky, result)`` (sticky: the remainder class array or None).  None (the
#: default) costs one lookup per call.
OBSERVER: ContextVar = ContextVar("floatfmt_rounding_observer", default=None)

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic",
         "stochastic_a", "stochastic_b", "stochastic_c")
# Every stochastic mode: floatfmt's own, and IEEE P3109's variants A, B, C (section 4.7.4),
# which need sr_bits = N and decide from N-bit random integers R (see ``_away``).
STOCHASTIC = ("stochastic", "stochastic_a", "stochastic_b", "stochastic_c")
_P3109_SR = STOCHASTIC[1:]
_MODE_ALIASES = {
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
_OVERFLOW_ALIASES = {"satfinite": "saturate", "sat_finite": "saturate",
                     "satpropagate": "propagate", "sat_propagate": "propagate",
                     "sat_none": "satnone"}

_CHUNK = 1 << 17


def resolve_mode(mode) -> str:
    """Canonical rounding-mode name for a name or alias (``"rne"`` -> ``"nearest_even"``)."""
    if not isinstance(mode, str):
        raise TypeError(f"rounding must be a string, not {type(mode).__name__}")
    key = mode.strip().lower()
    if key in MODES:
        return key
    if key in _MODE_ALIASES:
        return _MODE_ALIASES[key]
    raise unknown_name("rounding mode", mode, MODES, also=_MODE_ALIASES)


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
    key = _OVERFLOW_ALIASES.get(key, key)
    if key not in OVERFLOWS:
        raise unknown_name("overflow policy", overflow, OVERFLOWS + ("None",), also=_OVERFLOW_ALIASES)
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


# ---------------------------------------------------------------------------------------------
def _scales(x, fmt: Format, xp=NUMPY):
    """Per-element exponent k of the quantum ``2**k`` of x in fmt, and (1/q, q)
    as exact float64 powers of two when both are normal floats (else None)."""
    if fmt.mbits - fmt.emin <= 1022 and fmt.emax <= 1021:
        # in the exponent field's place (no shifts): E = the clamped biased exponent << 52,
        # q = 2**(ee - mbits) has bits E - (mbits << 52), 1/q has bits (2046 << 52) - those
        # (no int64 overflow: 1 <= e - mbits <= 2045)
        E = xp.clip(xp.bits(x) & 0x7FF0000000000000, (fmt.emin + 1023) << 52,
                    min(2046, fmt.emax + 1024) << 52)
        Q = E - (fmt.mbits << 52)
        return None, xp.floats((2046 << 52) - Q), xp.floats(Q)
    e = xp.clip((xp.bits(x) >> 52) & 0x7FF, fmt.emin + 1023, min(2046, fmt.emax + 1024))
    return e - (1023 + fmt.mbits), None, None


def _odd(t, xp=NUMPY):
    """Mask of odd integer-valued floats (t/2 is not an integer); Inf counts as even."""
    h = t * 0.5
    return xp.floor(h) != h


def _away(mode, y, t, sticky, fine, rand, sr_bits, neg, resid=None, shift=None, xp=NUMPY,
          odd=None):
    """Boolean mask: move |t| one step away from zero (magnitude formulation).

    ``f = |y - t|`` is the exact fraction of a quantum held by the float64 part;
    ``sticky`` (remainder class of the float64's own ulp, 0..3) adds what lies
    below it.  Where ``fine``, the quantum *is* that ulp, so class 2 is a tie
    and class 3 is past it; elsewhere the remainder only makes f inexact.
    Stochastic rounding needs the remainder itself: ``resid`` (see
    ``round_values``) with ``shift`` = log2(quantum / the float64's ulp).
    ``odd``: the mask of odd codes of t where that is not t's own parity (P3109
    with P = 1, see ``_round_chunk``); None means t's parity.
    """
    if mode == "toward_zero":
        return xp.falses(y)
    f = xp.abs(y - t)
    if mode in ("nearest_away", "nearest_even"):
        if sticky is None:
            if mode == "nearest_away":
                return f >= 0.5
            gt, eq = f > 0.5, f == 0.5
        else:
            nz = sticky != 0
            gt = (f > 0.5) | ((f == 0.5) & nz) | (fine & (sticky == 3))
            eq = ((f == 0.5) & ~nz) | (fine & (sticky == 2))
            if mode == "nearest_away":
                return gt | eq
        return gt | (eq & (_odd(t, xp) if odd is None else odd))
    if mode in ("up", "down", "odd"):
        inexact = f > 0 if sticky is None else (f > 0) | (sticky != 0)
        if mode == "up":
            return inexact & ~neg
        if mode == "down":
            return inexact & neg
        return inexact & ~(_odd(t, xp) if odd is None else odd)
    if mode in _P3109_SR:
        return _p3109_sr_away(mode, f, rand, int(sr_bits), resid, shift, xp)
    if mode == "stochastic":
        if resid is None:
            if sr_bits is None:
                return rand < f
            return rand < xp.floor(f * float(1 << sr_bits))
        return rand < _sr_threshold(f, resid, shift, sr_bits, xp)
    raise AssertionError(mode)


def _p3109_sr_away(mode, f, rand, n, resid, shift, xp=NUMPY):
    """P3109 stochastic rounding (v4.0 section 4.7.4), for the fraction nu = f (plus the
    remainder ``resid``, as in ``_sr_threshold``) and N-bit random integers R = ``rand``:

    * A: away iff floor(nu 2**N) + R >= 2**N;
    * B: away iff floor(nu 2**(N+1)) + 2R + 1 >= 2**(N+1);
    * C: away iff RNITE(nu 2**N) + R >= 2**N, RNITE rounding to nearest, ties to even.

    The floors are exact integers (``_sr_threshold``), compared as F >= 2**N - R so that
    nothing rounds in float64.  C's RNITE(z) is floor(z + 1/2) = (floor(2z) + 1) // 2,
    less one at a tie (2z an odd integer) whose floor(z) is even.
    """
    def floor_scaled(m):  # floor(nu 2**m), exact
        if resid is None:
            return xp.floor(f * float(1 << m))
        return _sr_threshold(f, resid, shift, m, xp)

    if mode == "stochastic_a":
        return floor_scaled(n) >= float(1 << n) - rand
    f2 = floor_scaled(n + 1)
    if mode == "stochastic_b":
        return f2 >= float(1 << (n + 1)) - 2.0 * rand - 1.0
    if resid is None:
        exact = f * float(1 << (n + 1)) == f2
    else:  # nu 2**(n+1) is an integer iff f's part is and rho 2**(n+1-shift) is (even resid)
        R, sh = _ints(resid, shift, xp)
        d = xp.clip(54 + sh - (n + 1), None, 62)
        exact = (f * float(1 << (n + 1)) == f2) & ((R & ((1 << d) - 1)) == 0)
    half = xp.floor(f2 * 0.5)  # floor(z)
    tie = exact & (f2 - 2.0 * half == 1.0)
    rn = xp.floor((f2 + 1.0) * 0.5) - xp.where(tie & (xp.floor(half * 0.5) * 2.0 == half), 1.0, 0.0)
    return rn >= float(1 << n) - rand


def _ints(resid, shift, xp):
    """resid and shift as int64 arrays of the namespace (numpy: converted; tensors: as
    given, int64 tensors on one device)."""
    if xp is NUMPY:
        return np.asarray(resid, np.int64), np.asarray(shift, np.int64)
    return resid, shift


def _sr_threshold(f, resid, shift, sr_bits, xp=NUMPY):
    """The stochastic-rounding threshold of the exact fraction p = f + rho * 2**-shift
    (numpy arrays or int64 tensors: ``resid``, ``shift``).

    ``f`` is the float64 part's fraction of a quantum (a multiple of 2**-shift),
    ``rho = resid / 2**54`` the rest in units of the float64's ulp (``resid``
    rounded to odd: an odd value only says rho lies strictly between its even
    neighbours), ``shift >= 0``.  Returned as a float64 array T with:

    * 53 random bits (u = k / 2**53): away iff u < T, T = ceil(p 2**53) / 2**53,
      so that P(away) = ceil(p 2**53) / 2**53 (= p whenever p has at most 53
      fraction bits, as the rule ``P = p`` demands of 53 random bits);
    * ``sr_bits = N`` (an integer r in [0, 2**N)): away iff r < T = floor(p 2**N).

    Both are exact integer computations: f 2**53 (or f 2**N) is an integer
    wherever the remainder can add to it (shift <= 53, resp. <= N), and the
    ceiling / floor of rho 2**(53 - shift) (resp. 2**(N - shift)) is read off
    resid with one shift, because no multiple of 2**(shift + 1) (an even number)
    lies strictly between the even neighbours of an odd resid.
    """
    R, sh = _ints(resid, shift, xp)
    if sr_bits is None:
        # ceil(rho 2**(53 - shift)) = ceil(R / 2**(shift + 1)); 1 for any R > 0 once
        # 2**(shift + 1) > R (shift >= 54)
        d = xp.clip(sh + 1, None, 56)
        c = xp.tofloat((R + (1 << d) - 1) >> d)
        base = xp.floor(f * 2.0 ** 53)
        k = xp.where(R == 0, xp.ceil(f * 2.0 ** 53), base + c)
        return k * 2.0 ** -53
    n = int(sr_bits)
    d = xp.clip(54 - n + sh, None, 63)  # floor(rho 2**(n - shift)) = R >> (54 - n + shift)
    return xp.floor(f * float(1 << n)) + xp.tofloat(R >> d)


def _round_chunk(x, fmt, mode, sticky, rng, sr_bits, resid=None, xp=NUMPY, draws=None):
    """Round x (float64, any sign) with an unbounded exponent range.

    ``draws``: the random numbers of a stochastic mode (integers in [0, 2**sr_bits), as
    float64), given instead of drawing them from ``rng``."""
    k = q = None
    if fmt.kind == "float":
        k, inv, q = _scales(x, fmt, xp)
        y = x * inv if k is None else xp.ldexp(x, -k)
    else:
        y = x  # quantum 1 (read only: every step below makes a new array)
    fine = False
    if sticky is not None and fmt.kind == "float" and fmt.mbits == 52:
        # x's own float64 ulp (np.spacing would give inf at the largest double)
        own = xp.clip((xp.bits(x) >> 52) & 0x7FF, 1, None) - 1075
        fine = xp.pow2(own) == (q if k is None else xp.pow2(k))
    code_parity = fmt.rules == "p3109" and fmt.mbits == 0
    # (toward zero ignores a sticky part: x + d, |d| < ulp(x), truncates as x does)
    if mode == "toward_zero" or (sticky is None and mode in ("nearest_even", "up", "down")
                                 and not (code_parity and mode == "nearest_even")):
        n = {"nearest_even": xp.rint, "toward_zero": xp.trunc, "up": xp.ceil,
             "down": xp.floor}[mode](y)
    elif (mode == "odd" and sticky is None and not code_parity and q is not None
          and fmt.mbits - fmt.emin >= 1):
        # the odd one of floor(y) and ceil(y) (y itself when an integer) is
        # floor(y/2) + ceil(y/2); y/2 is exact: y = x * 2**(mbits - ee) is at least 2**mbits
        # where ee is x's own exponent, and x scaled up by 2**(mbits - emin) >= 2 elsewhere
        h = y * 0.5
        n = xp.floor(h) + xp.ceil(h)
    else:
        t = xp.trunc(y)
        rand = None
        if mode in STOCHASTIC:
            if draws is not None:
                rand = draws
            else:
                rand = (xp.uniform(rng, y) if sr_bits is None
                        else xp.randint(rng, 1 << sr_bits, y))
        odd = None
        if code_parity and mode in ("nearest_even", "odd"):
            # P3109 section 4.7.4, P = 1: the code of t * 2**kq is kq + bias when t = 1,
            # and 0 when t = 0 (t*2**kq in the format's grid), so "odd code" is that
            kq = k if k is not None else ((xp.bits(q) >> 52) & 0x7FF) - 1023
            odd = (t != 0) & (((kq + fmt.bias) & 1) == 1)
        shift = None
        if mode in STOCHASTIC and resid is not None:
            # log2(quantum / x's float64 ulp), >= 0 for every format of at most 53 bits
            own = xp.clip((xp.bits(x) >> 52) & 0x7FF, 1, None) - 1075
            if fmt.kind != "float":
                kq = 0
            elif k is None:
                kq = ((xp.bits(q) >> 52) & 0x7FF) - 1023
            else:
                kq = k
            shift = xp.clip(kq - own, 0, None)
        neg = xp.signbit(x) if mode in ("up", "down") else None  # only they read it
        away = _away(mode, y, t, sticky, fine, rand, sr_bits, neg, resid, shift, xp, odd)
        n = t + xp.copysign(away, x)
    if q is not None:
        n = n * q
    elif k is not None:
        n = xp.ldexp(n, k)
    return n


def _fold(fmt: Format) -> int | None:
    """``fold`` for ``_overflow``: 1023 - emax when every value of fmt's grid (unbounded
    exponent) above max is at least 2**(emax + 1) (max = (2 - 2**-mbits) 2**emax: the
    top binade all finite, as in IEEE formats), so that scaling by 2**fold overflows the
    double exactly for the values past max; else None."""
    if fmt.kind != "float" or not 0 <= 1023 - fmt.emax <= 1023:
        return None
    return 1023 - fmt.emax if fmt.max == (2.0 - 2.0 ** -fmt.mbits) * 2.0 ** fmt.emax else None


def _overflow(r, x, mode, policy, sticky, limit, xp=NUMPY, has_inf=True, odd_inf=False,
              fold=None):
    """Apply the overflow policy to elements whose rounded magnitude exceeds limit.

    ``has_inf``: whether the format has +-Inf (``propagate`` and ``satnone`` saturate
    where it has not); ``odd_inf``: whether Inf's code is odd (``satnone`` under
    round-to-odd then overflows to Inf, P3109 section 4.7.5); ``fold``: see ``_fold``.

    An element past the limit becomes +-limit where the policy saturates it (always
    under ``saturate``; for a finite input under ``propagate``, and under the others
    when the mode does not round outward: toward zero, odd unless Inf's code is odd,
    and ``up`` / ``down`` on their inward side), else +-special (Inf for ``inf`` and
    ``satnone``, NaN for ``nan``; Inf inputs under ``propagate`` keep their Inf), the
    sign of the rounded value kept.

    A few whole-array passes, and no host sync on a device: a clip; where every element
    past the limit becomes +-Inf and ``fold`` is given, two exact scalings (r * 2**fold
    overflows the double exactly where |r| > limit: r is on the grid); without a sticky
    part, Inf inputs are already +-Inf in r and a finite input rounded inward is finite,
    so a one-sided clip and two selections do the directed modes."""
    if policy == "saturate" or (policy in ("propagate", "satnone") and not has_inf):
        return xp.clip(r, -limit, limit)  # NaN stays NaN
    if xp is NUMPY and not (np.abs(r) > limit).any():
        return r  # host arrays: a cheap look saves the passes when nothing overflows
    if policy == "propagate":  # Inf inputs stay Inf, finite overflow saturates
        finite_in = xp.isfinite(x) if sticky is None else xp.isfinite(x) | (sticky != 0)
        return xp.where((xp.abs(r) > limit) & finite_in, xp.signed(limit, r), r)
    inf_special = policy == "inf" or policy == "satnone"
    special = np.inf if inf_special else np.nan
    if mode in STOCHASTIC or mode in ("nearest_even", "nearest_away") or (
            mode == "odd" and policy == "satnone" and odd_inf):  # they round outward
        if fold is not None and inf_special:
            return (r * 2.0 ** fold) * 2.0 ** -fold
        return xp.where(xp.abs(r) > limit, xp.signed(special, r), r)
    if sticky is None:
        neg_special = float(np.copysign(special, -1.0))
        # (the input's Inf, not r's: a finite x near the double's top may have rounded
        # to +-Inf in r when scaled to the format's quantum)
        if mode == "up":  # outward above: +special; inward below: -limit, -Inf input -special
            r2 = xp.where(r > limit, special, xp.clip(r, -limit, None))
            return xp.where(x == -np.inf, neg_special, r2)
        if mode == "down":
            r2 = xp.where(r < -limit, neg_special, xp.clip(r, None, limit))
            return xp.where(x == np.inf, special, r2)
        # toward zero, odd: +-limit, an Inf input +-special
        return xp.where(xp.isinf(x), r if inf_special else xp.signed(special, r),
                        xp.clip(r, -limit, limit))
    big = xp.abs(r) > limit
    finite_in = xp.isfinite(x) if sticky is None else xp.isfinite(x) | (sticky != 0)
    lim = xp.signed(limit, r)  # +-limit with r's sign
    sat = finite_in  # toward zero, odd: +-limit for finite inputs
    if mode == "up":  # outward on the positive side only
        sat = sat & xp.signbit(r)
    elif mode == "down":
        sat = sat & ~xp.signbit(r)
    return xp.where(big, xp.where(sat, lim, xp.signed(special, r)), r)


def _int_finish(r, fmt, policy, xp=NUMPY):
    lo = float(-(1 << (fmt.bits - 1))) if fmt.signed else 0.0
    span = float(1 << fmt.bits)
    if policy == "wrap":
        w = xp.fmod(r - lo, span)
        w = xp.where(w < 0, w + span, w)
        r = xp.where(xp.isfinite(r), w + lo, xp.clip(r, lo, lo + span - 1))
    else:
        r = xp.clip(r, lo, lo + span - 1)
    return r + 0.0  # -0 -> +0 (integers have one zero)


def resid_class(resid):
    """The remainder class (0 none, 1 below half, 2 half, 3 above half) of a ``resid`` array."""
    R = np.asarray(resid, np.int64)
    half = np.int64(1 << 53)
    return np.where(R == 0, 0, np.where(R < half, 1, np.where(R == half, 2, 3))).astype(np.uint8)


def _round_tensor_observed(x, fmt, mode, overflow, ftz, daz_below, rng, sr_bits, sticky, out,
                           resid=None):
    """``round_values`` on a tensor, reported to the flags observer when one is set."""
    if resid is not None:  # the class, for the observer and the deterministic modes
        sticky = _resid_class_tensor(resid, x)
    r = _round_tensor(x, fmt, mode, overflow, ftz, daz_below, rng, sr_bits, sticky, out,
                      resid if mode in STOCHASTIC else None)
    observer = OBSERVER.get()
    # CPU tensors in deterministic modes went through the numpy routine, which reported
    if observer is not None and (mode in STOCHASTIC or not host_kernels(x)):
        observer(x, fmt, mode, resolve_overflow(overflow, fmt), ftz, daz_below, sticky, r)
    return r


def _remainders(sticky, resid, mode, shape):
    """The flat remainder class (uint8 or None) and, for stochastic modes, the flat
    fine remainder (int64 or None) of ``round_values``' ``sticky=`` / ``resid=``."""
    rf = None
    if resid is not None:
        rf = np.broadcast_to(np.asarray(resid, np.int64), shape).reshape(-1)
        sticky = resid_class(rf)
        if mode not in STOCHASTIC:
            rf = None
    sf = None if sticky is None else np.asarray(sticky, np.uint8).reshape(-1)
    if mode in STOCHASTIC and sf is not None and rf is None and sf.any():
        raise ValueError("stochastic rounding of a value that float64 does not hold needs its "
                         "remainder (resid=), not only its class (sticky=)")
    return sf, rf


def round_values(x, fmt: Format, mode="nearest_even", overflow=None, *, ftz=False,
                 daz_below=None, rng=None, sr_bits=None, sticky=None, resid=None, out=None,
                 sr_random=None):
    """Round exact values to ``fmt``; the one routine every other function calls.

    Parameters
    ----------
    x : float64 ndarray of exact values (not modified, unless it is ``out``).
    fmt : a resolved ``Format``.
    mode : canonical mode name (see ``resolve_mode``).
    overflow : canonical policy (see ``resolve_overflow``); None = format default.
    ftz : flush results that are subnormal in ``fmt`` to signed zero.
    daz_below : treat nonzero inputs with ``|x| <`` this as signed zero.
    rng : a ``numpy.random.Generator`` (stochastic mode only).
    sr_bits : random bits used by stochastic rounding (None = 53-bit uniform).
    sticky : optional uint8 array, the remainder class of the exact value
        beyond ``x`` in units of x's float64 ulp: 0 none, 1 below half, 2 half,
        3 above half (x is the exact value truncated toward zero).  A sticky
        +-Inf stands for a finite value beyond the float64 range.
    resid : optional int64 array, the same remainder in finer units: 2**54 times
        (exact - x) / (x's float64 ulp), in magnitude, rounded to odd (so an even
        value is exact and an odd one lies strictly between its even
        neighbours).  It carries the class (``resid_class``; ``sticky`` is then
        not needed) and what stochastic rounding needs: the probability of
        rounding away from zero is then the exact rule below for every format,
        fp64 included.  Stochastic rounding of inexact values (``sticky``
        nonzero) requires it; the other modes need only the class.  For a
        tensor x: an int64 tensor on x's device.
    out : optional float64 array of x's shape for the result (may be x itself).
    sr_random : optional integers R in [0, 2**sr_bits), broadcast to x: the random
        numbers of a stochastic mode, used instead of drawing from ``rng``.
        ``stochastic`` rounds away iff R < floor(nu 2**N) (nu: the fraction of a
        quantum); P3109's ``stochastic_a/b/c`` (need ``sr_bits``): ``_p3109_sr_away``.

    Stochastic rounding moves away from zero with probability p = (distance
    from the value toward zero to the exact value) / quantum, realised with 53
    random bits as P = ceil(p 2**53) / 2**53 (p itself when it has at most 53
    fraction bits), or with ``sr_bits = N`` as P = floor(p 2**N) / 2**N.

    Returns a float64 array of values of ``fmt`` (NaN where the result is NaN,
    also for formats that cannot encode NaN).

    The work is done in chunks of ``_CHUNK`` elements, so the extra memory is a
    few chunk-sized buffers (per thread) whatever the size of x.  Above one block
    (``threads.BLOCK`` elements) the blocks run on threads (``floatfmt.core.threads``);
    stochastic rounding then draws each block's random bits from a generator keyed
    by the block's index (one 63-bit key drawn from ``rng``), so the result of a
    seed does not depend on the thread count.
    """
    if is_tensor(x):
        if sr_random is not None:
            raise TypeError("round_values on a tensor takes no sr_random= (random draws come "
                            "from rng)")
        return _round_tensor_observed(x, fmt, mode, overflow, ftz, daz_below, rng, sr_bits, sticky,
                                      out, resid)
    x = np.asarray(x, dtype=np.float64)
    policy = resolve_overflow(overflow, fmt)
    if mode in STOCHASTIC and rng is None:
        rng = np.random.default_rng()
    _check_sr(mode, sr_bits)
    shape = x.shape
    xf = x.reshape(-1)
    draws = None if sr_random is None else _draws(sr_random, mode, sr_bits, shape)
    sf, rf = _remainders(sticky, resid, mode, shape)
    res = np.empty(xf.shape, np.float64) if out is None else out.reshape(-1)
    observer = OBSERVER.get()
    if observer is not None and out is not None:
        x = x.copy()  # out may be x: the observer needs the input
    with np.errstate(all="ignore"):
        _round_all(xf, sf, res, fmt, mode, policy, ftz, daz_below, rng, sr_bits, rf, draws)
    if observer is not None:
        observer(x, fmt, mode, policy, ftz, daz_below, None if sf is None else sf.reshape(shape),
                 res.reshape(shape))
    return res.reshape(shape)


def _check_sr(mode, sr_bits):
    """sr_bits must be 1..52 when given; P3109's stochastic modes require it."""
    if sr_bits is not None and not (isinstance(sr_bits, (int, np.integer))
                                    and not isinstance(sr_bits, bool) and 1 <= sr_bits <= 52):
        raise ValueError(f"sr_bits must be an integer in 1..52, not {sr_bits!r}")
    if mode in _P3109_SR and sr_bits is None:
        raise ValueError(f"rounding={mode!r} (IEEE P3109 stochastic rounding) needs sr_bits=N, "
                         "the number of random bits (an integer in 1..52)")


def _draws(sr_random, mode, sr_bits, shape):
    """The given random integers as a flat float64 array of x's size (checked)."""
    if mode not in STOCHASTIC or sr_bits is None:
        raise ValueError("sr_random applies to stochastic rounding with sr_bits=N only "
                         f"(rounding={mode!r}, sr_bits={sr_bits!r})")
    r = np.asarray(sr_random)
    if r.dtype.kind not in "iu":
        raise TypeError(f"sr_random must be integers, not {r.dtype}")
    if r.size and (int(r.min()) < 0 or int(r.max()) >= (1 << int(sr_bits))):
        raise ValueError(f"sr_random must lie in 0..{(1 << int(sr_bits)) - 1} (sr_bits={sr_bits}), "
                         f"not {int(r.min()) if int(r.min()) < 0 else int(r.max())}")
    try:
        r = np.broadcast_to(r, shape)
    except ValueError:
        raise ValueError(f"sr_random of shape {r.shape} does not broadcast to the input's "
                         f"shape {shape}") from None
    return r.astype(np.float64).reshape(-1)


def _resid_class_tensor(resid, x):
    """``resid_class`` of an int64 tensor on x's device."""
    xp = namespace(x)
    t = xp.t
    if not is_tensor(resid) or resid.device != x.device or resid.dtype != t.int64:
        raise TypeError("resid for a tensor must be an int64 tensor on the same device")
    half = 1 << 53
    return t.where(resid == 0, 0, t.where(resid < half, 1, t.where(resid == half, 2, 3))).to(
        t.uint8)


def _round_tensor(x, fmt, mode, overflow, ftz, daz_below, rng, sr_bits, sticky, out, resid=None):
    """``round_values`` for a float64 torch tensor; returns a float64 tensor on its device.

    CPU tensors (deterministic modes) take the numpy routine on a view of their memory;
    other devices, stochastic rounding (a ``torch.Generator``'s bits) and CPU tensors
    under ``dispatch.force_namespace`` take ``_general_chunk`` with torch ops on the
    tensor's device (see the module docstring and ``floatfmt.backend.dispatch``)."""
    xp = namespace(x)
    if x.dtype != xp.t.float64:
        raise TypeError(f"round_values takes float64 tensors, not {x.dtype}")
    if out is not None:
        raise TypeError("round_values on a tensor takes no out= (it returns a new tensor)")
    if sticky is not None:
        if not is_tensor(sticky) or sticky.device != x.device:
            raise TypeError("sticky for a tensor must be a tensor on the same device")
        sticky = sticky.to(xp.t.uint8) if bool(sticky.any()) else None
        if sticky is None:
            resid = None
        if sticky is not None and mode in STOCHASTIC and resid is None:
            raise ValueError("stochastic rounding of a value that float64 does not hold needs "
                             "its exact remainder, which tensors do not carry")
        if sticky is not None and daz_below is not None:
            raise ValueError("daz with a sticky part is not supported on tensors")
    policy = resolve_overflow(overflow, fmt)
    _check_sr(mode, sr_bits)
    x = x.detach()
    if mode not in STOCHASTIC and host_kernels(x):
        # CPU tensor: the numpy routine on views of the tensor's memory (see floatfmt.backend.dispatch)
        st = None if sticky is None else to_host(sticky).astype(np.uint8)
        r = round_values(to_host(x), fmt, mode, policy, ftz=ftz, daz_below=daz_below,
                         sticky=st)
        return from_host(r, x.device)
    if mode in STOCHASTIC:
        rng = xp.generator(rng, x)
    if daz_below is not None:
        x, _, _ = _daz(x, None, None, daz_below, xp)
    if resid is not None:
        resid = xp.t.broadcast_to(resid, x.shape)
    if x.device.type != "cpu" or x.numel() <= _TORCH_CHUNK:
        return _general_chunk(x, sticky, fmt, mode, policy, ftz, rng, sr_bits, resid, xp)
    # CPU: cache-sized chunks (the general path makes a dozen temporaries per call)
    xf = x.reshape(-1)
    sf = None if sticky is None else sticky.reshape(-1)
    rf = None if resid is None else resid.reshape(-1)
    out = xp.t.empty_like(xf)
    for i in range(0, xf.numel(), _TORCH_CHUNK):
        j = i + _TORCH_CHUNK
        out[i:j] = _general_chunk(xf[i:j], None if sf is None else sf[i:j], fmt, mode, policy,
                                  ftz, rng, sr_bits, None if rf is None else rf[i:j], xp)
    return out.reshape(x.shape)


_TORCH_CHUNK = 1 << 18


def round_block(xf, res, fmt: Format, mode, policy, ftz=False, daz_below=None, rng=None,
                sr_bits=None) -> None:
    """Round the flat float64 array ``xf`` (exact values, at most ``threads.BLOCK`` of them)
    into the float64 array ``res`` as ``round_values`` rounds one block of that size (the
    same chunks, the same random draws from ``rng``); canonical mode and policy; no
    observer is called.  For ``floatfmt.core.round_f32``'s blocks."""
    with np.errstate(all="ignore"):
        _round_all(xf, None, res, fmt, mode, policy, ftz, daz_below, rng, sr_bits)


# ------------------------------------------------------------------------- the chunk loop
def _round_all(xf, sf, res, fmt, mode, policy, ftz, daz_below, rng, sr_bits, rf=None, draws=None):
    """Round xf into res chunk by chunk; above one block (``threads.BLOCK`` elements) the
    blocks are shared among threads (``floatfmt.core.threads``), each done by this function.
    ``draws``: given random numbers (``sr_random``), sliced like xf."""
    n = xf.size
    if n > threads.BLOCK:
        def work(i, j, g):
            _round_all(xf[i:j], None if sf is None else sf[i:j], res[i:j], fmt, mode, policy,
                       ftz, daz_below, g, sr_bits, None if rf is None else rf[i:j],
                       None if draws is None else draws[i:j])

        threads.run_blocks(n, work, rng if (mode in STOCHASTIC and draws is None) else None)
        return
    plan = _plan(fmt, mode, policy, sr_bits) if draws is None else None
    bufs = _buffers() if plan is not None else None
    alias = plan is not None and np.may_share_memory(xf, res)
    for i in range(0, n, _CHUNK):
        j = min(i + _CHUNK, n)
        xc, o = xf[i:j], res[i:j]
        sc = None if sf is None else sf[i:j]
        rc = None if rf is None else rf[i:j]
        if daz_below is not None:
            xc, sc, rc = _daz(xc, sc, rc, daz_below)
        if sc is not None and not sc.any():
            sc = rc = None
        if plan is not None and (sc is None or _sticky_ok(xc, plan)):
            if alias:  # out is x: keep the chunk's input while o is overwritten
                np.copyto(bufs.x[:j - i], xc)
                xc = bufs.x[:j - i]
            if _fast_chunk(xc, o, plan, rng, bufs, sc):
                if ftz:
                    _flush(o, fmt)
                continue
        dc = None if draws is None else draws[i:j]
        o[...] = _general_chunk(xc, sc, fmt, mode, policy, ftz, rng, sr_bits, rc, draws=dc)


def _daz(xc, sc, rc, daz_below, xp=NUMPY):
    """Inputs with ``|x| < daz_below`` replaced by zero of their sign (sticky cleared)."""
    tiny = xp.abs(xc) < daz_below
    if xp.some(tiny):
        xc = xp.where(tiny, xc * 0.0, xc)  # (tiny values are finite: a zero of their sign)
        if sc is not None:
            sc = np.where(tiny, 0, sc).astype(np.uint8)
        if rc is not None:
            rc = np.where(tiny, 0, rc)
    return xc, sc, rc


def _general_chunk(xc, sc, fmt, mode, policy, ftz, rng, sr_bits, rc=None, xp=NUMPY, draws=None):
    """Any format, any input (sticky included): the reference implementation, written
    once for every array namespace ``xp`` (numpy arrays, torch tensors)."""
    r = _round_chunk(xc, fmt, mode, sc, rng, sr_bits, rc, xp, draws)
    if fmt.kind == "int":
        return _int_finish(r, fmt, policy, xp)
    p3109_unsigned = fmt.rules == "p3109" and not fmt.signed
    below = r < 0 if p3109_unsigned else None  # negative nonzero: under MinFinite = 0
    r = _overflow(r, xc, mode, policy, sc, fmt.max, xp, fmt.inf,
                  fmt.inf and (fmt.inf_code & 1) == 1, _fold(fmt))
    if ftz:
        r = _flush(r, fmt, xp)
    if not fmt.negative_zero:
        r = r + 0.0  # -0 -> +0
    if not fmt.zero:
        # Unsigned, zero-less scale formats (E8M0): the smallest value is the floor.
        r = xp.where(r == 0, fmt.smallest_normal, r)
    if p3109_unsigned:
        r = _below_unsigned(r, xc, below, mode, policy, sc, xp)
    elif not fmt.signed:
        # Unsigned: negative inputs are NaN; so is zero when the format has none.
        # (a -0.0 carrying a sticky part is a tiny negative value, not zero)
        bad = xp.signbit(xc) & ((xc != 0) if sc is None else (xc != 0) | (sc != 0))
        if not fmt.zero:
            bad = bad | ((xc == 0) if sc is None else (xc == 0) & (sc == 0))
        r = xp.where(bad, np.nan, r)
    return r


def _below_unsigned(r, x, below, mode, policy, sticky, xp=NUMPY):
    """P3109 unsigned formats (section 4.7.5, M_lo = 0): rounded values below 0 (``below``)
    give 0 under saturate / propagate (SatFinite / SatPropagate); under the other
    policies NaN (there is no -Inf), except that toward_zero and up give 0 for a finite
    input, as a directed mode pointing back into the range does at overflow."""
    if not xp.any(below):
        return r
    if policy in ("saturate", "propagate"):
        zero = xp.full(r, True)
    elif mode in ("toward_zero", "up"):
        zero = xp.isfinite(x) if sticky is None else xp.isfinite(x) | (sticky != 0)
    else:
        zero = xp.full(r, False)
    return xp.where(below, xp.where(zero, 0.0, np.nan), r)


def _flush(r, fmt, xp=NUMPY):
    """ftz: results below the smallest normal become zero of the same sign (+0 in
    formats without -0); returns r (changed in place for numpy arrays)."""
    if not fmt.subnormals:
        return r
    if xp is not NUMPY:  # (zeros too: r * 0 is r there) three or four passes, no sync
        tiny = xp.abs(r) < fmt.smallest_normal
        return xp.where(tiny, r * 0.0 if fmt.negative_zero else 0.0, r)
    sub = (xp.abs(r) < fmt.smallest_normal) & (r != 0)
    if xp.any(sub):
        r[sub] = np.copysign(0.0, r[sub]) if fmt.negative_zero else 0.0
    return r


# ------------------------------------------------------------------------------ fast path
# Bit patterns of float64 fields, as int64 scalars (no conversion per call).
_EXP = np.int64(0x7FF0000000000000)
_SIGN = np.int64(-0x8000000000000000)  # the sign bit
_ABS = np.int64(0x7FFFFFFFFFFFFFFF)
_QNAN = np.int64(0x7FF8000000000000)
try:  # the clip ufunc itself: np.clip adds ~2 microseconds of Python per call
    from numpy._core.umath import clip as _clip  # type: ignore[attr-defined]  # a ufunc numpy's stubs omit
except ImportError:  # numpy 1.x
    _clip = np.clip


def _i64(v: int) -> np.int64:
    """v as an int64 bit pattern (wrapping like the int64 arithmetic it is used in)."""
    return np.int64(((v + (1 << 63)) % (1 << 64)) - (1 << 63))


_LOCAL = threading.local()


def _buffers() -> "_Buffers":
    """This thread's scratch arrays, made once: callers that round chunk by chunk
    (arithmetic, block scaling) would otherwise pay fresh pages on every call."""
    b = getattr(_LOCAL, "bufs", None)
    if b is None or b.size != _CHUNK:
        b = _LOCAL.bufs = _Buffers(_CHUNK)
    return b


class _Buffers:
    """Chunk-sized scratch arrays, reused across chunks and calls (sliced to a chunk)."""

    def __init__(self, size):
        self.e = np.empty(size, np.int64)
        self.u = np.empty(size, np.float64)
        self.v = np.empty(size, np.float64)
        self.x = np.empty(size, np.float64)
        self._w, self._f32, self.size = None, None, size

    @property
    def w(self):  # only chunks with a sticky part need it
        if self._w is None:
            self._w = np.empty(self.size, np.float64)
        return self._w

    @property
    def f32(self):  # only binary32 requests (_Kind.F32) need it
        if self._f32 is None:
            self._f32 = np.empty(self.size, np.float32)
        return self._f32


class _Kind(enum.Enum):
    """How the fast path rounds: the four shapes of ``_fast_chunk``."""

    COPY = "copy"    # fp64 itself: every float64 is a value; copy (and clip for saturate)
    INT = "int"      # integer formats: quantum 1, round x itself, then clip to [min, max]
    FLOAT = "float"  # float formats: scale by 2**(mbits - ee), round, scale back
    F32 = "f32"      # IEEE binary32, nearest-even, Inf past the range: numpy's float64 ->
                     # float32 conversion (the FPU's IEEE rounding, as rint is for FLOAT)


class _Ovf(enum.Enum):
    """The fast path's overflow step (``_fast_overflow``), chosen once per request."""

    NONE = "none"                # nothing to do: no overflow, or the fold made the Inf
    CLIP = "clip"                # saturate: clip to [-max, max]
    MAX_NEG = "max_neg"          # up, inf policy: -max for negatives past -max (-Inf stays)
    MAX_POS = "max_pos"          # down, inf policy: +max for positives past max
    CLIP_FINITE = "clip_finite"  # toward zero / odd: +-max; Inf inputs take the general path
    NAN = "nan"                  # nan policy, nearest modes: NaN past max
    NAN_UP = "nan_up"            # nan policy, up: NaN above max, -max below -max
    NAN_DOWN = "nan_down"        # nan policy, down: NaN below -max, +max above max


# module-level aliases: the fast path tests them per chunk (a global is quicker to read
# than an Enum class attribute)
_COPY, _INT, _F32 = _Kind.COPY, _Kind.INT, _Kind.F32
(_O_NONE, _O_CLIP, _O_MAX_NEG, _O_MAX_POS, _O_CLIP_FINITE, _O_NAN, _O_NAN_UP,
 _O_NAN_DOWN) = _Ovf


@dataclass(frozen=True, slots=True)
class _Plan:
    """Constants for the fast path of one (format, mode, policy, sr_bits), made once by
    ``_make_plan`` and cached: see ``_fast_chunk``.

    kind : see ``_Kind``.
    mode, sr_bits : the request.
    max, max_bits : the format's largest finite value, and its float64 bit pattern.
    ovf : the overflow step (``_Ovf``).
    lo, hi : FLOAT: 2**emin and 2**(emax + 1), the clamp of the power 2**ee;
        INT: the format's min and max.
    c_inv, c_q : FLOAT: the int64 constants that turn the bits of 2**ee into
        inv = 2**(mbits - ee) and q = 2**(ee - mbits) by one subtraction each.
    back : 2**-fold when results are scaled to make overflow give Inf (else None).
    inf_check : nearest-away and stochastic compute inf - inf: chunks with Inf input
        take the general path.
    plus0 : the format has no -0: add +0 at the end.
    alt : F32: the FLOAT plan, for chunks with a sticky part.
    """

    kind: _Kind
    mode: str
    sr_bits: int | None
    max: np.float64
    max_bits: np.int64
    ovf: _Ovf = _Ovf.NONE
    lo: np.float64 | None = None
    hi: np.float64 | None = None
    c_inv: np.int64 | None = None
    c_q: np.int64 | None = None
    back: np.float64 | None = None
    inf_check: bool = False
    plus0: bool = False
    alt: _Plan | None = None


def _plan(fmt, mode, policy, sr_bits):
    """A _Plan when the fast path handles this request, else None (general path)."""
    p = _plan_cached(fmt, mode, policy, sr_bits)
    if p is not None and p.kind is _F32 and not _f32_keeps_subnormals():
        p = _plan_cached(fmt, mode, policy, sr_bits, False)
    return p


# binary32 subnormals, and two ties (to even: down, then up), with their RNE results
_F32_PROBE = (2.0 ** -140, -3 * 2.0 ** -149, 1 + 2.0 ** -24, -(1 + 3 * 2.0 ** -24))
_F32_WANT = (2.0 ** -140, -3 * 2.0 ** -149, 1.0, -(1 + 2.0 ** -22))
_F32_STRUCT = struct.Struct("<4f")  # C double -> float -> double casts: the FPU's, ~0.5 us


def _f32_keeps_subnormals() -> bool:
    """Whether this thread's float32 conversions round to nearest even and keep
    subnormals: not when the FPU flushes them (flush-to-zero / denormals-are-zero, as
    ``torch.set_flush_denormal(True)`` sets on x86) or rounds in another mode; then
    binary32 requests take the FLOAT plan."""
    return _F32_STRUCT.unpack(_F32_STRUCT.pack(*_F32_PROBE)) == _F32_WANT


_BINARY32 = ("float", 8, 23, 127, True, "ieee", True, True, True, "ieee")


def _make_plan(fmt, mode, policy, sr_bits, f32=True) -> _Plan | None:
    """The fast path's plan for a request (None: the general path handles it); ``f32``:
    whether IEEE binary32 nearest-even may use the conversion plan (``_Kind.F32``)."""
    if policy == "satnone":  # the same rule as these (see resolve_overflow), or general path
        if fmt.inf and mode == "odd" and fmt.inf_code & 1:
            return None
        policy = "inf" if fmt.inf else "saturate"
    if f32 and mode == "nearest_even" and policy == "inf" and (
            fmt.kind, fmt.ebits, fmt.mbits, fmt.bias, fmt.inf, fmt.nan, fmt.signed,
            fmt.negative_zero, fmt.zero, fmt.rules) == _BINARY32:
        mx = np.float64(fmt.max)
        return _Plan(_Kind.F32, mode=mode, sr_bits=sr_bits, max=mx, max_bits=mx.view(np.int64),
                     alt=_make_plan(fmt, mode, policy, sr_bits, False))
    if mode in _P3109_SR or policy == "propagate" or (
            fmt.inf and fmt.nan != "ieee" and policy == "inf"):
        return None  # (P3109: the Inf code is not the whole top binade, so no fold)
    mx = np.float64(fmt.max)
    base = dict(mode=mode, sr_bits=sr_bits, max=mx, max_bits=mx.view(np.int64))
    if fmt.kind == "int":  # quantum 1: round x itself, then saturate (wrap: general path)
        # odd: the fast path halves x, which flushes the smallest float64 subnormals
        # to zero (they must round to +-1): general path.
        if policy != "saturate" or fmt.bits > 53 or mode == "odd":
            return None
        return _Plan(_Kind.INT, **base, lo=np.float64(fmt.min), hi=mx, inf_check=True,
                     plus0=True)
    if not fmt.signed or not fmt.zero:
        return None
    if (fmt.ebits, fmt.mbits, fmt.bias, fmt.inf, fmt.nan) == (11, 52, 1023, True, "ieee"):
        # fp64 itself: every float64 input is exact, only Inf under saturation changes.
        if policy not in ("inf", "saturate"):
            return None
        return _Plan(_Kind.COPY, **base, ovf=_Ovf.CLIP if policy == "saturate" else _Ovf.NONE)
    m, emin, emax = fmt.mbits, fmt.emin, fmt.emax
    # Powers of two 2**ee (ee the clamped exponent), 2**(m-ee) and 2**(ee-m) must be normal
    # doubles, and 2**(m-ee) <= 1 so that x * inv never overflows.
    if not (1 <= m <= 50 and emin - m >= -1021 and m <= emax + 1 and emax <= 1000):
        return None
    half = 1 if mode == "odd" else 0  # round to odd works on y/2
    ieee_inf = fmt.inf and policy == "inf" and mode in ("nearest_even", "nearest_away", "stochastic",
                                                          "up", "down")
    # Overflow to Inf for free: scale results by 2**(1023-emax) so that exactly the
    # values >= 2**(emax+1) overflow the double, then scale back.
    fold = 1023 - emax if ieee_inf else 0
    return _Plan(_Kind.FLOAT, **base, ovf=_overflow_step(mode, policy, ieee_inf),
                 lo=np.float64(2.0 ** emin), hi=np.float64(2.0 ** (emax + 1)),
                 c_inv=_i64((2046 + m - half) << 52),
                 # q_bits = ee_bits - ((m - fold) << 52) = c_q - inv_bits
                 c_q=_i64(((2046 + m - half) << 52) - ((m - fold) << 52)),
                 back=np.float64(2.0 ** -fold) if fold else None,
                 inf_check=mode in ("nearest_away", "stochastic"),  # inf - inf inside
                 plus0=not fmt.negative_zero)


def _overflow_step(mode, policy, ieee_inf) -> _Ovf:
    """The fast path's overflow step of a float format (see ``_Ovf``)."""
    if policy == "saturate":
        return _Ovf.CLIP
    if ieee_inf:  # the fold gives Inf; up / down give +-max on their other side
        return {"up": _Ovf.MAX_NEG, "down": _Ovf.MAX_POS}.get(mode, _Ovf.NONE)
    if mode in ("toward_zero", "odd"):
        return _Ovf.CLIP_FINITE
    if policy == "nan":
        return {"up": _Ovf.NAN_UP, "down": _Ovf.NAN_DOWN}.get(mode, _Ovf.NAN)
    return _Ovf.CLIP_FINITE  # inf policy without Inf in the format's reach


_PLANS: dict = {}


def _plan_cached(fmt, mode, policy, sr_bits, f32=True):
    key = (fmt, mode, policy, sr_bits, f32)
    if key not in _PLANS:
        _PLANS[key] = _make_plan(fmt, mode, policy, sr_bits, f32)
    return _PLANS[key]


def _sticky_ok(xc, p) -> bool:
    """Whether the fast path can take a chunk with a sticky part (see _fast_chunk)."""
    if p.kind is _F32:
        p = p.alt
    return (p.kind is not _COPY and p.mode != "stochastic"
            and not (np.isinf(np.fmax.reduce(xc)) or np.isinf(np.fmin.reduce(xc))))


# size: one sequence of in-place passes per mode over reused buffers, in one function
# because it runs once per chunk on the hot path (a split adds calls per chunk)
def _fast_chunk(xc, o, p, rng, b, sc=None) -> bool:
    """Round the chunk xc into o; False when this chunk needs the general path.

    With ee = clamp(exponent of x, emin, emax + 1), inv = 2**(mbits - ee) and
    q = 2**(ee - mbits) are exact powers of two built from the exponent bits;
    y = x * inv is exact and its integer part is the significand to keep, so one
    numpy rounding function (rint, trunc, ceil, floor) on y and a multiply by q
    round x.  Round to odd is floor(y/2) + ceil(y/2); nearest-away is
    trunc(y + (y - trunc(y))); stochastic is trunc(y) + sign(x) * ceil(|f| - u)
    with f = y - trunc(y) and u uniform in [0, 1) (so it moves away from zero
    with probability |f|).  All of these are exact for |y| < 2**52, which holds
    wherever the result is in range.

    A sticky part (exact value = x + d, 0 < |d| < ulp(x), same sign) only
    matters where x sits on a decision point, because the fast formats have
    mbits <= 50 and so ulp(x) <= q/4 for every in-range x: a tie (|frac y| = 1/2)
    in the nearest modes, or an integer y in ``up``/``down`` (on the side they
    point away from zero) and in ``odd`` (when y is even).  There the result is
    trunc(y) + sign(x); everywhere else x + d rounds like x.
    """
    k = xc.size
    if p.kind is _F32:  # IEEE binary32 RNE: overflow gives +-Inf, subnormals kept (_plan)
        if sc is not None:
            return _fast_chunk(xc, o, p.alt, rng, b, sc)
        f = b.f32[:k]
        np.copyto(f, xc, casting="same_kind")
        np.copyto(o, f)
        return True
    if p.kind is _COPY:
        np.copyto(o, xc)
        if p.ovf is _O_CLIP:
            _clip(o, -p.max, p.max, out=o)
        return True
    if p.inf_check and (np.fmax.reduce(xc) == np.inf or np.fmin.reduce(xc) == -np.inf):
        return False  # Inf - Inf inside nearest-away / stochastic: general path
    E = b.e[:k]  # one int64 buffer holds 2**ee, then inv, then q (cache-friendly)
    Ef = E.view(np.float64)
    is_int = p.kind is _INT
    if is_int:
        np.multiply(xc, 0.5 if p.mode == "odd" else 1.0, out=o)
    else:
        np.bitwise_and(xc.view(np.int64), _EXP, out=E)
        _clip(Ef, p.lo, p.hi, out=Ef)  # 2**ee
        np.subtract(p.c_inv, E, out=E)  # inv = 2**(mbits - ee) (times 1/2 for odd)
        np.multiply(xc, Ef, out=o)
    mode = p.mode
    W = None if sc is None else b.w[:k]
    fix = None if sc is None else _sticky_fix(xc, o, sc, mode, W)
    if mode == "nearest_even":
        np.rint(o, out=o)
    elif mode == "toward_zero":
        np.trunc(o, out=o)
    elif mode == "up":
        np.ceil(o, out=o)
    elif mode == "down":
        np.floor(o, out=o)
    elif mode == "odd":
        U = b.u[:k]
        np.floor(o, out=U)
        np.ceil(o, out=o)
        np.add(o, U, out=o)
    elif mode == "nearest_away":
        U, V = b.u[:k], b.v[:k]
        np.trunc(o, out=U)
        np.subtract(U, o, out=V)  # -frac(y), so that y - V keeps the sign of -0
        np.subtract(o, V, out=o)
        np.trunc(o, out=o)
    else:  # stochastic, in magnitude: away from zero with probability |frac(y)|
        U, V = b.u[:k], b.v[:k]
        rng.random(out=U)
        np.trunc(o, out=V)
        np.subtract(o, V, out=o)  # frac(y), exact
        np.abs(o, out=o)
        if p.sr_bits is None:  # away iff u < |f|  (u: 53-bit uniform)
            np.subtract(o, U, out=o)
            np.ceil(o, out=o)
        else:  # away iff u' <= |f|, u' in {1, ..., 2**N} / 2**N: P = floor(|f| 2**N) / 2**N
            np.multiply(U, float(1 << p.sr_bits), out=U)
            np.floor(U, out=U)
            np.add(U, 1.0, out=U)
            np.multiply(U, 2.0 ** -p.sr_bits, out=U)
            np.subtract(U, o, out=o)
            np.ceil(o, out=o)
            np.subtract(1.0, o, out=o)
        Ub = U.view(np.int64)
        np.bitwise_and(xc.view(np.int64), _SIGN, out=Ub)  # the step carries the sign of x
        np.bitwise_or(o.view(np.int64), Ub, out=o.view(np.int64))
        np.add(V, o, out=o)  # trunc(y) + (+-0 or +-1): zeros keep the sign of x
    if fix is not None and W is not None and fix.size:  # (fix is set exactly when W is)
        o[fix] = W[fix] + np.copysign(1.0, xc[fix])
        if mode == "odd":
            o[fix] += W[fix]  # y = 2 trunc(y/2): the step is from y, not y/2
    if is_int:
        _clip(o, p.lo, p.hi, out=o)
        np.add(o, 0.0, out=o)
        return True
    np.subtract(p.c_q, E, out=E)  # q = 2**(ee - mbits) (times 2**(1023-emax) when folding)
    np.multiply(o, Ef, out=o)
    if p.back is not None:
        np.multiply(o, p.back, out=o)
    if p.ovf is not _O_NONE and not _fast_overflow(xc, o, p, E):
        return False
    if p.plus0:
        np.add(o, 0.0, out=o)
    return True


def _sticky_fix(xc, y, sc, mode, V):
    """Indices where the sticky part changes the rounding of y (see _fast_chunk); V gets
    trunc(y) (for odd, y is y/2 here)."""
    if mode == "toward_zero":
        return None
    np.trunc(y, out=V)
    nz = sc != 0
    if mode in ("nearest_even", "nearest_away"):
        at = np.abs(y - V) == 0.5
    else:
        at = y == V
        if mode == "up":  # x may be +-0 with a tiny exact part: its sign bit tells
            at &= ~np.signbit(xc)
        elif mode == "down":
            at &= np.signbit(xc)
    return np.flatnonzero(at & nz)


def _fast_overflow(xc, o, p, T) -> bool:
    """Apply the overflow policy in place; False when Inf inputs need the general path."""
    ovf, mx = p.ovf, p.max
    if ovf is _O_CLIP:
        _clip(o, -mx, mx, out=o)
        return True
    ob = o.view(np.int64)
    if ovf is _O_NAN:  # |o| > max -> NaN of the same sign (Inf inputs included)
        np.bitwise_and(ob, _ABS, out=T)  # magnitude bits; NaN and Inf sort above max
        if np.max(T) <= p.max_bits:
            return True
        return _nan_past_max(ob, T, p.max_bits)
    hi, lo = np.fmax.reduce(o), np.fmin.reduce(o)
    if hi <= mx and lo >= -mx:
        return True
    if ovf is _O_MAX_NEG:  # up, Inf policy: negatives past -max give -max (-Inf stays)
        if lo < -mx:
            if np.fmin.reduce(xc) == -np.inf:
                return False
            np.maximum(o, -mx, out=o)
        return True
    if ovf is _O_MAX_POS:
        if hi > mx:
            if np.fmax.reduce(xc) == np.inf:
                return False
            np.minimum(o, mx, out=o)
        return True
    if ovf is _O_CLIP_FINITE:  # toward zero / odd: +-max, but Inf inputs follow the policy
        if np.isinf(hi) or np.isinf(lo):
            return False
        _clip(o, -mx, mx, out=o)
        return True
    # up (down): positives (negatives) past max -> NaN, the other side -> +-max
    if ovf is _O_NAN_UP and lo < -mx:
        if lo == -np.inf:
            return False
        np.maximum(o, -mx, out=o)
    if ovf is _O_NAN_DOWN and hi > mx:
        if hi == np.inf:
            return False
        np.minimum(o, mx, out=o)
    np.bitwise_and(ob, _ABS, out=T)
    return _nan_past_max(ob, T, p.max_bits)


def _nan_past_max(ob, T, max_bits) -> bool:
    """Set NaN (keeping the sign) where the magnitude bits T exceed max_bits, in place."""
    np.subtract(max_bits, T, out=T)
    np.right_shift(T, 63, out=T)  # -1 where past max, else 0
    np.bitwise_and(T, _QNAN, out=T)
    np.bitwise_or(ob, T, out=ob)
    return True


# --------------------------------------------------------------- one value, and why
@dataclass(frozen=True)
class Decision:
    """What the rounding routine did with one value, for explanations (``decide``).

    Every field is read from the routine's own results (``round_values`` for
    the stored value, its unbounded-range rounding for the neighbours and the
    choice), never from a second statement of the rules.

    value : the stored value, exactly what ``round_values`` (so ``cast``) returns.
    input : the float64 value the routine rounded (after daz; +-Inf / NaN kept).
    sticky : its remainder class (see ``round_values``).
    special : ``"nan"`` or ``"inf"`` for a NaN or infinite input, else None.
    daz : True when daz turned a nonzero input into zero before rounding.
    invalid : True when the format has no value of this kind at all (a negative
        value or zero in an unsigned float format such as E8M0): the result is NaN.
    beyond : True when |input| is so far past the format's range that the routine
        clamps the exponent (|x| >= 2**(emax + 2)) or the input is past float64:
        no neighbours are reported, only the overflow.
    lower, upper : Fractions, the values of the format's grid with an unbounded
        range just below and above the input (``round_values`` in modes
        ``down`` / ``up`` before range handling); equal when the input is on the
        grid; either may lie outside the format's range.  None when special,
        invalid or beyond.
    rounded : the neighbour the mode chose, before range handling (a Fraction;
        None when special, invalid, beyond, or a stochastic draw that the result
        cannot reveal, see ``chosen``).
    chosen : ``"exact"``, ``"lower"``, ``"upper"``, or ``"either"`` (stochastic
        only: both neighbours would be stored as the same value, e.g. both
        saturate), or None (special / invalid / beyond).
    nearer : ``"lower"`` or ``"upper"`` (the neighbour nearer to the input), or
        None when exact or a tie.
    tie : True when the input is exactly halfway between the neighbours.
    outside : which neighbours (``"lower"``, ``"upper"``) lie outside the format's
        range (not representable), e.g. ``("lower",)`` for -128.3 in int8.
    out_of_range : ``"above"`` (the rounded value, or for beyond / Inf the input,
        exceeds the largest finite value), ``"below"`` (under the most negative
        value: ``-max``, or an integer format's min, 0 for unsigned integers), or None.
    action : what the range handling did: ``"inf"`` or ``"nan"`` (overflow to
        Inf / NaN), ``"saturate"`` (overflow clipped to the largest finite value by
        the saturate policy or an integer format's clipping), ``"max"`` (overflow
        in a mode that does not round outward: toward_zero, odd, or the directed
        mode pointing back toward zero, gives the largest finite value under the
        inf / nan policies, as IEEE 754 says), ``"wrap"`` (two's complement
        wrap-around), ``"flush"`` (ftz: a subnormal result became zero),
        ``"smallest"`` (a format without zero stores its smallest value for a
        result of 0), or None.
    """

    value: float
    input: float
    sticky: int
    special: str | None = None
    daz: bool = False
    invalid: bool = False
    beyond: bool = False
    lower: Fraction | None = None
    upper: Fraction | None = None
    rounded: Fraction | None = None
    chosen: str | None = None
    nearer: str | None = None
    tie: bool = False
    outside: tuple = ()
    out_of_range: str | None = None
    action: str | None = None


def _same(a: float, b: float) -> bool:
    """Equal as stored values: NaN equals NaN, and the sign of zero counts."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _frac(v: float, fmt: Format) -> Fraction:
    """A neighbour as a Fraction; float64 overflow (+-Inf from the unbounded rounding
    of an fp64-wide format just below 2**1024) stands for +-2**1024."""
    if math.isinf(v):
        return Fraction(2) ** 1024 * (1 if v > 0 else -1)
    return Fraction(v)


def _ulp64(x: float) -> Fraction:
    """Spacing of float64 just above |x| (2**-1074 at zero), exactly."""
    if x == 0:
        return Fraction(2) ** -1074
    e = math.frexp(abs(x))[1] - 1
    return Fraction(2) ** (max(e, -1022) - 52)


def _side_of_midpoint(x: float, sticky: int, mid: Fraction) -> int:
    """-1, 0 or +1: the exact value (x plus its sticky part, away from zero) compared
    with ``mid``, in magnitude."""
    ax, am = abs(Fraction(x)), abs(mid)
    if sticky == 0:
        return (ax > am) - (ax < am)
    if am <= ax:
        return 1  # the sticky part is beyond x
    gap = am - ax
    u = _ulp64(x)
    if gap >= u:
        return -1
    half = u / 2
    if gap != half:  # a midpoint between two float64 values other than halfway: cannot be
        raise AssertionError(f"midpoint {mid} is not on the float64 grid near {x!r}")
    return {1: -1, 2: 0, 3: 1}[sticky]


# size: one value's decision read from the routine's results step by step (special,
# daz, neighbours, choice, range handling), each step a few lines
def decide(x, fmt: Format, mode="nearest_even", overflow=None, *, ftz=False, daz_below=None,
           rng=None, sr_bits=None, sticky=0, resid=None, stored=None) -> Decision:
    """Round one value as ``round_values`` does and report how (a ``Decision``).

    ``x`` is one float64 value, ``sticky`` its remainder class and ``resid``
    (optional) the finer remainder, exactly as ``round_values`` takes them (``cast`` prepares them from any input); the
    other arguments are those of ``round_values`` (canonical mode and policy).
    The stored value is ``round_values``' own result, so it equals ``cast`` for
    the same arguments (a stochastic draw included, given the same ``rng``).
    ``stored``: the result of an earlier call (an element of an array cast),
    used instead of rounding again; for a deterministic mode it must be the
    routine's result (ValueError otherwise).

    The neighbours and the chosen one come from the routine's rounding with an
    unbounded range (modes ``down``, ``up`` and ``mode`` itself); the range
    handling (overflow, saturation, ftz, no zero) is read from the difference
    between that rounding and the stored value.  A stochastic draw is read from
    the stored value: ``chosen`` is ``"either"`` when both neighbours give it.

    >>> from floatfmt.core.formats import get_format
    >>> d = decide(-128.3, get_format("int8"))
    >>> d.lower, d.upper, d.chosen, d.out_of_range, d.value
    (Fraction(-129, 1), Fraction(-128, 1), 'upper', None, -128.0)
    """
    x = float(x)
    sticky = int(sticky or 0)
    policy = resolve_overflow(overflow, fmt)
    st = None if sticky == 0 else np.array([sticky], np.uint8)
    if stored is None:
        value = float(round_values(np.array([x]), fmt, mode, policy, ftz=ftz, daz_below=daz_below,
                                   rng=rng, sr_bits=sr_bits, sticky=st,
                                   resid=None if resid is None else np.array([resid], np.int64))[0])
    else:
        value = float(stored)
    base = dict(value=value, input=x, sticky=sticky)
    if math.isnan(x):
        return Decision(special="nan", **base)
    daz = False
    if daz_below is not None:
        xd, sd, _ = _daz(np.array([x]), st, None, daz_below)
        # (a zero with a sticky part, e.g. the decimal 1e-400, is a tiny value: flushed too)
        daz = bool(abs(x) < daz_below and (x != 0 or sticky != 0))
        if daz:
            x, sticky, st = float(xd[0]), 0, None
            base.update(input=x, sticky=0)

    def finish(r: Fraction) -> float:
        """The routine applied to a value already on the grid: only its range handling acts.
        (A format without zero has no input 0 to apply it to: the routine stores its
        smallest value for a result of 0, which the caller reads from ``value``.)"""
        if r == 0 and not fmt.zero:
            return value
        v = float(r) if abs(r) < Fraction(2) ** 1024 else (math.inf if r > 0 else -math.inf)
        if v == 0:
            v = math.copysign(0.0, x)  # a zero result keeps the input's sign, as in the routine
        return float(round_values(np.array([v]), fmt, mode, policy, ftz=ftz,
                                  rng=np.random.default_rng(0), sr_bits=sr_bits)[0])

    # (P3109 unsigned formats take negatives as out of range below, not as invalid)
    unsigned_float = fmt.kind == "float" and not fmt.signed and fmt.rules != "p3109"
    neg = math.copysign(1.0, x) < 0
    if unsigned_float and ((neg and (x != 0 or sticky)) or (not fmt.zero and x == 0 and not sticky)):
        return Decision(invalid=True, daz=daz, **base)
    lo_val = float(fmt.min) if fmt.kind == "int" else (-fmt.max if fmt.signed else 0.0)

    def side(r) -> str | None:
        if r > fmt.max_exact:
            return "above"
        return "below" if r < lo_val else None

    def action(out: str | None, r) -> str | None:
        if out is not None:
            if math.isnan(value):
                return "nan"
            if math.isinf(value):
                return None if (isinstance(r, float) and math.isinf(r)) else "inf"
            return {"wrap": "wrap", "saturate": "saturate"}.get(policy, "max")
        if r != 0 and value == 0:
            return "flush"
        if r == 0 and value != 0:
            return "smallest"
        return None

    out: str | None  # the side of the range a value falls outside, if any
    if math.isinf(x) and not sticky:
        out = "above" if x > 0 else "below"
        return Decision(special="inf", out_of_range=out, action=action(out, x), daz=daz, **base)
    far = fmt.kind == "float" and (math.isinf(x) or (fmt.emax + 2 <= 1023
                                                    and abs(x) >= math.ldexp(1.0, fmt.emax + 2)))
    xs = np.array([x])
    if far:
        out = "above" if x > 0 else "below"
        return Decision(beyond=True, out_of_range=out, action=action(out, Fraction(0)), daz=daz, **base)
    with np.errstate(all="ignore"):
        lower = _frac(float(_round_chunk(xs, fmt, "down", st, None, None)[0]), fmt)
        upper = _frac(float(_round_chunk(xs, fmt, "up", st, None, None)[0]), fmt)
    if sticky and lower == upper:  # an integer too wide for float64's steps: far past the range
        out = "above" if x > 0 else "below"
        return Decision(beyond=True, out_of_range=out, action=action(out, Fraction(0)), daz=daz, **base)
    tie, nearer = False, None
    if lower != upper:
        s = _side_of_midpoint(x, sticky, (lower + upper) / 2)
        tie = s == 0
        if not tie:  # s > 0: past the midpoint, away from zero
            toward_zero_is_lower = not neg
            near_zero = "lower" if toward_zero_is_lower else "upper"
            far_zero = "upper" if toward_zero_is_lower else "lower"
            nearer = far_zero if s > 0 else near_zero
    outside = tuple(n for n, v in (("lower", lower), ("upper", upper)) if side(v) is not None)
    info = dict(lower=lower, upper=upper, tie=tie, nearer=nearer, daz=daz, **base)
    if lower == upper:
        out = side(lower)
        got = finish(lower)
        if not _same(got, value):
            if stored is not None:
                raise ValueError(f"{value!r} is not {x!r} stored in {fmt.name} ({got!r})")
            raise AssertionError(f"round_values is not idempotent at {x!r}: {got!r} vs {value!r}")
        return Decision(rounded=lower, chosen="exact", out_of_range=out,
                        action=action(out, lower), outside=outside, **info)
    if mode in STOCHASTIC:
        v_lo, v_hi = finish(lower), finish(upper)
        if _same(v_lo, value) and _same(v_hi, value):
            return Decision(chosen="either", outside=outside, **info)
        if not (_same(v_lo, value) or _same(v_hi, value)):
            raise ValueError(f"{value!r} is not a stochastic rounding of {x!r} to {fmt.name}")
        chosen = "lower" if _same(v_lo, value) else "upper"
    else:
        with np.errstate(all="ignore"):
            r = _frac(float(_round_chunk(xs, fmt, mode, st, None, sr_bits)[0]), fmt)
        if r not in (lower, upper):
            raise AssertionError(f"rounding {x!r} gave {r}, not a neighbour ({lower}, {upper})")
        chosen = "lower" if r == lower else "upper"
        got = finish(r)
        if not _same(got, value):
            if stored is not None:
                raise ValueError(f"{value!r} is not {x!r} rounded {mode} to {fmt.name} ({got!r})")
            raise AssertionError(f"the rounding of {x!r} ({value!r}) is not its range handling "
                                 f"of {r} ({got!r})")
    r = lower if chosen == "lower" else upper
    out = side(r)
    return Decision(rounded=r, chosen=chosen, out_of_range=out, action=action(out, r),
                    outside=outside, **info)
