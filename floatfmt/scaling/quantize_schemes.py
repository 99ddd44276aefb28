"""``quantize`` and ``fake_quant``, every scheme written once over the array namespace
``xp`` (``floatfmt.backend.namespace``): the reference of the rules, which runs on numpy
arrays and on tensors of any device alike (torch is never imported or called here).

``floatfmt.scaling.quantize`` chooses, in one place (``quantize._run``): numpy arrays
(and CPU tensors, viewed as numpy arrays by ``floatfmt.backend.dispatch``) take the
numpy kernels of ``floatfmt.scaling.quantize_schemes_fast``, which hold the same rules
with chunked, in-place and Fraction-exact paths; tensors on other devices (CUDA, or
CPU under ``force_namespace``) take the functions here.  ``tests/test_quantize_schemes.py``
runs both on numpy arrays and requires the same bits, scheme by scheme.  The options are
checked once (``floatfmt.scaling.quantize.plan_quantize``); the scale rules are those of
``floatfmt.scaling.scales`` / ``tiles`` / ``mx_nvfp4``:

* integers and floats per tensor / per channel (calibration ``"max"``,
  ``"percentile"`` and ``"mse"``; a given scale and zero point; ``pow2_scale``,
  ``margin``, ``narrow_range``, every overflow policy), group-wise and 2-D blocks;
* OCP MX (every ``scale_rounding``) and NVFP4.

Every rounding is the one rounding routine's (``rounding.round_values``): the fp32
scales, the zero points, and each quotient ``x / scale``, which is handed to it as the
float64 quotient truncated toward zero plus its remainder class (``exact_quotient``:
the exact quotient of any magnitude, subnormal quotients and ones past the float64
range included, so every element format, fp64 and wide custom ones too, gets the
quotient rounded once).  A call whose scales are all powers of two and quotients all
normal divides directly.  Stochastic rounding hands the routine the quotient's exact
remainder (``resid``), so a quotient a fraction p of the way between its neighbours
rounds away with probability p; it draws from the array's generator (a
``numpy.random.Generator`` or a ``torch.Generator`` on the tensor's device; an int seed
makes one).

``calibration="mse"`` tries the 40 candidate ranges of ``scales.MSE_GRID``,
fake-quantises with each by the rules here, and scores each by its squared errors
d * d (d = xq - x, float64) summed exactly and rounded once: the score does not
depend on the order of summation, so every device picks the same range (the first
smallest).  Under stochastic rounding the search and the final rounding draw from one
generator.

The exact quotient and the exact column sums are two kernels chosen by namespace here
(``_quotient_kernel``, ``_column_sums``): numpy's fast ones (``eft``, ``scales.exact_sums``)
and the rules over the namespace (``residuals.wide_quotient``, ``limbs.limb_sum``), the
named strategies of one rule that ``tests/test_arith_strategies.py`` proves equal on numpy.
"""

# size: every scheme (per tensor / channel with every calibration, tiled, MX, NVFP4) shares
# the private scale rules and exact quotients here
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..core.block_formats import get_block_format
from ..core.formats import Format, get_format
from ..backend.namespace import is_tensor, namespace
from .mx_nvfp4 import SCALE_ROUNDINGS, nvfp4_tensor_scale
from ..core.codec import values_to_codes
from ..arith.eft import exact_quotient as _numpy_exact_quotient
from ..arith.limbs import limb_sum as exact_sum
from .tiles import tiled_layout
from ..arith.residuals import wide_quotient
from .quantized_tensor import (QuantizedTensor, block_scale_layout, choose, normalize_axis,
                               split_blocks, tile_expand, unsplit_blocks, width)
from ..core.rounding import STOCHASTIC, round_values
from .scale_convention import check_convention, library_elements, library_scale, library_scale_inverse, library_scale_of
from .scales import (MSE_GRID, WIDE_INT, check_zero_point, code_range, exact_sums, reduce_axes,
                     fp32_scale as _fp32_scale)

