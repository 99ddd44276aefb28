"""Exact intake of user input: anything numeric -> float64 values plus a sticky mask.

float64 holds every value of every format up to fp32, and every float16, float32
and ml_dtypes array converts to it exactly.  Inputs that float64 cannot hold
(Python ints past 2**53, ``Fraction``, ``Decimal``, decimal strings, int64 past
2**53, long double) are truncated toward zero to float64 and carry a *sticky*
*remainder class* r: 0 exact, 1 below half a float64 ulp, 2 exactly half,
3 above half (so the exact magnitude is ``|x| + r/4`` ulps, roughly).  That is
all a single correct rounding to any format of at most 53 bits needs, so
nothing is rounded twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from numbers import Number

import numpy as np

from .formats import Format, get_format

__all__ = ["Exact", "to_exact", "holds"]

_TWO53 = 2 ** 53


@dataclass
class Exact:
    """Input converted for the rounding routine."""

    values: np.ndarray  # float64, truncated toward zero where inexact
    sticky: np.ndarray | None  # uint8 remainder class, or None when every value is exact
    scalar: bool  # the input was a scalar
    src: Format  # the input's own format (fp64 for Python numbers and integers)
    float_dtype: np.dtype | None  # the input's float dtype, if it had one
    # int64 remainder in 2**-54 float64 ulps, rounded to odd (``round_values``' resid),
    # or None when every value is exact: what stochastic rounding needs beyond the class
    resid: np.ndarray | None = None


def floor_log2(a: Fraction | int) -> int:
    """``floor(log2(a))`` of a positive rational, exactly (no float ``log2``).

    >>> floor_log2(Fraction(1, 3)), floor_log2(Fraction(1, 4)), floor_log2(1000)
    (-2, -2, 9)
    """
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    if (n << max(-e, 0)) < (d << max(e, 0)):
        e -= 1  # now 2**e <= a < 2**(e+1)
    return e


def _fraction_rz(fr: Fraction) -> tuple[float, int]:
    """Truncate a rational toward zero to float64; return (value, remainder class)."""
    if fr == 0:
        return 0.0, 0
    neg = fr < 0
    a, b = abs(fr.numerator), fr.denominator
    e = floor_log2(abs(fr))
    if e >= 1024:
        return (-math.inf if neg else math.inf), 3
    k = max(e, -1022) - 52
    num, den = (a, b << k) if k >= 0 else (a << -k, b)
    m, rem = divmod(num, den)
    hi = math.ldexp(m, k)
    twice = 2 * rem
    cls = 0 if rem == 0 else 1 if twice < den else 2 if twice == den else 3
    return (-hi if neg else hi), cls


def _resid(fr: Fraction, t: float) -> int:
    """``resid`` of the exact rational fr truncated toward zero to the float64 t:
    2**54 * (|fr| - |t|) / ulp(t), rounded to odd (see ``rounding.round_values``)."""
    if not math.isfinite(t):
        return 3 << 52  # a finite value past the float64 range: class 3
    rem = abs(fr) - abs(Fraction(t))
    if rem == 0:
        return 0
    u = Fraction(math.ulp(t))
    q, r = divmod(rem.numerator * u.denominator << 54, rem.denominator * u.numerator)
    return q | (r != 0)


def _resid_of(v, t: float, wrap_bits=None) -> int:
    """``resid`` of the input scalar v (as ``_scalar`` reads it) truncated to t."""
    if isinstance(v, (str, np.str_)):
        v = _parse_string(str(v))
    if isinstance(v, Decimal) and v.is_finite() and not v.is_zero() and v.adjusted() < -399:
        return 1  # far below 2**-1074: a sliver of the smallest subnormal's ulp
    if not math.isfinite(t):
        return 3 << 52
    fr = to_fraction(v)
    if wrap_bits is not None and not isinstance(v, float):
        red = abs(fr) % (1 << wrap_bits)
        fr = -red if fr < 0 else red
    return _resid(fr, t)


def to_fraction(obj) -> Fraction:
    """The exact rational value of a Python or numpy number, or of a numeric string
    (decimal or hex float; see ``to_exact``).  Non-finite values raise ValueError
    or OverflowError, as ``Fraction`` does."""
    if isinstance(obj, str):
        obj = _parse_string(obj)
    if isinstance(obj, np.floating):
        return Fraction(*obj.as_integer_ratio())  # exact for long double too
    if isinstance(obj, np.integer):
        return Fraction(int(obj))
    return Fraction(obj)


def _parse_string(s: str):
    t = s.strip().replace("_", "")
    low = t.lower()
    if low.lstrip("+-").startswith("0x"):
        try:
            return float.fromhex(t)  # hex floats are exact
        except ValueError:
            pass
    try:
        return Decimal(t)
    except InvalidOperation:
        raise TypeError(f"cannot interpret the string {s!r} as a number") from None


def _scalar(v, wrap_bits=None) -> tuple[float, int]:
    """(float64 truncated toward zero, remainder class) for one Python or numpy scalar.

    ``wrap_bits``: reduce the magnitude modulo 2**wrap_bits first (exact), for
    two's-complement wrap-around of huge integers."""
    if wrap_bits is not None and isinstance(v, (int, np.integer, Fraction, Decimal, str)) \
            and not isinstance(v, (bool, np.bool_)):
        if isinstance(v, str):
            v = _parse_string(v)
        if not isinstance(v, float) and not (isinstance(v, Decimal) and not v.is_finite()):
            fr = Fraction(v)
            red = abs(fr) % (1 << wrap_bits)
            v = -red if fr < 0 else red
    if isinstance(v, (bool, np.bool_)):
        return float(v), 0
    if isinstance(v, float):  # np.float64 included
        return float(v), 0
    if isinstance(v, (int, np.integer)):
        iv = int(v)
        if abs(iv) <= _TWO53:
            return float(iv), False
        return _fraction_rz(Fraction(iv))
    if isinstance(v, np.floating):
        if v.dtype.itemsize <= 8 or not np.isfinite(v):
            return float(v), 0
        return _fraction_rz(Fraction(*v.as_integer_ratio()))
    if isinstance(v, (str, np.str_)):
        v = _parse_string(str(v))
        if isinstance(v, float):
            return v, 0
    if isinstance(v, Decimal):
        if v.is_nan():
            return math.nan, 0
        if v.is_infinite():
            return (-math.inf if v < 0 else math.inf), 0
        if v.is_zero():
            return (-0.0 if v.is_signed() else 0.0), 0
        # Far outside float64 (|v| >= 1e309 or < 1e-399): decide without building a
        # rational with a million-digit power of ten.
        if v.adjusted() >= 309:
            return (-math.inf if v.is_signed() else math.inf), 3
        if v.adjusted() < -399:
            return (-0.0 if v.is_signed() else 0.0), 1
        return _fraction_rz(Fraction(v))
    if isinstance(v, Fraction):
        return _fraction_rz(v)
    if isinstance(v, (complex, np.complexfloating)):
        raise TypeError(f"complex numbers are not supported (got {v!r})")
    if hasattr(v, "dtype") and getattr(v, "shape", None) == ():  # 0-d arrays, ml_dtypes scalars
        return _scalar(np.asarray(v).astype(np.float64).item())
    if hasattr(v, "as_integer_ratio") and isinstance(v, Number):
        try:
            return _fraction_rz(Fraction(*v.as_integer_ratio()))
        except (ValueError, OverflowError):
            return float(v), 0  # nan / inf (e.g. gmpy2.mpfr)
    raise TypeError(f"expected a number, got {type(v).__name__}: {v!r}")


