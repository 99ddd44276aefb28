"""Quantisation: ``quantize`` and ``fake_quant`` for integer, float, MX and NVFP4 formats.

``quantize`` resolves the format's kind and hands each scheme only the options that
apply to it; an option that does not apply (``quantize(x, "nvfp4", scheme=...)``,
``quantize(x, "mxfp8_e4m3", scale=2.0)``, ``quantize(x, "int8", scale_rounding=...)``)
raises ``ValueError`` naming the option, its value and what it applies to
(``OPTIONS_BY_KIND``).  The schemes:

* integers, per tensor or per channel, and floats (FP8, FP6, FP4, bf16 ...) per tensor or
  per channel: here, with the scale rules of ``floatfmt.scaling.scales``;
* group-wise and 2-D blocks: ``floatfmt.scaling.tiles``;
* OCP MX and NVFP4: ``floatfmt.scaling.mx_nvfp4``.

Conventions (PyTorch's): a quantised tensor holds codes ``q``, a ``scale`` and a
``zero_point`` with ``x ~ (q - zero_point) * scale``, so

* integers (``int8 uint8 int4 uint4``): ``q = clamp(round(x / scale) + zero_point)``;
* float elements (``fp8_e4m3``, ``fp8_e5m2``, ``fp6_*``, ``fp4_e2m1``): ``q = round(x / scale)``
  to the format, saturating at its largest finite value;
* OCP MX blocks (``mxfp8_e4m3 mxfp8_e5m2 mxfp6_e2m3 mxfp6_e3m2 mxfp4_e2m1 mxint8``):
  blocks of 32 along ``axis`` share a power-of-two scale ``2**E`` stored as E8M0;
* ``nvfp4``: E2M1 elements in blocks of 16, an E4M3 block scale and an fp32 tensor scale.

Scales other than MX's powers of two are stored as fp32 values (rounded once), as real
kernels keep them.  Every quotient ``x / scale`` is rounded once by the one rounding
routine: exactly-representable cases are divided directly, others carry their remainder
class to it (``floatfmt.scaling.quotients``).

    >>> q = quantize([0.5, -1.0, 0.25], "int8")
    >>> q.codes.tolist(), q.scale
    ([64, -127, 32], 0.007874015718698502)
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.formats import Format, FormatLike
from ..core.types import Overflow, RngLike, Values

from ..backend.namespace import is_tensor, namespace
from ..backend.dispatch import tensor_entry
from .mx_nvfp4 import SCALE_ROUNDINGS, mx_quantize, nvfp4_quantize
from ..core.intake import to_exact
from .tiles import quantize_tiled, tiled_request
from .quantize_device import device_quantize
from .quantized_tensor import QuantizedTensor, choose, intake, normalize_axis, resolve_kind, width
from ..core.rounding import make_rng, resolve_mode
from .scales import (CALIBRATIONS, calibrated_range, channel_layout, fp32_scale, given_scale,
                          int_scale_params, mse_range, round_float_quotients, round_int_quotients)

__all__ = ["quantize", "fake_quant", "CALIBRATIONS"]

_SCHEMES = ("symmetric", "asymmetric")
_GRANULARITIES = ("tensor", "channel", "group", "block")


def _device_quantize(*args: Any, **kwargs: Any) -> QuantizedTensor:
    """``quantize`` of a tensor the numpy kernels do not compute (``floatfmt.backend.dispatch``)."""
    o = inspect.signature(quantize).bind(*args, **kwargs)
    o.apply_defaults()
    opts = dict(o.arguments)
    x, fmt = opts.pop("x"), opts.pop("fmt")
    _check_ste(opts.pop("ste"))
    return device_quantize(x, plan_quantize(fmt, opts), False, "quantize")


@tensor_entry("quantize", ("x", "scale", "zero_point"), device_impl=_device_quantize, ste=True)
def quantize(x: Values, fmt: FormatLike = "int8", *, scheme: str = "symmetric",
             granularity: str = "tensor", axis: int | None = None, calibration: str = "max",
             percentile: float = 99.99, rounding: str = "nearest_even", scale: Any = None,
             zero_point: Any = None, margin: int = 0, pow2_scale: bool = False,
             narrow_range: bool | None = None, scale_rounding: str = "floor",
             overflow: Overflow = "saturate", tensor_scale: float | None = None,
             rng: RngLike = None, group_size: int | None = None,
             block: tuple[int, int] | None = None, ste: str | None = None) -> QuantizedTensor:
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
    An option that does not apply to the format's kind (``OPTIONS_BY_KIND``: e.g.
    ``scale`` or ``scheme`` for MX and NVFP4, ``scale_rounding`` for anything but MX,
    ``tensor_scale`` for anything but NVFP4, ``zero_point`` for floats) raises
    ``ValueError`` unless it is left at its default.
    ste : tensors that require grad: ``quantize(x).dequantize()`` passes the gradient unchanged
        (None / ``"identity"``), or with ``"clipped"`` only where ``lo < x < hi``,
        ``(lo, hi) = q.limits()`` (0 where saturated or clipped).  No effect on arrays.

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
    _check_ste(ste)
    return _quantize(x, fmt, False, dict(
        scheme=scheme, granularity=granularity, axis=axis, calibration=calibration,
        percentile=percentile, rounding=rounding, scale=scale, zero_point=zero_point,
        margin=margin, pow2_scale=pow2_scale, narrow_range=narrow_range,
        scale_rounding=scale_rounding, overflow=overflow, tensor_scale=tensor_scale, rng=rng,
        group_size=group_size, block=block))


_RAW_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))

#: The options each kind of format takes besides ``axis``, ``rounding`` and ``rng`` (which
#: every kind takes).  Any other option given a value other than its default raises
#: ``ValueError``: it would change nothing, so it is almost certainly a mistake.
OPTIONS_BY_KIND = {
    "int": ("scheme", "granularity", "calibration", "percentile", "scale", "zero_point", "margin",
            "pow2_scale", "narrow_range", "group_size", "block"),
    "float": ("scheme", "granularity", "calibration", "percentile", "scale", "margin",
              "pow2_scale", "overflow", "group_size", "block"),
    "mx": ("scale_rounding",),
    "nvfp4": ("tensor_scale",),
}
_KIND_WORDS = {"int": "integer formats (int8 uint8 int4 uint4 ...)",
               "float": "float formats (fp8_e4m3 fp8_e5m2 fp6_* fp4_e2m1 bf16 ...)",
               "mx": "OCP MX formats (mxfp8_e4m3 ... mxint8)", "nvfp4": "nvfp4"}


def _at_default(option, value) -> bool:
    """Whether ``value`` is ``option``'s default (strings compared case- and space-blind;
    ``overflow=None``, the format's own policy, counts as not given)."""
    default = _QUANTIZE_DEFAULTS[option]
    if value is default or (option == "overflow" and value is None):
        return True
    if default is None or value is None:
        return False
    if isinstance(default, str):
        return isinstance(value, str) and value.strip().lower() == default
    if isinstance(value, (bool, int, float, np.integer, np.floating)):
        return bool(value == default)
    return False


