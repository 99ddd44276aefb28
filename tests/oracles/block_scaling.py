"""An exact reference for group-wise and 2-D block scaling (granularity="group" / "block").

Each element's group comes from its index alone (no reshaping or padding); each group's
scale from the documented formula in Fraction arithmetic, rounded to fp32 by its own integer
rounding; every x / scale rounded with Fractions (integers: half to even; float elements:
nearest-even over ml_dtypes' value table, saturating).  Nothing of floatfmt is used.
"""

from bisect import bisect_left
from fractions import Fraction

import ml_dtypes
import numpy as np


def rne(fr: Fraction, mbits: int, emin: int) -> Fraction:
    """Fraction rounded to the nearest value of a binary format with ``mbits`` fraction
    bits and smallest normal exponent ``emin`` (ties to even; subnormals on the emin
    grid), finite range only (no overflow handling)."""
    if fr == 0:
        return Fraction(0)
    a = abs(fr)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - mbits)
    r = round(a / quantum) * quantum  # round() of a Fraction: half to even
    return r if fr > 0 else -r


def fp32_rne(fr: Fraction) -> Fraction:
    """Fraction rounded to the nearest fp32 value (ties to even), finite range only."""
    return rne(fr, 23, -126)


INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15)}


def ref_int_params(vals, fmt, symmetric):
    """(scale, zero_point, qmin, qmax) of one group by the documented rule."""
    bits = 8 if fmt.endswith("8") else 4
    qmin, qmax = INT_RANGE[fmt]
    signed = fmt.startswith("int")
    if symmetric:  # narrow range: signed -127..127 (int4 -7..7), unsigned from 1
        qmin += 1
        amax = max(abs(Fraction(float(v))) for v in vals)
        half = 2 ** (bits - 1) - 1
        scale = fp32_rne(amax / half) if amax > 0 else Fraction(1)
        zp = 0 if signed else 2 ** (bits - 1)
        return scale, zp, qmin, qmax
    lo = min(min(Fraction(float(v)) for v in vals), Fraction(0))
    hi = max(max(Fraction(float(v)) for v in vals), Fraction(0))
    scale = fp32_rne((hi - lo) / (qmax - qmin)) if hi > lo else Fraction(1)
    zp = min(max(qmin - round(lo / scale), qmin), qmax)
    return scale, zp, qmin, qmax


FLOAT_DT = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
            "fp4_e2m1": ml_dtypes.float4_e2m1fn}


def _value_table(fmt):
    bits = 4 if fmt == "fp4_e2m1" else 8
    codes = np.arange(1 << (bits - 1), dtype=np.uint8)
    vals = codes.view(FLOAT_DT[fmt]).astype(np.float64)
    keep = np.isfinite(vals)
    return [Fraction(float(v)) for v in vals[keep]], [int(c) for c in codes[keep]]


TABLES = {f: _value_table(f) for f in FLOAT_DT}


def ref_float_round(fr: Fraction, fmt) -> Fraction:
    vals, codes = TABLES[fmt]
    a = abs(fr)
    if a >= vals[-1]:
        r = vals[-1]
    else:
        i = bisect_left(vals, a)
        if vals[i] == a:
            r = a
        else:
            lo, hi = vals[i - 1], vals[i]
            r = lo if (a - lo < hi - a or (a - lo == hi - a and codes[i - 1] % 2 == 0)) else hi
    return -r if fr < 0 else r


def group_ids(shape, granularity, size, axis):
    """The group of every element from its index alone."""
    ids = {}
    for idx in np.ndindex(*shape):
        if granularity == "group":
            key = idx[:axis] + (idx[axis] // size,) + idx[axis + 1:]
        else:
            key = idx[:-2] + (idx[-2] // size[0], idx[-1] // size[1])
        ids.setdefault(key, []).append(idx)
    return ids


def pow2_up(fr: Fraction) -> Fraction:
    """The smallest power of two >= fr > 0."""
    e = fr.numerator.bit_length() - fr.denominator.bit_length()
    while Fraction(2) ** e < fr:
        e += 1
    while Fraction(2) ** (e - 1) >= fr:
        e -= 1
    return Fraction(2) ** e


def ref_quantize(x, fmt, granularity, size, axis, symmetric, pow2=False):
    """(elements, scale grid as a dict key -> Fraction, zero points) by the reference;
    ``pow2``: float scales rounded up to a power of two instead of to fp32."""
    out = np.empty(x.shape, np.float64)
    scales, zps = {}, {}
    for key, members in group_ids(x.shape, granularity, size, axis).items():
        vals = [x[i] for i in members]
        if fmt in INT_RANGE:
            s, zp, qmin, qmax = ref_int_params(vals, fmt, symmetric)
            for i in members:
                out[i] = min(max(round(Fraction(float(x[i])) / s) + zp, qmin), qmax)
        else:
            amax = max(abs(Fraction(float(v))) for v in vals)
            fmax = TABLES[fmt][0][-1]
            raw = amax / fmax
            s = Fraction(1) if amax == 0 else (pow2_up(raw) if pow2 else fp32_rne(raw))
            zp = 0
            for i in members:
                out[i] = float(ref_float_round(Fraction(float(x[i])) / s, fmt))
        scales[key], zps[key] = s, zp
    return out, scales, zps
