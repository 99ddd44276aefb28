"""``quantize`` and ``fake_quant`` on tensors of any device (CUDA), written over the array
namespace (torch ops on the tensor's device; torch is never imported here).

``floatfmt.backend.dispatch`` calls these (through ``floatfmt.scaling.quantize``) for tensors that
the numpy kernels do not compute: CUDA tensors, or CPU tensors under
``force_namespace``, which the tests use to prove them equal to the numpy path
element for element.  Every scheme of the numpy path is here, with its rules read
from the same places (``floatfmt.scaling.quantize.plan_quantize`` checks the options,
``floatfmt.scaling.scales`` / ``groupscale`` / ``blockscale`` state the scale rules):

* integers and floats per tensor / per channel (calibration ``"max"``,
  ``"percentile"`` and ``"mse"``; a given scale and zero point; ``pow2_scale``,
  ``margin``, ``narrow_range``, every overflow policy), group-wise and 2-D blocks;
* OCP MX (every ``scale_rounding``) and NVFP4.

Every rounding is the one rounding routine's (``rounding.round_values`` on tensors):
the fp32 scales, the zero points, and each quotient ``x / scale``, which is handed to
it as the float64 quotient truncated toward zero plus its remainder class
(``exact_quotient``, through ``ops_device.wide_quotient``: the operands' frexp
mantissas' quotient q = fl(a / b) placed by the sign of the exact residual a - q b from
Dekker's TwoProd, scaled back exactly, subnormal quotients and ones past the float64
range included, so every element format, fp64 and wide custom ones too, gets the
quotient rounded once).  As on numpy, a call whose scales are all powers of two and
quotients all normal divides directly.

Stochastic rounding draws from a ``torch.Generator`` (or an int seed) on the device,
for every scheme.  Quotients that float64 does not hold (scales that are not powers
of two, NVFP4's elements) go to the rounding routine as numpy's path hands them:
truncated toward zero with their exact remainder ``resid`` (``exact_quotient`` with
``fine``, through ``ops_device.wide_quotient``), so a quotient a fraction p of the way
between its neighbours rounds away with probability p.  MX, ``pow2_scale=True`` and a
scale of 1 give exact quotients (no remainder).

``calibration="mse"`` tries the same 40 candidate ranges as numpy
(``tensorscale.MSE_GRID``), fake-quantises with each by the rules here, and scores
each by its squared errors d * d (d = xq - x, float64) summed exactly
(``exact_device.exact_sum``) and rounded once: the score does not depend on the
order of summation, so every device picks numpy's range (the first smallest).
Under stochastic rounding the search and the final rounding draw from one
generator (an int seed makes one), so the range depends on the draws.

Every option of the numpy path runs here; nothing is copied to the host.
"""

# size: the device form of quantization's schemes (per tensor / channel with every
# calibration, tiled, MX, NVFP4) shares the private scale rules and exact quotients here
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..core.block_formats import get_block_format
from ..core.formats import Format, get_format
from ..backend.namespace import is_tensor, namespace
from .mx_nvfp4 import SCALE_ROUNDINGS, nvfp4_tensor_scale
from ..core.codec import values_to_codes
from ..arith.eft_device import exact_sum
from .tiles import tiled_layout
from ..arith.ops_device import wide_quotient
from .quantized_tensor import QuantizedTensor, choose, normalize_axis, width
from .quantized_tensor import tile_expand as expand_tiles
from ..core.rounding import STOCHASTIC, round_values
from .scales import MSE_GRID, WIDE_INT, check_zero_point, code_range, reduce_axes

__all__ = ["device_quantize", "exact_quotient"]

_FP32 = get_format("fp32")
_FP64 = get_format("fp64")
_INT53 = Format("int53", kind="int", bits=53)  # round(x / scale) before the clamp (as tensorscale)


def _no(what: str, device: Any, name: str) -> NotImplementedError:
    return NotImplementedError(f"floatfmt.{name} on {device}: {what} is not implemented on the "
                               "device yet (numpy arrays and CPU tensors support it)")


