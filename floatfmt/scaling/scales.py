"""Per-tensor and per-channel scales: calibration and the scale rules of each format kind.

* the range: ``calibrated_range`` (``"max"``, ``"percentile"``) or ``mse_range`` (its
  candidates' errors summed exactly, ``squared_error_sums``, so that every backend
  chooses the same range);
* integers: ``int_scale_params`` gives the fp32 scale, zero point and code range
  (symmetric ``amax / 127``, asymmetric ``(hi - lo) / (qmax - qmin)``);
* floats: ``fp32_scale(amax * 2**margin / max)``;
* the rounding of ``x / scale``, once: ``round_int_quotients``, ``round_float_quotients``.

Group-wise and 2-D block scaling (``floatfmt.scaling.tiles``) apply the same rules tile by
tile.  A documented internal API of the lab layer.
"""

from __future__ import annotations

import numpy as np

from ..backend.namespace import namespace
from ..core.formats import Format, get_format
from .quantized_tensor import width
from .quotients import remainder_kwargs, scaled_quotient
from ..arith.eft import int_to_sticky
from ..core.rounding import round_values

__all__ = ["CALIBRATIONS"]

#: Calibration methods for integer and per-tensor float scales.
CALIBRATIONS = ("max", "percentile", "mse")
#: ``calibration="mse"``'s candidate clip ranges: the ``"max"`` range times each t, in
#: this order (``np.linspace(0.2, 1.0, 40)``'s float64 values; the device code uses
#: these same constants).
MSE_GRID: tuple[float, ...] = tuple(np.linspace(0.2, 1.0, 40).tolist())

_FP32 = get_format("fp32")
_FP64 = get_format("fp64")
#: holds round(x / scale) before the clamp to the code range
WIDE_INT = Format("int62", kind="int", bits=62)
# the same for round_int_quotients, narrow enough (<= 53 bits) for round_values' fast integer path;
# saturating at +-(2**52 - 1) instead of +-(2**61 - 1) before the clamp to qmin..qmax changes nothing
_ROUND_INT = Format("int53", kind="int", bits=53)


def reduce_axes(ndim, axis, granularity):
    if granularity == "tensor":
        return None
    return tuple(i for i in range(ndim) if i != axis)


def calibrated_range(v, granularity, axis, calibration, percentile, symmetric):
    """(lo, hi) of the calibrated range, keepdims layout (scalars per tensor)."""
    red = reduce_axes(v.ndim, axis, granularity)
    kd = granularity == "channel"
    fin = np.where(np.isfinite(v), v, 0.0) if not np.isfinite(v).all() else v
    if calibration == "percentile" and not (isinstance(percentile, (int, float))
                                            and 0 < percentile <= 100):
        raise ValueError(f"percentile must be in (0, 100], not {percentile!r}")
    if fin.size == 0:  # no elements: the range of nothing is [0, 0], as for all zeros
        zero = np.sum(fin, axis=red, keepdims=kd)  # +0 in the layout of the result
        return zero, zero
    if calibration == "percentile":
        if symmetric:
            hi = np.percentile(np.abs(fin), percentile, axis=red, keepdims=kd)
            return -hi, hi
        return (np.percentile(fin, 100 - percentile, axis=red, keepdims=kd),
                np.percentile(fin, percentile, axis=red, keepdims=kd))
    if symmetric:
        hi = np.max(np.abs(fin), axis=red, keepdims=kd)
        return -hi, hi
    return np.min(fin, axis=red, keepdims=kd), np.max(fin, axis=red, keepdims=kd)


def int_scale_params(lo, hi, fmt: Format, symmetric, narrow_range, pow2):
    """(scale fp32, zero_point, qmin, qmax) for an integer format and a range."""
    n = width(fmt)
    if fmt.signed:
        qmin, qmax = -(1 << (n - 1)), (1 << (n - 1)) - 1
    else:
        qmin, qmax = 0, (1 << n) - 1
    if symmetric:
        if narrow_range:
            qmin = qmin + 1 if fmt.signed else qmin + 1
        half: float = (1 << (n - 1)) - 1  # 127 for 8 bits
        if not fmt.signed and not narrow_range:
            half = (qmax - qmin) / 2  # 127.5 for uint8, as PyTorch's observers
        amax = np.maximum(np.abs(lo), np.abs(hi))
        scale = fp32_scale(amax / half, pow2)
        zp = np.zeros(np.shape(scale), np.int64) if fmt.signed else \
            np.full(np.shape(scale), 1 << (n - 1), np.int64)
    else:
        lo = np.minimum(lo, 0.0)
        hi = np.maximum(hi, 0.0)
        scale = fp32_scale((hi - lo) / (qmax - qmin), pow2)
        zp = qmin - round_values(np.asarray(lo / scale, np.float64), WIDE_INT)
        zp = np.clip(zp, qmin, qmax).astype(np.int64)
    return scale, zp, qmin, qmax


