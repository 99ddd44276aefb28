"""Block scaling: OCP MX (E8M0 power-of-two scales) and NVFP4 (E4M3 scales, fp32 tensor scale).

The block facts (element format, block size, scale format, ``emax_elem``) are data in
the block registry (``floatfmt.core.block_formats``); this module computes the scales
and rounds the elements, each quotient once, through the one rounding routine.

* OCP MX v1.0: blocks of 32 along ``axis`` share ``2**E`` with
  ``E = floor(log2(amax)) - emax_elem`` (other rules: ``SCALE_ROUNDINGS``), stored
  as E8M0; elements ``x / 2**E`` rounded to the element format, saturating.
* NVFP4: blocks of 16; the block scale ``amax_block / (6 * ts)`` rounded once to
  E4M3; ``ts`` an fp32 per-tensor scale; elements ``x / (block * ts)`` to E2M1.

    >>> import floatfmt as ff
    >>> ff.fake_quant([0.1, 0.3, 7.0], "mxfp4_e2m1").tolist()
    [0.0, 0.5, 6.0]
"""

from __future__ import annotations

import numpy as np

from ..core.block_formats import block_formats, get_block_format
from ..core.cast import cast
from ..core.formats import Format, get_format
from ..core.codec import values_to_codes
from .quantized_tensor import (QuantizedTensor, block_scale_layout, choose, resolve_kind, split_blocks,
                        unsplit_blocks)
from .quotients import remainder_kwargs, scaled_quotient
from .nvfp4_te import nvfp4_te_quantize
from .nvfp4_torchao import nvfp4_torchao_quantize
from ..core.rounding import STOCHASTIC, round_values

__all__ = ["MX_FORMATS", "SCALE_ROUNDINGS", "mx_shared_exponent"]

#: OCP MX v1.0 block formats: name -> element format name, read from the block registry
#: (``floatfmt.core.block_formats``, which holds block sizes, scale formats and ``emax_elem``).
MX_FORMATS = {n: get_block_format(n).element for n in block_formats()
              if get_block_format(n).scale == "e8m0"}
_NV = get_block_format("nvfp4")

#: Shared-exponent rules for MX scales (see ``mx_shared_exponent``).
SCALE_ROUNDINGS = ("floor", "ceil", "even", "rceil")


def mx_shared_exponent(amax, fmt="mxfp8_e4m3", scale_rounding="floor"):
    """Shared exponent E of MX blocks whose largest magnitude is ``amax``; NaN marks a
    NaN scale (E8M0 code 0xFF).

    ``floor`` (OCP MX v1.0): ``E = floor(log2(amax)) - emax_elem``, taken exactly from
    the float64 exponent field (``np.frexp``), never from a floating-point ``log2``
    (``log2(2**k * (1 - 2**-53))`` rounds to ``k`` in float64).  Other rules
    (torchao's ``ScaleCalculationMode``): ``ceil`` uses ``ceil(log2(amax))``;
    ``even`` first rounds amax to the element precision (ties away, as torchao adds
    half an ulp); ``rceil`` is the smallest E with ``amax / 2**E <= max_elem``
    (nothing saturates; NVIDIA's round-up E8M0 conversion of ``amax / max_elem``).
    Then: ``E < -127`` (and all-zero blocks) clamp to -127; ``E > 127``, Inf and NaN
    give NaN.

    >>> mx_shared_exponent([1.0, 448.0, 449.0, 0.0], "mxfp8_e4m3").tolist()
    [-8.0, 0.0, 0.0, -127.0]
    >>> mx_shared_exponent([449.0, 480.0], "mxfp8_e4m3", "rceil").tolist()
    [1.0, 1.0]
    """
    kind, name = resolve_kind(fmt)
    if kind != "mx":
        raise ValueError(f"mx_shared_exponent needs an MX format ({', '.join(MX_FORMATS)}), not {fmt!r}")
    mode = choose("scale_rounding", scale_rounding, SCALE_ROUNDINGS)
    elem = get_format(MX_FORMATS[name])
    a = np.abs(np.asarray(amax, np.float64))
    return _shared_exponent(a, name, elem, mode)


