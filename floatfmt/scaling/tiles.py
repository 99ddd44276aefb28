"""Group-wise and 2-D block scaling: the per-tensor rules applied tile by tile.

``granularity="group"``: one scale (and zero point) per ``group_size`` consecutive
elements along ``axis`` (GPTQ / AWQ-style weight groups); ``granularity="block"``: one
per 2-D block ``block=(rows, cols)`` of the last two axes (DeepSeek-V3's 128 x 128
weight blocks).  Each tile's range is its own ``max``; then the per-tensor scale rule
of its format (``floatfmt.scaling.scales``); then one rounding of every ``x / scale``.
"""

from __future__ import annotations

import numpy as np

from ..core.block_formats import get_block_format
from .quantized_tensor import QuantizedTensor, normalize_axis, tile_expand
from .scales import (fp32_scale, int_scale_params, round_float_quotients, round_int_quotients,
                          unit_scale_where_infinite)

__all__: list[str] = []


def is_integer(n):
    return isinstance(n, (int, np.integer)) and not isinstance(n, bool)


def tiled_request(kind, f, granularity, group_size, block):
    """True for ``granularity="group"`` / ``"block"``; rejects ``group_size`` / ``block``
    given with anything else (and with MX / NVFP4, whose blocks are fixed)."""
    key = granularity.strip().lower() if isinstance(granularity, str) else granularity
    if kind in ("mx", "nvfp4") and (key in ("group", "block") or group_size is not None
                                    or block is not None):
        name = f if isinstance(f, str) else f.name
        raise ValueError(f"{name} has its own blocks ({get_block_format(name).block_size} "
                         f"along axis); granularity={granularity!r}, group_size and block do not apply "
                         f"(given: group_size={group_size!r}, block={block!r}). "
                         "Group-wise and 2-D block scaling take integer formats (int8 uint8 int4 uint4) "
                         "and float formats (fp8_e4m3 fp8_e5m2 ...).")
    if group_size is not None and key != "group":
        raise ValueError(f"group_size={group_size!r} applies to granularity='group', not "
                         f"granularity={granularity!r}")
    if block is not None and key != "block":
        raise ValueError(f"block={block!r} applies to granularity='block', not granularity={granularity!r}")
    return key in ("group", "block")


def _tile_shape(shape, granularity, group_size, block, axis):
    """(tile: one size per dimension, normalised axis or None) of a group / block request."""
    ndim = len(shape)
    if granularity == "group":
        if group_size is None:
            raise ValueError("granularity='group' needs group_size= (elements per group, e.g. 32, 64 or 128)")
        if not is_integer(group_size):
            raise TypeError(f"group_size must be an integer, not {type(group_size).__name__}")
        ax = normalize_axis(-1 if axis is None else axis, ndim, "group-wise quantisation")
        n = shape[ax]
        if not (0 < group_size and (group_size <= n or n == 0)):  # an empty axis has no groups
            raise ValueError(f"group_size={group_size} is not a group of axis {ax} ({n} elements); "
                             f"valid: 1..{n}")
        tile = [1] * ndim
        tile[ax] = int(group_size)
        return tuple(tile), ax
    if block is None:
        raise ValueError("granularity='block' needs block=(rows, cols), e.g. block=(128, 128)")
    if axis is not None:
        raise ValueError(f"axis={axis!r} does not apply to granularity='block' (2-D blocks tile the "
                         "last two axes); valid: axis=None")
    if isinstance(block, (str, bytes)) or not hasattr(block, "__len__"):
        raise TypeError(f"block must be a pair of integers (rows, cols), not {type(block).__name__}")
    if len(block) != 2:
        raise ValueError(f"block={tuple(block)!r} must be a pair (rows, cols), e.g. (128, 128)")
    if not all(is_integer(b) for b in block):
        raise TypeError(f"block must hold integers, not {tuple(type(b).__name__ for b in block)}")
    if ndim < 2:
        raise ValueError(f"granularity='block' needs an array of at least 2 dimensions, not {ndim}")
    rows, cols = shape[-2:]
    # a zero-length axis has no blocks, so any positive size fits it
    if not all(0 < b and (b <= d or d == 0) for b, d in zip(block, (rows, cols))):
        raise ValueError(f"block={tuple(int(b) for b in block)} does not fit the last two dimensions "
                         f"({rows}, {cols}); valid: 1..{rows} rows, 1..{cols} columns")
    return (1,) * (ndim - 2) + (int(block[0]), int(block[1])), None


