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
"""

from __future__ import annotations

import difflib

import numpy as np

from .formats import Format

__all__ = ["MODES", "OVERFLOWS", "resolve_mode", "resolve_overflow", "make_rng", "round_values"]

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic")
_MODE_ALIASES = {
    "rne": "nearest_even", "rn": "nearest_even", "nearest": "nearest_even",
    "rna": "nearest_away", "rtz": "toward_zero", "rz": "toward_zero", "trunc": "toward_zero",
    "rup": "up", "ru": "up", "ceil": "up", "rdn": "down", "rd": "down", "floor": "down",
    "rto": "odd", "ro": "odd", "sr": "stochastic",
}
OVERFLOWS = ("inf", "saturate", "nan", "wrap")

_CHUNK = 1 << 15


def _unknown(kind, given, valid, extra=()):
    close = difflib.get_close_matches(str(given).lower(), list(valid) + list(extra), n=3, cutoff=0.4)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ValueError(f"unknown {kind} {given!r}.{hint} Valid: {', '.join(valid)}.")


def resolve_mode(mode) -> str:
    """Canonical rounding-mode name for a name or alias (``"rne"`` -> ``"nearest_even"``)."""
    if not isinstance(mode, str):
        raise TypeError(f"rounding must be a string, not {type(mode).__name__}")
    key = mode.strip().lower()
    if key in MODES:
        return key
    if key in _MODE_ALIASES:
        return _MODE_ALIASES[key]
    raise _unknown("rounding mode", mode, MODES, _MODE_ALIASES)


def resolve_overflow(overflow, fmt: Format) -> str:
    """The overflow policy to use for ``fmt`` (``None`` -> the format's own default).

    ``inf``: values past max become +-Inf where IEEE 754 would (nearest modes, and
    the directed mode pointing away); other directed modes give +-max.
    ``nan``: the same, with NaN where ``inf`` would give Inf.
    ``saturate``: +-max for every overflow, Inf inputs included (PTX ``.satfinite``).
    ``wrap``: integers only, two's complement wrap-around.
    """
    if overflow is None:
        return fmt.default_overflow
    if not isinstance(overflow, str):
        raise TypeError(f"overflow must be a string or None, not {type(overflow).__name__}")
    key = overflow.strip().lower()
    if key not in OVERFLOWS:
        raise _unknown("overflow policy", overflow, OVERFLOWS + ("None",))
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
def _scales(x, fmt: Format):
    """Per-element exponent k of the quantum ``2**k`` of x in fmt, and (1/q, q)
    as exact float64 powers of two when both are normal floats (else None)."""
    e = (x.view(np.int64) >> 52) & 0x7FF
    np.clip(e, fmt.emin + 1023, min(2046, fmt.emax + 1024), out=e)
    if fmt.mbits - fmt.emin <= 1022 and fmt.emax <= 1021:
        inv = ((2046 + fmt.mbits) - e) << 52
        e -= fmt.mbits
        e <<= 52
        return None, inv.view(np.float64), e.view(np.float64)
    return e - (1023 + fmt.mbits), None, None


def _away(mode, y, t, sticky, fine, rand, sr_bits, neg):
    """Boolean mask: move |t| one step away from zero (magnitude formulation).

    ``f = |y - t|`` is the exact fraction of a quantum held by the float64 part;
    ``sticky`` (remainder class of the float64's own ulp, 0..3) adds what lies
    below it.  Where ``fine``, the quantum *is* that ulp, so class 2 is a tie
    and class 3 is past it; elsewhere the remainder only makes f inexact.
    """
    f = np.abs(y - t)
    if sticky is None:
        gt, eq, inexact = f > 0.5, f == 0.5, f > 0
    else:
        nz = sticky != 0
        gt = (f > 0.5) | ((f == 0.5) & nz) | (fine & (sticky == 3))
        eq = ((f == 0.5) & ~nz) | (fine & (sticky == 2))
        inexact = (f > 0) | nz
        if mode == "stochastic":
            f = f + np.where(fine, sticky * 0.25, 0.0)
    if mode == "nearest_away":
        return gt | eq
    if mode == "nearest_even":
        return gt | (eq & (np.fmod(t, 2.0) != 0))
    if mode == "toward_zero":
        return np.zeros(f.shape, bool)
    if mode == "up":
        return inexact & ~neg
    if mode == "down":
        return inexact & neg
    if mode == "odd":
        return inexact & (np.fmod(t, 2.0) == 0)
    if mode == "stochastic":
        if sr_bits is None:
            return rand < f
        return rand < np.floor(f * float(1 << sr_bits))
    raise AssertionError(mode)


def _round_chunk(x, fmt, mode, sticky, rng, sr_bits):
    """Round x (float64, any sign) with an unbounded exponent range."""
    k = q = None
    if fmt.kind == "float":
        k, inv, q = _scales(x, fmt)
        y = x * inv if k is None else np.ldexp(x, -k)
    else:
        y = x.copy()
    fine = False
    if sticky is not None and fmt.kind == "float" and fmt.mbits == 52:
        # x's own float64 ulp (np.spacing would give inf at the largest double)
        own = np.maximum((x.view(np.int64) >> 52) & 0x7FF, 1) - 1075
        fine = np.ldexp(1.0, own) == (q if k is None else np.ldexp(1.0, k))
    if sticky is None and mode in ("nearest_even", "toward_zero", "up", "down"):
        fn = {"nearest_even": np.rint, "toward_zero": np.trunc, "up": np.ceil, "down": np.floor}[mode]
        n = fn(y, out=y)
    else:
        t = np.trunc(y)
        rand = None
        if mode == "stochastic":
            rand = (rng.random(y.shape) if sr_bits is None
                    else rng.integers(0, 1 << sr_bits, size=y.shape).astype(np.float64))
        away = _away(mode, y, t, sticky, fine, rand, sr_bits, np.signbit(x))
        n = t + np.copysign(away, x)
    if q is not None:
        n *= q
    elif k is not None:
        n = np.ldexp(n, k)
    return n


def _overflow(r, x, fmt, mode, policy, sticky, limit):
    """Apply the overflow policy to elements whose rounded magnitude exceeds limit."""
    big = np.abs(r) > limit
    if not big.any():
        return r
    neg = np.signbit(r)
    if policy == "saturate":
        r[big] = np.where(neg[big], -limit, limit)
        return r
    special = np.inf if policy == "inf" else np.nan
    finite_in = np.isfinite(x) if sticky is None else np.isfinite(x) | (sticky != 0)
    toward_inf = {"nearest_even": True, "nearest_away": True, "stochastic": True,
                  "toward_zero": False, "odd": False}
    if mode in toward_inf:
        goes_out = np.full(r.shape, toward_inf[mode])
    else:
        goes_out = neg if mode == "down" else ~neg
    to_special = big & (goes_out | ~finite_in)
    to_max = big & ~to_special
    r[to_max] = np.where(neg[to_max], -limit, limit)
    r[to_special] = np.copysign(special, np.where(neg[to_special], -1.0, 1.0))
    return r


def _int_finish(r, fmt, policy):
    lo = float(-(1 << (fmt.bits - 1))) if fmt.signed else 0.0
    span = float(1 << fmt.bits)
    if policy == "wrap":
        fin = np.isfinite(r)
        w = np.fmod(r - lo, span)
        w[w < 0] += span
        r = np.where(fin, w + lo, np.clip(r, lo, lo + span - 1))
    else:
        np.clip(r, lo, lo + span - 1, out=r)
    r += 0.0  # -0 -> +0 (integers have one zero)
    return r


def round_values(x, fmt: Format, mode="nearest_even", overflow=None, *, ftz=False,
                 daz_below=None, rng=None, sr_bits=None, sticky=None, out=None):
    """Round exact values to ``fmt``; the one routine every other function calls.

    Parameters
    ----------
    x : float64 ndarray of exact values (not modified).
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

    Returns a new float64 array of values of ``fmt`` (NaN where the result is NaN,
    also for formats that cannot encode NaN).
    """
    x = np.asarray(x, dtype=np.float64)
    policy = resolve_overflow(overflow, fmt)
    if mode == "stochastic" and rng is None:
        rng = np.random.default_rng()
    if sr_bits is not None and not (isinstance(sr_bits, (int, np.integer)) and 1 <= sr_bits <= 52):
        raise ValueError(f"sr_bits must be an integer in 1..52, not {sr_bits!r}")
    shape = x.shape
    xf = x.reshape(-1)
    sf = None if sticky is None else np.asarray(sticky, np.uint8).reshape(-1)
    res = np.empty(xf.shape, np.float64) if out is None else out.reshape(-1)
    with np.errstate(all="ignore"):
        _round_all(xf, sf, res, fmt, mode, policy, ftz, daz_below, rng, sr_bits)
    return res.reshape(shape)


def _round_all(xf, sf, res, fmt, mode, policy, ftz, daz_below, rng, sr_bits):
    limit = fmt.max
    for i in range(0, max(xf.size, 1), _CHUNK):
        xc = xf[i:i + _CHUNK]
        if xc.size == 0:
            break
        sc = None if sf is None else sf[i:i + _CHUNK]
        if daz_below is not None:
            tiny = np.abs(xc) < daz_below
            if tiny.any():
                xc = np.where(tiny, np.copysign(0.0, xc), xc)
                if sc is not None:
                    sc = np.where(tiny, 0, sc).astype(np.uint8)
        if sc is not None and not sc.any():
            sc = None
        r = _round_chunk(xc, fmt, mode, sc, rng, sr_bits)
        if fmt.kind == "int":
            r = _int_finish(r, fmt, policy)
        else:
            r = _overflow(r, xc, fmt, mode, policy, sc, limit)
            if ftz and fmt.subnormals:
                sub = (np.abs(r) < fmt.smallest_normal) & (r != 0)
                if sub.any():
                    r[sub] = np.copysign(0.0, r[sub])
            if not fmt.negative_zero:
                r += 0.0  # -0 -> +0
            if not fmt.zero:
                # Unsigned, zero-less scale formats (E8M0): the smallest value is the floor.
                r = np.where(r == 0, fmt.smallest_normal, r)
            if not fmt.signed:
                # Unsigned: negative inputs are NaN; so is zero when the format has none.
                bad = np.signbit(xc) & (xc != 0)
                if not fmt.zero:
                    bad |= (xc == 0) if sc is None else (xc == 0) & (sc == 0)
                r[bad] = np.nan
        res[i:i + xc.size] = r