__all__ = ["quantize_array", "exact_quotient"]

_FP32 = get_format("fp32")
_FP64 = get_format("fp64")
_INT53 = Format("int53", kind="int", bits=53)  # round(x / scale) before the clamp (as scales)


# ------------------------------------------------------------------ exact quotients
def _exponent(a: Any, xp: Any) -> Any:
    """int64 e with |a| = m 2**e, m in [0.5, 1), for finite nonzero float64 a (from the
    exponent field; subnormals scaled by 2**64 first)."""
    a = xp.abs(a)
    sub = a < 2.0 ** -1022
    e = ((xp.bits(xp.where(sub, a * 2.0 ** 64, a)) >> 52) & 0x7FF) - 1022
    return xp.where(sub, e - 64, e)


def _all_pow2(s: Any, xp: Any) -> bool:
    """Whether every finite value of the positive array s is a power of two."""
    m = xp.bits(xp.where(s < 2.0 ** -1022, s * 2.0 ** 64, s)) & ((1 << 52) - 1)
    return xp.all((m == 0) | ~xp.isfinite(s))


def _rounded_by_scaling(v: Any, y: Any, xp: Any) -> Any:
    """Where ``y``, v divided or multiplied by a power of two in float64, may have been
    rounded: v finite nonzero and |y| at most 2**-1022 (subnormal, zero, or rounded up
    to 2**-1022) or infinite."""
    a = xp.abs(y)
    return ((a <= 2.0 ** -1022) | (a == float("inf"))) & xp.isfinite(v) & (v != 0)


def _quotient_kernel(v: Any, s: Any, fine: bool, xp: Any) -> tuple[Any, Any]:
    """The exact quotient's kernel of the namespace (``eft.exact_quotient`` on numpy,
    ``residuals.wide_quotient`` on tensors: the same (t, class / resid))."""
    if xp.name == "numpy":
        t, c = _numpy_exact_quotient(v, s, fine)
        if c is None:
            c = np.zeros(t.shape, np.int64 if fine else np.uint8)
        return t, c
    return wide_quotient(v, s, fine)


def exact_quotient(v: Any, s: Any, fine: bool = False) -> tuple[Any, Any]:
    """The exact quotients ``v / s`` (float64 arrays, s > 0 finite, broadcast) of any
    magnitude as (float64 truncated toward zero, uint8 remainder class 0..3), or with
    ``fine`` (stochastic rounding) (float64 truncated toward zero, int64 ``resid``:
    2**54 times the remainder in units of the truncated value's float64 ulp, rounded
    to odd; ``rounding.round_values``' ``resid``): those of ``eft.exact_quotient(v, s,
    fine)``; a subnormal quotient truncated to a multiple of 2**-1074 with the class (or
    resid) of every bit below, one past the float64 range +-Inf with class 3, which
    rounds as the finite value it stands for.

    When every scale is a power of two and every quotient a normal float64 number or a
    zero from a zero, the float64 quotient is exact: it is returned with None."""
    xp = namespace(v)
    v, s = xp.broadcast(v, s)
    d = v / s
    if _all_pow2(s, xp) and not xp.any(_rounded_by_scaling(v, d, xp)):
        return d, None  # a normal float64 quotient by a power of two is exact
    return _quotient_kernel(v, s, fine, xp)


def _round_quotients(v: Any, s: Any, f: Format, mode: str, overflow: Any, rng: Any) -> Any:
    """round(v / s) to f, the quotient rounded once, for every format (fp64 included:
    quotients of any magnitude are exact); stochastic modes hand the routine the
    quotient's exact remainder (``resid``)."""
    if mode in STOCHASTIC:
        y, resid = exact_quotient(v, s, fine=True)
        return round_values(y, f, mode, overflow, rng=rng, resid=resid)
    y, cls = exact_quotient(v, s)
    return round_values(y, f, mode, overflow, rng=rng, sticky=cls)


