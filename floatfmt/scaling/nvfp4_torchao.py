"""NVFP4 by torchao's convention: the fp32 steps of ``NVFP4Tensor.to_nvfp4`` with two-level scaling.

torchao (``torchao/prototype/mx_formats/nvfp4_tensor.py``: ``nvfp4_quantize``,
``per_tensor_amax_to_scale``; the input is taken to fp32 first, ``data_hp.float()``)
divides where Transformer Engine multiplies, and rounds every step to fp32:

1. per-tensor scale ``ts = fp32(fp32(amax) / 2688)`` (``per_tensor_amax_to_scale``,
   ``2688 = 448 * 6``; ``use_dynamic_per_tensor_scale``), or a given ``per_tensor_scale``
   (``quantize``'s ``tensor_scale=``) taken as fp32;
2. per block of 16: ``b = fp32(amax_b / 6)``, the E4M3 scale
   ``s_b = e4m3(clamp(fp32(b / ts), 2**-6, 448))`` (round to nearest even;
   ``2**-6 = torch.finfo(torch.float8_e4m3fn).tiny``, so a block scale is never zero
   nor subnormal: an all-zero block gets ``2**-6``);
3. ``total = fp32(ts * s_b)``; elements ``q = e2m1(clamp(fp32(x / total), -6, 6))``,
   round to nearest even (``f32_to_f4_unpacked``).

torchao itself takes 2-D tensors blocked along the last axis with whole blocks; here any
``axis`` and a partial last block (its scale from the elements it has) are allowed.
ValueError where torchao would divide by zero (``ts`` or ``total`` 0: an all-zero
tensor, or amax below about ``2688 * 2**-144``; torchao's result there is NaN) and for
input that is not finite in fp32.  The ``QuantizedTensor`` keeps ``q``, ``s_b`` and
``tensor_scale = ts``: ``dequantize()`` is the exact ``q * s_b * ts`` (torchao's
``to_dtype`` rounds ``fp32(ts * s_b)`` first).

    >>> q = nvfp4_torchao_quantize(np.array([[0.0, 1.0, 2.5, 6.0]]))
    >>> q.tensor_scale, q.scale.tolist(), q.elements.tolist()
    (0.0022321429569274187, [[448.0]], [[0.0, 1.0, 2.0, 6.0]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.block_formats import get_block_format
from ..core.cast import cast
from ..core.codec import values_to_codes
from ..core.rounding import round_values
from .quantized_tensor import QuantizedTensor, block_scale_layout, split_blocks, unsplit_blocks

__all__ = ["torchao_tensor_scale", "nvfp4_torchao_quantize"]

_NV = get_block_format("nvfp4")
_F32 = np.float32
_E4M3_TINY = _F32(2.0 ** -6)


def torchao_tensor_scale(amax: float) -> np.float32:
    """torchao's NVFP4 per-tensor scale ``fp32(fp32(amax) / 2688)``.

    >>> float(torchao_tensor_scale(2688.0)), float(torchao_tensor_scale(1.0))
    (1.0, 0.00037202381645329297)
    """
    return _F32(_F32(amax) / _F32(2688.0))


def nvfp4_torchao_quantize(x: Any, axis: int = -1, *,
                           tensor_scale: float | None = None) -> QuantizedTensor:
    """NVFP4 quantisation of ``x`` by torchao's arithmetic (the module docstring): blocks of
    16 along ``axis``; ``tensor_scale``: torchao's ``per_tensor_scale`` (default
    ``torchao_tensor_scale(max |x|)``)."""
    v = np.asarray(x, np.float64)
    if v.ndim == 0:
        raise ValueError("NVFP4 quantisation needs an array with at least one dimension")
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = v.astype(_F32)
    if not np.isfinite(x32).all():
        raise ValueError("NVFP4 has no NaN or Inf encoding; the input holds values that are not "
                         "finite in fp32 (torchao reads the input as fp32)")
    ax = axis % v.ndim if -v.ndim <= axis < v.ndim else None
    if ax is None:
        raise ValueError(f"axis {axis} is out of range for an array of {v.ndim} dimensions")
    amax = float(np.max(np.abs(x32))) if v.size else 0.0
    ts = torchao_tensor_scale(amax) if tensor_scale is None else _F32(tensor_scale)
    if not (ts > 0 and np.isfinite(ts)):
        raise ValueError(f"torchao's NVFP4 divides by its per-tensor scale, here {float(ts)!r} "
                         "(an all-zero tensor, an amax below 2688 * 2**-150, or a tensor_scale "
                         "that is not positive and finite in fp32): its result would be NaN")
    bs = _NV.block_size
    rows, meta = split_blocks(x32, ax, bs)
    with np.errstate(over="ignore"):
        b = np.abs(rows).max(axis=1) / _F32(6.0)          # fp32 division
        t = np.clip(b / ts, _E4M3_TINY, _F32(448.0))      # fp32 division, then the clamp
    sb = np.asarray(cast(t.astype(np.float64), _NV.scale_format), np.float64)
    total = (sb.astype(_F32) * ts).astype(_F32)           # fp32 multiply
    if not (total > 0).all():
        raise ValueError("torchao's NVFP4 block divisor fp32(tensor_scale * block_scale) "
                         "underflows to 0 here: its result would be NaN")
    with np.errstate(over="ignore"):
        y = np.clip(rows / total[:, None], _F32(-6.0), _F32(6.0))  # fp32 division, clamp
    q = np.asarray(round_values(y.astype(np.float64), _NV.element_format, "nearest_even",
                                "saturate"), np.float64)
    return QuantizedTensor(
        elements=unsplit_blocks(q, meta, ax, bs), scale=block_scale_layout(sb, meta, ax),
        zero_point=0, fmt="nvfp4", element_format=_NV.element_format, granularity="block",
        axis=ax, block_size=bs, scale_codes=block_scale_layout(values_to_codes(sb, _NV.scale_format), meta, ax),
        tensor_scale=float(ts), scheme="symmetric")