# ------------------------------------------------------------------ exact quotients
def _exponent(a: Any, t: Any) -> Any:
    """int64 e with |a| = m 2**e, m in [0.5, 1), for finite nonzero float64 a (from the
    exponent field; subnormals scaled by 2**64 first)."""
    a = a.abs()
    sub = a < 2.0 ** -1022
    e = ((t.where(sub, a * 2.0 ** 64, a).view(t.int64) >> 52) & 0x7FF) - 1022
    return t.where(sub, e - 64, e)


def _all_pow2(s: Any, t: Any) -> bool:
    """Whether every finite value of the positive tensor s is a power of two."""
    m = t.where(s < 2.0 ** -1022, s * 2.0 ** 64, s).view(t.int64) & ((1 << 52) - 1)
    return bool(((m == 0) | ~t.isfinite(s)).all())


def _rounded_by_scaling(v: Any, y: Any, t: Any) -> Any:
    """Where ``y``, v divided or multiplied by a power of two in float64, may have been
    rounded: v finite nonzero and |y| at most 2**-1022 (subnormal, zero, or rounded up
    to 2**-1022) or infinite."""
    a = y.abs()
    return ((a <= 2.0 ** -1022) | (a == float("inf"))) & t.isfinite(v) & (v != 0)


def exact_quotient(v: Any, s: Any, fine: bool = False) -> tuple[Any, Any]:
    """The exact quotients ``v / s`` (float64 tensors, s > 0 finite, broadcast) of any
    magnitude as (float64 truncated toward zero, uint8 remainder class 0..3), or with
    ``fine`` (stochastic rounding) (float64 truncated toward zero, int64 ``resid``:
    2**54 times the remainder in units of the truncated value's float64 ulp, rounded
    to odd; ``rounding.round_values``' ``resid``).  Both are those of
    ``eft.exact_quotient(v, s, fine)`` on numpy, computed by
    ``ops_device.wide_quotient``: the frexp mantissas' quotient placed by the sign of
    its exact residual (Dekker's TwoProd), scaled back by the exponent difference; a
    subnormal quotient truncated to a multiple of 2**-1074 with the class (or resid) of
    every bit below, one past the float64 range +-Inf with class 3
    (``exact_device.R_PAST``), which rounds as the finite value it stands for.

    When every scale is a power of two and every quotient a normal float64 number or a
    zero from a zero, the float64 quotient is exact: it is returned with None (as on
    numpy)."""
    xp = namespace(v)
    t = xp.t
    v, s = t.broadcast_tensors(v, s)
    d = v / s
    if _all_pow2(s, t) and not bool(_rounded_by_scaling(v, d, t).any()):
        return d, None  # a normal float64 quotient by a power of two is exact
    return wide_quotient(v, s, fine)


def _round_quotients(v: Any, s: Any, f: Format, mode: str, overflow: Any, rng: Any) -> Any:
    """round(v / s) to f, the quotient rounded once (``tensorscale`` on the device), for
    every format (fp64 included: quotients of any magnitude are exact); stochastic
    modes hand the routine the quotient's exact remainder (``resid``)."""
    if mode in STOCHASTIC:
        y, resid = exact_quotient(v, s, fine=True)
        return round_values(y, f, mode, overflow, rng=rng, resid=resid)
    y, cls = exact_quotient(v, s)
    return round_values(y, f, mode, overflow, rng=rng, sticky=cls)


# ------------------------------------------------------------------ scale rules (tensorscale)
def _fp32_scale(raw: Any, pow2: bool) -> Any:
    """``tensorscale.fp32_scale`` on a tensor (a Python float for a 0-d one)."""
    t = namespace(raw).t
    raw = raw.to(t.float64)
    raw = t.where((raw > 0) & t.isfinite(raw), raw, t.ones_like(raw))
    if pow2:
        s = round_values(raw, get_format("e11m0"), "up")
    else:
        s = round_values(raw, _FP32, "nearest_even", "saturate")
    s = t.where(s > 0, s, t.full_like(s, _FP32.smallest_subnormal))
    return float(s) if s.ndim == 0 else s