def code_range(fmt: Format) -> tuple[int, int]:
    """(qmin, qmax): every code of the integer format (int8: -128..127, uint8: 0..255)."""
    n = width(fmt)
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if fmt.signed else (0, (1 << n) - 1)


def check_zero_point(lo: int, hi: int, fmt: Format, what: str = "zero_point") -> None:
    """A given zero point must be a code of ``fmt``: ``lo`` and ``hi`` are the smallest
    and largest of the given zero points (one or per channel); a ValueError naming the
    range otherwise (``x ~ (q - zero_point) * scale`` with a zero point outside the codes
    maps no code to 0, and the clamp of ``round(x / scale) + zero_point`` then gives
    values of the wrong sign)."""
    qmin, qmax = code_range(fmt)
    if lo < qmin or hi > qmax:
        bad = lo if lo < qmin else hi
        raise ValueError(f"{what} must be a code of {fmt.name}, an integer in [{qmin}, {qmax}]; "
                         f"got {bad}")


def unit_scale_where_infinite(sc, infinite):
    """An amax-calibrated float scale where the amax is infinite: 1.0 (the tensor, channel
    or tile is rounded unscaled, so its +-Inf saturates to +-max and its finite values keep
    their own magnitudes), as Transformer Engine's ``compute_scale_from_amax`` does for an
    infinite amax (its amax, ``fmaxf`` of |x|, keeps Inf and skips NaN).  ``infinite``:
    True where the calibration set holds +-Inf, in the layout of ``sc``."""
    if not np.any(infinite):
        return sc
    r = np.where(infinite, 1.0, sc)
    return float(r) if r.ndim == 0 else r


def fp32_scale(raw, pow2):
    """A positive fp32 scale (1.0 where the range is empty); ``pow2`` rounds it up
    to a power of two (so nothing new clips).  Written over the array namespace: numpy
    arrays and numbers, or tensors on their device (a Python float for a 0-d result)."""
    xp = namespace(raw)
    raw = xp.asfloat(raw)
    raw = xp.where((raw > 0) & xp.isfinite(raw), raw, 1.0)
    if pow2:
        s = round_values(raw, get_format("e11m0"), "up")
    else:
        s = round_values(raw, _FP32, "nearest_even", "saturate")
    s = xp.where(s > 0, s, _FP32.smallest_subnormal)
    return float(s) if s.ndim == 0 else s


def round_int_quotients(v, frac, narrow, scale, zp, qmin, qmax, mode, rng):
    yq, yst = scaled_quotient(v, frac, scale, narrow, _ROUND_INT, mode == "stochastic")
    own = isinstance(yq, np.ndarray) and yq is not v and yq.flags.writeable  # a fresh quotient
    n = round_values(yq, _ROUND_INT, mode, "saturate", rng=rng, **remainder_kwargs(yst),
                     out=yq if own else None)
    if np.any(zp):
        if np.broadcast_shapes(np.shape(zp), n.shape) == n.shape:
            n += zp
        else:
            n = n + zp
    np.clip(n, qmin, qmax, out=n)
    if np.isnan(v).any():
        raise ValueError("integer formats have no NaN; the input holds NaN")
    return n


def round_float_quotients(v, frac, sticky, narrow, scale, elem, mode, overflow, rng):
    class_only = mode == "stochastic" and sticky is not None and sticky.dtype != np.int64
    if np.ndim(scale) == 0 and float(scale) == 1.0 and not (class_only and frac is not None):
        return round_values(v, elem, mode, overflow, rng=rng, **remainder_kwargs(sticky))
    yq, yst = scaled_quotient(v, frac, scale, narrow, elem, mode == "stochastic")
    return round_values(yq, elem, mode, overflow, rng=rng, **remainder_kwargs(yst))


