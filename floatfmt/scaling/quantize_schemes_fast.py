"""The numpy kernels of ``quantize`` and ``fake_quant``: the fast path of the rules whose
reference, written once over the array namespace, is ``floatfmt.scaling.quantize_schemes``.

``floatfmt.scaling.quantize._run`` chooses between the two in one place: numpy arrays
(and CPU tensors, as numpy views) come here.  The rules are the same; what is faster
here is the numpy form: inputs float64 cannot hold kept as exact Fractions, float32
inputs read without a float64 copy, MX converted chunk by chunk, integer fake
quantisation fused and chunked (``_fake_int``), the quotient rounding of
``floatfmt.scaling.scales`` / ``quotients`` (inexact elements only recomputed exactly),
and the library scale conventions (``floatfmt.scaling.scale_convention``: the same functions the
reference calls).
``tests/test_quantize_schemes.py`` proves fast == reference on numpy, scheme by scheme.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.formats import Format
from .mx_nvfp4 import SCALE_ROUNDINGS, mx_quantize, nvfp4_quantize
from ..core.intake import to_exact
from .tiles import quantize_tiled
from .quantized_tensor import QuantizedTensor, choose, intake, normalize_axis, width
from ..core.rounding import make_rng
from .scale_convention import (check_convention, library_elements, library_scale, library_scale_inverse,
                               library_scale_of)
from .scales import (calibrated_range, channel_layout, check_zero_point, code_range,
                     fp32_scale, given_scale, int_scale_params, mse_range, reduce_axes,
                     round_float_quotients, round_int_quotients, unit_scale_where_infinite)

__all__ = ["quantize_fast"]

_RAW_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def quantize_fast(x, p, fake: bool):
    """quantize (``fake``: fake_quant) of a numpy input by the plan ``p``
    (``quantize.plan_quantize``): dispatch to the kind's scheme."""
    kind, f, o, mode = p.kind, p.f, p.options, p.mode
    rng = make_rng(o["rng"]) if mode == "stochastic" else o["rng"]
    if kind == "mx":
        return _mx(x, f, fake, o["axis"], o["scale_rounding"], mode, rng)
    if kind == "nvfp4":
        v, frac, narrow, _ = intake(x)
        ax = normalize_axis(-1 if o["axis"] is None else o["axis"], v.ndim, "NVFP4 quantisation")
        q = nvfp4_quantize(v, frac, narrow, ax, mode, rng, o["tensor_scale"],
                           check_convention(o["scale_convention"]))
        return q.dequantize() if fake else q
    if (fake and kind == "int" and isinstance(x, np.ndarray) and x.dtype == np.float32
            and (o["calibration"] == "max" or (o["scale"] is not None and not isinstance(o["scale"], str)))):
        v, frac, narrow, sticky, class_only = x, None, True, None, None  # no float64 copy
    else:
        v, frac, narrow, ex = intake(x)
        sticky = ex.resid if mode == "stochastic" else ex.sticky
        class_only = ex.sticky  # the remainder class alone (what group / block scaling takes)
    granularity, symmetric, margin = p.granularity, p.symmetric, p.margin
    if p.tiled:
        q = quantize_tiled(v, frac, None if kind == "int" else class_only, narrow, f, granularity,
                           o["group_size"], o["block"], o["axis"], symmetric, p.calibration,
                           o["scale"], o["zero_point"], margin, o["pow2_scale"], p.narrow_range,
                           mode, o["overflow"], rng)
        return q.dequantize() if fake else q
    ax = None
    if granularity == "channel":
        ax = normalize_axis(0 if o["axis"] is None else o["axis"], v.ndim, "per-channel quantisation")
    rule = _ScaleRule(granularity, ax, p.calibration, o["percentile"], margin, bool(o["pow2_scale"]))
    if kind == "int":
        return _int(v, frac, narrow, f, fake, rule, p.scheme, o["scale"], o["zero_point"],
                    p.narrow_range, mode, rng)
    if not symmetric:
        raise ValueError("float formats are quantised symmetrically (scheme='symmetric')")
    convention = check_convention(o["scale_convention"])
    if convention != "exact":
        if p.tiled:
            raise ValueError("scale_convention applies to per-tensor and per-channel scaling")
        q = _library_float(v, narrow, f, rule, o["scale"], convention, mode, rng)
    else:
        q = _float(v, frac, sticky, narrow, f, rule, o["scale"], o["overflow"], mode, rng)
    return q.dequantize() if fake else q


