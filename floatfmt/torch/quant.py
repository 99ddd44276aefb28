"""``fake_quant`` on torch tensors: per-tensor and per-channel integer and float
(FP8, FP6, FP4 ...) quantisation, computed with torch ops on the tensor's device,
with a straight-through gradient.

The rules are those of ``floatfmt.quantization.quantize`` (calibration ``"max"``), and
every rounding is the one rounding routine's (``rounding.round_values`` on
tensors): the fp32 scale, the zero point, and each quotient ``x / scale``, which
is rounded once from its exact value (float64 quotient plus the sign of its exact
residual, as ``floatfmt.eft.exact_quotient`` does on numpy).  tests/test_torch_quant.py
shows the results equal to ``floatfmt.fake_quant`` on numpy bit for bit.
"""

from __future__ import annotations

import torch

from .._xp import namespace
from .._cast import tensor_exact
from .._formats import Format, get_format
from ..rounding import resolve_mode, resolve_overflow, round_values

__all__ = ["fake_quant", "exact_quotient"]

_FP32 = get_format("fp32")
_INT53 = Format("int53", kind="int", bits=53)  # round(x / scale) before the clamp
_INT62 = Format("int62", kind="int", bits=62)  # the zero point before its clamp
_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's splitter for float64
_TINY, _BIG = 2.0 ** -960, 2.0 ** 960


def _two_prod(a, b):
    """(p, e) with p = fl(a * b) and p + e = a * b exactly (Dekker; |a|, |b| < 2**960)."""
    def split(v):
        c = _SPLIT * v
        hi = c - (c - v)
        return hi, v - hi

    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def exact_quotient(v, s):
    """(t, sticky) for the exact quotients ``v / s`` of float64 tensors (s > 0 finite):
    t the quotient truncated toward zero to float64, sticky a bool tensor, True where
    the exact quotient lies beyond t (the remainder class only matters as nonzero for
    the formats rounded here, all narrower than float64).

    q = fl(v / s); the residual r = v - q s is exact (TwoProd, then Sterbenz) and its
    sign says on which side of q the quotient lies.  Quotients below 2**-960 in
    magnitude become a signed zero with sticky set (every format here rounds them as
    a hair above zero), and those past 2**960 keep q with sticky set (they saturate)."""
    with torch.no_grad():
        q = v / s
        p, pe = _two_prod(q, s)
        r = (v - p) - pe
        fin = torch.isfinite(v) & (v != 0)
        small = fin & (q.abs() < _TINY)
        big = fin & (q.abs() >= _BIG)
        ok = fin & ~small & ~big
        inexact = ok & (r != 0)
        beyond = (torch.sign(r) * torch.sign(q)) > 0
        short = inexact & ~beyond
        t = torch.where(short, torch.nextafter(q, torch.zeros_like(q)), q)
        t = torch.where(small, torch.copysign(torch.zeros_like(q), v), t)
        sticky = inexact | small | big
    return t, sticky


def _round(v, fmt, mode, policy, sticky=None, rng=None):
    return round_values(v, fmt, mode, policy, rng=rng, sticky=sticky)


def _fp32_scale(raw, pow2):
    """The fp32 scale of ``floatfmt.tensorscale``: 1.0 where the range is empty or not
    finite; fp32 round-to-nearest-even (saturating) or, with pow2, up to a power of two;
    the smallest fp32 subnormal where that gives 0."""
    raw = torch.where((raw > 0) & torch.isfinite(raw), raw, torch.ones_like(raw))
    if pow2:
        s = _round(raw, get_format("e11m0"), "up", None)
    else:
        s = _round(raw, _FP32, "nearest_even", "saturate")
    return torch.where(s > 0, s, torch.full_like(s, _FP32.smallest_subnormal))


def _resolve(fmt):
    if isinstance(fmt, str) and (fmt.strip().lower().startswith("mx") or fmt.strip().lower() == "nvfp4"):
        raise ValueError(f"floatfmt.torch.fake_quant handles per-tensor and per-channel integer "
                         f"and float formats; for {fmt!r} (block scaling) use floatfmt.fake_quant, "
                         "which takes tensors of any device and every scheme")
    return get_format(fmt)