def _unit_where_infinite(sc: Any, inf: Any) -> Any:
    """``tensorscale.unit_scale_where_infinite`` on tensors: 1.0 where ``inf`` (1.0 where
    the calibration set holds +-Inf, 0.0 elsewhere, in the layout of ``sc``) is set."""
    t = namespace(inf).t
    if not bool((inf > 0).any()):
        return sc
    if not is_tensor(sc):
        return 1.0
    return t.where(inf > 0, t.ones_like(sc), sc)


def _tensor(a: Any, like: Any) -> Any:
    t = namespace(like).t
    return a if is_tensor(a) else t.as_tensor(a, dtype=t.float64, device=like.device)


def _int_params(lo: Any, hi: Any, f: Format, symmetric: bool, narrow_range: bool,
                pow2: bool) -> tuple[Any, Any, int, int]:
    """``tensorscale.int_scale_params`` on tensors: (scale, zero point, qmin, qmax); a 0-d
    range gives a Python float scale and int zero point."""
    t = namespace(lo).t
    n = width(f)
    qmin, qmax = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if f.signed else (0, (1 << n) - 1)
    if symmetric:
        if narrow_range:
            qmin += 1
        half: float = (1 << (n - 1)) - 1
        if not f.signed and not narrow_range:
            half = (qmax - qmin) / 2
        scale = _fp32_scale(t.maximum(lo.abs(), hi.abs()) / half, pow2)
        zp: Any = 0 if f.signed else 1 << (n - 1)
        if lo.ndim:
            zp = t.full(lo.shape, zp, dtype=t.int64, device=lo.device)
        return scale, zp, qmin, qmax
    lo = t.clamp(lo, max=0.0)
    hi = t.clamp(hi, min=0.0)
    scale = _fp32_scale((hi - lo) / (qmax - qmin), pow2)
    zq = qmin - round_values((lo / _tensor(scale, lo)).to(t.float64), WIDE_INT)
    zq = t.clamp(zq, qmin, qmax).to(t.int64)
    return scale, (int(zq) if zq.ndim == 0 else zq), qmin, qmax


