"""Codes and neighbours: encode, decode, classify, next_up, next_down, ulp, values.

A code is the format's bit pattern as an unsigned integer, right-aligned in the
smallest of uint8 / uint16 / uint32 / uint64 that holds it (6- and 4-bit codes
in uint8, tf32's 19-bit code in uint32).  Integer formats use two's complement
(int8 -1 is 0xFF, int4 -1 is 0xF).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from typing import Any

import numpy as np

from ..backend.fpu import flushing, ieee, ieee_entry
from ..backend.namespace import NUMPY, is_tensor, namespace
from .cast import round_exact, tensor_exact
from ..backend.dispatch import check_tensors, from_host, host_kernels, tensor_entry, to_host
from .intake import holds, to_exact
from .formats import Format, FormatLike, get_format
from .types import Overflow, RngLike, Values
from .rounding import STOCHASTIC, make_rng, resolve_mode
from .threads import run_blocks

__all__ = ["encode", "decode", "classify", "next_up", "next_down", "ulp", "values",
           "code_dtype", "values_to_codes", "codes_to_values"]


def code_dtype(fmt: Format) -> np.dtype:
    """Smallest unsigned dtype that holds a code of ``fmt``."""
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if fmt.bits <= np.dtype(dt).itemsize * 8:
            return np.dtype(dt)
    raise AssertionError


def _nan_code(fmt: Format, neg, xp=NUMPY):
    """The NaN code of ``fmt`` with the sign of each element of the bool mask ``neg``
    (int64; formats with one NaN code ignore the sign)."""
    if fmt.nan == "ieee":
        c = (((1 << fmt.ebits) - 1) << fmt.mbits) | (1 << (fmt.mbits - 1))
    elif fmt.nan == "all_ones":
        c = (1 << (fmt.ebits + fmt.mbits)) - 1
    else:  # negative_zero
        c = 1 << (fmt.bits - 1)
        return np.where(neg, c, c) if xp is NUMPY else _to_int64(neg, xp) * 0 + c
    if xp is NUMPY:
        return np.where(neg & fmt.signed, c | (1 << (fmt.bits - 1)) if fmt.signed else c, c)
    if not fmt.signed:
        return _to_int64(neg, xp) * 0 + c
    return (_to_int64(neg, xp) << (fmt.bits - 1)) | c  # int64 shifts wrap into the sign bit


def values_to_codes(r, fmt: Format) -> np.ndarray:
    """Codes of values already in ``fmt`` (float64 array; NaN -> the format's NaN code).

    Works on cache-sized chunks, so the temporaries stay small for big arrays.  A
    float64 torch tensor gives a tensor of codes on its device (torch's unsigned
    dtype of the same width)."""
    if is_tensor(r):
        if host_kernels(r):  # CPU tensor: the numpy chunks on a view (floatfmt.backend.dispatch)
            return from_host(values_to_codes(to_host(r), fmt), r.device)
        xp = namespace(r)
        return _codes(r, fmt, xp).to(xp.code_dtype(fmt.bits))
    r = np.asarray(r, np.float64)
    return _by_chunks(lambda c: _codes(c, fmt), r.shape, code_dtype(fmt), r)


_CHUNK = 1 << 15


def _by_chunks(fn, shape, dtype, *arrays, rng=None):
    """A new array of ``shape`` and ``dtype`` holding ``fn`` applied to slices of
    ``_CHUNK`` elements of the flattened ``arrays`` (``None`` passes through as None).

    ``fn`` must work element by element; only its chunk-sized temporaries are alive
    at a time (per thread: blocks of chunks are shared among threads, see
    ``floatfmt.core.threads``), so the extra memory is a few chunks times the thread count
    however big the input is.  With ``rng`` (a Generator), ``fn`` also gets the
    generator of its block as a last argument (the stream does not depend on the
    thread count)."""
    out = np.empty(shape, dtype)
    dst = out.reshape(-1)
    flat = [None if a is None else np.asarray(a).reshape(-1) for a in arrays]

    def work(i, j, g):
        for k in range(i, j, _CHUNK):
            e = min(k + _CHUNK, j)
            parts = [None if a is None else a[k:e] for a in flat]
            dst[k:e] = fn(*parts) if rng is None else fn(*parts, g)

    run_blocks(dst.size, work, rng)
    return out


def _exact_chunks(ex, fn, dtype=np.float64, rng=None):
    """``_by_chunks`` over an ``Exact`` record: ``fn`` gets Exact records of one chunk
    (and, with ``rng``, the block's generator)."""
    if rng is None:
        return _by_chunks(lambda v, s, r: fn(replace(ex, values=v, sticky=s, resid=r)),
                          ex.values.shape, dtype, ex.values, ex.sticky, ex.resid)
    return _by_chunks(lambda v, s, r, g: fn(replace(ex, values=v, sticky=s, resid=r), g),
                      ex.values.shape, dtype, ex.values, ex.sticky, ex.resid, rng=rng)


def _codes(r, fmt: Format, xp=NUMPY):
    """values_to_codes for one 1-d chunk (or a whole tensor); int64 codes."""
    nan = xp.isnan(r)
    any_nan = xp.any(nan)
    if fmt.kind == "int":
        if any_nan:
            raise ValueError(f"{fmt.name} has no code for NaN")
        return _to_int64(r, xp) & ((1 << fmt.bits) - 1)
    if any_nan and not fmt.has_nan:
        raise ValueError(f"{fmt.name} has no NaN code; the input holds NaN")
    m = fmt.mbits
    bits = xp.bits(r)
    a = xp.floats(bits & 0x7FFFFFFFFFFFFFFF)  # |r|
    if fmt.subnormals:
        # A subnormal a becomes a + 2**emin, a normal double whose top m fraction bits
        # are a's significand; its exponent field is then one too high (fixed below).
        sub = a < fmt.smallest_normal
        a = xp.where(sub, a + fmt.smallest_normal, a)
    # The float64 fields shifted into place, (e64 << m) | mantissa, then rebiased.
    code = (xp.bits(a) >> (52 - m)) - ((1023 - fmt.bias) << m)
    if fmt.subnormals:
        code = code - (_to_int64(sub, xp) << m)
    inf = xp.isinf(a)
    if xp.any(inf):
        if not fmt.inf:
            raise ValueError(f"{fmt.name} has no Inf code; the input holds Inf")
        code = xp.where(inf, fmt.inf_code, code)
    if fmt.signed:
        code = code | (_to_int64(bits < 0, xp) << (fmt.bits - 1))
    if any_nan:
        code = xp.where(nan, _nan_code(fmt, bits < 0, xp), code)
    return code


def _to_int64(a, xp):
    return a.astype(np.int64) if xp is NUMPY else a.to(xp.t.int64)


def codes_to_values(codes, fmt: Format) -> np.ndarray:
    """float64 values of valid codes (int64 array) by the field formula (an int64
    tensor gives a float64 tensor on its device)."""
    xp = namespace(codes)
    c = np.asarray(codes, np.int64) if xp is NUMPY else codes
    if fmt.kind == "int":
        v = xp.where(fmt.signed & (c >= (1 << (fmt.bits - 1))), c - (1 << fmt.bits), c)
        return v.astype(np.float64) if xp is NUMPY else v.to(xp.t.float64)
    emask, mmask = (1 << fmt.ebits) - 1, (1 << fmt.mbits) - 1
    e = (c >> fmt.mbits) & emask
    m = c & mmask
    sub = (e == 0) & fmt.subnormals
    sig = xp.where(sub, m, m + (1 << fmt.mbits))
    sig = sig.astype(np.float64) if xp is NUMPY else sig.to(xp.t.float64)
    with np.errstate(over="ignore"):  # the Inf/NaN exponent field of fp64 (replaced below)
        v = xp.ldexp(sig, xp.where(sub, fmt.emin, e - fmt.bias) - fmt.mbits)
    if fmt.inf and fmt.nan != "ieee":  # P3109: +-Inf just above the largest finite code
        v = xp.where((c & ((1 << (fmt.ebits + fmt.mbits)) - 1)) == fmt.inf_code, np.inf, v)
    if fmt.nan == "ieee":
        top = e == emask
        v = xp.where(top, xp.where(m == 0, np.inf, np.nan), v)
    elif fmt.nan == "all_ones":
        v = xp.where((e == emask) & (m == mmask), np.nan, v)
    elif fmt.nan == "negative_zero":
        v = xp.where(c == (1 << (fmt.bits - 1)), np.nan, v)
    if fmt.signed:
        v = xp.where(((c >> (fmt.bits - 1)) & 1) == 1, -v, v)
    return v


@lru_cache(maxsize=None)
def _table(fmt: Format) -> np.ndarray:
    t = codes_to_values(np.arange(1 << fmt.bits, dtype=np.int64), fmt)
    t.setflags(write=False)
    return t


def encode(x: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,
           ftz: bool = False, daz: bool = False, rng: RngLike = None, *, sr_bits: int | None = None,
           container: FormatLike | None = None, sr_random: Any = None) -> Values:
    """Round ``x`` to ``fmt`` (as ``cast`` does) and return the bit patterns.

    Codes come right-aligned in the smallest unsigned dtype that holds them.
    ``container="fp32"`` returns the code of the same value in a wider format
    (tf32 as GPU memory keeps it: an fp32 word whose low 13 bits are zero).
    Formats without NaN raise ``ValueError`` for NaN input.  Scalars give a
    Python int.  A torch tensor gives a tensor of codes on its device, in
    torch's unsigned dtype of the same width (``torch.uint8`` ... ``uint64``;
    torch supports few operations on uint16/32/64: ``.to(torch.int64)`` first).

    >>> hex(encode(1.0, "fp16")), hex(encode(-2.0, "bf16")), hex(encode(448, "e4m3"))
    ('0x3c00', '0xc000', '0x7e')
    >>> encode(1 + 2**-10, "tf32"), hex(encode(1 + 2**-10, "tf32", container="fp32"))
    (130049, '0x3f802000')
    """
    if flushing():  # a thread that flushes subnormals: IEEE for the call (backend.fpu)
        with ieee():
            return encode(x, fmt, rounding, overflow, ftz, daz, rng, sr_bits=sr_bits,
                          container=container, sr_random=sr_random)
    fmt = get_format(fmt)
    target = fmt
    if container is not None:
        target = get_format(container)
        if not holds(target, fmt):
            raise ValueError(f"container {target.name} cannot hold every {fmt.name} value")
    ex = tensor_exact(x) if is_tensor(x) else to_exact(x)
    if is_tensor(x) or ex.values.size == 0 or sr_random is not None:
        codes = values_to_codes(round_exact(ex, fmt, rounding, overflow, ftz, daz, rng, sr_bits,
                                            sr_random), target)
        return int(codes) if ex.scalar else codes
    # chunk by chunk from the input to the codes (no float64 array of the whole result);
    # under stochastic rounding the same draws as cast (per block, see floatfmt.core.threads)
    g = make_rng(rng) if resolve_mode(rounding) in STOCHASTIC else None

    def chunk(e, gb=rng):
        return _codes(round_exact(e, fmt, rounding, overflow, ftz, daz, gb, sr_bits), target)

    codes = _exact_chunks(ex, chunk, code_dtype(target), rng=g)
    return int(codes) if ex.scalar else codes


def _as_codes(codes, fmt: Format) -> tuple[np.ndarray, bool]:
    scalar = np.isscalar(codes) or (isinstance(codes, np.ndarray) and codes.ndim == 0)
    arr = np.asarray(codes)
    if isinstance(codes, (float, np.floating)) or arr.dtype.kind not in "iu" and not (
            arr.dtype.kind == "O" and all(isinstance(v, (int, np.integer)) for v in arr.ravel())):
        if arr.dtype.kind == "b" or isinstance(codes, bool):
            raise TypeError("codes must be integers, not booleans")
        raise TypeError(f"codes must be integers, not {arr.dtype if arr.dtype.kind != 'O' else type(codes).__name__}")
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= (1 << fmt.bits):
            raise ValueError(f"code {hi if hi >= (1 << fmt.bits) else lo} does not fit {fmt.name}: "
                             f"codes are 0..{(1 << fmt.bits) - 1} ({fmt.bits} bits)")
    return arr.astype(np.uint64 if arr.dtype.kind == "O" else arr.dtype), scalar


@ieee_entry
def decode(codes: Values, fmt: FormatLike) -> np.ndarray | float:
    """Values (float64) of bit patterns of ``fmt``.

    An integer torch tensor of codes gives a float64 tensor on its device.

    >>> decode(0x3c00, "fp16"), decode(0x7e, "fp8_e4m3"), decode(0b0111, "fp4_e2m1")
    (1.0, 448.0, 6.0)
    """
    fmt = get_format(fmt)
    if is_tensor(codes):
        return _decode_tensor(codes, fmt)
    arr, scalar = _as_codes(codes, fmt)
    if fmt.bits <= 16:
        table = _table(fmt)
        out = _by_chunks(lambda c: table[c.astype(np.intp)], arr.shape, np.float64, arr)
    else:
        out = _by_chunks(lambda c: codes_to_values(c.astype(np.int64), fmt), arr.shape,
                         np.float64, arr)
    return float(out) if scalar else out


def _decode_tensor(codes, fmt: Format):
    """decode for an integer tensor: float64 values on its device (the field formula,
    the same that builds the numpy path's table)."""
    check_tensors("floatfmt.decode", [codes], codes=True)
    xp = namespace(codes)
    c = xp.int64(codes)
    if host_kernels(c):  # CPU tensor: the numpy table / formula on a view (floatfmt.backend.dispatch)
        h = to_host(c)  # int64; 64-bit codes are their two's complement: view as uint64
        return from_host(np.asarray(decode(h.view(np.uint64) if fmt.bits == 64 else h, fmt),
                                    np.float64), c.device)
    if c.numel() and fmt.bits < 64:  # (int64 holds 64-bit patterns as two's complement)
        lo, hi = xp.minmax(c)
        if lo < 0 or hi >= (1 << fmt.bits):
            raise ValueError(f"code {hi if hi >= (1 << fmt.bits) else lo} does not fit {fmt.name}: "
                             f"codes are 0..{(1 << fmt.bits) - 1} ({fmt.bits} bits)")
    return codes_to_values(c, fmt)


_CLASSES = np.array(["zero", "subnormal", "normal", "inf", "nan"])


@ieee_entry
def classify(x: Values, fmt: FormatLike, rounding: str = "nearest_even", **options: Any) -> Values:
    """Class of ``x`` after rounding to ``fmt``: ``zero``, ``subnormal``,
    ``normal``, ``inf`` or ``nan`` (integers: ``zero`` or ``normal``).

    >>> classify(1e-5, "fp16"), classify(1e-5, "bf16"), classify(1e5, "fp16")
    ('subnormal', 'normal', 'inf')

    ``options`` are those of ``cast`` (``overflow``, ``ftz``, ``daz``, ``rng``,
    ``sr_bits``, ``dtype``); the input is classified chunk by chunk, so the extra
    memory stays a few chunks beyond the result.  torch tensors raise TypeError
    (a tensor holds no strings; classify ``x.cpu().numpy()``).
    """
    fmt = get_format(fmt)
    if is_tensor(x):
        raise TypeError("classify returns class names (str), which a torch tensor cannot hold: "
                        "classify x.cpu().numpy(), or compare ff.cast(x, fmt) with "
                        "ff.info(fmt).smallest_normal on the tensor's device")
    unknown = sorted(set(options) - set(_CAST_OPTIONS))
    if unknown:
        raise TypeError(f"classify() got an unexpected keyword argument {unknown[0]!r}; "
                        f"valid: {', '.join(_CAST_OPTIONS)}")
    opts = {**_CAST_OPTIONS, **options}
    rng = opts.pop("rng")
    if resolve_mode(rounding) in STOCHASTIC:
        rng = make_rng(rng)  # one stream across the chunks (per block: see floatfmt.core.threads)
    else:
        rng = None  # (round_exact ignores it outside stochastic rounding)
    dtype = opts.pop("dtype")
    ex = to_exact(x, wrap_bits=fmt.bits if opts["overflow"] == "wrap" else None)

    def chunk(e, g=None):
        r = round_exact(e, fmt, rounding, rng=g, **opts)
        if dtype is not None:
            r = r.astype(dtype).astype(np.float64)
        a = np.abs(r)
        idx = np.select([np.isnan(r), np.isinf(r), a == 0, a < fmt.smallest_normal],
                        [4, 3, 0, 1], 2)
        return _CLASSES[idx]

    out = _exact_chunks(ex, chunk, _CLASSES.dtype, rng=rng)
    return str(out) if ex.scalar else out


_CAST_OPTIONS = {"overflow": None, "ftz": False, "daz": False, "rng": None, "sr_bits": None,
                 "dtype": None}


def _step(r, fmt: Format, up: bool, xp=NUMPY):
    """Neighbour one step up (or down) in value of values r that are in ``fmt``."""
    if fmt.kind == "int":
        n = r + (1.0 if up else -1.0)
        return xp.where((n > fmt.max) | (n < fmt.min), np.nan, n)
    fin = xp.isfinite(r)
    # r's side of zero (up: zero counts as positive, down: as negative; Inf keeps its sign)
    side = xp.where(r == 0, 1.0 if up else -1.0, xp.copysign(1.0, r))
    mag = xp.where(fin, xp.abs(r), 0.0)
    mag_code = _codes(mag, fmt, xp) if xp is not NUMPY else values_to_codes(mag, fmt).astype(np.int64)
    nc = mag_code + (((side > 0) == up) * 2 - 1)  # +1 away from zero, -1 toward it
    mag = codes_to_values(xp.clip(nc, 0, fmt.max_code), fmt)
    mag = xp.where(nc > fmt.max_code, np.inf if fmt.inf else np.nan, xp.where(nc < 0, np.nan, mag))
    out = side * mag
    if not fmt.signed:
        out = xp.where(side < 0, np.nan, out)
    # Infinities: one step inward gives +-max; outward stays infinite (IEEE nextUp), or
    # is NaN in P3109 formats (section 4.16: nothing compares greater than +Inf).
    outward = np.nan if fmt.rules == "p3109" else r
    inward = xp.where((r > 0) == up, outward, xp.copysign(fmt.max, r))
    return xp.where(fin, out, xp.where(xp.isnan(r), np.nan, inward))


def _neighbour(x, fmt, up: bool):
    fmt = get_format(fmt)
    ex = to_exact(x)
    out = _exact_chunks(ex, lambda e: _neighbour_chunk(e, fmt, up))
    return float(out) if ex.scalar else out


def _neighbour_chunk(ex, fmt: Format, up: bool):
    v = ex.values
    xp = namespace(v)
    inexact = xp.falses(v) if ex.sticky is None else ex.sticky != 0
    r = round_exact(ex, fmt, "up" if up else "down", "inf" if fmt.inf else "saturate")
    exact = (r == v) & ~inexact
    out = xp.where(exact, _step(r, fmt, up, xp), r)
    if not fmt.inf:
        # Past the finite range there is nothing further out, and from beyond it the
        # first value met is the end of the range (rounding saturated or gave NaN).
        lo, hi = fmt.min, fmt.max
        above = (v > hi) | ((v == hi) & inexact)
        below = (v < lo) | ((v == lo) & inexact & (lo < 0))
        out = xp.where(above, np.nan if up else hi, xp.where(below, lo if up else np.nan, out))
    if not fmt.negative_zero:
        out = out + 0.0
    return out


def _device_next_up(x: Any, fmt: FormatLike) -> Any:
    """``next_up`` on a tensor of any device: the numpy path's rule with torch ops there
    (``floatfmt.backend.dispatch``); a float64 tensor."""
    return _neighbour_chunk(tensor_exact(x), get_format(fmt), True)


def _device_next_down(x: Any, fmt: FormatLike) -> Any:
    """``next_down`` on a tensor of any device (see ``_device_next_up``)."""
    return _neighbour_chunk(tensor_exact(x), get_format(fmt), False)


def _device_ulp(x: Any, fmt: FormatLike) -> Any:
    """``ulp`` on a tensor of any device (see ``_device_next_up``)."""
    return _ulp_chunk(tensor_exact(x).values, get_format(fmt))


@tensor_entry('next_up', ('x',), device_impl=_device_next_up)
def next_up(x: Values, fmt: FormatLike) -> Values:
    """Smallest value of ``fmt`` strictly greater than ``x`` (+Inf past max, or NaN
    for formats without Inf; +Inf for +Inf, but NaN in the P3109 formats, whose
    NextGreaterThan(Inf) is NaN, section 4.16).

    >>> next_up(1.0, "fp16"), next_up(0.0, "fp8_e4m3"), next_up(-0.5, "fp4_e2m1")
    (1.0009765625, 0.001953125, -0.0)
    """
    return _neighbour(x, fmt, True)


@tensor_entry('next_down', ('x',), device_impl=_device_next_down)
def next_down(x: Values, fmt: FormatLike) -> Values:
    """Largest value of ``fmt`` strictly less than ``x`` (mirror of ``next_up``).

    >>> next_down(1.0, "bf16"), next_down(448.0, "e4m3")
    (0.99609375, 416.0)
    """
    return _neighbour(x, fmt, False)


@tensor_entry('ulp', ('x',), device_impl=_device_ulp)
def ulp(x: Values, fmt: FormatLike) -> Values:
    """Spacing of ``fmt`` at ``|x|``: the gap between the two values of ``fmt``
    that bracket ``|x|`` (for a value of the format, the gap to the next larger
    magnitude), ``2**(max(floor(log2|x|), emin) - mbits)``; 1 for integers.

    >>> ulp(1.0, "fp16"), ulp(1000.0, "bf16"), ulp(0.0, "fp16")
    (0.0009765625, 4.0, 5.960464477539063e-08)
    """
    fmt = get_format(fmt)
    ex = to_exact(x)
    out = _exact_chunks(ex, lambda e: _ulp_chunk(e.values, fmt))
    return float(out) if ex.scalar else out


def _ulp_chunk(v, fmt: Format):
    xp = namespace(v)
    fin = xp.isfinite(v)
    if fmt.kind == "int":
        return xp.where(fin, 1.0, np.nan)
    if xp is NUMPY:
        e = np.frexp(np.abs(v))[1].astype(np.int64)
    else:
        e = xp.t.frexp(xp.abs(v))[1].to(xp.t.int64)
    e = xp.where(v == 0, fmt.emin, e - 1)  # floor(log2|v|)
    k = xp.where(e < fmt.emin, fmt.emin, e) - fmt.mbits
    return xp.where(fin, xp.pow2(k), np.nan)


@ieee_entry
def values(fmt: FormatLike) -> np.ndarray:
    """Every distinct finite value of ``fmt`` in increasing order (one zero);
    formats of at most 16 bits.

    >>> values("fp4_e2m1")[7:].tolist()
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    """
    fmt = get_format(fmt)
    if fmt.bits > 16:
        raise ValueError(f"values() lists formats of at most 16 bits; {fmt.name} has {fmt.bits}")
    t = _table(fmt)
    return np.unique(t[np.isfinite(t)]) + 0.0  # one zero, +0