# ------------------------------------------------------------------ scale rules (scales)
def _unit_where_infinite(sc: Any, inf: Any) -> Any:
    """``scales.unit_scale_where_infinite``: 1.0 where ``inf`` (1.0 where the calibration
    set holds +-Inf, 0.0 elsewhere, in the layout of ``sc``) is set."""
    xp = namespace(inf)
    if not xp.any(inf > 0):
        return sc
    if not hasattr(sc, "ndim"):  # a Python float: one scale
        return 1.0
    return xp.where(inf > 0, 1.0, sc)


def _array(a: Any, like: Any) -> Any:
    """a (an array or a Python number) as a float64 array of ``like``'s namespace."""
    return namespace(like).asfloat(a, like)


def _int_params(lo: Any, hi: Any, f: Format, symmetric: bool, narrow_range: bool,
                pow2: bool) -> tuple[Any, Any, int, int]:
    """``scales.int_scale_params`` over xp: (scale, zero point, qmin, qmax); a 0-d range
    gives a Python float scale and int zero point."""
    xp = namespace(lo)
    n = width(f)
    qmin, qmax = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if f.signed else (0, (1 << n) - 1)
    if symmetric:
        if narrow_range:
            qmin += 1
        half: float = (1 << (n - 1)) - 1
        if not f.signed and not narrow_range:
            half = (qmax - qmin) / 2
        scale = _fp32_scale(xp.maximum(xp.abs(lo), xp.abs(hi)) / half, pow2)
        zp: Any = 0 if f.signed else 1 << (n - 1)
        if lo.ndim:
            zp = xp.asint(np.full(lo.shape, zp, np.int64), lo)
        return scale, zp, qmin, qmax
    lo = xp.clip(lo, None, 0.0)
    hi = xp.clip(hi, 0.0, None)
    scale = _fp32_scale((hi - lo) / (qmax - qmin), pow2)
    zq = qmin - round_values(xp.asfloat(lo / _array(scale, lo)), WIDE_INT)
    zq = xp.asint(xp.clip(zq, qmin, qmax))
    return scale, (int(zq) if zq.ndim == 0 else zq), qmin, qmax


def _percentile(a: Any, q: float, ax: Any) -> Any:
    """numpy's ``percentile`` (method "linear") of a over all elements (``ax`` None, a
    0-d result) or over every axis but ``ax`` (keepdims layout): the same virtual
    index, neighbours and interpolation formula, so the same bits."""
    xp = namespace(a)
    rows = a.reshape(1, -1) if ax is None else xp.moveaxis(a, ax, 0).reshape(a.shape[ax], -1)
    srt = xp.sort(rows, 1)
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
    """``scales.calibrated_range`` over xp (calibrations max and percentile)."""
    xp = namespace(v)
    red = reduce_axes(v.ndim, ax, granularity)
    fin = xp.where(xp.isfinite(v), v, 0.0)
    if calibration == "percentile" and not (isinstance(percentile, (int, float))
                                            and 0 < percentile <= 100):
        raise ValueError(f"percentile must be in (0, 100], not {percentile!r}")

    def reduce(a: Any, op: str) -> Any:
        if red is None:
            return getattr(xp, op)(a)
        return getattr(xp, op)(a, red, True) if red else a

    if xp.size(fin) == 0:
        if red is None:
            zero = xp.zeros_as((), fin)
        else:
            zero = xp.zeros_as(tuple(1 if i in red else d for i, d in enumerate(fin.shape)), fin)
        return zero, zero
    if calibration == "percentile":
        if symmetric:
            hi = _percentile(xp.abs(fin), percentile, ax)
            return -hi, hi
        return _percentile(fin, 100 - percentile, ax), _percentile(fin, percentile, ax)
    if symmetric:
        hi = reduce(xp.abs(fin), "amax")
        return -hi, hi
    return reduce(fin, "amin"), reduce(fin, "amax")


