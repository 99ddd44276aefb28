"""``fake_quant`` on torch tensors: per-tensor and per-channel integer and float
(FP8, FP6, FP4 ...) quantisation, computed on the tensor's device, with a
straight-through gradient.

The options are a subset of ``floatfmt.fake_quant``'s (calibration ``"max"``, no zero
point, no group / block / MX / NVFP4 schemes: ``floatfmt.fake_quant`` takes tensors of
any device with every scheme), checked here; the work is ``floatfmt.fake_quant``'s,
which dispatches (numpy kernels for CPU tensors, ``floatfmt.scaling.quantize_schemes`` on other
devices), so there is one implementation of the rules.  tests/test_torch_quant.py
shows the results equal to ``floatfmt.fake_quant`` on numpy bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.cast import cast
from ..core.formats import get_format
from ..backend.namespace import namespace as _namespace
from ..scaling.quantize import fake_quant as ff_fake_quant

__all__ = ["fake_quant"]


def _resolve(fmt):
    if isinstance(fmt, str) and (fmt.strip().lower().startswith("mx") or fmt.strip().lower() == "nvfp4"):
        raise ValueError(f"floatfmt.torch.fake_quant handles per-tensor and per-channel integer "
                         f"and float formats; for {fmt!r} (block scaling) use floatfmt.fake_quant, "
                         "which takes tensors of any device and every scheme")
    return get_format(fmt)


def fake_quant(x: torch.Tensor, fmt: Any = "int8", *, scheme: str = "symmetric",
               granularity: str = "tensor", axis: int | None = None,
               rounding: str = "nearest_even", scale: Any = None, margin: int = 0,
               pow2_scale: bool = False, narrow_range: bool | None = None,
               overflow: Any = "saturate", rng: Any = None, ste: str | None = None,
               dtype: torch.dtype | None = None, scale_convention: str = "exact") -> torch.Tensor:
    """Quantise then dequantise a tensor, with the rules of ``floatfmt.fake_quant``,
    on the tensor's device; returns a tensor of the input's dtype (``dtype=`` another).

    The dequantised values ``(q - zero_point) * scale`` are computed exactly (float64
    holds every one), then rounded once to nearest-even to the result dtype, as a
    float32 fake-quant kernel stores them (``torch.fake_quantize_per_tensor_affine``
    returns the input's dtype too): float32 / float16 / bfloat16 inputs give that dtype;
    float64 and integer inputs give float64 (exact).  ``dtype=torch.float64`` keeps every
    value exact for any input.  A value the input dtype holds (an FP8 element times a
    power-of-two scale in float32, for instance) is returned with the same bits either way.

    Formats: integers (``int8 uint8 int4 uint4``, affine, ``scheme="symmetric"`` or
    ``"asymmetric"``) and float formats (``fp8_e4m3``, ``fp8_e5m2``, ``fp6_*``,
    ``fp4_e2m1``, ``bf16`` ...; symmetric, ``scale="amax"``: ``amax * 2**margin / max``
    in fp32, the default for formats of at most 8 bits, else 1.0).  ``granularity``
    ``"tensor"`` or ``"channel"`` (one scale per index of ``axis``, default 0);
    calibration by max.  ``scale_convention`` (float formats): ``"exact"``, ``"te"`` or
    ``"torchao"`` (``floatfmt.scaling.scale_convention``; CPU tensors).  ``scale`` a number gives the scale (zero point 0, or
    2**(bits-1) for a symmetric unsigned format).  ``overflow`` applies to float formats.

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
    if scheme not in ("symmetric", "asymmetric"):
        raise ValueError(f"unknown scheme {scheme!r}. Valid: symmetric, asymmetric.")
    if granularity not in ("tensor", "channel"):
        raise ValueError(f"granularity {granularity!r} is not supported here. Valid: tensor, "
                         "channel (group and block: floatfmt.fake_quant, on any device)")
    if not isinstance(margin, int) or isinstance(margin, bool):
        raise TypeError(f"margin must be an integer (a power of two), not {type(margin).__name__}")
    if f.kind == "float" and scheme != "symmetric":
        raise ValueError("float formats are quantised symmetrically (scheme='symmetric')")
    opts: dict[str, Any] = dict(scheme=scheme, granularity=granularity, axis=axis, rounding=rounding,
                                scale=scale, margin=margin, pow2_scale=pow2_scale,
                                narrow_range=narrow_range, rng=rng, ste=ste)
    if f.kind == "float":
        opts["overflow"] = overflow
        opts["scale_convention"] = scale_convention
    elif scale_convention != "exact":
        raise ValueError(f"scale_convention={scale_convention!r} applies to float formats")
    out: Any = ff_fake_quant(x, f, **opts)
    return _to_dtype(out, x, dtype)


#: result dtypes other than float64 and the format that rounds to each one exactly once
_DTYPE_FORMATS = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def _to_dtype(out: torch.Tensor, x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """``out`` (float64, exact) rounded once to ``dtype`` (default: x's float dtype, float64
    for others) by ``floatfmt.cast`` (torch's own float64 -> bfloat16 / float16 conversion
    goes through float32: two roundings); the gradient of ``out`` passes unchanged."""
    if dtype is None:
        dtype = x.dtype if x.dtype in _DTYPE_FORMATS else torch.float64
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, not {type(dtype).__name__}")
    if dtype == out.dtype:
        return out
    if dtype not in _DTYPE_FORMATS:
        valid = ", ".join(str(d) for d in (torch.float64, *_DTYPE_FORMATS))
        raise ValueError(f"dtype {dtype} is not a result dtype of fake_quant. Valid: {valid}")
    r: Any = cast(out.detach(), _DTYPE_FORMATS[dtype], dtype=dtype)
    if out.requires_grad:
        r = _namespace(out).straight_through(out, r)
    return r
