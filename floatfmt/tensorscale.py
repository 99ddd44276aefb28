"""Per-tensor and per-channel scales: calibration and the scale rules of each format kind.

* the range: ``calibrated_range`` (``"max"``, ``"percentile"``) or ``mse_range``;
* integers: ``int_scale_params`` gives the fp32 scale, zero point and code range
  (symmetric ``amax / 127``, asymmetric ``(hi - lo) / (qmax - qmin)``);
* floats: ``fp32_scale(amax * 2**margin / max)``;
* the rounding of ``x / scale``, once: ``round_int_quotients``, ``round_float_quotients``.

Group-wise and 2-D block scaling (``floatfmt.groupscale``) apply the same rules tile by
tile.  A documented internal API of the lab layer.
"""

from __future__ import annotations

import numpy as np

from ._formats import Format, get_format
from .quantized import width
from .quotients import remainder_kwargs, scaled_quotient
from .rounding import round_values

__all__ = ["CALIBRATIONS"]

#: Calibration methods for integer and per-tensor float scales.
CALIBRATIONS = ("max", "percentile", "mse")

_FP32 = get_format("fp32")
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


def fp32_scale(raw, pow2):
    """A positive fp32 scale (1.0 where the range is empty); ``pow2`` rounds it up
    to a power of two (so nothing new clips)."""
    raw = np.asarray(raw, np.float64)
    raw = np.where((raw > 0) & np.isfinite(raw), raw, 1.0)
    if pow2:
        s = round_values(raw, get_format("e11m0"), "up")
    else:
        s = round_values(raw, _FP32, "nearest_even", "saturate")
    s = np.where(s > 0, s, _FP32.smallest_subnormal)
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


def mse_range(v, fmt, granularity, axis, symmetric, narrow_range, pow2, narrow, mode, rng,
                grid=40):
    """Clip range minimising the mean squared error of fake quantisation: try
    ``amax * t`` for ``grid`` values of t in [0.2, 1] (per channel independently)."""
    lo0, hi0 = calibrated_range(v, granularity, axis, "max", None, symmetric)
    if v.size == 0:
        return lo0, hi0  # no elements, no error to minimise: the range of nothing, [0, 0]
    red = reduce_axes(v.ndim, axis, granularity)
    best_err = best_lo = best_hi = None
    for t in np.linspace(0.2, 1.0, grid):
        lo, hi = lo0 * t, hi0 * t
        xq = _fake_with_range(v, fmt, lo, hi, symmetric, narrow_range, pow2, narrow, mode, rng)
        err = np.mean((xq - v) ** 2, axis=red, keepdims=granularity == "channel")
        if best_err is None:
            best_err, best_lo, best_hi = err, lo, hi
        else:
            better = err < best_err
            best_err = np.where(better, err, best_err)
            best_lo = np.where(better, lo, best_lo)
            best_hi = np.where(better, hi, best_hi)
    return best_lo, best_hi


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