def _given_scale(scale: Any, v: Any, ax: Any) -> Any:
    """``scales.given_scale`` over xp (a Python float, or an array laid out along
    ``ax``)."""
    xp = namespace(v)
    if is_tensor(scale):
        if xp.dtype_kind(scale) not in "fiu":
            raise TypeError("scale must be a number or an array of numbers")
        s = xp.asfloat(scale)
    else:  # a Python number or list, given on the host
        a = np.asarray(scale)
        if a.dtype.kind not in "fiu":
            raise TypeError("scale must be a number or an array of numbers")
        s = xp.asfloat(a.astype(np.float64), v)
    if xp.any(~(s > 0)) or not xp.all(xp.isfinite(s)):
        raise ValueError("scale must be positive and finite")
    s = _layout(s, v, ax)
    return float(s) if s.ndim == 0 else s


def _layout(a: Any, v: Any, ax: Any) -> Any:
    """``scales.channel_layout``: a 1-D per-channel array along axis ``ax`` of v."""
    if a.ndim == 1 and ax is not None and v.ndim > 1:
        a = a.reshape([a.shape[0] if i == ax else 1 for i in range(v.ndim)])
    return a


# ------------------------------------------------------------------ the entry
def quantize_array(x: Any, p: Any, fake: bool, name: str) -> Any:
    """``quantize`` (``fake``: ``fake_quant``) of the array x by the plan ``p``
    (``floatfmt.scaling.quantize.plan_quantize``); returns a ``QuantizedTensor`` of arrays
    of x's namespace, or the dequantised array."""
    if not is_tensor(x) and not isinstance(x, np.ndarray):
        raise TypeError(f"floatfmt.{name}: x is a {type(x).__name__} but scale / zero_point are "
                        "tensors; give x as a tensor on their device too")
    xp = namespace(x)
    v, dtype = xp.intake(x)
    o = p.options
    if p.mode in STOCHASTIC and (p.calibration == "mse" or xp.name == "numpy"):
        # one generator for the search's roundings and the final one (an int seed once;
        # numpy: one numpy Generator for every rounding of the call)
        p = replace(p, options={**p.options, "rng": xp.generator(p.options["rng"], v)})
    if p.kind == "mx":
        return _mx(v, dtype, p, fake)
    if p.kind == "nvfp4":
        q = _nvfp4(v, p)
        return _fake_of(q, fake)
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
    """The ``rng`` option for stochastic modes (a generator, an int seed or None), else None."""
    return p.options["rng"] if p.mode in STOCHASTIC else None


def _fake_of(q: QuantizedTensor, fake: bool) -> Any:
    return q.dequantize() if fake else q


def _no_nan(v: Any) -> None:
    xp = namespace(v)
    if xp.any(xp.isnan(v)):
        raise ValueError("integer formats have no NaN; the input holds NaN")


def _int_codes(v: Any, sc: Any, zp: Any, qmin: int, qmax: int, mode: str, rng: Any) -> Any:
    """``scales.round_int_quotients``: clamp(round(v / sc) + zp, qmin, qmax)."""
    xp = namespace(v)
    _no_nan(v)
    n = _round_quotients(v, _array(sc, v), _INT53, mode, "saturate", rng)
    if hasattr(zp, "ndim") and xp.any(zp != 0) or not hasattr(zp, "ndim") and zp:
        n = n + zp
    return xp.clip(n, qmin, qmax)