def _percentile(a: Any, q: float, ax: Any) -> Any:
    """numpy's ``percentile`` (method "linear") of a over all elements (``ax`` None, a
    0-d result) or over every axis but ``ax`` (keepdims layout): the same virtual
    index, neighbours and interpolation formula, so the same bits."""
    t = namespace(a).t
    rows = a.reshape(1, -1) if ax is None else a.movedim(ax, 0).reshape(a.shape[ax], -1)
    srt = t.sort(rows, dim=1, stable=True).values
    n = srt.shape[1]
    vi = (n - 1) * (q / 100)
    if vi >= n - 1:
        prev = nxt = n - 1
        g = vi - (-1)
    else:
        prev = int(vi // 1)
        nxt, g = prev + 1, vi - prev
    lo, hi = srt[:, prev], srt[:, nxt]
    diff = hi - lo
    out = hi - diff * (1 - g) if g >= 0.5 else lo + diff * g
    if ax is None:
        return out.reshape(())
    return out.reshape([a.shape[ax] if i == ax else 1 for i in range(a.ndim)])


def _range(v: Any, granularity: str, ax: Any, calibration: str, percentile: Any,
           symmetric: bool) -> tuple[Any, Any]:
    """``tensorscale.calibrated_range`` on a tensor (calibrations max and percentile)."""
    t = namespace(v).t
    red = reduce_axes(v.ndim, ax, granularity)
    fin = t.where(t.isfinite(v), v, t.zeros_like(v))
    if calibration == "percentile" and not (isinstance(percentile, (int, float))
                                            and 0 < percentile <= 100):
        raise ValueError(f"percentile must be in (0, 100], not {percentile!r}")

    def reduce(a: Any, op: str) -> Any:
        if red is None:
            return getattr(a, op)()
        return getattr(t, op)(a, dim=red, keepdim=True) if red else a

    if fin.numel() == 0:
        zero = fin.sum() if red is None else (fin.sum(dim=red, keepdim=True) if red else fin)
        return zero, zero
    if calibration == "percentile":
        if symmetric:
            hi = _percentile(fin.abs(), percentile, ax)
            return -hi, hi
        return _percentile(fin, 100 - percentile, ax), _percentile(fin, percentile, ax)
    if symmetric:
        hi = reduce(fin.abs(), "amax")
        return -hi, hi
    return reduce(fin, "amin"), reduce(fin, "amax")


def _given_scale(scale: Any, v: Any, ax: Any) -> Any:
    """``tensorscale.given_scale`` on the device (a Python float, or a tensor laid out
    along ``ax``)."""
    t = namespace(v).t
    if is_tensor(scale):
        if scale.is_complex() or not (scale.is_floating_point() or scale.dtype in (
                t.int8, t.int16, t.int32, t.int64, t.uint8)):
            raise TypeError("scale must be a number or an array of numbers")
        s = scale.to(dtype=t.float64)
    else:  # a Python number or list, given on the host
        a = np.asarray(scale)
        if a.dtype.kind not in "fiu":
            raise TypeError("scale must be a number or an array of numbers")
        s = t.as_tensor(a.astype(np.float64), device=v.device)
    if bool((~(s > 0)).any()) or not bool(t.isfinite(s).all()):
        raise ValueError("scale must be positive and finite")
    s = _layout(s, v, ax)
    return float(s) if s.ndim == 0 else s


def _layout(a: Any, v: Any, ax: Any) -> Any:
    """``tensorscale.channel_layout``: a 1-D per-channel tensor along axis ``ax`` of v."""
    if a.ndim == 1 and ax is not None and v.ndim > 1:
        a = a.reshape([a.numel() if i == ax else 1 for i in range(v.ndim)])
    return a


# ------------------------------------------------------------------ the entry
def device_quantize(x: Any, p: Any, fake: bool, name: str) -> Any:
    """``quantize`` (``fake``: ``fake_quant``) of the tensor x on its device by the plan
    ``p`` (``floatfmt.scaling.quantize.plan_quantize``); returns a ``QuantizedTensor`` of
    tensors, or the dequantised tensor."""
    if not is_tensor(x):
        raise TypeError(f"floatfmt.{name}: x is a {type(x).__name__} but scale / zero_point are "
                        "tensors; give x as a tensor on their device too")
    xp = namespace(x)
    v, dtype = xp.intake(x)
    o = p.options
    if p.kind == "mx":
        return _mx(v, dtype, p, fake)
    if p.kind == "nvfp4":
        q = _nvfp4(v, p)
        return _fake_of(q, fake)
    if p.calibration == "mse" and p.mode in STOCHASTIC:
        # one generator for the search's roundings and the final one (an int seed once)
        p = replace(p, options={**p.options, "rng": xp.generator(p.options["rng"], v)})
    f = p.f
    if p.tiled:
        return _fake_of(_tiled(v, p), fake)
    ax = None
    if p.granularity == "channel":
        ax = normalize_axis(0 if o["axis"] is None else o["axis"], v.ndim, "per-channel quantisation")
    if f.kind == "int":
        return _fake_of(_int(v, p, ax), fake)
    if not p.symmetric:
        raise ValueError("float formats are quantised symmetrically (scheme='symmetric')")
    return _fake_of(_float(v, p, ax), fake)


def _rng(p: Any) -> Any:
    """The ``rng`` option for stochastic modes (a torch.Generator, an int seed or None), else None."""
    return p.options["rng"] if p.mode in STOCHASTIC else None


def _fake_of(q: QuantizedTensor, fake: bool) -> Any:
    return q.dequantize() if fake else q


def _no_nan(v: Any) -> None:
    if bool(namespace(v).t.isnan(v).any()):
        raise ValueError("integer formats have no NaN; the input holds NaN")


def _int_codes(v: Any, sc: Any, zp: Any, qmin: int, qmax: int, mode: str, rng: Any) -> Any:
    """``tensorscale.round_int_quotients``: clamp(round(v / sc) + zp, qmin, qmax)."""
    t = namespace(v).t
    _no_nan(v)
    n = _round_quotients(v, _tensor(sc, v), _INT53, mode, "saturate", rng)
    if is_tensor(zp) and bool((zp != 0).any()) or not is_tensor(zp) and zp:
        n = n + zp
    return t.clamp(n, qmin, qmax)


def _int(v: Any, p: Any, ax: Any) -> QuantizedTensor:
    """Integer formats per tensor / per channel (``quantization._int``)."""
    t = namespace(v).t
    o, f = p.options, p.f
    scale = o["scale"]
    if scale is not None and not isinstance(scale, str):
        bits = width(f)
        sc = _given_scale(scale, v, ax)
        default_zp = 0 if (f.signed or not p.symmetric) else 1 << (bits - 1)
        zp_given = o["zero_point"]
        zp: Any = zp_given if zp_given is not None else default_zp
        if is_tensor(zp):
            if zp.is_floating_point() or zp.is_complex() or zp.dtype == t.bool:
                raise TypeError("zero_point must be an integer or an integer array")
            zpt = zp
        else:
            a = np.asarray(zp)
            if a.dtype.kind not in "iu":
                raise TypeError("zero_point must be an integer or an integer array")
            zpt = t.as_tensor(a.astype(np.int64), device=v.device)
        if zp_given is not None and zpt.numel():
            check_zero_point(int(zpt.min()), int(zpt.max()), f)
        zpt = _layout(zpt.to(dtype=t.int64), v, ax)
        zp = int(zpt) if zpt.ndim == 0 else zpt
        qmin, qmax = code_range(f)
        if o["pow2_scale"]:  # pow2_scale applies to a given scale too (quantization._int)
            sc = _fp32_scale(_tensor(sc, v), True)
        if f.signed and p.symmetric and p.narrow_range and zp_given is None:
            qmin += 1
    else:
        if scale is not None and scale != "amax":
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        lo, hi = _calibrate(v, p, ax, p.symmetric)
        sc, zp, qmin, qmax = _int_params(lo, hi, f, p.symmetric, p.narrow_range, bool(o["pow2_scale"]))
        if p.margin:
            sc = _fp32_scale(_tensor(sc, v) * 2.0 ** p.margin, bool(o["pow2_scale"]))
    n = _int_codes(v, sc, zp, qmin, qmax, p.mode, _rng(p))
    return QuantizedTensor(n, sc, zp, f.name, f, p.granularity, ax, None, None, None, qmin, qmax,
                           p.scheme)


def _float(v: Any, p: Any, ax: Any) -> QuantizedTensor:
    """Float formats per tensor / per channel (``quantization._float``)."""
    o, f = p.options, p.f
    scale = o["scale"]
    if scale is None:
        scale = "amax" if width(f) <= 8 else 1.0
    if isinstance(scale, str):
        if scale != "amax":
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        _, hi = _calibrate(v, p, ax, True)
        sc = _fp32_scale(hi * 2.0 ** p.margin / f.max, bool(o["pow2_scale"]))
        if p.calibration == "max" and v.numel():  # tensorscale.unit_scale_where_infinite
            red = reduce_axes(v.ndim, ax, p.granularity)
            inf = namespace(v).t.isinf(v).to(v.dtype if v.is_floating_point() else namespace(v).t.float64)
            sc = _unit_where_infinite(sc, inf.amax() if red is None else inf.amax(dim=red, keepdim=True))
    else:
        sc = _given_scale(scale, v, ax)
        if o["pow2_scale"]:
            sc = _fp32_scale(_tensor(sc, v), True)
    if not is_tensor(sc) and sc == 1.0:
        r = round_values(v, f, p.mode, o["overflow"], rng=_rng(p))
    else:
        r = _round_quotients(v, _tensor(sc, v), f, p.mode, o["overflow"], _rng(p))
    return QuantizedTensor(r, sc, 0, f.name, f, p.granularity, ax, scheme="symmetric")


# ------------------------------------------------------------------ calibration "mse"
def _calibrate(v: Any, p: Any, ax: Any, symmetric: bool) -> tuple[Any, Any]:
    """(lo, hi) by the plan's calibration (``quantization._ScaleRule.range``)."""
    if p.calibration == "mse":
        return _mse_range(v, p, ax, symmetric)
    return _range(v, p.granularity, ax, p.calibration, p.options["percentile"], symmetric)


def _mse_range(v: Any, p: Any, ax: Any, symmetric: bool) -> tuple[Any, Any]:
    """``tensorscale.mse_range`` on the device: the candidates ``(lo * t, hi * t)`` for t
    in ``MSE_GRID`` in order, each fake-quantised by this module's own rules and scored
    by its exact sum of squared errors (``_squared_error_sums``); the first smallest wins."""
    t = namespace(v).t
    lo0, hi0 = _range(v, p.granularity, ax, "max", None, symmetric)
    if v.numel() == 0:
        return lo0, hi0
    best: Any = None
    for c in MSE_GRID:
        lo, hi = lo0 * c, hi0 * c
        err = _squared_error_sums(_fake_range(v, p, lo, hi, symmetric), v, ax)
        if best is None:
            best = (err, lo, hi)
        else:
            better = err < best[0]
            best = tuple(t.where(better, new, old) for new, old in zip((err, lo, hi), best))
    return best[1], best[2]


def _fake_range(v: Any, p: Any, lo: Any, hi: Any, symmetric: bool) -> Any:
    """``tensorscale._fake_with_range``: v fake-quantised with the range (lo, hi) (no
    margin; floats saturate), float64."""
    t = namespace(v).t
    f, pow2 = p.f, bool(p.options["pow2_scale"])
    if f.kind == "int":
        sc, zp, qmin, qmax = _int_params(lo, hi, f, symmetric, p.narrow_range, pow2)
        return (_int_codes(v, sc, zp, qmin, qmax, p.mode, _rng(p)) - zp) * sc
    sc = _fp32_scale(t.maximum(lo.abs(), hi.abs()) / f.max, pow2)
    if not is_tensor(sc) and sc == 1.0:
        return round_values(v, f, p.mode, "saturate", rng=_rng(p))
    return _round_quotients(v, _tensor(sc, v), f, p.mode, "saturate", _rng(p)) * sc


def _squared_error_sums(xq: Any, v: Any, ax: Any) -> Any:
    """``tensorscale.squared_error_sums``: d * d (d = xq - v, float64) summed exactly over
    every axis but ``ax`` (all: None) and rounded once to float64 (nearest even)."""
    d = xq - v
    d = d * d
    T = d.reshape(-1, 1) if ax is None else d.movedim(ax, -1).reshape(-1, d.shape[ax])
    s, cls = exact_sum(T, "nearest_even")
    s = round_values(s, _FP64, "nearest_even", sticky=cls)
    return s.reshape(()) if ax is None else _layout(s, v, ax)


# ------------------------------------------------------------------ group / 2-D blocks
def _tile_reduce(a: Any, tile: tuple, op: str) -> Any:
    """``op`` (``"amax"`` / ``"amin"``) over each tile of a, zero-padded at the edges
    (``groupscale._tile_reduce``)."""
    t = namespace(a).t
    nt = tuple(-(-d // k) for d, k in zip(a.shape, tile))
    full = tuple(n * k for n, k in zip(nt, tile))
    if full != tuple(a.shape):
        pad = t.zeros(full, dtype=a.dtype, device=a.device)
        pad[tuple(slice(0, d) for d in a.shape)] = a
        a = pad
    a = a.reshape(tuple(x for n, k in zip(nt, tile) for x in (n, k)))
    return getattr(t, op)(a, dim=tuple(range(1, 2 * len(tile), 2)))


def _tiled(v: Any, p: Any) -> QuantizedTensor:
    """Group-wise / 2-D block quantisation (``groupscale.quantize_tiled``)."""
    t = namespace(v).t
    o, f = p.options, p.f
    tile, ax = tiled_layout(tuple(v.shape), f, p.granularity, o["group_size"], o["block"],
                            o["axis"], p.symmetric, p.calibration, o["scale"], o["zero_point"])
    fin = t.where(t.isfinite(v), v, t.zeros_like(v))
    if p.symmetric:
        hi = _tile_reduce(fin.abs(), tile, "amax")
        lo = -hi
    else:
        lo, hi = _tile_reduce(fin, tile, "amin"), _tile_reduce(fin, tile, "amax")
    label = "group" if p.granularity == "group" else "block2d"
    size = int(o["group_size"]) if p.granularity == "group" else tile[-2:]
    pow2 = bool(o["pow2_scale"])
    shape = tuple(v.shape)
    if f.kind == "int":
        sc, zp, qmin, qmax = _int_params(lo, hi, f, p.symmetric, p.narrow_range, pow2)
        if p.margin:
            sc = _fp32_scale(_tensor(sc, v) * 2.0 ** p.margin, pow2)
        n = _int_codes(v, expand_tiles(_tensor(sc, v), tile, shape),
                       expand_tiles(zp, tile, shape) if is_tensor(zp) else zp, qmin, qmax, p.mode,
                       _rng(p))
        return QuantizedTensor(n, sc, zp, f.name, f, label, ax, size, None, None, qmin, qmax,
                               p.scheme, block_shape=tile)
    sc = _fp32_scale(hi * 2.0 ** p.margin / f.max, pow2)
    if v.numel():  # a tile whose amax is infinite: scale 1 (groupscale.quantize_tiled)
        sc = _unit_where_infinite(sc, _tile_reduce(t.isinf(v).to(t.float64), tile, "amax"))
    r = _round_quotients(v, expand_tiles(_tensor(sc, v), tile, shape), f, p.mode, o["overflow"],
                         _rng(p))
    return QuantizedTensor(r, sc, 0, f.name, f, label, ax, size, scheme=p.scheme, block_shape=tile)


# ------------------------------------------------------------------ MX and NVFP4 blocks
def _blocks(v: Any, axis: int, bs: int) -> tuple[Any, tuple]:
    """``quantized.split_blocks`` on a tensor: (rows of bs, (lead shape, n, blocks))."""
    t = namespace(v).t
    xm = v.movedim(axis, -1)
    n = xm.shape[-1]
    nb = -(-n // bs)
    if nb * bs != n:
        pad = t.zeros(tuple(xm.shape[:-1]) + (nb * bs - n,), dtype=xm.dtype, device=xm.device)
        xm = t.cat([xm, pad], dim=-1)
    lead = tuple(xm.shape[:-1])
    return xm.reshape(_prod(lead) * nb, bs), (lead, n, nb)


def _unblocks(rows: Any, meta: tuple, axis: int) -> Any:
    lead, n, nb = meta
    out = rows.reshape(lead + (nb * rows.shape[1],))
    if out.shape[-1] != n:
        out = out[..., :n]
    return out.movedim(-1, axis)


def _prod(shape: tuple) -> int:
    r = 1
    for d in shape:
        r *= d
    return r


def _per_block(a: Any, meta: tuple, axis: int) -> Any:
    lead, _, nb = meta
    return a.reshape(lead + (nb,)).movedim(-1, axis)


def _shared_exponent(a: Any, name: str, mode: str) -> Any:
    """``blockscale.mx_shared_exponent`` of block amaxes a >= 0 (float64 tensor; NaN: a
    NaN scale)."""
    xp = namespace(a)
    t = xp.t
    bf = get_block_format(name)
    if mode == "even":
        a = round_values(a, get_format(f"e11m{bf.element_mbits}"), "nearest_away")
    ok = t.isfinite(a) & (a != 0)
    e = _exponent(t.where(ok, a, t.ones_like(a)), t)
    E = e - 1 - bf.emax_elem
    if mode == "ceil":
        E = E + (xp.ldexp(t.where(ok, a, t.ones_like(a)), -(e - 1)) != 1.0).to(t.int64)
    elif mode == "rceil":
        E = E + (xp.ldexp(t.where(ok, a, t.ones_like(a)), -E) > bf.element_max).to(t.int64)
    Ef = t.where(a == 0, -127.0, t.clamp(E, min=-127).to(t.float64))
    return t.where(t.isfinite(a) & (Ef <= 127), Ef, t.full_like(Ef, float("nan")))


def _mx(v: Any, dtype: Any, p: Any, fake: bool) -> Any:
    """OCP MX (``blockscale.mx_quantize``): blocks of 32 along axis share 2**E (E8M0)."""
    xp = namespace(v)
    t = xp.t
    o, name = p.options, p.f
    sr = choose("scale_rounding", o["scale_rounding"], SCALE_ROUNDINGS)
    if v.ndim == 0:
        raise ValueError("MX quantisation needs an array with at least one dimension")
    axis = normalize_axis(-1 if o["axis"] is None else o["axis"], v.ndim, "MX quantisation")
    bf = get_block_format(name)
    elem, bs, shift = bf.element_format, bf.block_size, bf.element_shift
    rows, meta = _blocks(v, axis, bs)
    amax = rows.abs().amax(dim=1) if rows.shape[0] else rows.new_zeros((0,))
    E = _shared_exponent(amax, name, sr)
    bad = t.isnan(E)
    Ek = t.where(bad, t.zeros_like(E), E).to(t.int64)
    y = rows * xp.pow2(shift - Ek)[:, None]
    y = t.where(bad[:, None], t.zeros_like(y), y)
    # products float64 may have rounded: a signed zero and class 1 (blockscale.settle_tiny)
    tiny = _rounded_by_scaling(rows, y, t) & ~bad[:, None]
    y = t.where(tiny, t.copysign(t.zeros_like(y), rows.to(y.dtype)), y)
    rem = {"resid" if p.mode in STOCHASTIC else "sticky":
           tiny.to(t.int64 if p.mode in STOCHASTIC else t.uint8)} if bool(tiny.any()) else {}
    r = round_values(y, elem, p.mode, "saturate", rng=_rng(p), **rem)
    if fake:
        out = r * xp.pow2(Ek - shift)[:, None]
        out = t.where(bad[:, None], t.full_like(out, float("nan")), out)
        if dtype == t.float32:
            out = out.to(t.float32)  # exact: MX values of float32 data are float32 values
        return _unblocks(out, meta, axis)
    q = r * 2.0 ** -shift if shift else r
    scale = t.where(bad, t.full_like(E, float("nan")), xp.pow2(Ek))
    codes = t.where(bad, 255, Ek + 127).to(t.uint8)
    return QuantizedTensor(
        elements=_unblocks(q, meta, axis), scale=_per_block(scale, meta, axis), zero_point=0,
        fmt=name, element_format=elem, granularity="block", axis=axis, block_size=bs,
        scale_codes=_per_block(codes, meta, axis), scheme="symmetric")


def _nvfp4(v: Any, p: Any) -> QuantizedTensor:
    """NVFP4 (``blockscale.nvfp4_quantize``): blocks of 16, an E4M3 block scale
    ``amax / (6 ts)`` rounded once, an fp32 tensor scale ts, E2M1 elements."""
    t = namespace(v).t
    o = p.options
    bf = get_block_format("nvfp4")
    elem, bs, sfmt = bf.element_format, bf.block_size, bf.scale_format
    if v.ndim == 0:
        raise ValueError("NVFP4 quantisation needs an array with at least one dimension")
    axis = normalize_axis(-1 if o["axis"] is None else o["axis"], v.ndim, "NVFP4 quantisation")
    if not bool(t.isfinite(v).all()):
        raise ValueError("NVFP4 has no NaN or Inf encoding; the input holds non-finite values")
    rows, meta = _blocks(v, axis, bs)
    amax_b = rows.abs().amax(dim=1) if rows.shape[0] else rows.new_zeros((0,))
    ts = nvfp4_tensor_scale(float(amax_b.max()) if amax_b.numel() else 0.0, o["tensor_scale"])
    bscale = _round_quotients(amax_b, _tensor(elem.max * ts, amax_b), sfmt, "nearest_even",
                              "saturate", None)
    denom = bscale * ts  # E4M3 * fp32: exact
    zero = denom == 0
    qv = _round_quotients(rows, t.where(zero, t.ones_like(denom), denom)[:, None], elem, p.mode,
                          "saturate", _rng(p))
    qv = t.where(zero[:, None], t.zeros_like(qv), qv)
    return QuantizedTensor(
        elements=_unblocks(qv, meta, axis), scale=_per_block(bscale, meta, axis), zero_point=0,
        fmt="nvfp4", element_format=elem, granularity="block", axis=axis, block_size=bs,
        scale_codes=_per_block(values_to_codes(bscale, sfmt), meta, axis), tensor_scale=ts,
        scheme="symmetric")