def mx_emax(name, elem: Format | None = None) -> int:
    """The OCP MX ``emax_elem`` of block format ``name`` (from the block registry)."""
    return get_block_format(name).emax_elem


def _mx_mbits(name, elem: Format):
    return get_block_format(name).element_mbits


def _mx_max(name, elem: Format):
    return get_block_format(name).element_max


def _shared_exponent(a, name, elem, mode):
    emax = mx_emax(name, elem)
    if mode == "even":
        # torchao EVEN: round amax to the element precision (half-ulp added: ties away)
        a = round_values(a, get_format(f"e11m{_mx_mbits(name, elem)}"), "nearest_away")
    m, e = np.frexp(a)
    E = (e - 1 - emax).astype(np.float64)
    if mode == "ceil":
        E += m != 0.5
    elif mode == "rceil":
        with np.errstate(all="ignore"):
            E += np.ldexp(a, (-E).clip(-2000, 2000).astype(np.int64)) > _mx_max(name, elem)
    E = np.where(a == 0, -127.0, np.maximum(E, -127.0))
    return np.where(np.isfinite(a) & (E <= 127), E, np.nan)



_CHUNK_ROWS = 4096  # 2**17 elements a chunk: fewer round_values calls, passes stay in cache
_SIGNLESS = {2: (np.int16, 0x7FFF), 4: (np.int32, 0x7FFFFFFF), 8: (np.int64, 0x7FFFFFFFFFFFFFFF)}
# (exponent shift, exponent-field mask, bias) of the float dtypes whose floor(log2) is read
# from the exponent field directly (float16 amaxes go through _shared_exponent)
_EXP_FIELD = {4: (23, 0xFF, 127), 8: (52, 0x7FF, 1023)}


def _block_amax_bits(blk, ibuf, mbuf):
    """Sign-cleared bit pattern of the largest magnitude of each row of ``blk`` (a
    contiguous (rows, 32) float array), as integers of the same width.

    With the sign bit cleared, integer order is magnitude order for IEEE floats, with
    NaN patterns above Inf (NaN-safe, no abs temporary).  The row maximum is a fold:
    max of the even and odd elements, five times, each a single numpy call over the
    whole chunk (a reduction along rows of 32 pays numpy's per-row overhead)."""
    it, mask = _SIGNLESS[blk.dtype.itemsize]
    k = blk.size
    src = np.bitwise_and(blk.reshape(-1).view(it), it(mask), out=ibuf.view(it)[:k])
    dst = mbuf.view(it)
    h = k // 2
    while h >= blk.shape[0]:
        np.maximum(src[0:2 * h:2], src[1:2 * h:2], out=dst[:h])
        src, dst = dst[:h], src
        h //= 2
    return src


def _floor_exponent(bits, dtype, emax):
    """(E as int64, NaN-scale mask) of the ``floor`` rule from sign-cleared amax bits of
    float32 or float64 data: floor(log2 amax) is the unbiased exponent field (zero
    and subnormal amaxes sit below -127 - emax, so they clamp to -127 like zero)."""
    sh, fmask, bias = _EXP_FIELD[dtype.itemsize]
    e = (bits >> sh).astype(np.int64)
    E = e - (bias + emax)
    bad = (e == fmask) | (E > 127)  # Inf / NaN, or a scale past E8M0's range
    np.maximum(E, -127, out=E)
    E[bad] = 0
    return E, bad


def _pow2(k):
    """2.0**k as float64 for int64 k in -1022..1023, built from the exponent bits."""
    return ((k + 1023) << 52).view(np.float64)


