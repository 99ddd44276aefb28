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

Inf and NaN under amax calibration (``calibration="max"``), per scheme:

* float formats (per tensor, channel, group or block): where the calibration set holds
  +-Inf the scale is 1.0, so that set is rounded unscaled and +-Inf saturates to +-max
  (Transformer Engine's current and block scaling: its amax keeps Inf, and
  ``compute_scale_from_amax`` returns 1 for an infinite amax); NaN is left out of the
  amax (as ``fmaxf`` leaves it out) and stays NaN;
* integer formats: +-Inf and NaN are left out of the amax; +-Inf then clamps to the
  ends of the code range; NaN is a ValueError (an integer format has no NaN);
* OCP MX: a block holding Inf or NaN gets the NaN scale (E8M0 0xFF), so every element
  of that block decodes to NaN (OCP MX v1.0: a NaN scale makes its block NaN);
* NVFP4: a ValueError (E2M1 elements and the E4M3 block scale hold no Inf).

    >>> quantize([np.inf, 1.0, -0.5], "fp8_e4m3").dequantize().tolist()
    [448.0, 1.0, -0.5]
    >>> q = quantize([0.5, -1.0, 0.25], "int8")
    >>> q.codes.tolist(), q.scale
    ([64, -127, 32], 0.007874015718698502)
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend.fpu import ieee_entry
from ..core.formats import FormatLike
from ..core.types import Overflow, RngLike, Values

from ..backend.namespace import is_tensor, namespace
from ..backend.dispatch import tensor_entry
from .tiles import tiled_request
from .quantize_schemes import quantize_array
from .quantize_schemes_fast import quantize_fast
from .quantized_tensor import QuantizedTensor, choose, resolve_kind
from ..core.rounding import resolve_mode
from .scale_convention import check_convention
from .scales import CALIBRATIONS

__all__ = ["quantize", "fake_quant", "CALIBRATIONS"]

_SCHEMES = ("symmetric", "asymmetric")
_GRANULARITIES = ("tensor", "channel", "group", "block")


# size: the docstring states every scheme's rule (most of the lines); the body hands them on
@tensor_entry("quantize", ("x", "scale", "zero_point"), portable=True, ste=True)
def quantize(x: Values, fmt: FormatLike = "int8", *, scheme: str = "symmetric",
             granularity: str = "tensor", axis: int | None = None, calibration: str = "max",
             percentile: float = 99.99, rounding: str = "nearest_even", scale: Any = None,
             zero_point: Any = None, margin: int = 0, pow2_scale: bool = False,
             narrow_range: bool | None = None, scale_rounding: str = "floor",
             overflow: Overflow = "saturate", tensor_scale: float | None = None,
             rng: RngLike = None, group_size: int | None = None,
             block: tuple[int, int] | None = None, ste: str | None = None,
             scale_convention: str = "exact") -> QuantizedTensor:
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
        (or ``tensor_scale=``); elements ``round_e2m1(x / (block * ts))``.  With
        ``scale_convention="te"``, Transformer Engine's fp32 steps instead:
        ``S_enc = fp32(2688 / amax)`` (1 for amax 0, ``FLT_MAX`` past it), block
        ``s_b = e4m3(fp32(amax_b * fp32(S_enc * fp32(1/6))))``, elements
        ``round_e2m1(fp32(x * e_b))``, ``e_b = fp32(1 / fp32(s_b * fp32(1 / S_enc)))``,
        ``tensor_scale`` kept as ``fp32(1 / S_enc)`` (``floatfmt.scaling.nvfp4_te``; round
        to nearest even or stochastic; ``tensor_scale=`` refused).  With ``"torchao"``,
        ``NVFP4Tensor``'s two-level divisions: ``ts = fp32(amax / 2688)`` (or
        ``tensor_scale=``, its ``per_tensor_scale``), ``s_b = e4m3(clamp(fp32(fp32(amax_b
        / 6) / ts), 2**-6, 448))``, elements ``round_e2m1(clamp(fp32(x / fp32(ts * s_b)),
        -6, 6))`` (``floatfmt.scaling.nvfp4_torchao``; nearest even; ValueError where
        torchao divides by 0, an all-zero tensor included).  Both read x as fp32 (an
        input fp32 cannot hold is rounded to it once; past its range: ValueError).

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
        at both ends for asymmetric), ``"mse"`` (clip range minimising the MSE); Inf, NaN: module docstring.
    scale, zero_point : give them instead of calibrating (numbers, or per-channel arrays);
        with an explicit zero point the codes span the format's whole range, as in
        ``torch.quantize_per_tensor``.
    pow2_scale : round the scale, calibrated or given, up to a power of two (0.3 -> 0.5).
    zero_point : a code of the format (uint8: 0..255); else a ValueError naming the range.
    scale_convention : float formats: ``"exact"`` (the rule above, one rounding of
        ``x / scale``), or ``"te"`` / ``"torchao"``: Transformer Engine's and torchao's
        ``s = fp32(max / amax)``, ``q = round(fp32(x * s))`` (two roundings), ``scale``
        kept as ``fp32(1 / s)``; the exact rules and sources: ``floatfmt.scaling.scale_convention``.
        ``nvfp4``: the same three names, each library's two-level NVFP4 (above).
        CPU tensors and numpy arrays (other devices and ``force_namespace``:
        NotImplementedError).
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
    return _run(x, fmt, False, "quantize", dict(
        scheme=scheme, granularity=granularity, axis=axis, calibration=calibration,
        percentile=percentile, rounding=rounding, scale=scale, zero_point=zero_point,
        margin=margin, pow2_scale=pow2_scale, narrow_range=narrow_range,
        scale_rounding=scale_rounding, overflow=overflow, tensor_scale=tensor_scale, rng=rng,
        group_size=group_size, block=block, scale_convention=scale_convention))