def _tile_reduce(a, tile, fn):
    """``fn`` (np.max or np.min) over each tile of ``a``, on the grid ``ceil(shape / tile)``;
    partial edge tiles are padded with zeros first (the documented rule)."""
    nt = tuple(-(-d // t) for d, t in zip(a.shape, tile))
    pad = [(0, n * t - d) for n, t, d in zip(nt, tile, a.shape)]
    if any(p for _, p in pad):
        a = np.pad(a, pad)
    a = a.reshape(tuple(x for n, t in zip(nt, tile) for x in (n, t)))
    return fn(a, axis=tuple(range(1, 2 * len(tile), 2)))


def tiled_layout(shape, f, granularity, group_size, block, axis, symmetric, calibration, scale,
                 zero_point):
    """(tile: one size per dimension, normalised axis or None) of a group / 2-D block request
    on an array of ``shape``, after checking the options that tiling allows (calibration
    ``"max"``, no given scale or zero point, floats symmetric); shared by the numpy and the
    namespace (``floatfmt.scaling.quantize_schemes``) code."""
    tile, ax = _tile_shape(shape, granularity, group_size, block, axis)
    if calibration != "max":
        raise ValueError(f"calibration={calibration!r} is not available with granularity="
                         f"{granularity!r}; valid: max")
    if zero_point is not None or not (scale is None or (isinstance(scale, str) and scale == "amax")):
        raise ValueError(f"granularity={granularity!r} computes a scale{'' if symmetric else ' and zero point'} "
                         f"per {granularity} from its elements; valid: scale=None (or 'amax'), "
                         f"zero_point=None")
    if f.kind != "int" and not symmetric:
        scheme = "symmetric" if symmetric else "asymmetric"
        raise ValueError(f"scheme={scheme!r} does not apply to float formats ({f.name}); valid: symmetric")
    return tile, ax


def quantize_tiled(v, frac, sticky, narrow, f, granularity, group_size, block, axis, symmetric,
                    calibration, scale, zero_point, margin, pow2, narrow_range, mode, overflow, rng):
    """Group-wise / 2-D block quantisation: each tile's range by ``calibration="max"``,
    then the per-tensor scale rule of its format (``int_scale_params`` / ``fp32_scale``),
    then one rounding of every ``x / scale`` (``round_int_quotients`` / ``round_float_quotients``)."""
    tile, ax = tiled_layout(v.shape, f, granularity, group_size, block, axis, symmetric,
                            calibration, scale, zero_point)
    scheme = "symmetric" if symmetric else "asymmetric"
    fin = v if np.isfinite(v).all() else np.where(np.isfinite(v), v, 0.0)
    if symmetric:
        hi = _tile_reduce(np.abs(fin), tile, np.max).astype(np.float64)
        lo = -hi
    else:
        lo = _tile_reduce(fin, tile, np.min).astype(np.float64)
        hi = _tile_reduce(fin, tile, np.max).astype(np.float64)
    label = "group" if granularity == "group" else "block2d"
    size = int(group_size) if granularity == "group" else tile[-2:]

    def full(a):
        return tile_expand(np.asarray(a), tile, v.shape)

    if f.kind == "int":
        sc, zp, qmin, qmax = int_scale_params(lo, hi, f, symmetric, narrow_range, pow2)
        if margin:
            sc = fp32_scale(np.asarray(sc) * 2.0 ** margin, pow2)
        n = round_int_quotients(v, frac, narrow, full(sc), full(zp), qmin, qmax, mode, rng)
        return QuantizedTensor(n, sc, zp, f.name, f, label, ax, size, None, None, qmin, qmax,
                               scheme, block_shape=tile)
    sc = fp32_scale(hi * 2.0 ** margin / f.max, pow2)
    if v.size:  # a tile whose amax is infinite: scale 1 (Transformer Engine's block scaling)
        sc = unit_scale_where_infinite(sc, _tile_reduce(np.isinf(v).astype(np.float64), tile, np.max) > 0)
    r = round_float_quotients(v, frac, sticky, narrow, full(sc), f, mode, overflow, rng)
    return QuantizedTensor(r, sc, 0, f.name, f, label, ax, size, scheme=scheme, block_shape=tile)