def _int(v: Any, p: Any, ax: Any) -> QuantizedTensor:
    """Integer formats per tensor / per channel."""
    xp = namespace(v)
    o, f = p.options, p.f
    scale = o["scale"]
    if scale is not None and not isinstance(scale, str):
        bits = width(f)
        sc = _given_scale(scale, v, ax)
        default_zp = 0 if (f.signed or not p.symmetric) else 1 << (bits - 1)
        zp_given = o["zero_point"]
        zp: Any = zp_given if zp_given is not None else default_zp
        if is_tensor(zp):
            if xp.dtype_kind(zp) not in "iu":
                raise TypeError("zero_point must be an integer or an integer array")
            zpt = zp
        else:
            a = np.asarray(zp)
            if a.dtype.kind not in "iu":
                raise TypeError("zero_point must be an integer or an integer array")
            zpt = xp.asint(a, v)
        if zp_given is not None and xp.size(zpt):
            zlo, zhi = xp.minmax(zpt)
            check_zero_point(zlo, zhi, f)
        zpt = _layout(xp.asint(zpt), v, ax)
        zp = int(zpt) if zpt.ndim == 0 else zpt
        qmin, qmax = code_range(f)
        if o["pow2_scale"]:  # pow2_scale applies to a given scale too
            sc = _fp32_scale(_array(sc, v), True)
        if f.signed and p.symmetric and p.narrow_range and zp_given is None:
            qmin += 1
    else:
        if scale is not None and scale != "amax":
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        lo, hi = _calibrate(v, p, ax, p.symmetric)
        sc, zp, qmin, qmax = _int_params(lo, hi, f, p.symmetric, p.narrow_range, bool(o["pow2_scale"]))
        if p.margin:
            sc = _fp32_scale(_array(sc, v) * 2.0 ** p.margin, bool(o["pow2_scale"]))
    n = _int_codes(v, sc, zp, qmin, qmax, p.mode, _rng(p))
    return QuantizedTensor(n, sc, zp, f.name, f, p.granularity, ax, None, None, None, qmin, qmax,
                           p.scheme)


def _float(v: Any, p: Any, ax: Any) -> QuantizedTensor:
    """Float formats per tensor / per channel."""
    xp = namespace(v)
    o, f = p.options, p.f
    scale = o["scale"]
    convention = check_convention(o.get("scale_convention", "exact"))
    if convention != "exact":
        return _library_float(v, p, ax, convention)
    if scale is None:
        scale = "amax" if width(f) <= 8 else 1.0
    if isinstance(scale, str):
        if scale != "amax":
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        _, hi = _calibrate(v, p, ax, True)
        sc = _fp32_scale(hi * 2.0 ** p.margin / f.max, bool(o["pow2_scale"]))
        if p.calibration == "max" and xp.size(v):  # scales.unit_scale_where_infinite
            red = reduce_axes(v.ndim, ax, p.granularity)
            inf = xp.tofloat(xp.isinf(v))
            sc = _unit_where_infinite(sc, xp.amax(inf) if red is None else xp.amax(inf, red, True))
    else:
        sc = _given_scale(scale, v, ax)
        if o["pow2_scale"]:
            sc = _fp32_scale(_array(sc, v), True)
    if not hasattr(sc, "ndim") and sc == 1.0:
        r = round_values(v, f, p.mode, o["overflow"], rng=_rng(p))
    else:
        r = _round_quotients(v, _array(sc, v), f, p.mode, o["overflow"], _rng(p))
    return QuantizedTensor(r, sc, 0, f.name, f, p.granularity, ax, scheme="symmetric")


def _library_float(v: Any, p: Any, ax: Any, convention: str) -> QuantizedTensor:
    """Float formats by Transformer Engine's / torchao's convention
    (``floatfmt.scaling.scale_convention``): ``s`` from the amax (or the given scale),
    elements ``round(fp32(fp32(x) * s))`` saturating, kept scale ``fp32(1 / s)``."""
    o, f = p.options, p.f
    scale = o["scale"]
    if scale is None or isinstance(scale, str):
        if scale not in (None, "amax"):
            raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")
        _, hi = _calibrate(v, p, ax, True)
        s = library_scale(hi, f, convention, p.margin, bool(o["pow2_scale"]))
    else:
        s = library_scale_of(_array(_given_scale(scale, v, ax), v))
    e = library_elements(v, s, f, p.mode, _rng(p))
    inv = library_scale_inverse(s)
    sc = float(inv) if inv.ndim == 0 else inv
    return QuantizedTensor(e, sc, 0, f.name, f, p.granularity, ax, scheme="symmetric")