def _objects(arr: np.ndarray, wrap_bits=None):
    """(values, sticky, resid) of an object / string array, element by element."""
    vals = np.empty(arr.shape, np.float64)
    sticky = np.zeros(arr.shape, np.uint8)
    resid = None
    for idx, v in np.ndenumerate(arr):
        vals[idx], sticky[idx] = _scalar(v, wrap_bits)
        if sticky[idx]:
            if resid is None:
                resid = np.zeros(arr.shape, np.int64)
            resid[idx] = _resid_of(v, vals[idx], wrap_bits)
    if resid is None:
        return vals, None, None
    return vals, sticky, resid


def _from_torch(t):
    import ml_dtypes
    t = t.detach().cpu()
    name = str(t.dtype).replace("torch.", "")
    special = {"bfloat16": (np.uint16, ml_dtypes.bfloat16),
               "float8_e4m3fn": (np.uint8, ml_dtypes.float8_e4m3fn),
               "float8_e5m2": (np.uint8, ml_dtypes.float8_e5m2),
               "float8_e4m3fnuz": (np.uint8, ml_dtypes.float8_e4m3fnuz),
               "float8_e5m2fnuz": (np.uint8, ml_dtypes.float8_e5m2fnuz)}
    if name in special:
        import torch
        itype, mtype = special[name]
        tint = torch.int16 if itype is np.uint16 else torch.uint8
        return t.view(tint).numpy().view(itype).view(mtype)
    return t.numpy()


