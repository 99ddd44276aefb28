"""Quantisation: ``quantize`` and ``fake_quant`` for integer, float, MX and NVFP4 formats.

``quantize`` resolves the format's kind and hands each scheme only the options that
apply to it; an option that does not apply (``quantize(x, "nvfp4", scheme=...)``,
``quantize(x, "mxfp8_e4m3", scale=2.0)``, ``quantize(x, "int8", scale_rounding=...)``)
raises ``ValueError`` naming the option, its value and what it applies to
(``OPTIONS_BY_KIND``).  The schemes:

* integers, per tensor or per channel, and floats (FP8, FP6, FP4, bf16 ...) per tensor or
  per channel: here, with the scale rules of ``floatfmt.tensorscale``;
* group-wise and 2-D blocks: ``floatfmt.groupscale``;
* OCP MX and NVFP4: ``floatfmt.blockscale``.

Every quotient ``x / scale`` is rounded once by the one rounding routine.

    >>> q = quantize([0.5, -1.0, 0.25], "int8")
    >>> q.codes.tolist(), q.scale
    ([64, -127, 32], 0.007874015718698502)
"""

from __future__ import annotations

import numpy as np

from .blockscale import SCALE_ROUNDINGS, mx_quantize, nvfp4_quantize
from .exact import to_exact
from .groupscale import quantize_tiled, tiled_request
from .quantized import QuantizedTensor, choose, intake, normalize_axis, resolve_kind
from .rounding import make_rng, resolve_mode
from .tensorscale import (CALIBRATIONS, calibrated_range, channel_layout, fp32_scale, given_scale,
                          int_scale_params, mse_range, round_float_quotients, round_int_quotients)

__all__ = ["quantize", "fake_quant", "CALIBRATIONS"]

_SCHEMES = ("symmetric", "asymmetric")
_GRANULARITIES = ("tensor", "channel", "group", "block")


def quantize(x, fmt="int8", *, scheme="symmetric", granularity="tensor", axis=None,
             calibration="max", percentile=99.99, rounding="nearest_even", scale=None,
             zero_point=None, margin=0, pow2_scale=False, narrow_range=None,
             scale_rounding="floor", overflow="saturate", tensor_scale=None, rng=None,
             group_size=None, block=None):
    """Quantise ``x`` to ``fmt`` and return a ``QuantizedTensor`` (``.dequantize()``).

    Formats
    -------
    ``int8 uint8 int4 uint4``: affine, ``q = clamp(round(x / scale) + zero_point, qmin, qmax)``.
        ``scheme="symmetric"``: zero point 0 (unsigned: 2**(bits-1)), ``scale = amax / 127``
        for int8 with codes -127..127 (``narrow_range=False``: -128..127).
        ``scheme="asymmetric"``: the range [min(lo, 0), max(hi, 0)] maps onto qmin..qmax,
        ``scale = (hi - lo) / (qmax - qmin)``, ``zero_point = qmin - round(lo / scale)``.
    float formats (``fp8_e4m3``, ``fp8_e5m2``, ``fp6_*``, ``fp4_e2m1``, ``bf16`` ...):
        ``q = round(x / scale)`` in the format, saturating.  ``scale="amax"`` (the default
        for formats of at most 8 bits; 1.0 for wider ones) is ``amax * 2**margin / max``,
        FP8 per-tensor scaling as Transformer Engine computes it.
    ``mxfp8_e4m3 mxfp8_e5m2 mxfp6_e2m3 mxfp6_e3m2 mxfp4_e2m1 mxint8`` (``mxfp8``,
        ``mxfp6``, ``mxfp4``): OCP MX, blocks of 32 along ``axis`` (default -1), see
        ``mx_shared_exponent`` for the E8M0 scale; elements rounded with saturation.
        A block holding Inf or NaN gets the NaN scale (its values decode to NaN).
    ``nvfp4``: E2M1 in blocks of 16 along ``axis``; block scale
        ``round_e4m3(amax_block / (6 * ts))``, ``ts = amax / (6 * 448)`` in fp32
        (or ``tensor_scale=``); elements ``round_e2m1(x / (block * ts))``.

    Options
    -------
    granularity : ``"tensor"``, ``"channel"`` (one scale per index of ``axis``, default 0),
        ``"group"`` (one scale, and zero point, per ``group_size`` consecutive elements
        along ``axis``, default -1: GPTQ / AWQ-style weight groups) or ``"block"`` (one per
        2-D block ``block=(rows, cols)`` of the last two axes, e.g. ``(128, 128)``).  Each
        group or block gets the per-tensor rule applied to its own elements (same scale
        formula, the same single rounding of ``x / scale``); ``calibration="max"`` only.
        When ``group_size`` (or a block side) does not divide its axis, the last group is
        partial: its scale comes from the elements it has, which is what padding it with
        zeros to full size gives (a zero never raises amax nor widens ``[min(lo, 0),
        max(hi, 0)]``), as DeepSeek-V3 pads edge blocks.  A group or block larger than its
        axis is an error.  Result: ``granularity="group"`` or ``"block2d"``, scales on the
        grid of groups / blocks (``block_shape`` gives the tile).
    calibration : how the range is found: ``"max"``, ``"percentile"`` (of |x|, or of x
        at both ends for asymmetric), ``"mse"`` (clip range minimising the MSE).
    scale, zero_point : give them instead of calibrating (numbers, or per-channel arrays);
        with an explicit zero point the codes span the format's whole range, as in
        ``torch.quantize_per_tensor``.
    pow2_scale : round the scale up to a power of two.
    rounding : element rounding mode (``"stochastic"`` uses ``rng``).
    Scales are fp32 values (rounded once); every quotient ``x / scale`` is rounded once.

    >>> q = quantize([-1.0, 0.0, 2.0], "uint8", scheme="asymmetric")
    >>> q.codes.tolist(), q.zero_point, q.scale
    ([0, 85, 255], 85, 0.0117647061124444)
    >>> quantize([[1.0, 2.0], [30.0, 40.0]], "int8", granularity="channel").codes.tolist()
    [[64, 127], [95, 127]]
    >>> q = quantize(np.arange(1.0, 33.0), "mxfp8_e4m3")
    >>> int(q.scale_codes[0]), q.dequantize()[-3:].tolist()
    (124, [30.0, 32.0, 32.0])
    >>> q = quantize([[1.0, -2.0, 30.0, 40.0, 5.0]], "int8", granularity="group", group_size=2)
    >>> q.codes.tolist(), q.scale.shape      # groups [1, -2], [30, 40], [5]
    ([[64, -127, 95, 127, 127]], (1, 3))
    """
    return _quantize(x, fmt, False, scheme=scheme, granularity=granularity, axis=axis,
                     calibration=calibration, percentile=percentile, rounding=rounding,
                     scale=scale, zero_point=zero_point, margin=margin, pow2_scale=pow2_scale,
                     narrow_range=narrow_range, scale_rounding=scale_rounding,
                     overflow=overflow, tensor_scale=tensor_scale, rng=rng,
                     group_size=group_size, block=block)