def mse_range(v, fmt, granularity, axis, symmetric, narrow_range, pow2, narrow, mode, rng):
    """Clip range minimising the squared error of fake quantisation, per tensor or per
    channel independently.  The candidates are ``(lo * t, hi * t)`` for t in ``MSE_GRID``
    (40 values from 0.2 to 1, in order; ``lo, hi`` the ``"max"`` range); a candidate's
    error is ``squared_error_sums`` of its fake quantisation ``xq`` (every element's
    ``d * d``, d = xq - v, summed exactly and rounded once), and the first candidate with
    the smallest error wins (later ones must be strictly smaller).  The error does not
    depend on the order of summation, so every backend picks the same range
    (``floatfmt.scaling.quantize_schemes`` over the array namespace).

    ``v``: float64; returns float64 (lo, hi), 0-d per tensor, keepdims layout per channel."""
    lo0, hi0 = calibrated_range(v, granularity, axis, "max", None, symmetric)
    if v.size == 0:
        return lo0, hi0  # no elements, no error to minimise: the range of nothing, [0, 0]
    lo0, hi0 = np.asarray(lo0, np.float64), np.asarray(hi0, np.float64)
    ax = axis if granularity == "channel" else None
    best_err = best_lo = best_hi = None
    for t in MSE_GRID:
        lo, hi = lo0 * t, hi0 * t
        xq = _fake_with_range(v, fmt, lo, hi, symmetric, narrow_range, pow2, narrow, mode, rng)
        err = squared_error_sums(xq, v, ax)
        if best_err is None:
            best_err, best_lo, best_hi = err, lo, hi
        else:
            better = err < best_err
            best_err = np.where(better, err, best_err)
            best_lo = np.where(better, lo, best_lo)
            best_hi = np.where(better, hi, best_hi)
    return best_lo, best_hi


def squared_error_sums(xq, v, axis):
    """The error of fake-quantised values ``xq`` of ``v`` (float64 arrays of one shape):
    ``d * d`` for each element's d = xq - v (float64 operations, each rounded once),
    summed over every axis but ``axis`` (None: over all, a 0-d result; else the sums
    laid out along ``axis``) exactly, and rounded once to float64 (``exact_sums``).

    >>> float(squared_error_sums(np.array([1.0, 2.0**-60, 3.0]), np.zeros(3), None))
    10.0
    """
    with np.errstate(over="ignore", invalid="ignore"):  # Inf and NaN are the defined results there
        d = np.subtract(xq, v, dtype=np.float64)
        d *= d
    if axis is None:
        return exact_sums(d.reshape(-1, 1)).reshape(())
    return channel_layout(exact_sums(np.moveaxis(d, axis, -1).reshape(-1, d.shape[axis])), v, axis)


_LOW = 27  # a significand M (|M| < 2**53) is cut as M = (M >> 27) * 2**27 + (M & (2**27 - 1))
_ROWS = 1 << 25  # terms per bincount: a bin's sum of pieces below 2**27 stays below 2**52
_BINS = 1 << 22  # bins per bincount (columns are taken in groups to stay below this)