# ------------------------------------------------------------------ calibration "mse"
def _calibrate(v: Any, p: Any, ax: Any, symmetric: bool) -> tuple[Any, Any]:
    """(lo, hi) by the plan's calibration."""
    if p.calibration == "mse":
        return _mse_range(v, p, ax, symmetric)
    return _range(v, p.granularity, ax, p.calibration, p.options["percentile"], symmetric)


def _mse_range(v: Any, p: Any, ax: Any, symmetric: bool) -> tuple[Any, Any]:
    """``scales.mse_range``: the candidates ``(lo * t, hi * t)`` for t in ``MSE_GRID`` in
    order, each fake-quantised by this module's own rules and scored by its exact sum of
    squared errors (``_squared_error_sums``); the first smallest wins."""
    xp = namespace(v)
    lo0, hi0 = _range(v, p.granularity, ax, "max", None, symmetric)
    if xp.size(v) == 0:
        return lo0, hi0
    best: Any = None
    for c in MSE_GRID:
        lo, hi = lo0 * c, hi0 * c
        err = _squared_error_sums(_fake_range(v, p, lo, hi, symmetric), v, ax)
        if best is None:
            best = (err, lo, hi)
        else:
            better = err < best[0]
            best = tuple(xp.where(better, new, old) for new, old in zip((err, lo, hi), best))
    return best[1], best[2]


def _fake_range(v: Any, p: Any, lo: Any, hi: Any, symmetric: bool) -> Any:
    """``scales._fake_with_range``: v fake-quantised with the range (lo, hi) (no margin;
    floats saturate), float64."""
    xp = namespace(v)
    f, pow2 = p.f, bool(p.options["pow2_scale"])
    if f.kind == "int":
        sc, zp, qmin, qmax = _int_params(lo, hi, f, symmetric, p.narrow_range, pow2)
        return (_int_codes(v, sc, zp, qmin, qmax, p.mode, _rng(p)) - zp) * sc
    sc = _fp32_scale(xp.maximum(xp.abs(lo), xp.abs(hi)) / f.max, pow2)
    if not hasattr(sc, "ndim") and sc == 1.0:
        return round_values(v, f, p.mode, "saturate", rng=_rng(p))
    return _round_quotients(v, _array(sc, v), f, p.mode, "saturate", _rng(p)) * sc


def _column_sums(T: Any, xp: Any) -> Any:
    """Each column's exact sum of the float64 matrix T, rounded once to float64 (nearest
    even): the namespace's kernel (``scales.exact_sums`` on numpy,
    ``limbs.limb_sum`` on tensors)."""
    if xp.name == "numpy":
        return exact_sums(T)
    s, cls = exact_sum(T, "nearest_even")
    return round_values(s, _FP64, "nearest_even", sticky=cls)


def _squared_error_sums(xq: Any, v: Any, ax: Any) -> Any:
    """``scales.squared_error_sums``: d * d (d = xq - v, float64) summed exactly over
    every axis but ``ax`` (all: None) and rounded once to float64 (nearest even)."""
    xp = namespace(v)
    d = xq - v
    d = d * d
    T = d.reshape(-1, 1) if ax is None else xp.moveaxis(d, ax, -1).reshape(-1, d.shape[ax])
    s = _column_sums(T, xp)
    return s.reshape(()) if ax is None else _layout(s, v, ax)