def _library_float(v, narrow, f: Format, rule: "_ScaleRule", scale, convention, mode, rng):
    """Float formats by Transformer Engine's / torchao's convention (``floatfmt.scaling.scale_convention``):
    ``s`` from amax (or given), elements ``round(fp32(x * s))``, scale ``fp32(1 / s)``."""
    if scale is None or isinstance(scale, str):
        if scale not in (None, "amax"):
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        _, hi = rule.range(v, f, True, True, narrow, mode, rng)
        s = library_scale(hi, f, convention, rule.margin, rule.pow2)
    else:
        s = library_scale_of(np.asarray(given_scale(scale, "scale", v, rule.axis), np.float64))
    e = library_elements(v, s, f, mode, rng)
    inv = library_scale_inverse(s)
    sc = float(inv) if inv.ndim == 0 else inv
    return QuantizedTensor(e, sc, 0, f.name, f, rule.granularity, rule.axis, scheme="symmetric")


def _mx(x, name, fake, axis, scale_rounding, mode, rng):
    """OCP MX: float16/32/64 arrays go to the blocks as they are (converted chunk by chunk)."""
    sr = choose("scale_rounding", scale_rounding, SCALE_ROUNDINGS)
    if isinstance(x, np.ndarray) and x.dtype in _RAW_FLOATS:
        v, st = x, None
    else:
        ex = to_exact(x)
        v, st = ex.values, (ex.resid if mode == "stochastic" else ex.sticky)
    ax = normalize_axis(-1 if axis is None else axis, v.ndim, "MX quantisation")
    return mx_quantize(v, st, name, ax, sr, mode, rng, fake=fake)


@dataclass(frozen=True)
class _ScaleRule:
    """How a per-tensor or per-channel scale is calibrated (integer and float formats)."""

    granularity: str
    axis: int | None
    calibration: str
    percentile: float
    margin: int
    pow2: bool

    def range(self, v, f: Format, symmetric, narrow_range, narrow, mode, rng):
        """(lo, hi) of ``v`` by the calibration (float64, keepdims layout per channel)."""
        if self.calibration == "mse":
            return mse_range(v, f, self.granularity, self.axis, symmetric, narrow_range,
                             self.pow2, narrow, mode, rng)
        lo, hi = calibrated_range(v, self.granularity, self.axis, self.calibration,
                                  self.percentile, symmetric)
        return lo, hi


def _int(v, frac, narrow, f: Format, fake, rule: _ScaleRule, scheme, scale, zero_point,
         narrow_range, mode, rng):
    """Integer formats per tensor or per channel: a given or calibrated scale, then one
    rounding of ``x / scale`` plus the zero point, clamped to the code range."""
    symmetric = scheme == "symmetric"
    if scale is not None and not isinstance(scale, str):
        sc, zp, qmin, qmax = _given_int_params(v, f, rule.axis, scale, zero_point, symmetric,
                                               narrow_range)
        if rule.pow2:  # pow2_scale applies to a given scale too
            sc = fp32_scale(sc, True)
    else:
        if scale is not None and scale != "amax":
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        lo, hi = rule.range(v, f, symmetric, narrow_range, narrow, mode, rng)
        if rule.calibration != "mse" and v.dtype != np.float64:  # float32 extremes, exact in float64
            lo, hi = lo.astype(np.float64), hi.astype(np.float64)
        sc, zp, qmin, qmax = int_scale_params(lo, hi, f, symmetric, narrow_range, rule.pow2)
        if rule.margin:
            sc = fp32_scale(np.asarray(sc) * 2.0 ** rule.margin, rule.pow2)
    if fake and frac is None and mode != "stochastic" and v.ndim and v.size:
        return _fake_int(v, narrow, sc, zp, qmin, qmax, mode)
    n = round_int_quotients(v, frac, narrow, sc, zp, qmin, qmax, mode, rng)
    if fake:
        return QuantizedTensor(n, sc, zp, f.name, f).dequantize()
    zp_out = int(zp) if np.ndim(zp) == 0 else zp
    return QuantizedTensor(n, sc, zp_out, f.name, f, rule.granularity, rule.axis, None, None, None,
                           qmin, qmax, scheme)


