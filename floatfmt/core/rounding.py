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

Two implementations of that one rule: ``rounding_fast.fast_chunk`` handles
float64 input without a sticky part (the common case) with a handful of
in-place numpy passes over cache-sized chunks: ``q`` and ``1/q`` are built
from the exponent bits, one of ``rint``/``trunc``/``ceil``/``floor`` rounds,
and overflow is found with reductions, a clip, or (for Inf) a scaling that
makes exactly the values past the format overflow the double.
``_general_chunk`` (here) handles everything (sticky input, unusual formats, Inf in
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

# size: the general routine and its tensor path are one rule over the namespace (the chunk
# loop, the rounding of a chunk, overflow, subnormals); the fast plan, the modes and decide
# are their own modules (rounding_fast, modes, decision)
from __future__ import annotations

from contextvars import ContextVar

import numpy as np

from ..backend.namespace import NUMPY, is_tensor, namespace
from ..backend.dispatch import from_host, host_kernels, to_host
from .formats import Format
from . import threads
from .modes import (CHUNK, MODE_ALIASES, MODES, OVERFLOWS, P3109_SR, STOCHASTIC, make_rng,  # noqa: F401
                    resolve_mode, resolve_overflow)
from .rounding_fast import chunk_buffers, fast_chunk, fast_plan, sticky_ok

__all__ = ["MODES", "OVERFLOWS", "STOCHASTIC", "resolve_mode", "resolve_overflow", "make_rng",
           "round_values", "resid_class", "OBSERVER", "round_chunk", "daz_flush",
           "round_block"]

#: Set only inside a ``floatfmt.flags()`` block (by ``floatfmt.core.flags``): a callable that
#: ``round_values`` calls after each rounding as ``observer(x, fmt, mode, policy, ftz,
#: daz_below, sticky, result)`` (sticky: the remainder class array or None).  None (the
#: default) costs one lookup per call.
OBSERVER: ContextVar = ContextVar("floatfmt_rounding_observer", default=None)

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
    with P = 1, see ``round_chunk``); None means t's parity.
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
    if mode in P3109_SR:
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


def round_chunk(x, fmt, mode, sticky, rng, sr_bits, resid=None, xp=NUMPY, draws=None):
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

    The work is done in chunks of ``CHUNK`` elements, so the extra memory is a
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
    if mode in P3109_SR and sr_bits is None:
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
        x, _, _ = daz_flush(x, None, None, daz_below, xp)
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
    plan = fast_plan(fmt, mode, policy, sr_bits) if draws is None else None
    bufs = chunk_buffers() if plan is not None else None
    alias = plan is not None and np.may_share_memory(xf, res)
    for i in range(0, n, CHUNK):
        j = min(i + CHUNK, n)
        xc, o = xf[i:j], res[i:j]
        sc = None if sf is None else sf[i:j]
        rc = None if rf is None else rf[i:j]
        if daz_below is not None:
            xc, sc, rc = daz_flush(xc, sc, rc, daz_below)
        if sc is not None and not sc.any():
            sc = rc = None
        if plan is not None and (sc is None or sticky_ok(xc, plan)):
            if alias:  # out is x: keep the chunk's input while o is overwritten
                np.copyto(bufs.x[:j - i], xc)
                xc = bufs.x[:j - i]
            if fast_chunk(xc, o, plan, rng, bufs, sc):
                if ftz:
                    _flush(o, fmt)
                continue
        dc = None if draws is None else draws[i:j]
        o[...] = _general_chunk(xc, sc, fmt, mode, policy, ftz, rng, sr_bits, rc, draws=dc)


def daz_flush(xc, sc, rc, daz_below, xp=NUMPY):
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
    r = round_chunk(xc, fmt, mode, sc, rng, sr_bits, rc, xp, draws)
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