# ------------------------------------------------------------------ group / 2-D blocks
def _tile_reduce(a: Any, tile: tuple, op: str) -> Any:
    """``op`` (``"amax"`` / ``"amin"``) over each tile of a, zero-padded at the edges."""
    xp = namespace(a)
    nt = tuple(-(-d // k) for d, k in zip(a.shape, tile))
    full = tuple(n * k for n, k in zip(nt, tile))
    if full != tuple(a.shape):
        pad = xp.zeros_as(full, a)
        pad[tuple(slice(0, d) for d in a.shape)] = a
        a = pad
    a = a.reshape(tuple(x for n, k in zip(nt, tile) for x in (n, k)))
    return getattr(xp, op)(a, tuple(range(1, 2 * len(tile), 2)))


def _tiled(v: Any, p: Any) -> QuantizedTensor:
    """Group-wise / 2-D block quantisation (``tiles.quantize_tiled``)."""
    xp = namespace(v)
    o, f = p.options, p.f
    tile, ax = tiled_layout(tuple(v.shape), f, p.granularity, o["group_size"], o["block"],
                            o["axis"], p.symmetric, p.calibration, o["scale"], o["zero_point"])
    fin = xp.where(xp.isfinite(v), v, 0.0)
    if p.symmetric:
        hi = _tile_reduce(xp.abs(fin), tile, "amax")
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
            sc = _fp32_scale(_array(sc, v) * 2.0 ** p.margin, pow2)
        n = _int_codes(v, tile_expand(_array(sc, v), tile, shape),
                       tile_expand(zp, tile, shape) if hasattr(zp, "ndim") else zp, qmin, qmax,
                       p.mode, _rng(p))
        return QuantizedTensor(n, sc, zp, f.name, f, label, ax, size, None, None, qmin, qmax,
                               p.scheme, block_shape=tile)
    sc = _fp32_scale(hi * 2.0 ** p.margin / f.max, pow2)
    if xp.size(v):  # a tile whose amax is infinite: scale 1 (tiles.quantize_tiled)
        sc = _unit_where_infinite(sc, _tile_reduce(xp.tofloat(xp.isinf(v)), tile, "amax"))
    r = _round_quotients(v, tile_expand(_array(sc, v), tile, shape), f, p.mode, o["overflow"],
                         _rng(p))
    return QuantizedTensor(r, sc, 0, f.name, f, label, ax, size, scheme=p.scheme, block_shape=tile)


# ------------------------------------------------------------------ MX and NVFP4 blocks
def _shared_exponent(a: Any, name: str, mode: str) -> Any:
    """``mx_nvfp4.mx_shared_exponent`` of block amaxes a >= 0 (float64; NaN: a NaN
    scale)."""
    xp = namespace(a)
    bf = get_block_format(name)
    if mode == "even":
        a = round_values(a, get_format(f"e11m{bf.element_mbits}"), "nearest_away")
    ok = xp.isfinite(a) & (a != 0)
    a1 = xp.where(ok, a, 1.0)
    e = _exponent(a1, xp)
    E = e - 1 - bf.emax_elem
    i64 = xp.dtype_of("int64")
    if mode == "ceil":
        E = E + xp.astype(xp.ldexp(a1, -(e - 1)) != 1.0, i64)
    elif mode == "rceil":
        E = E + xp.astype(xp.ldexp(a1, -E) > bf.element_max, i64)
    Ef = xp.where(a == 0, -127.0, xp.asfloat(xp.clip(E, -127, None)))
    return xp.where(xp.isfinite(a) & (Ef <= 127), Ef, float("nan"))


def _mx(v: Any, dtype: Any, p: Any, fake: bool) -> Any:
    """OCP MX (``mx_nvfp4.mx_quantize``): blocks of 32 along axis share 2**E (E8M0)."""
    xp = namespace(v)
    o, name = p.options, p.f
    sr = choose("scale_rounding", o["scale_rounding"], SCALE_ROUNDINGS)
    if v.ndim == 0:
        raise ValueError("MX quantisation needs an array with at least one dimension")
    axis = normalize_axis(-1 if o["axis"] is None else o["axis"], v.ndim, "MX quantisation")
    bf = get_block_format(name)
    elem, bs, shift = bf.element_format, bf.block_size, bf.element_shift
    rows, meta = split_blocks(v, axis, bs)
    amax = xp.amax(xp.abs(rows), 1) if rows.shape[0] else xp.zeros_as((0,), rows)
    E = _shared_exponent(amax, name, sr)
    bad = xp.isnan(E)
    Ek = xp.asint(xp.where(bad, 0.0, E))
    y = rows * xp.pow2(shift - Ek)[:, None]
    y = xp.where(bad[:, None], 0.0, y)
    # products float64 may have rounded: a signed zero and class 1 (mx_nvfp4.settle_tiny)
    tiny = _rounded_by_scaling(rows, y, xp) & ~bad[:, None]
    y = xp.where(tiny, xp.copysign(0.0, rows), y)
    stoch = p.mode in STOCHASTIC
    rem = {"resid" if stoch else "sticky":
           xp.astype(tiny, xp.dtype_of("int64" if stoch else "uint8"))} if xp.any(tiny) else {}
    r = round_values(y, elem, p.mode, "saturate", rng=_rng(p), **rem)
    if fake:
        out = r * xp.pow2(Ek - shift)[:, None]
        out = xp.where(bad[:, None], float("nan"), out)
        if dtype is not None and dtype == xp.dtype_of("float32"):
            out = xp.astype(out, dtype)  # exact: MX values of float32 data are float32 values
        return unsplit_blocks(out, meta, axis, bs)
    q = r * 2.0 ** -shift if shift else r
    scale = xp.where(bad, float("nan"), xp.pow2(Ek))
    codes = xp.astype(xp.where(bad, 255, Ek + 127), xp.dtype_of("uint8"))
    return QuantizedTensor(
        elements=unsplit_blocks(q, meta, axis, bs), scale=block_scale_layout(scale, meta, axis),
        zero_point=0, fmt=name, element_format=elem, granularity="block", axis=axis,
        block_size=bs, scale_codes=block_scale_layout(codes, meta, axis), scheme="symmetric")


def _nvfp4(v: Any, p: Any) -> QuantizedTensor:
    """NVFP4 (``mx_nvfp4.nvfp4_quantize``): blocks of 16, an E4M3 block scale
    ``amax / (6 ts)`` rounded once, an fp32 tensor scale ts, E2M1 elements."""
    xp = namespace(v)
    o = p.options
    bf = get_block_format("nvfp4")
    elem, bs, sfmt = bf.element_format, bf.block_size, bf.scale_format
    if v.ndim == 0:
        raise ValueError("NVFP4 quantisation needs an array with at least one dimension")
    axis = normalize_axis(-1 if o["axis"] is None else o["axis"], v.ndim, "NVFP4 quantisation")
    if not xp.all(xp.isfinite(v)):
        raise ValueError("NVFP4 has no NaN or Inf encoding; the input holds non-finite values")
    rows, meta = split_blocks(v, axis, bs)
    amax_b = xp.amax(xp.abs(rows), 1) if rows.shape[0] else xp.zeros_as((0,), rows)
    ts = nvfp4_tensor_scale(float(xp.amax(amax_b)) if xp.size(amax_b) else 0.0, o["tensor_scale"])
    bscale = _round_quotients(amax_b, _array(elem.max * ts, amax_b), sfmt, "nearest_even",
                              "saturate", None)
    denom = bscale * ts  # E4M3 * fp32: exact
    zero = denom == 0
    qv = _round_quotients(rows, xp.where(zero, 1.0, denom)[:, None], elem, p.mode,
                          "saturate", _rng(p))
    qv = xp.where(zero[:, None], 0.0, qv)
    return QuantizedTensor(
        elements=unsplit_blocks(qv, meta, axis, bs), scale=block_scale_layout(bscale, meta, axis),
        zero_point=0, fmt="nvfp4", element_format=elem, granularity="block", axis=axis,
        block_size=bs, scale_codes=block_scale_layout(values_to_codes(bscale, sfmt), meta, axis),
        tensor_scale=ts, scheme="symmetric")