# size: one rule read top to bottom (intake, calibration of the int and float schemes, the single
# rounding, the clipping limits of the gradient), mirroring quantization.fake_quant step by step
def fake_quant(x, fmt="int8", *, scheme="symmetric", granularity="tensor", axis=None,
               rounding="nearest_even", scale=None, margin=0, pow2_scale=False,
               narrow_range=None, overflow="saturate", rng=None, ste=None):
    """Quantise then dequantise a tensor, with the rules of ``floatfmt.fake_quant``,
    on the tensor's device; returns a float64 tensor (it holds every result exactly).

    Formats: integers (``int8 uint8 int4 uint4``, affine, ``scheme="symmetric"`` or
    ``"asymmetric"``) and float formats (``fp8_e4m3``, ``fp8_e5m2``, ``fp6_*``,
    ``fp4_e2m1``, ``bf16`` ...; symmetric, ``scale="amax"``: ``amax * 2**margin / max``
    in fp32, the default for formats of at most 8 bits, else 1.0).  ``granularity``
    ``"tensor"`` or ``"channel"`` (one scale per index of ``axis``, default 0);
    calibration by max.  ``scale`` a number gives the scale (zero point 0, or
    2**(bits-1) for a symmetric unsigned format).

    Gradient (straight-through estimator): ``ste=None`` / ``"identity"`` passes the
    incoming gradient unchanged; ``ste="clipped"`` passes it where
    ``lo < x < hi`` (the thresholds past which values saturate, as
    ``QuantizedTensor.limits`` gives: ``(qmin - 0.5 - zp) * scale`` to
    ``(qmax + 0.5 - zp) * scale`` for integers, ``+-(max + half the top step) * scale``
    for floats) and gives 0 elsewhere (clipped or non-finite inputs).  The scale
    and zero point are constants for the gradient, as in fake-quant training.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"floatfmt.torch.fake_quant takes a torch.Tensor, not {type(x).__name__}; "
                        "use floatfmt.fake_quant for numpy arrays")
    if ste not in (None, "identity", "clipped"):
        raise ValueError(f"unknown ste {ste!r}. Valid: 'identity' (the default), 'clipped'")
    f = _resolve(fmt)
    mode = resolve_mode(rounding)
    if scheme not in ("symmetric", "asymmetric"):
        raise ValueError(f"unknown scheme {scheme!r}. Valid: symmetric, asymmetric.")
    if granularity not in ("tensor", "channel"):
        raise ValueError(f"granularity {granularity!r} is not supported on tensors. "
                         "Valid: tensor, channel (group and block: use floatfmt.fake_quant)")
    if not isinstance(margin, int) or isinstance(margin, bool):
        raise TypeError(f"margin must be an integer (a power of two), not {type(margin).__name__}")
    ex = tensor_exact(x)
    v = ex.values
    ax = None
    if granularity == "channel":
        if v.ndim == 0:
            raise ValueError("per-channel quantisation needs a tensor with at least one dimension")
        ax = (0 if axis is None else axis)
        if not -v.ndim <= ax < v.ndim:
            raise ValueError(f"axis {ax} is out of bounds for a tensor of dimension {v.ndim}")
        ax %= v.ndim
    if v.numel() == 0:  # nothing to calibrate: an empty result, as on numpy
        out = v.clone()
        return _ste(x, out, None) if x.requires_grad else out
    red = None if ax is None else tuple(i for i in range(v.ndim) if i != ax)
    symmetric = scheme == "symmetric"
    if narrow_range is None:
        narrow_range = symmetric

    def reduce(a, op):
        if red is None:
            return getattr(a, op)()
        return getattr(torch, op)(a, dim=red, keepdim=True) if red else a

    fin = torch.where(torch.isfinite(v), v, torch.zeros_like(v))
    given = scale is not None and not isinstance(scale, str)
    if given:
        sc = torch.as_tensor(scale, dtype=torch.float64, device=v.device)
        if not bool(((sc > 0) & torch.isfinite(sc)).all()):
            raise ValueError("scale must be positive and finite")
        if sc.ndim == 1 and ax is not None and v.ndim > 1:
            sc = sc.reshape([sc.numel() if i == ax else 1 for i in range(v.ndim)])
    elif scale is not None and scale != "amax":
        raise ValueError(f"scale must be a number, an array, 'amax' or None, not {scale!r}")

    if f.kind == "int":
        if bool(torch.isnan(v).any()):
            raise ValueError("integer formats have no NaN; the input holds NaN")
        n_bits = f.bits
        qmin, qmax = (-(1 << (n_bits - 1)), (1 << (n_bits - 1)) - 1) if f.signed else (0, (1 << n_bits) - 1)
        if given:
            zp = torch.zeros((), dtype=torch.float64, device=v.device) + (
                0 if (f.signed or not symmetric) else 1 << (n_bits - 1))
            if f.signed and symmetric and narrow_range:
                qmin += 1
        elif symmetric:
            if narrow_range:
                qmin += 1
            half = (1 << (n_bits - 1)) - 1
            if not f.signed and not narrow_range:
                half = (qmax - qmin) / 2
            amax = reduce(fin.abs(), "amax")
            sc = _fp32_scale(amax / half, pow2_scale)
            zp = torch.zeros_like(sc) + (0 if f.signed else 1 << (n_bits - 1))
        else:
            lo = torch.clamp(reduce(fin, "amin"), max=0.0)
            hi = torch.clamp(reduce(fin, "amax"), min=0.0)
            sc = _fp32_scale((hi - lo) / (qmax - qmin), pow2_scale)
            zp = qmin - _round(lo / sc, _INT62, "nearest_even", "saturate")
            zp = torch.clamp(zp, qmin, qmax)
        if margin and not given:
            sc = _fp32_scale(sc * 2.0 ** margin, pow2_scale)
        t, st = exact_quotient(v, sc)
        n = _round(t, _INT53, mode, "saturate", st, rng)
        n = torch.clamp(n + zp, qmin, qmax)
        out = (n - zp) * sc
        lo_lim, hi_lim = (qmin - 0.5 - zp) * sc, (qmax + 0.5 - zp) * sc
    else:
        if not symmetric:
            raise ValueError("float formats are quantised symmetrically (scheme='symmetric')")
        policy = resolve_overflow(overflow, f)
        if not given:
            if scale is None and f.bits > 8:
                sc = torch.ones((), dtype=torch.float64, device=v.device)
            else:
                sc = _fp32_scale(reduce(fin.abs(), "amax") * 2.0 ** margin / f.max, pow2_scale)
        if sc.ndim == 0 and float(sc) == 1.0:
            r = _round(v, f, mode, policy, None, rng)
        else:
            t, st = exact_quotient(v, sc)
            r = _round(t, f, mode, policy, st, rng)
        out = r * sc
        top = f.max + 2.0 ** (f.emax - f.mbits) / 2
        lo_lim, hi_lim = -top * sc, top * sc
    if x.requires_grad:
        out = _ste(x, out, (v > lo_lim) & (v < hi_lim) if ste == "clipped" else None)
    return out


def _ste(x, out, mask):
    """out with the straight-through gradient of x (masked where mask is given)."""
    return namespace(out).straight_through(x, out, mask)
