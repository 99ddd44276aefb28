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

import numpy as np

from ..core.cast import cast
from ..core.formats import Format
from ..core.names import unknown_name

__all__ = ["SCALE_CONVENTIONS", "check_convention", "library_scale", "library_elements"]

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


def _pow2_down(s: np.ndarray) -> np.ndarray:
    """Each fp32 value with its mantissa bits cleared (TE's ``scale_bits &= 0xFF800000``;
    torchao's ``exp2(floor(log2(s)))`` is the same for normal fp32 values)."""
    bits = s.astype(np.float32).view(np.uint32) & np.uint32(0xFF800000)
    return bits.view(np.float32)


def library_scale(amax, f: Format, convention: str, margin: int, pow2: bool) -> np.ndarray:
    """``s`` (fp32, as a float32 array) of each amax by ``convention`` ("te" / "torchao")."""
    a = np.asarray(amax, np.float64).astype(np.float32)
    mx = np.float32(f.max)
    with np.errstate(all="ignore"):
        if convention == "torchao":
            s = (np.float64(mx) / np.maximum(a.astype(np.float64), _TORCHAO_EPS)).astype(np.float32)
        else:
            s = mx / a  # IEEE fp32 division (numpy: round to nearest even)
            s = np.where(np.isinf(s), np.float32(np.finfo(np.float32).max), s)
            s = np.where((a == 0) | ~np.isfinite(a), np.float32(1.0), s).astype(np.float32)
        if margin:
            s = (s / np.float32(2.0 ** margin)).astype(np.float32)
        if pow2:
            s = _pow2_down(s)
    return s


def library_elements(v, s: np.ndarray, f: Format, mode: str, rng) -> np.ndarray:
    """``round_fmt(fp32(fp32(v) * s))`` with saturation: the elements of the library
    conventions (float64 array of format values)."""
    x32 = np.asarray(v, np.float64).astype(np.float32)
    with np.errstate(all="ignore"):
        y = (x32 * s).astype(np.float32)  # IEEE fp32 multiply, one rounding
    return np.asarray(cast(y.astype(np.float64), f, rounding=mode, overflow="saturate", rng=rng),
                      np.float64)