def exact_sums(T):
    """Each column's sum of the float64 matrix ``T`` (n x m), computed exactly and
    rounded once to float64 (nearest even): the same value for every order of the terms.
    Specials as ``floatfmt.sum(..., order="exact")``: NaN, or +Inf and -Inf, give NaN, an
    Inf gives it; an exact zero is -0 only when every term is -0; a finite sum past the
    float64 range rounds to Inf.

    Each finite term is M * 2**(e - 1075) (from its bits: M a signed integer below
    2**53, e the exponent field, 1 for subnormals).  The two pieces ``M >> 27`` and
    ``M & (2**27 - 1)`` are added per column and exponent e by a float64 ``bincount``
    (integers below 2**52: exact in any order); the bins of a column then become one
    Python integer (``sum_e (H_e 2**27 + L_e) 2**(e - emin)``, through 16-bit limbs),
    which ``eft.int_to_sticky`` and the one rounding routine round to float64.  Work
    and memory grow with n x m plus (distinct exponents) x m, not with the span of the
    values' exponents.

    >>> float(exact_sums(np.array([[1.0], [2.0**-80], [-1.0]]))[0]) == 2.0**-80
    True
    >>> float(exact_sums(np.full((10, 1), 0.1))[0]), sum([0.1] * 10)   # 10 x fl(0.1) = 1 + 2**-54
    (1.0, 0.9999999999999999)
    """
    T = np.asarray(T, np.float64)
    n, m = T.shape
    fin = np.isfinite(T)
    X = T if fin.all() else np.where(fin, T, 0.0)
    bits = np.ascontiguousarray(X).view(np.int64)
    E = (bits >> 52) & 0x7FF  # biased exponent field; 0 for zeros and subnormals
    M = bits & ((1 << 52) - 1)
    M = np.where(E > 0, M | (1 << 52), M)
    M = np.where(bits < 0, -M, M)  # exact: X = M * 2**(ex - 1075), ex = max(E, 1)
    ex = np.maximum(E, 1)
    nz = M != 0
    t = np.zeros(m)
    cls = np.zeros(m, np.uint8)
    if nz.any():
        emin = int(ex[nz].min())
        b = np.where(nz, ex - emin, 0)  # zeros join the lowest exponent (they add nothing)
        used = np.bincount(b.ravel()) > 0
        pos = np.flatnonzero(used)  # the exponents present, each given a bin
        slot = np.cumsum(used) - 1
        B = slot[b]
        K = len(pos)
        step = max(1, _BINS // K)
        for c0 in range(0, m, step):
            c1 = min(m, c0 + step)
            H, L = _bin_sums(M[:, c0:c1], B[:, c0:c1], K)
            for j, total in enumerate(_column_ints(H, L, pos)):  # in units of 2**(emin - 1075)
                t[c0 + j], cls[c0 + j] = int_to_sticky(total, emin - 1075)
    out = round_values(t, _FP64, "nearest_even", sticky=cls)
    if not fin.all():
        pinf, ninf = np.isposinf(T).any(0), np.isneginf(T).any(0)
        out = np.where(np.isnan(T).any(0) | (pinf & ninf), np.nan,
                       np.where(pinf, np.inf, np.where(ninf, -np.inf, out)))
    neg0 = ((T == 0) & np.signbit(T)).all(0) & (n > 0)
    return np.where(neg0, -0.0, out)


def _column_ints(H, L, pos):
    """Per column, the Python integer sum_k H[k] 2**(pos[k] + 27) + L[k] 2**pos[k]
    (|H|, |L| < 2**52): each bin cut into 16-bit pieces added into int64 limbs of 16
    bits (a limb gets fewer than 2**14 pieces below 2**32: no overflow), carries
    propagated, and each column's limbs read as one integer."""
    K, m = H.shape
    nl = (int(pos[-1]) + _LOW + 52 + 16) // 16 + 3  # room for the top bin and the carries
    limbs = np.zeros((nl, m), np.int64)
    for k in range(K):
        for V, at in ((H[k], int(pos[k]) + _LOW), (L[k], int(pos[k]))):
            li, sh = divmod(at, 16)
            for j in range(4):  # V = sum_j piece_j 2**(16 j); the top piece keeps the sign
                piece = (V >> (16 * j)) & 0xFFFF if j < 3 else V >> 48
                limbs[li + j] += piece << sh
    neg = _carry16(limbs)[-1] < 0
    if neg.any():
        limbs[:, neg] = -limbs[:, neg]
        _carry16(limbs)
    raw = np.ascontiguousarray(limbs.T).astype("<u2").tobytes()  # each limb now 0..65535
    w = 2 * nl
    return [(-1 if neg[j] else 1) * int.from_bytes(raw[j * w:(j + 1) * w], "little")
            for j in range(m)]


def _carry16(limbs):
    """Carries up (floor shifts): every limb but the top one in 0..65535."""
    for i in range(limbs.shape[0] - 1):
        c = limbs[i] >> 16
        limbs[i] -= c << 16
        limbs[i + 1] += c
    return limbs


def _bin_sums(M, B, K):
    """(H, L): int64 (K, columns) sums of ``M >> 27`` and ``M & (2**27 - 1)`` per bin
    ``B`` (0..K-1) and column, ``_ROWS`` rows per float64 ``bincount`` (exact)."""
    n, m = M.shape
    H = np.zeros(K * m, np.int64)
    L = np.zeros(K * m, np.int64)
    cols = np.arange(m)
    for r0 in range(0, n, _ROWS):
        Mr = M[r0:r0 + _ROWS]
        idx = (B[r0:r0 + _ROWS] * m + cols).ravel()
        H += np.bincount(idx, weights=(Mr >> _LOW).ravel(), minlength=K * m).astype(np.int64)
        L += np.bincount(idx, weights=(Mr & ((1 << _LOW) - 1)).ravel(),
                         minlength=K * m).astype(np.int64)
    return H.reshape(K, m), L.reshape(K, m)


def _fake_with_range(v, fmt, lo, hi, symmetric, narrow_range, pow2, narrow, mode, rng):
    if fmt.kind == "int":
        scale, zp, qmin, qmax = int_scale_params(lo, hi, fmt, symmetric, narrow_range, pow2)
        return (round_int_quotients(v, None, narrow, scale, zp, qmin, qmax, mode, rng) - zp) * scale
    scale = fp32_scale(np.maximum(np.abs(lo), np.abs(hi)) / fmt.max, pow2)
    return round_float_quotients(v, None, None, narrow, scale, fmt, mode, "saturate", rng) * scale


def channel_layout(a, v, ax):
    """A 1-D per-channel array reshaped to broadcast along axis ``ax`` of v."""
    if a.ndim == 1 and ax is not None and v.ndim > 1:
        shape = [1] * v.ndim
        shape[ax] = a.size
        a = a.reshape(shape)
    return a


def given_scale(scale, what, v, ax):
    s = np.asarray(scale)
    if s.dtype.kind not in "fiu":
        raise TypeError(f"{what} must be a number or an array of numbers")
    s = s.astype(np.float64)
    if np.any(~(s > 0)) or not np.all(np.isfinite(s)):
        raise ValueError(f"{what} must be positive and finite")
    s = channel_layout(s, v, ax)
    return float(s) if s.ndim == 0 else s