def check_options(kind: str, name: str, options: dict) -> None:
    """Raise ``ValueError`` for the first option in ``options`` that ``kind`` (``"int"``,
    ``"float"``, ``"mx"``, ``"nvfp4"``) does not take and that is not at its default,
    naming the option, its value, the format and the kinds it applies to."""
    takes = set(OPTIONS_BY_KIND[kind]) | {"axis", "rounding", "rng"}
    for option, value in options.items():
        if option in takes or _at_default(option, value):
            continue
        homes = " and ".join(_KIND_WORDS[k] for k, opts in OPTIONS_BY_KIND.items() if option in opts)
        raise ValueError(f"{option}={value!r} does not apply to {name} ({_KIND_WORDS[kind]}); "
                         f"{option} applies to {homes}. Leave it out.")


@dataclass(frozen=True)
class QuantPlan:
    """The resolved options of one ``quantize`` / ``fake_quant`` call, before any data is
    read (shared by the numpy path and the device code, ``floatfmt.scaling.quantize_device``).

    ``kind`` (``"int"``, ``"float"``, ``"mx"``, ``"nvfp4"``), ``f`` (the element ``Format``,
    or the block format's name), ``tiled`` (group / 2-D block), ``mode`` (canonical
    rounding mode); for integer and float kinds also ``scheme``, ``granularity``,
    ``calibration``, ``symmetric``, ``narrow_range`` and ``margin``; ``options`` holds
    every option as given."""

    kind: str
    f: Any
    tiled: bool
    mode: str
    options: dict
    scheme: str = "symmetric"
    granularity: str = "tensor"
    calibration: str = "max"
    symmetric: bool = True
    narrow_range: bool = True
    margin: int = 0


def plan_quantize(fmt: FormatLike, options: dict) -> QuantPlan:
    """Resolve ``fmt``'s kind and check ``options`` (every keyword option of ``quantize``):
    ``ValueError`` / ``TypeError`` for an option that does not apply or is not valid."""
    kind, f = resolve_kind(fmt)
    o = options
    tiled = tiled_request(kind, f, o["granularity"], o["group_size"], o["block"])
    check_options(kind, f if isinstance(f, str) else f.name, o)
    mode = resolve_mode(o["rounding"])
    if kind in ("mx", "nvfp4"):
        return QuantPlan(kind, f, tiled, mode, o)
    scheme = choose("scheme", o["scheme"], _SCHEMES)
    margin = o["margin"]
    if not isinstance(margin, (int, np.integer)) or isinstance(margin, bool):
        raise TypeError(f"margin must be an integer (a power of two), not {type(margin).__name__}")
    symmetric = scheme == "symmetric"
    return QuantPlan(kind, f, tiled, mode, o, scheme,
                     choose("granularity", o["granularity"], _GRANULARITIES),
                     choose("calibration", o["calibration"], CALIBRATIONS), symmetric,
                     symmetric if o["narrow_range"] is None else o["narrow_range"], int(margin))