def mx_quantize(v, sticky, name, axis, scale_rounding, mode, rng, fake=False):
    """MX quantisation of ``v`` (a float16/32/64 array, or float64 values with an
    optional remainder class); with ``fake`` returns the dequantised values instead
    (fused, in v's dtype when that holds them: float32 and float64 inputs always do,
    as MX values of a float32 input are float32 values).

    Works through chunks of ``_CHUNK_ROWS`` blocks with reused scratch buffers (fresh
    large temporaries cost page faults): block amax by a fold of integer maxima, E
    from the exponent bits, scaling by exact powers of two built from bits, one
    ``round_values`` call per chunk, one multiply back."""
    bf = get_block_format(name)
    elem, bs = bf.element_format, bf.block_size
    if v.ndim == 0:
        raise ValueError("MX quantisation needs an array with at least one dimension")
    rows, meta = split_blocks(v, axis, bs)
    st_rows = None if sticky is None else split_blocks(sticky, axis, bs)[0]
    shift = bf.element_shift
    emax = bf.emax_elem
    out_dtype = v.dtype if (fake and v.dtype in (np.float32, np.float64)) else np.float64
    q = np.empty(rows.shape, out_dtype)
    E = None if fake else np.empty(rows.shape[0], np.float64)
    int_exp = scale_rounding == "floor" and rows.dtype.itemsize in _EXP_FIELD
    # scratch buffers reused by every chunk
    nrow = min(_CHUNK_ROWS, rows.shape[0])
    ybuf = np.empty((nrow, bs), np.float64)
    rbuf = np.empty((nrow, bs), np.float64)
    ibuf = np.empty(nrow * bs * rows.dtype.itemsize, np.uint8)
    mbuf = np.empty(nrow * bs // 2 * rows.dtype.itemsize, np.uint8)
    # float32 data in nearest / toward-zero modes: scale in float32 (half the bytes)
    f32_scale = (rows.dtype == np.float32 and not shift and st_rows is None
                 and mode in ("nearest_even", "nearest_away", "toward_zero"))
    fbuf = np.empty((nrow, bs), np.float32) if f32_scale else None
    for i in range(0, rows.shape[0], _CHUNK_ROWS):
        blk = rows[i:i + _CHUNK_ROWS]
        nb = blk.shape[0]
        bits = _block_amax_bits(blk, ibuf, mbuf)
        if int_exp:
            Ek, bad = _floor_exponent(bits, rows.dtype, emax)
        else:
            amax = bits.view(rows.dtype).astype(np.float64)
            Ei = _shared_exponent(amax, name, elem, scale_rounding)
            bad = np.isnan(Ei)
            Ek = np.where(bad, 0.0, Ei).astype(np.int64)
        any_bad = bool(bad.any())
        y = _scaled_chunk(blk, _pow2(shift - Ek), ybuf[:nb], None if fbuf is None else fbuf[:nb])
        if any_bad:
            y[bad] = 0.0
        # a power-of-two scaling keeps an input's remainder class (if any) valid
        st = None if st_rows is None else st_rows[i:i + _CHUNK_ROWS]
        if blk.dtype == np.float64:  # narrower inputs never scale below 2**-276
            y, st = settle_tiny(blk, y, bad if any_bad else None, st, mode in STOCHASTIC)
        qi = q[i:i + _CHUNK_ROWS]
        if not fake and not shift:
            round_values(y, elem, mode, "saturate", rng=rng, **remainder_kwargs(st), out=qi)
        else:
            r = round_values(y, elem, mode, "saturate", rng=rng, **remainder_kwargs(st), out=rbuf[:nb])
            if not fake:
                np.multiply(r, 2.0 ** -shift, out=qi)
            elif out_dtype == np.float32:
                # exact: element values and 2**(E - shift) >= 2**-133 are float32 values,
                # and so are their products (MX values of float32 data)
                np.copyto(qi, r, casting="same_kind")
                np.multiply(qi, _pow2(Ek - shift).astype(np.float32)[:, None], out=qi)
            else:
                np.multiply(r, _pow2(Ek - shift)[:, None], out=qi)
        if not fake:
            E[i:i + _CHUNK_ROWS] = np.where(bad, np.nan, Ek)
        elif any_bad:
            qi[bad] = np.nan  # a NaN scale makes its whole block NaN
    if fake:
        return unsplit_blocks(q, meta, axis, bs)
    return _mx_tensor(q, E, meta, axis, name)


def settle_tiny(x, y, bad_rows, st, fine):
    """(y, remainder) with the scaled values ``y = x * 2**k`` (one power of two a row) that
    float64 may have rounded replaced by their exact single-rounding stand-in.

    A product of a power of two is exact while it is a normal float64 number; a nonzero
    ``x`` whose product is at most 2**-1022 in magnitude may have been rounded (into the
    subnormals, to zero, or up to 2**-1022), and rounding that again would be a double
    rounding.  Such an exact value lies strictly between 0 and 2**-1021, far below half
    the smallest step of every MX element format (2**-16 for E5M2; 1 for MXINT8's
    integers), so each is rounded once as a signed zero with remainder class 1 (a hair
    beyond zero; ``fine``, for stochastic rounding: the smallest ``resid``, 1: the exact
    value is below 2**-1000 of a step, and every stochastic threshold is the same for
    all positive fractions that small).  ``bad_rows``: rows
    with a NaN scale (left as they are); ``st``: the input's remainder or None."""
    with np.errstate(all="ignore"):
        tiny = (np.abs(y) <= 2.0 ** -1022) & (x != 0)
    if bad_rows is not None:
        tiny &= ~bad_rows[:, None]
    if not tiny.any():
        return y, st
    y[tiny] = np.copysign(0.0, x[tiny])
    st = np.zeros(y.shape, np.int64 if fine else np.uint8) if st is None else np.array(st)
    st[tiny] = 1
    return y, st


def _scaled_chunk(blk, p2, y, f32buf):
    """``blk * p2`` (one power of two ``2**(shift - E)`` a row, E in -127..127) into the
    float64 buffer ``y``, exactly.  ``f32buf``: float32 data whose modes allow it are
    multiplied in float32 (half the bytes): exact except below 2**-126, which rounds to
    (signed) zero in those modes anyway (element formats' subnormals are >= 2**-17)."""
    if blk.dtype == np.float64:
        np.multiply(blk, p2[:, None], out=y)
    elif f32buf is not None:
        np.multiply(blk, p2.astype(np.float32)[:, None], out=f32buf)
        np.copyto(y, f32buf)
    else:
        np.copyto(y, blk)
        np.multiply(y, p2[:, None], out=y)
    return y


def _mx_tensor(q, E, meta, axis, name) -> QuantizedTensor:
    """The ``QuantizedTensor`` of MX element rows ``q`` and shared exponents ``E`` (NaN: a
    NaN scale), scales stored as E8M0 codes (the biased exponent; 0xFF is NaN)."""
    bf = get_block_format(name)
    bad = np.isnan(E)
    Ek = np.where(bad, 0.0, E).astype(np.int64)
    scale = np.where(bad, np.nan, np.ldexp(1.0, Ek))
    codes = np.where(bad, 255, Ek + 127).astype(np.uint8)
    return QuantizedTensor(
        elements=unsplit_blocks(q, meta, axis, bf.block_size),
        scale=block_scale_layout(scale, meta, axis), zero_point=0, fmt=name,
        element_format=bf.element_format, granularity="block", axis=axis,
        block_size=bf.block_size, scale_codes=block_scale_layout(codes, meta, axis),
        scheme="symmetric")



# ---------------------------------------------------------------------------------------------
# NVFP4

def nvfp4_tensor_scale(amax: float, tensor_scale: float | None = None) -> float:
    """NVFP4's fp32 per-tensor scale: ``fp32(amax / (6 * 448))`` (so that the largest block
    scale is E4M3's max; 1.0 for an all-zero tensor, the smallest fp32 subnormal where
    that rounds to 0), or the given ``tensor_scale`` rounded to fp32.  ValueError when
    it is not positive and finite (an amax past fp32's max times 2688 included: no
    fp32 tensor scale holds it)."""
    elem, sfmt, tfmt = _NV.element_format, _NV.scale_format, _NV.tensor_scale_format
    assert tfmt is not None  # NVFP4 has a tensor scale
    if tensor_scale is None:
        ts = float(cast(amax / (elem.max * sfmt.max), tfmt)) if amax > 0 else 1.0
        if ts == 0.0:
            ts = tfmt.smallest_subnormal
        if not np.isfinite(ts):
            raise ValueError(f"NVFP4's fp32 tensor scale amax / {elem.max * sfmt.max:g} overflows "
                             f"fp32 (amax = {amax!r}); scale the input down first")
        return ts
    ts = float(cast(tensor_scale, tfmt))
    if not (ts > 0 and np.isfinite(ts)):
        raise ValueError(f"tensor_scale must be a positive finite fp32 number, not {tensor_scale!r}")
    return ts


def nvfp4_quantize(v, frac, narrow, axis, mode, rng, tensor_scale=None, scale_convention="exact"):
    """NVFP4 of the float64 values ``v`` (``frac``: their exact Fractions, or None) by
    ``scale_convention``: ``"exact"`` here (the module docstring), ``"te"``
    (``nvfp4_te.nvfp4_te_quantize``) or ``"torchao"`` (``nvfp4_torchao``); the library
    conventions read ``v`` as fp32, so a ``frac`` is rounded to fp32 once first."""
    if scale_convention != "exact":
        if frac is not None:  # one rounding of the exact input to the fp32 the libraries read
            v = np.asarray(cast(frac, "fp32", overflow="inf"), np.float64)
        return _library_nvfp4(v, axis, mode, rng, tensor_scale, scale_convention)
    elem, bs, sfmt = _NV.element_format, _NV.block_size, _NV.scale_format
    if v.ndim == 0:
        raise ValueError("NVFP4 quantisation needs an array with at least one dimension")
    fin = np.isfinite(v)
    if not fin.all():
        raise ValueError("NVFP4 has no NaN or Inf encoding; the input holds non-finite values")
    rows, meta = split_blocks(v, axis, bs)
    amax_b = np.max(np.abs(rows), axis=1)
    ts = nvfp4_tensor_scale(float(amax_b.max()) if amax_b.size else 0.0, tensor_scale)
    # block scale: amax_b / (6 * ts) rounded once to E4M3 (saturating)
    bq, bst = scaled_quotient(amax_b, None, elem.max * ts, False, sfmt)
    bscale = round_values(bq, sfmt, "nearest_even", "saturate", sticky=bst)
    denom = bscale * ts  # E4M3 (4 bits) * fp32 (24 bits): exact
    zero = denom == 0
    frows = None if frac is None else split_blocks(frac, axis, bs)[0]
    yq, yst = scaled_quotient(rows, frows, np.where(zero, 1.0, denom)[:, None], narrow, elem,
                              mode == "stochastic")
    q = round_values(yq, elem, mode, "saturate", rng=rng, **remainder_kwargs(yst))
    q[zero] = 0.0
    return QuantizedTensor(
        elements=unsplit_blocks(q, meta, axis, bs), scale=block_scale_layout(bscale, meta, axis),
        zero_point=0, fmt="nvfp4", element_format=elem, granularity="block", axis=axis,
        block_size=bs, scale_codes=block_scale_layout(values_to_codes(bscale, sfmt), meta, axis),
        tensor_scale=float(ts), scheme="symmetric")


def _library_nvfp4(v, axis, mode, rng, tensor_scale, convention):
    """NVFP4 by Transformer Engine's (``"te"``) or torchao's (``"torchao"``) arithmetic;
    ValueError for what that library does not take."""
    if convention == "te":
        if tensor_scale is not None:
            raise ValueError("tensor_scale does not apply to scale_convention='te': Transformer "
                             "Engine derives its NVFP4 tensor scale from the amax (S_enc = "
                             "2688 / amax). Leave tensor_scale out, or use 'exact' or 'torchao'")
        return nvfp4_te_quantize(v, axis, rounding=mode, rng=rng)
    if mode != "nearest_even":
        raise ValueError(f"torchao's NVFP4 cast rounds to nearest even, not {mode!r}")
    return nvfp4_torchao_quantize(v, axis, tensor_scale=tensor_scale)