def _given_int_params(v, f: Format, ax, scale, zero_point, symmetric, narrow_range):
    """(scale, zero point, qmin, qmax) of a given scale: zero point as given (default 0, or
    2**(bits-1) for a symmetric unsigned format); codes span the format's range
    (-127..127 for a signed symmetric scheme with narrow_range, as without a given scale)."""
    bits = width(f)
    sc = given_scale(scale, "scale", v, ax)
    default_zp = 0 if (f.signed or not symmetric) else 1 << (bits - 1)
    zp = np.asarray(default_zp if zero_point is None else zero_point)
    if zp.dtype.kind not in "iu":
        raise TypeError("zero_point must be an integer or an integer array")
    if zero_point is not None and zp.size:
        check_zero_point(int(zp.min()), int(zp.max()), f)
    zp = channel_layout(zp.astype(np.int64), v, ax)
    qmin, qmax = code_range(f)
    if f.signed and symmetric and narrow_range and zero_point is None:
        qmin += 1
    return sc, zp, qmin, qmax


def _float(v, frac, sticky, narrow, f: Format, rule: _ScaleRule, scale, overflow, mode, rng):
    """Float formats per tensor or per channel: ``round(x / scale)`` in the format, the
    scale given or ``amax * 2**margin / max`` (default for formats of at most 8 bits)."""
    if scale is None:
        scale = "amax" if width(f) <= 8 else 1.0
    if isinstance(scale, str):
        if scale != "amax":
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        _, hi = rule.range(v, f, True, True, narrow, mode, rng)
        sc = fp32_scale(hi * 2.0 ** rule.margin / f.max, rule.pow2)
        if rule.calibration == "max" and v.size:  # an infinite amax: scale 1 (Transformer Engine)
            red = reduce_axes(v.ndim, rule.axis, rule.granularity)
            sc = unit_scale_where_infinite(sc, np.isinf(v).any(axis=red, keepdims=rule.granularity == "channel"))
    else:
        sc = given_scale(scale, "scale", v, rule.axis)
        if rule.pow2:
            sc = fp32_scale(sc, True)
    r = round_float_quotients(v, frac, sticky, narrow, sc, f, mode, overflow, rng)
    return QuantizedTensor(r, sc, 0, f.name, f, rule.granularity, rule.axis, scheme="symmetric")


_FAKE_CHUNK = 1 << 17  # elements a chunk of _fake_int


def _fake_int(v, narrow, sc, zp, qmin, qmax, mode):
    """``(round_int_quotients(v, ...) - zp) * sc`` as float64, chunk by chunk along axis 0 (the
    same elementwise operations as quantize + dequantize, without whole-size temporaries)."""
    out = np.empty(v.shape, np.float64)
    sc_a, zp_a = np.asarray(sc, np.float64), np.asarray(zp)
    step = max(1, _FAKE_CHUNK // (v.size // v.shape[0] or 1))

    def part(a, sl):  # the slice of a per-channel array that broadcasts onto v[sl]
        return a[sl] if a.ndim == v.ndim and a.shape[0] > 1 else a

    for i in range(0, v.shape[0], step):
        sl = slice(i, i + step)
        s_i, z_i = part(sc_a, sl), part(zp_a, sl)
        n = round_int_quotients(v[sl], None, narrow, s_i, z_i, qmin, qmax, mode, None)
        if z_i.any():
            n -= z_i
        np.multiply(n, s_i, out=out[sl])
    return out
