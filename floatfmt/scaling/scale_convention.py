"""Per-tensor (and per-channel) FP8 scale conventions: floatfmt's exact division, and the
two-rounding multiply of Transformer Engine and torchao.

``quantize(x, fmt, scale_convention=...)`` for float formats (FP8, FP6, FP4 ...):

``"exact"`` (the default)
    ``scale = fp32(amax * 2**margin / max)``, ``q = round(x / scale)``: the exact quotient
    rounded once to the format (saturating).
``"te"`` (NVIDIA Transformer Engine)
    ``s = fp32(max / amax)`` (IEEE division, ``__fdiv_rn``), then ``s = fp32(s / 2**margin)``;
    ``s = 1`` when amax is 0, Inf or NaN; ``s = FLT_MAX`` when ``max / amax`` overflows fp32;
    ``pow2_scale``: ``s`` rounded down to a power of two (its mantissa bits cleared).
    Source: ``transformer_engine/common/recipe/recipe_common.cuh``,
    ``compute_scale_from_amax`` (called by ``nvte_compute_scale_from_amax`` for current
    scaling); the cast kernel stores ``fp8(x * s)``, with the fp32 product and a
    saturating conversion (``__NV_SATFINITE`` of ``cuda_fp8.h``).
``"torchao"`` (torchao.float8)
    ``s = fp32(max / max(amax, 1e-12))`` (``amax_to_scale``: the quotient in float64, then
    ``.to(torch.float32)``: the correctly rounded fp32 quotient, since amax is an fp32
    value); ``pow2_scale``: ``s`` rounded down to a power of two
    (``round_scales_to_power_of_2``); ``margin`` applied as for ``"te"``.
    Source: ``torchao/float8/float8_utils.py``, ``amax_to_scale`` and
    ``to_fp8_saturated`` (clamp to +-max, then the RNE cast), and
    ``torchao/float8/float8_scaling_utils.py`` / ``hp_tensor_and_scale_to_float8``
    (``tensor.to(torch.float32) * scale``).  Rowwise / axiswise scaling
    (``ScalingGranularity.AXISWISE``) is the same rule on the amax of each row
    (``granularity="channel"``).

NVFP4 by Transformer Engine's two-level convention (``S_enc = fp32(2688 / amax)``, E4M3
block scales ``e4m3(amax_b * fp32(S_enc / 6))``, elements ``e2m1(fp32(x * e_b))``) is
``floatfmt.scaling.nvfp4_te``, and by torchao's (``ts = fp32(amax / 2688)``, divisions)
``floatfmt.scaling.nvfp4_torchao``: ``quantize(x, "nvfp4", scale_convention="te" | "torchao")``.

A given ``scale=`` (a number or per-channel array) is, under ``"te"`` / ``"torchao"``, the
library's multiplier ``s`` (TE's ``scale``, torchao's ``Float8Tensor._scale``; a delayed
scaling recipe's scale), taken as fp32.

In both library conventions the element is rounded twice: ``y = fp32(x32 * s)`` (x first
taken to fp32, exact for float32 / bfloat16 / float16 data), then ``q = round(y)`` in the
format with saturation (``rounding`` applies to this second step; NaN stays NaN, +-Inf
saturates).  The ``QuantizedTensor`` keeps ``scale = fp32(1 / s)``: the ``scale_inv``
that both libraries hand to the GEMM (``torch._scaled_mm(scale_a=...)``, cuBLASLt's
``A_SCALE_POINTER``), so ``dequantize()`` is ``q * scale_inv`` (exact).  torchao's own
``to_original_precision`` divides instead, ``fp32(q / s)``: compute that from ``codes``
and ``1 / s`` if it is what you compare.

    >>> import numpy as np
    >>> s = np.float32(448) / np.float32(3.0)              # te: fp32(max / amax)
    >>> float(s), float(np.float32(1) / s)
    (149.3333282470703, 0.0066964286379516125)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend.namespace import namespace
from ..core.formats import Format, get_format
from ..core.names import unknown_name
from ..core.rounding import round_values

__all__ = ["SCALE_CONVENTIONS", "check_convention", "library_scale", "library_elements",
           "library_scale_of", "library_scale_inverse"]

#: Values of ``quantize``'s ``scale_convention``.
SCALE_CONVENTIONS = ("exact", "te", "torchao")

_TORCHAO_EPS = 1e-12  # torchao.float8.float8_utils.EPS


def check_convention(name: object) -> str:
    """The canonical convention name; ValueError listing the valid ones."""
    if not isinstance(name, str):
        raise TypeError(f"scale_convention must be a string, not {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    key = {"transformer_engine": "te"}.get(key, key)
    if key not in SCALE_CONVENTIONS:
        raise unknown_name("scale_convention", name, SCALE_CONVENTIONS)
    return key


_FP32 = get_format("fp32")
_FLT_MAX = float(np.finfo(np.float32).max)


def _fp32(a: Any) -> Any:
    """fp32 round to nearest even of float64 values (an array of any namespace), Inf past the
    range: a quotient or product of two fp32 values computed in float64 and rounded once is
    the IEEE fp32 result (53 >= 2 * 24 + 2), so this is the fp32 division / multiply."""
    if isinstance(a, (int, float, np.generic)):
        a = np.asarray(a, np.float64)
    return round_values(a, _FP32, "nearest_even", "inf")


def _pow2_down(s: Any) -> Any:
    """Each fp32 value with its mantissa bits cleared (TE's ``scale_bits &= 0xFF800000``;
    torchao's ``exp2(floor(log2(s)))`` is the same for normal fp32 values): ``2**floor(log2
    s)`` for normal values, 0 for fp32 subnormals, Inf for Inf and NaN."""
    xp = namespace(s)
    _, e = xp.frexp(xp.where(xp.isfinite(s), s, 1.0))
    p2 = xp.pow2(e - 1)
    p2 = xp.where(s < 2.0 ** -126, 0.0, p2)
    return xp.where(xp.isfinite(s), p2, np.inf)


def library_scale(amax: Any, f: Format, convention: str, margin: int, pow2: bool) -> Any:
    """``s`` (fp32 values, float64) of each amax by ``convention`` ("te" / "torchao"), over
    the array namespace of ``amax`` (numpy arrays and tensors alike)."""
    if not hasattr(amax, "ndim"):
        amax = np.asarray(amax, np.float64)
    xp = namespace(amax)
    a = _fp32(xp.asfloat(amax))
    mx = float(f.max)
    if convention == "torchao":  # float64 quotient, then .to(torch.float32)
        s = _fp32(mx / xp.where(a > 1e-12, a, _TORCHAO_EPS))
        s = xp.where(xp.isnan(a), np.nan, s)  # torch.clamp(NaN, min=eps) is NaN
    else:
        with np.errstate(all="ignore"):
            s = _fp32(mx / xp.where(a == 0, 1.0, a))
        s = xp.where(xp.isinf(s), _FLT_MAX, s)
        s = xp.where((a == 0) | ~xp.isfinite(a), 1.0, s)
    if margin:
        s = _fp32(s / 2.0 ** margin)
    if pow2:
        s = _pow2_down(s)
    return s


def library_elements(v: Any, s: Any, f: Format, mode: str, rng: Any) -> Any:
    """``round_fmt(fp32(fp32(v) * s))`` with saturation (NaN stays NaN, +-Inf saturates):
    the elements of the library conventions, float64 values of the format, over the array
    namespace of ``v``."""
    with np.errstate(all="ignore"):
        y = _fp32(_fp32(v) * s)  # an exact float64 product of two fp32 values, rounded once
    return round_values(y, f, mode, "saturate", rng=rng)


def library_scale_of(scale: Any) -> Any:
    """A given ``scale=`` (the library's multiplier ``s``) taken as fp32."""
    return _fp32(scale)


def library_scale_inverse(s: Any) -> Any:
    """``fp32(1 / s)``: the ``scale_inv`` the libraries hand to the GEMM."""
    with np.errstate(all="ignore"):
        return _fp32(1.0 / s)