#: The options each kind of format takes besides ``axis``, ``rounding`` and ``rng`` (which
#: every kind takes).  Any other option given a value other than its default raises
#: ``ValueError``: it would change nothing, so it is almost certainly a mistake.
OPTIONS_BY_KIND = {
    "int": ("scheme", "granularity", "calibration", "percentile", "scale", "zero_point", "margin",
            "pow2_scale", "narrow_range", "group_size", "block"),
    "float": ("scheme", "granularity", "calibration", "percentile", "scale", "margin",
              "pow2_scale", "overflow", "group_size", "block", "scale_convention"),
    "mx": ("scale_rounding",),
    "nvfp4": ("tensor_scale", "scale_convention"),
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
    read (shared by the numpy kernels, ``floatfmt.scaling.quantize_schemes_fast``, and the
    reference over the array namespace, ``floatfmt.scaling.quantize_schemes``).

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


STRATEGIES = ("fast", "reference")


def _run(x, fmt, fake: bool, name: str, options: dict, strategy: str | None = None):
    """``quantize`` (``fake``: ``fake_quant``) with every option of ``quantize`` in
    ``options``: the plan (options checked once), then the one choice of implementation.
    ``strategy`` None picks ``"reference"`` (``quantize_schemes``, over the array
    namespace) when x, ``scale`` or ``zero_point`` is a tensor (the numpy kernels do not
    compute it: ``floatfmt.backend.dispatch`` hands CPU tensors over as numpy views), else
    ``"fast"`` (``quantize_schemes_fast``, the numpy kernels); the tests name a strategy
    to run both on numpy arrays."""
    p = plan_quantize(fmt, options)
    tensors = [is_tensor(a) for a in (x, options.get("scale"), options.get("zero_point"))]
    if strategy is None:
        strategy = "reference" if any(tensors) else "fast"
    if strategy == "fast":
        return quantize_fast(x, p, fake)
    if strategy != "reference":
        raise ValueError(f"unknown strategy {strategy!r}. Valid: {', '.join(STRATEGIES)}")
    if any(tensors) and not tensors[0]:
        raise TypeError(f"floatfmt.{name}: x is a {type(x).__name__} but scale / zero_point are "
                        "tensors; give x as a tensor on their device too")
    _host_only_convention(options, x, name, p.kind)
    return quantize_array(x, p, fake, name)


def _host_only_convention(opts: dict, x: Any, name: str, kind: str) -> None:
    """NVFP4's library scale conventions have numpy kernels only (numpy arrays, CPU
    tensors): NotImplementedError on the array-namespace path (other devices, and CPU
    tensors under ``force_namespace``), never the exact convention's bits instead.  (The
    per-tensor / per-channel FP8 conventions are written over the namespace.)"""
    if check_convention(opts.get("scale_convention", "exact")) != "exact" and kind == "nvfp4":
        where = f"{x.device.type} tensors" if is_tensor(x) else "arrays"
        raise NotImplementedError(
            f"floatfmt.{name} with scale_convention={opts['scale_convention']!r} has no "
            f"array-namespace implementation yet (here for {where}; CUDA tensors and CPU "
            "tensors under force_namespace take that path): it runs on numpy arrays and CPU "
            "tensors by the numpy kernels")


@tensor_entry("fake_quant", ("x",), portable=True, ste=True)
def _fake_quant(x: Values, fmt: FormatLike = "int8", **options: Any) -> np.ndarray:
    """``fake_quant`` without ``ste`` (tensors through ``floatfmt.backend.dispatch``):
    ``quantize(x, fmt, **options).dequantize()``, fused and chunked on numpy."""
    return _run(x, fmt, True, "fake_quant", _options(options))


@ieee_entry
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
        xp = namespace(x)
        f32 = xp.dtype_of("float32")
        dtype = f32 if kind == "mx" and x.dtype == f32 else xp.dtype_of("float64")
        return quantize(x, fmt, ste="clipped", **options).dequantize(dtype)
    return _fake_quant(x, fmt, **options)