def _quantize(x, fmt, fake: bool, options: dict):
    """quantize (``fake``: fake_quant) with every option of ``quantize`` in ``options``:
    resolve the kind, reject options that do not apply, dispatch to the kind's scheme."""
    p = plan_quantize(fmt, options)
    kind, f, o, mode = p.kind, p.f, options, p.mode
    rng = make_rng(o["rng"]) if mode == "stochastic" else o["rng"]
    if kind == "mx":
        return _mx(x, f, fake, o["axis"], o["scale_rounding"], mode, rng)
    if kind == "nvfp4":
        v, frac, narrow, _ = intake(x)
        ax = normalize_axis(-1 if o["axis"] is None else o["axis"], v.ndim, "NVFP4 quantisation")
        q = nvfp4_quantize(v, frac, narrow, ax, mode, rng, o["tensor_scale"])
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
    q = _float(v, frac, sticky, narrow, f, rule, o["scale"], o["overflow"], mode, rng)
    return q.dequantize() if fake else q


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
    zp = channel_layout(zp.astype(np.int64), v, ax)
    qmin, qmax = (int(f.min), int(f.max)) if f.signed else (0, (1 << bits) - 1)
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
    else:
        sc = given_scale(scale, "scale", v, rule.axis)
    r = round_float_quotients(v, frac, sticky, narrow, sc, f, mode, overflow, rng)
    return QuantizedTensor(r, sc, 0, f.name, f, rule.granularity, rule.axis, scheme="symmetric")


_QUANTIZE_DEFAULTS = {k: v.default for k, v in inspect.signature(quantize).parameters.items()
                      if v.kind is v.KEYWORD_ONLY}


def _options(options: dict) -> dict:
    """Every keyword option of ``quantize``: its defaults updated by ``options``."""
    opts = dict(_QUANTIZE_DEFAULTS)
    unknown = set(options) - set(opts)
    if unknown:
        raise TypeError(f"fake_quant() got unexpected keyword argument(s) {sorted(unknown)}")
    opts.update(options)
    return opts


def _check_ste(ste: Any) -> None:
    if ste not in (None, "identity", "clipped"):
        raise ValueError(f"unknown ste {ste!r}. Valid: 'identity' (the default), 'clipped'")


def _device_fake_quant(x: Any, fmt: FormatLike = "int8", **options: Any) -> Any:
    """``fake_quant`` of a tensor the numpy kernels do not compute (``floatfmt.backend.dispatch``)."""
    opts = _options(options)
    return device_quantize(x, plan_quantize(fmt, opts), True, "fake_quant")


@tensor_entry("fake_quant", ("x",), device_impl=_device_fake_quant, ste=True)
def _fake_quant(x: Values, fmt: FormatLike = "int8", **options: Any) -> np.ndarray:
    """``fake_quant`` without ``ste`` (numpy path; tensors through ``floatfmt.backend.dispatch``)."""
    kind, _ = resolve_kind(fmt)
    if kind in ("mx", "int"):  # fused and chunked: quantize(x, fmt, **options).dequantize()
        return _quantize(x, fmt, True, _options(options))
    return quantize(x, fmt, **options).dequantize()


def fake_quant(x: Values, fmt: FormatLike = "int8", **options: Any) -> Values:
    """Quantise then dequantise (the forward pass of quantisation-aware training);
    same options as ``quantize``.  Returns float64 (it holds every result exactly);
    MX formats keep a float32 input's dtype (MX values of float32 data are float32 values).

    A tensor gives a tensor on its device.  ``ste``: for tensors that require grad, the
    gradient of x passes unchanged (None / ``"identity"``), or with ``"clipped"`` only
    where ``lo < x < hi`` for ``(lo, hi) = quantize(x, fmt, **options).limits()`` (0 where
    the value saturated or was clipped by the scale); no effect on arrays.

    >>> fake_quant([0.1, 0.26, -1.0], "int8").tolist()
    [0.10236220434308052, 0.25984251871705055, -0.9999999962747097]
    """
    ste = options.pop("ste", None)
    _check_ste(ste)
    if ste == "clipped" and is_tensor(x) and x.requires_grad:
        # the values of quantize(...).dequantize(), which carries the clipped gradient
        kind, _ = resolve_kind(fmt)
        t = namespace(x).t
        dtype = t.float32 if kind == "mx" and x.dtype == t.float32 else t.float64
        return quantize(x, fmt, ste="clipped", **options).dequantize(dtype)
    return _fake_quant(x, fmt, **options)


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
