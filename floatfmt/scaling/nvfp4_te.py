"""NVFP4 by Transformer Engine's scale convention: the fp32 arithmetic TE's cast kernels do.

floatfmt's own NVFP4 (``floatfmt.scaling.mx_nvfp4``) divides exactly: tensor scale
``ts = fp32(amax / 2688)``, block scale ``round_e4m3(amax_b / (6 * ts))``, elements
``round_e2m1(x / (block * ts))``, each quotient rounded once.  Transformer Engine (TE)
computes with an encode scale and fp32 multiplies instead, rounding each step:

1. the global encode scale ``S_enc = fp32(2688 / amax)`` (``448 * 6``: E4M3's max times
   E2M1's, an exact fp32 constant), at most ``FLT_MAX``; 1 when amax is 0 or the
   quotient is 0 (amax Inf);
2. each block's decode scale ``s_b = e4m3(fp32(amax_b * fp32(S_enc * fp32(1/6))))``
   (E4M3 round to nearest even, saturating to 448: ``static_cast<fp8e4m3>``, whose
   conversion is ``__NV_SATFINITE``);
3. ``S_dec = fp32(1 / S_enc)``, the block's encode factor
   ``e_b = min(fp32(1 / fp32(s_b * S_dec)), FLT_MAX)``;
4. each element ``q = e2m1(fp32(x * e_b))``, round to nearest even with saturation
   (``cvt.rn.satfinite.e2m1x2.f32``) or, for gradients, stochastic rounding
   (``cvt.rs.satfinite.e2m1x4.f32``; floatfmt draws its own random bits, so the
   distribution is TE's, not the bits).

Sources (Transformer Engine, main as of 2026-08): ``transformer_engine/common/cast/nvfp4/
core_nvfp4.cuh`` (``compute_global_encode_scaling_factor_FP4``,
``compute_decoding_scaling_factor``), ``quantize_transpose_nvfp4.cuh`` (``S_dec = 1.0 /
S_enc``, ``block_scale_inverse``) and ``common/util/ptx_arch_spec.cuh``
(``mul_cvt_fp32_to_fp4_4x``: ``mul.f32x2`` then the conversion).

``tile=(16, 16)`` gives one block scale to each 16 x 16 tile of a 2-D tensor (TE's
``fp4_2d_quantization`` of weights; NVIDIA, "Pretraining Large Language Models with
NVFP4", arXiv 2509.25149, section 4.2): the same values whichever axis the GEMM reads,
so ``W`` and ``W.T`` quantise alike.

What is kept: the ``QuantizedTensor`` (blocks of 16 along ``axis``) holds the E2M1
elements, the E4M3 block scales and ``tensor_scale = S_dec = fp32(1 / S_enc)``, so
``dequantize()`` is ``q * s_b * S_dec`` (exact).  TE itself stores the amax and
dequantises with ``fp32(fp32(s_b * amax) * fp32(1 / 2688))``
(``dequantize_nvfp4.cuh``); its GEMM takes ``alpha = fp32(fp32(amax_a * amax_b) *
fp32(1 / 2688**2))`` (``recipe/nvfp4.cu``, ``nvte_nvfp4_compute_per_tensor_scale``), which
``te_gemm_alpha`` computes.

    >>> import numpy as np
    >>> q = nvfp4_te_quantize(np.array([[1.0, 2.0, 3.0, 7.0]]))
    >>> float(te_encode_scale(7.0)), q.tensor_scale
    (384.0, 0.0026041667442768812)
    >>> q.elements.tolist(), q.scale.tolist()   # e_b = fp32(1 / fp32(448 * S_dec)): 6/7
    ([[1.0, 1.5, 3.0, 6.0]], [[448.0]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.block_formats import get_block_format
from ..core.cast import cast
from ..core.codec import values_to_codes
from ..core.modes import make_rng, resolve_mode
from ..core.rounding import round_values
from .quantized_tensor import QuantizedTensor, block_scale_layout, split_blocks, unsplit_blocks

__all__ = ["TE_TILES", "te_encode_scale", "te_block_scales", "te_gemm_alpha", "nvfp4_te_quantize"]

#: The block shapes of TE's NVFP4: 1 x 16 along the GEMM's K, and 16 x 16 (2-D, weights).
TE_TILES = ((1, 16), (16, 16))

_NV = get_block_format("nvfp4")
_F32 = np.float32
_FLT_MAX = _F32(np.finfo(np.float32).max)
_ENC = _F32(448.0 * 6.0)  # fp8_max * fp4_max, exact in fp32
_INV6 = _F32(1.0) / _F32(6.0)  # constexpr 1.0f / 6.0f


def te_encode_scale(amax: float) -> np.float32:
    """TE's global encode scale ``S_enc = min(fp32(2688 / fp32(amax)), FLT_MAX)``; 1 when
    amax is 0 or the quotient is 0.

    >>> float(te_encode_scale(6.0)), float(te_encode_scale(0.0))
    (448.0, 1.0)
    """
    a = _F32(amax)
    with np.errstate(all="ignore"):
        s = _ENC / a
    s = _F32(min(s, _FLT_MAX)) if not np.isnan(s) else _FLT_MAX  # fminf ignores a NaN
    if a == 0 or s == 0:
        return _F32(1.0)
    return s


def te_block_scales(block_amax: Any, s_enc: float) -> np.ndarray:
    """E4M3 decode scales ``e4m3_satfinite(fp32(amax_b * fp32(S_enc * fp32(1/6))))`` (float64
    array of E4M3 values)."""
    with np.errstate(all="ignore"):
        mult = _F32(_F32(s_enc) * _INV6)
        t = np.minimum(np.asarray(block_amax, np.float64).astype(_F32) * mult, _FLT_MAX)
    return np.asarray(cast(t.astype(np.float64), _NV.scale_format, overflow="saturate"), np.float64)


def te_gemm_alpha(amax_a: float, amax_b: float, alpha: float = 1.0) -> float:
    """TE's NVFP4 GEMM alpha, ``fp32(fp32(fp32(alpha * amax_a) * amax_b) * fp32(1 / 2688**2))``
    (``nvte_nvfp4_compute_per_tensor_scale``): what multiplies the sum of the block-scaled
    products ``(q_a * s_a) * (q_b * s_b)``.

    >>> te_gemm_alpha(2688.0, 2688.0)
    1.0
    """
    inv = _F32(1.0 / (6.0 * 6.0 * 448.0 * 448.0))
    return float(_F32(_F32(_F32(_F32(alpha) * _F32(amax_a)) * _F32(amax_b)) * inv))


def _tile_amax(a: np.ndarray, tile: tuple[int, int]) -> np.ndarray:
    """One |max| per 16 x 16 tile of a 2-D array, expanded to one per element."""
    r, c = a.shape
    tr, tc = tile
    R, C = -(-r // tr) * tr, -(-c // tc) * tc
    p = np.zeros((R, C), np.float64)
    p[:r, :c] = np.abs(a)
    t = p.reshape(R // tr, tr, C // tc, tc).max(axis=(1, 3))
    return np.repeat(np.repeat(t, tr, axis=0), tc, axis=1)[:r, :c]


def nvfp4_te_quantize(x: Any, axis: int = -1, *, tile: tuple[int, int] = (1, 16),
                      rounding: str = "nearest_even", rng: Any = None,
                      amax: float | None = None) -> QuantizedTensor:
    """NVFP4 quantisation of ``x`` by Transformer Engine's arithmetic (the module docstring):
    blocks of 16 along ``axis`` (``tile=(1, 16)``) or 16 x 16 tiles of a 2-D ``x``
    (``tile=(16, 16)``, the same result for either ``axis``); ``rounding``
    ``"nearest_even"`` or ``"stochastic"`` (``rng``: seed or Generator); ``amax``: the
    global amax to use (default ``max |x|``; TE's post-RHT amax of a transformed tensor
    is the amax of what is quantised).  ``x`` is taken to fp32 first (RNE: TE reads
    bf16 / fp16 / fp32 tensors, all exact).  ValueError for input not finite in fp32.

    >>> w = np.arange(32.0).reshape(2, 16)
    >>> a, b = nvfp4_te_quantize(w, tile=(16, 16)), nvfp4_te_quantize(w.T, 0, tile=(16, 16))
    >>> bool((a.dequantize() == b.dequantize().T).all())
    True
    """
    tile = tuple(tile)  # type: ignore[assignment]
    if tile not in TE_TILES:
        raise ValueError(f"tile must be one of {TE_TILES}, not {tile!r}")
    mode = resolve_mode(rounding)
    if mode not in ("nearest_even", "stochastic"):
        raise ValueError(f"TE's NVFP4 cast rounds to nearest even or stochastically, not {rounding!r}")
    v = np.asarray(x, np.float64)
    if v.ndim == 0:
        raise ValueError("NVFP4 quantisation needs an array with at least one dimension")
    if not np.isfinite(v).all():
        raise ValueError("NVFP4 has no NaN or Inf encoding; the input holds non-finite values")
    ax = axis % v.ndim if -v.ndim <= axis < v.ndim else None
    if ax is None:
        raise ValueError(f"axis {axis} is out of range for an array of {v.ndim} dimensions")
    with np.errstate(over="ignore"):
        x32 = v.astype(_F32)
    if not np.isfinite(x32).all():
        raise ValueError("NVFP4 by TE's arithmetic reads the input as fp32, and it holds values "
                         "past fp32's range")
    bs = _NV.block_size
    if tile == (16, 16):
        if v.ndim != 2:
            raise ValueError(f"16 x 16 tiles need a 2-D array, not {v.ndim}-D")
        amax_el = _tile_amax(x32.astype(np.float64), tile)
    else:
        rows, meta = split_blocks(np.abs(x32.astype(np.float64)), ax, bs)
        amax_el = unsplit_blocks(np.repeat(rows.max(axis=1, keepdims=True), bs, axis=1), meta, ax, bs)
    g = float(np.max(np.abs(x32))) if amax is None and v.size else (0.0 if amax is None else amax)
    s_enc = te_encode_scale(g)
    s_dec = _F32(_F32(1.0) / s_enc)
    sb_el = te_block_scales(amax_el, float(s_enc))
    with np.errstate(all="ignore"):
        enc = np.minimum(_F32(1.0) / (sb_el.astype(_F32) * s_dec), _FLT_MAX)
        y = (x32 * enc).astype(np.float64)
    r = make_rng(rng) if mode == "stochastic" else None
    q = np.asarray(round_values(y, _NV.element_format, mode, "saturate", rng=r), np.float64)
    erows, meta = split_blocks(q, ax, bs)
    bscale = split_blocks(sb_el, ax, bs)[0][:, 0]  # every element of a block carries its scale
    return QuantizedTensor(
        elements=unsplit_blocks(erows, meta, ax, bs), scale=block_scale_layout(bscale, meta, ax),
        zero_point=0, fmt="nvfp4", element_format=_NV.element_format, granularity="block", axis=ax,
        block_size=bs, scale_codes=block_scale_layout(values_to_codes(bscale, _NV.scale_format), meta, ax),
        tensor_scale=float(s_dec), scheme="symmetric")