_RAW_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _quantize(x, fmt, fake, *, scheme, granularity, axis, calibration, percentile, rounding,
              scale, zero_point, margin, pow2_scale, narrow_range, scale_rounding, overflow,
              tensor_scale, rng, group_size=None, block=None):
    kind, f = resolve_kind(fmt)
    tiled = tiled_request(kind, f, granularity, group_size, block)
    mode = resolve_mode(rounding)
    if mode == "stochastic":
        rng = make_rng(rng)
    if kind == "mx":
        sr = choose("scale_rounding", scale_rounding, SCALE_ROUNDINGS)
        if isinstance(x, np.ndarray) and x.dtype in _RAW_FLOATS:
            v, st = x, None  # blocks are converted to float64 chunk by chunk
        else:
            ex = to_exact(x)
            v, st = ex.values, (ex.resid if mode == "stochastic" else ex.sticky)
        ax = normalize_axis(-1 if axis is None else axis, v.ndim, "MX quantisation")
        return mx_quantize(v, st, f, ax, sr, mode, rng, fake=fake)
    if (fake and kind == "int" and isinstance(x, np.ndarray) and x.dtype == np.float32
            and (calibration == "max" or (scale is not None and not isinstance(scale, str)))):
        v, frac, narrow = x, None, True  # float32 data: no float64 copy of the whole input
    else:
        v, frac, narrow, ex = intake(x)
    if kind == "nvfp4":
        ax = normalize_axis(-1 if axis is None else axis, v.ndim, "NVFP4 quantisation")
        return nvfp4_quantize(v, frac, narrow, ax, mode, rng, tensor_scale)

    scheme = choose("scheme", scheme, _SCHEMES)
    granularity = choose("granularity", granularity, _GRANULARITIES)
    calibration = choose("calibration", calibration, CALIBRATIONS)
    symmetric = scheme == "symmetric"
    ax = None
    if granularity == "channel":
        ax = normalize_axis(0 if axis is None else axis, v.ndim, "per-channel quantisation")
    if narrow_range is None:
        narrow_range = symmetric
    if not isinstance(margin, (int, np.integer)) or isinstance(margin, bool):
        raise TypeError(f"margin must be an integer (a power of two), not {type(margin).__name__}")
    if tiled:
        q = quantize_tiled(v, frac, None if kind == "int" else ex.sticky, narrow, f, granularity,
                            group_size, block, axis, symmetric, calibration, scale, zero_point,
                            margin, pow2_scale, narrow_range, mode, overflow, rng)
        return q.dequantize() if fake else q

    if kind == "int":
        if scale is not None and not isinstance(scale, str):
            # given scale: zero point as given (default 0, or 2**(bits-1) for a symmetric
            # unsigned format); codes span the format's range (-127..127 for a signed
            # symmetric scheme with narrow_range, as without a given scale)
            sc = given_scale(scale, "scale", v, ax)
            default_zp = 0 if (f.signed or not symmetric) else 1 << (f.bits - 1)
            zp = np.asarray(default_zp if zero_point is None else zero_point)
            if zp.dtype.kind not in "iu":
                raise TypeError("zero_point must be an integer or an integer array")
            zp = channel_layout(zp.astype(np.int64), v, ax)
            qmin, qmax = (int(f.min), int(f.max)) if f.signed else (0, (1 << f.bits) - 1)
            if f.signed and symmetric and narrow_range and zero_point is None:
                qmin += 1
        else:
            if scale is not None and scale != "amax":
                raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
            if calibration == "mse":
                lo, hi = mse_range(v, f, granularity, ax, symmetric, narrow_range, pow2_scale,
                                     narrow, mode, rng)
            else:
                lo, hi = calibrated_range(v, granularity, ax, calibration, percentile, symmetric)
                if v.dtype != np.float64:  # float32 extremes, exact in float64
                    lo, hi = lo.astype(np.float64), hi.astype(np.float64)
            sc, zp, qmin, qmax = int_scale_params(lo, hi, f, symmetric, narrow_range, pow2_scale)
            if margin:
                sc = fp32_scale(np.asarray(sc) * 2.0 ** margin, pow2_scale)
        if fake and frac is None and mode != "stochastic" and v.ndim and v.size:
            return _fake_int(v, narrow, sc, zp, qmin, qmax, mode)
        n = round_int_quotients(v, frac, narrow, sc, zp, qmin, qmax, mode, rng)
        if fake:
            return QuantizedTensor(n, sc, zp, f.name, f).dequantize()
        zp_out = int(zp) if np.ndim(zp) == 0 else zp
        return QuantizedTensor(n, sc, zp_out, f.name, f, granularity, ax, None, None, None,
                               qmin, qmax, scheme)

    # float element formats, per tensor or per channel
    if not symmetric:
        raise ValueError("float formats are quantised symmetrically (scheme='symmetric')")
    if scale is None:
        scale = "amax" if f.bits <= 8 else 1.0
    if isinstance(scale, str):
        if scale != "amax":
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        if calibration == "mse":
            lo, hi = mse_range(v, f, granularity, ax, True, True, pow2_scale, narrow, mode, rng)
        else:
            lo, hi = calibrated_range(v, granularity, ax, calibration, percentile, True)
        sc = fp32_scale(hi * 2.0 ** margin / f.max, pow2_scale)
    else:
        sc = given_scale(scale, "scale", v, ax)
    ov = overflow if overflow is not None else None
    r = round_float_quotients(v, frac, ex.resid if mode == "stochastic" else ex.sticky, narrow, sc, f,
                     mode, ov, rng)
    return QuantizedTensor(r, sc, 0, f.name, f, granularity, ax, scheme=scheme)


_QUANTIZE_DEFAULTS = {k: v.default for k, v in __import__("inspect").signature(quantize).parameters.items()
                      if v.kind is v.KEYWORD_ONLY}


def fake_quant(x, fmt="int8", **options) -> np.ndarray:
    """Quantise then dequantise (the forward pass of quantisation-aware training);
    same options as ``quantize``.  Returns float64 (it holds every result exactly);
    MX formats keep a float32 input's dtype (MX values of float32 data are float32 values).

    >>> fake_quant([0.1, 0.26, -1.0], "int8").tolist()
    [0.10236220434308052, 0.25984251871705055, -0.9999999962747097]
    """
    kind, _ = resolve_kind(fmt)
    if kind in ("mx", "int"):  # fused and chunked: quantize(x, fmt, **options).dequantize()
        opts = dict(_QUANTIZE_DEFAULTS)
        unknown = set(options) - set(opts)
        if unknown:
            raise TypeError(f"fake_quant() got unexpected keyword argument(s) {sorted(unknown)}")
        opts.update(options)
        return _quantize(x, fmt, True, **opts)
    return quantize(x, fmt, **options).dequantize()


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