def _src_format(dtype: np.dtype) -> Format | None:
    try:
        return get_format(dtype)
    except (ValueError, TypeError):
        return None


def to_exact(x, wrap_bits=None) -> Exact:
    """Convert any supported input into an ``Exact`` record (see module docstring).

    ``wrap_bits`` reduces exact integer inputs modulo 2**wrap_bits on the way
    (used for ``overflow="wrap"``)."""
    fp64 = get_format("fp64")
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        x = _from_torch(x)
    if isinstance(x, (list, tuple)):
        try:
            arr = np.asarray(x)
        except ValueError as err:  # ragged
            raise TypeError(f"cannot make a rectangular array from this input: {err}") from None
        if arr.dtype.kind == "f" and any(isinstance(v, (Fraction, Decimal, str)) for v in np.ravel(x)):
            arr = np.asarray(x, dtype=object)
        return _exact_array(arr, False, fp64, wrap_bits)
    if isinstance(x, np.ndarray):
        return _exact_array(x, False, fp64, wrap_bits)
    if isinstance(x, np.generic):
        return _exact_array(np.asarray(x), True, fp64, wrap_bits)
    if isinstance(x, dict) or isinstance(x, (set, frozenset)):
        raise TypeError(f"expected a number or an array, got {type(x).__name__}")
    if hasattr(x, "__array__") and not isinstance(x, (str, bytes, Number, Decimal)):
        # Array-likes (floatfmt.FPArray, pandas, xarray ...): their exact values.
        return _exact_array(np.asarray(x), False, fp64, wrap_bits)
    hi, st = _scalar(x, wrap_bits)
    if not st:
        return Exact(np.asarray(hi, np.float64), None, True, fp64, None)
    return Exact(np.asarray(hi, np.float64), np.asarray(st, np.uint8), True, fp64, None,
                 np.asarray(_resid_of(x, hi, wrap_bits), np.int64))


def _exact_array(arr: np.ndarray, scalar: bool, fp64: Format, wrap_bits=None) -> Exact:
    kind = arr.dtype.kind
    if kind == "c":
        raise TypeError(f"complex numbers are not supported (got an array of {arr.dtype})")
    if kind == "f" and arr.dtype.itemsize <= 8:
        src = _src_format(arr.dtype)
        with np.errstate(invalid="ignore"):  # signalling-NaN payloads are still NaN
            return Exact(arr.astype(np.float64, copy=False), None, scalar, src, arr.dtype)
    if kind == "V" or (kind not in "biufcOUSMm" and _src_format(arr.dtype) is not None):
        src = _src_format(arr.dtype)  # ml_dtypes types
        if src is None:
            raise TypeError(f"unsupported array dtype {arr.dtype}")
        return Exact(arr.astype(np.float64), None, scalar, src, arr.dtype)
    if kind == "b":
        return Exact(arr.astype(np.float64), None, scalar, fp64, None)
    if kind in "iu":
        if arr.size == 0 or int(np.max(np.abs(arr.astype(np.float64)))) <= _TWO53:
            return Exact(arr.astype(np.float64), None, scalar, fp64, None)
        vals, sticky, resid = _objects(arr.astype(object), wrap_bits)
        return Exact(vals, sticky, scalar, fp64, None, resid)
    if kind == "f":  # long double
        vals, sticky, resid = _objects(arr.astype(object))
        return Exact(vals, sticky, scalar, fp64, None, resid)
    if kind in "OUS":
        if kind == "S":
            arr = arr.astype(str)
        vals, sticky, resid = _objects(arr, wrap_bits)
        return Exact(vals, sticky, scalar, fp64, None, resid)
    raise TypeError(f"unsupported array dtype {arr.dtype}")


def holds(src: Format, dst: Format) -> bool:
    """True when every value (and Inf / NaN) of ``dst`` is exactly a value of ``src``."""
    if src.kind != "float":
        return False
    if dst.kind == "int":
        return src.mbits + 1 >= dst.bits and src.emax >= dst.bits and src.has_nan
    return (src.mbits >= dst.mbits
            and src.emin - src.mbits <= dst.emin - dst.mbits
            and src.emax >= dst.emax
            and (src.inf or not dst.inf) and src.has_nan and src.signed >= dst.signed)
