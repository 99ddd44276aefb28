"""The rounding routine's fast plan: float64 input on NumPy, in-place passes per chunk.

``fast_plan(fmt, mode, policy, sr_bits)`` says whether (and how) a chunk can take the
fast path; ``fast_chunk`` rounds one chunk with a handful of in-place NumPy passes over
reused cache-sized buffers (``chunk_buffers``): ``q`` and ``1/q`` built from the exponent
bits, one of ``rint`` / ``trunc`` / ``ceil`` / ``floor``, overflow found with reductions,
a clip, or a scaling that makes exactly the values past the format overflow the double.
It must give the bits of the general routine (``rounding._general_chunk``) on every
input it accepts; the oracle tests run every case through both, and ``rounding``
chooses between them in one place (``_round_all``).  NumPy only: its speed comes from
NumPy specifics (ufuncs with ``out=``, the clip ufunc) that have no portable form.
"""

from __future__ import annotations

import enum
import struct
import threading
from dataclasses import dataclass

import numpy as np

from .modes import CHUNK, P3109_SR

__all__ = ["fast_plan", "fast_chunk", "chunk_buffers", "sticky_ok"]

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


def chunk_buffers() -> "_Buffers":
    """This thread's scratch arrays, made once: callers that round chunk by chunk
    (arithmetic, block scaling) would otherwise pay fresh pages on every call."""
    b = getattr(_LOCAL, "bufs", None)
    if b is None or b.size != CHUNK:
        b = _LOCAL.bufs = _Buffers(CHUNK)
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
    """How the fast path rounds: the four shapes of ``fast_chunk``."""

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
    ``_make_plan`` and cached: see ``fast_chunk``.

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


def fast_plan(fmt, mode, policy, sr_bits):
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
    if mode in P3109_SR or policy == "propagate" or (
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


def sticky_ok(xc, p) -> bool:
    """Whether the fast path can take a chunk with a sticky part (see fast_chunk)."""
    if p.kind is _F32:
        p = p.alt
    return (p.kind is not _COPY and p.mode != "stochastic"
            and not (np.isinf(np.fmax.reduce(xc)) or np.isinf(np.fmin.reduce(xc))))


# size: one sequence of in-place passes per mode over reused buffers, in one function
# because it runs once per chunk on the hot path (a split adds calls per chunk)
def fast_chunk(xc, o, p, rng, b, sc=None) -> bool:
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
    if p.kind is _F32:  # IEEE binary32 RNE: overflow gives +-Inf, subnormals kept (fast_plan)
        if sc is not None:
            return fast_chunk(xc, o, p.alt, rng, b, sc)
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
    """Indices where the sticky part changes the rounding of y (see fast_chunk); V gets
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
