"""Exact intake of user input: anything numeric -> float64 values plus a sticky mask.

float64 holds every value of every format up to fp32, and every float16, float32
and ml_dtypes array converts to it exactly.  Inputs that float64 cannot hold
(Python ints past 2**53, int64 / uint64 past 2**53, ``Fraction``, ``Decimal``,
decimal and hex strings, long double) are truncated toward zero to float64 and
carry a *sticky* *remainder class* r: 0 exact, 1 below half a float64 ulp,
2 exactly half, 3 above half (so the exact magnitude is ``|x| + r/4`` ulps,
roughly).  That is all a single correct rounding to any format of at most 53
bits needs, so nothing is rounded twice.

Every way in (scalars, numpy arrays of any dtype, lists and tuples, nested or
mixed, other array-likes) ends in the same per-value rules:

* int64 / uint64 arrays and scalars are split into their top 53 bits and a
  remainder class in integer arithmetic (``_integers``), never by a float64
  conversion that would round first.
* A list or tuple keeps numpy's array only when numpy's conversion rounds
  nothing (``_sequence``); a mix that numpy would promote with rounding (big
  ints next to floats, uint64 next to negative ints, floats next to strings) is
  taken element by element, each element exactly as it would be on its own.
* Strings: decimal (``"0.1"``, ``"1e400"``, ``"inf"``, ``"nan"``) and hex floats
  (``"0x1.8p-3"``) are both read exactly; neither rounds nor overflows on the
  way in (``"0x1p2000"`` is a finite number past float64, like ``"1e400"``).
"""

from __future__ import annotations

import decimal
import math
import re
import typing
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from numbers import Number
from typing import SupportsFloat

import numpy as np

from .formats import Format, get_format
from .mldtypes_link import module as ml_module, scalar_types as ml_scalar_types

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


def fraction_rz(fr: Fraction) -> tuple[float, int]:
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


def fraction_resid(fr: Fraction, t: float) -> int:
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
    """``resid`` of the input scalar v (as ``_scalar`` reads it) truncated to t.

    Values past the float64 range or far below its smallest subnormal are decided from
    their exponent alone, never by expanding a huge power of two or ten."""
    if not math.isfinite(t):
        return 3 << 52  # a finite value past the float64 range: class 3
    if isinstance(v, (str, np.str_)):
        h = _parse_hex(str(v).strip().replace("_", ""))
        if h is not None and h[1] and h[1].bit_length() - 1 + h[2] < -1130:
            return 1  # |v| < 2**-1129: 2**54 * |v| / 2**-1074 < 1/2, rounded to odd
        v = parse_string(str(v))
    if isinstance(v, Decimal) and v.is_finite() and not v.is_zero() and v.adjusted() < -399:
        return 1  # far below 2**-1074: a sliver of the smallest subnormal's ulp
    fr = to_fraction(v)
    if wrap_bits is not None and not isinstance(v, float):
        red = abs(fr) % (1 << wrap_bits)
        fr = -red if fr < 0 else red
    return fraction_resid(fr, t)


def to_fraction(obj) -> Fraction:
    """The exact rational value of a Python or numpy number, or of a numeric string
    (decimal or hex float; see ``to_exact``).  Non-finite values raise ValueError
    or OverflowError, as ``Fraction`` does."""
    if isinstance(obj, str):
        obj = parse_string(obj)
    if hasattr(obj, "dtype") and getattr(obj, "shape", None) == () and not isinstance(obj, np.generic):
        obj = obj[()]  # a 0-d array: its element
    if isinstance(obj, np.generic) and obj.dtype.kind not in "biufcOUS":
        obj = float(np.asarray(obj).astype(np.float64))  # ml_dtypes scalars: exact in float64
    if isinstance(obj, np.floating):
        return Fraction(*obj.as_integer_ratio())  # exact for long double too
    if isinstance(obj, np.integer):
        return Fraction(int(obj))
    return Fraction(obj)


_HEX = re.compile(r"([+-]?)(0x)?([0-9a-f]*)(?:\.([0-9a-f]*))?(?:p([+-]?[0-9]+))?", re.IGNORECASE)


def _parse_hex(t: str):
    """``(negative, m, e)`` with the exact value ``(-1)**negative * m * 2**e`` of a hex
    float string (already stripped of blanks and ``_``), or None when ``t`` is not one.

    The grammar is ``float.fromhex``'s: a sign, ``0x``, hex digits with an optional
    point, an optional binary exponent ``p[+-]N``.  A string counts as hex when it
    has the ``0x`` prefix or a ``p`` exponent (a decimal string never has either);
    unlike ``float.fromhex`` nothing is rounded and no exponent is too large.

    >>> _parse_hex("-0x1.8p-1"), _parse_hex("0x.4"), _parse_hex("1.8p3"), _parse_hex("1e5")
    ((True, 24, -5), (False, 4, -4), (False, 24, -1), None)
    """
    m = _HEX.fullmatch(t)
    if m is None or (m[2] is None and m[5] is None):
        return None
    whole, frac = m[3], m[4] or ""
    if not whole and not frac:
        return None  # no digits ("0x", "0x.p1")
    exp = int(m[5]) if m[5] is not None else 0
    return m[1] == "-", int(whole + frac, 16), exp - 4 * len(frac)


_WIDE = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def parse_string(s: str):
    """The exact value of a numeric string as a ``Decimal``.

    Decimal strings (``"0.1"``, ``"-1e400"``, ``"inf"``, ``"nan"``, underscores
    allowed) are read by ``Decimal``; hex floats (``"0x1.8p-3"``, see
    ``_parse_hex``) are converted to the Decimal of exactly the same value, so both
    kinds of string follow one path afterwards.  Anything else raises TypeError.
    """
    t = s.strip().replace("_", "")
    h = _parse_hex(t)
    if h is not None:
        neg, m, e = h
        if e >= 0:
            d = Decimal(m << e)
        else:  # m / 2**-e = m * 5**-e / 10**-e: a terminating decimal, exactly
            d = Decimal(m * 5 ** -e).scaleb(e, _WIDE)
        return d.copy_negate() if neg else d
    try:
        return Decimal(t)
    except InvalidOperation:
        raise TypeError(f"cannot interpret the string {s!r} as a number") from None


def _string_rz(s: str) -> tuple[float, int]:
    """(float64 truncated toward zero, remainder class) of a numeric string."""
    t = s.strip().replace("_", "")
    h = _parse_hex(t)
    if h is None:
        return _decimal_rz(parse_string(s))
    neg, m, e = h
    sign = -1.0 if neg else 1.0
    if m == 0:
        return math.copysign(0.0, sign), 0
    top = m.bit_length() - 1 + e  # 2**top <= |value| < 2**(top+1)
    # Far outside float64: decide without building a rational with a huge power of two.
    if top >= 1024:
        return sign * math.inf, 3
    if top < -1076:  # below a quarter of the smallest subnormal
        return math.copysign(0.0, sign), 1
    fr = Fraction(m << e) if e >= 0 else Fraction(m, 1 << -e)
    return fraction_rz(-fr if neg else fr)


def _decimal_rz(v: Decimal) -> tuple[float, int]:
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
    return fraction_rz(Fraction(v))


def _wrap_reduce(v, bits: int):
    """v with its magnitude reduced modulo 2**bits (exactly; the sign kept), or v
    itself when that changes nothing.  Strings and Decimals with huge exponents are
    decided from the exponent (a multiple of 2**bits, or already below it) without
    building the huge rational."""
    if isinstance(v, np.integer):
        v = int(v)  # Fraction(np.uint64) would keep numpy integers inside
    if isinstance(v, np.floating):
        v = Fraction(*v.as_integer_ratio())  # long double
    if isinstance(v, str):
        t = v.strip().replace("_", "")
        h = _parse_hex(t)
        if h is not None:
            neg, m, e = h
            if m == 0 or m.bit_length() + e <= bits:  # |v| < 2**bits already
                return v
            if e >= bits:  # m * 2**e is a multiple of 2**bits
                return Fraction(0)
            fr = Fraction(m << max(e, 0), 1 << max(-e, 0))
            v = -fr if neg else fr
        else:
            v = parse_string(v)
    if isinstance(v, Decimal):
        if not v.is_finite() or v.is_zero() or v.adjusted() < 0:  # |v| < 1: nothing to reduce
            return v
        q = v.as_tuple().exponent  # an int: v is finite
        if isinstance(q, int) and q >= bits:  # c * 10**q with q >= bits: a multiple of 2**bits
            return Fraction(0)
    fr = Fraction(v)  # bounded by the size of v's own digits here
    red = abs(fr) % (1 << bits)
    return -red if fr < 0 else red


def _scalar(v, wrap_bits=None) -> tuple[float, int]:
    """(float64 truncated toward zero, remainder class) for one Python or numpy scalar.

    ``wrap_bits``: reduce the magnitude modulo 2**wrap_bits first (exact), for
    two's-complement wrap-around of huge integers."""
    if wrap_bits is not None and not isinstance(v, (bool, np.bool_)) and (
            isinstance(v, (int, np.integer, Fraction, Decimal, str))
            or (isinstance(v, np.floating) and v.dtype.itemsize > 8 and np.isfinite(v))):
        v = _wrap_reduce(v, wrap_bits)  # (float64 values are reduced exactly later, by fmod)
    if isinstance(v, (bool, np.bool_)):
        return float(v), 0
    if isinstance(v, float):  # np.float64 included
        return float(v), 0
    if isinstance(v, (int, np.integer)):
        iv = int(v)
        if abs(iv) <= _TWO53:
            return float(iv), False
        return fraction_rz(Fraction(iv))
    if isinstance(v, np.floating):
        if v.dtype.itemsize <= 8 or not np.isfinite(v):
            return float(v), 0
        return fraction_rz(Fraction(*v.as_integer_ratio()))
    if isinstance(v, (str, np.str_)):
        return _string_rz(str(v))
    if isinstance(v, Decimal):
        return _decimal_rz(v)
    if isinstance(v, Fraction):
        return fraction_rz(v)
    if isinstance(v, (complex, np.complexfloating)):
        raise TypeError(f"complex numbers are not supported (got {v!r})")
    if hasattr(v, "dtype") and getattr(v, "shape", None) == ():  # 0-d arrays, ml_dtypes scalars
        a = np.asarray(v)
        if a.dtype.kind in "biufcOUS":  # a numpy scalar of its own type, taken exactly
            return _scalar(a[()], wrap_bits)
        return float(a.astype(np.float64)), 0  # ml_dtypes: every value is a float64
    ratio = getattr(v, "as_integer_ratio", None)
    if ratio is not None and isinstance(v, Number):
        try:
            return fraction_rz(Fraction(*ratio()))
        except (ValueError, OverflowError):
            return float(typing.cast(SupportsFloat, v)), 0  # nan / inf (e.g. gmpy2.mpfr)
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
    ml_dtypes = ml_module()  # torch's bf16 / fp8 tensors are viewed as ml_dtypes arrays
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
        return _exact_array(_sequence(x), False, fp64, wrap_bits)
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


# Leaf types that numpy converts to float64 without rounding (ml_dtypes scalars too,
# see _float_leaves), and integer leaf types (exact in float64 up to 2**53 only).
_FLOAT_LEAVES = frozenset({float, bool, np.float64, np.float32, np.float16, np.bool_})
_INT_LEAVES = frozenset({int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                         np.uint64, np.intc, np.uintc, np.longlong, np.ulonglong})
_OTHER_LEAVES = frozenset({str, np.str_, bytes, np.bytes_, Fraction, Decimal})


def _float_leaves() -> frozenset:
    """_FLOAT_LEAVES plus the ml_dtypes scalar types once ml_dtypes is imported (before
    that no ml_dtypes scalar exists, and floatfmt does not import it for them)."""
    return _FLOAT_LEAVES | ml_scalar_types()


def _sequence(x) -> np.ndarray:
    """A list or tuple (nested, of any numbers or arrays) as an array that holds every
    element exactly: the array numpy makes when that conversion rounds nothing, else an
    object array of the elements themselves.

    ``np.asarray`` promotes a mix to one dtype and may round on the way: Python ints
    past 2**53 (or int64 / uint64 values) next to floats become float64, uint64 next
    to negative ints becomes float64, floats next to strings become their shortest
    decimal repr.  Elements are therefore checked by type; only lists of floats (and
    ints up to 2**53), of ints alone, or of strings alone keep numpy's array.
    """
    try:
        arr = np.asarray(x)
    except ValueError as err:  # ragged
        raise TypeError(f"cannot make a rectangular array from this input: {err}") from None
    except TypeError:  # no common dtype (e.g. ml_dtypes scalars next to strings)
        arr = np.asarray(x, dtype=object)
    kind = arr.dtype.kind
    if kind in "Oiub":
        # Object arrays hold the elements themselves; numpy picks an integer (or bool)
        # dtype only when every element is an integer that fits it (else float64 or
        # object): exact, and the integer path takes int64 / uint64 exactly.
        return arr
    types = set(map(type, x))
    leaves: np.ndarray | None
    flat: np.ndarray | None
    float_leaves = _float_leaves()
    # nested, or array-likes: look at the innermost elements
    if not types <= float_leaves | _INT_LEAVES | _OTHER_LEAVES:
        leaves = np.asarray(x, dtype=object)  # (arrays expanded into their elements)
        if leaves.shape != arr.shape:  # pragma: no cover - numpy expands both alike
            raise TypeError("cannot make a rectangular array from this input")
        flat = leaves.reshape(-1)
        types = set(map(type, flat))
    else:
        leaves = flat = None  # the elements are the leaves: x itself
    if kind == "f" and arr.dtype.itemsize <= 8 and types <= float_leaves | _INT_LEAVES:
        if types <= float_leaves or all(-_TWO53 <= int(v) <= _TWO53 for v in (x if flat is None else flat)
                                         if type(v) in _INT_LEAVES):
            return arr
    elif kind in "US" and types <= {str, np.str_, bytes, np.bytes_}:
        return arr
    if leaves is None:
        leaves = np.empty(len(x), dtype=object)
        leaves[:] = x
    return leaves


def _exact_array(arr: np.ndarray, scalar: bool, fp64: Format, wrap_bits=None) -> Exact:
    kind = arr.dtype.kind
    if kind == "c":
        raise TypeError(f"complex numbers are not supported (got an array of {arr.dtype})")
    if kind == "f" and arr.dtype.itemsize <= 8:
        src = get_format(arr.dtype)  # float16/32/64: registered formats
        with np.errstate(invalid="ignore"):  # signalling-NaN payloads are still NaN
            return Exact(arr.astype(np.float64, copy=False), None, scalar, src, arr.dtype)
    if kind == "V" or (kind not in "biufcOUSMm" and _src_format(arr.dtype) is not None):
        ml_src = _src_format(arr.dtype)  # ml_dtypes types
        if ml_src is None:
            raise TypeError(f"unsupported array dtype {arr.dtype}")
        return Exact(arr.astype(np.float64), None, scalar, ml_src, arr.dtype)
    if kind == "b":
        return Exact(arr.astype(np.float64), None, scalar, fp64, None)
    if kind in "iu":
        vals, sticky, resid = _integers(arr, wrap_bits)
        return Exact(vals, sticky, scalar, fp64, None, resid)
    if kind == "f":  # long double
        vals, sticky, resid = _objects(arr.astype(object), wrap_bits)
        return Exact(vals, sticky, scalar, fp64, None, resid)
    if kind in "OUS":
        if kind == "S":
            arr = arr.astype(str)
        vals, sticky, resid = _objects(arr, wrap_bits)
        return Exact(vals, sticky, scalar, fp64, None, resid)
    raise TypeError(f"unsupported array dtype {arr.dtype}")


def _integers(arr: np.ndarray, wrap_bits=None):
    """(float64 truncated toward zero, remainder class or None, resid or None) of an
    integer array, exactly, in whole-array integer arithmetic (no per-element Python).

    ``wrap_bits``: reduce magnitudes modulo 2**wrap_bits first, as ``_scalar`` does.
    A magnitude a >= 2**53 with bit length L keeps its top 53 bits; the s = L - 53
    bits below (the float64's ulp is 2**s) give the remainder class against 2**(s-1)
    and the exact ``resid`` (the remainder in units of 2**-54 ulps: rem << (54 - s)).
    """
    if wrap_bits is None and (arr.dtype.itemsize < 8 or arr.size == 0 or (
            int(arr.min()) >= -_TWO53 and int(arr.max()) <= _TWO53)):
        return arr.astype(np.float64), None, None  # every value exact in float64 (as ints)
    shape, arr = arr.shape, arr.reshape(-1)  # 1-d: numpy ops on 0-d arrays return scalars
    neg = arr < 0 if arr.dtype.kind == "i" else None
    # |v| as uint64; int64's -2**63 wraps to 2**63, its true magnitude.
    mag = arr.astype(np.int64).view(np.uint64) if arr.dtype.kind == "i" else arr.astype(np.uint64)
    if neg is not None:
        mag = np.where(neg, np.uint64(0) - mag, mag)
    if wrap_bits is not None and wrap_bits < 64:
        mag = mag & np.uint64((1 << wrap_bits) - 1)
    big = mag > np.uint64(_TWO53)
    sticky: np.ndarray | None = None
    resid: np.ndarray | None = None
    if big.any():
        a = mag[big]
        # bit length of a is 11 + bit length of a >> 11 (< 2**53: its float64 is exact)
        _, e = np.frexp((a >> np.uint64(11)).astype(np.float64))
        s = (e - 42).astype(np.uint64)  # 1..11 dropped bits
        low = (np.uint64(1) << s) - np.uint64(1)
        rem = a & low
        half = np.uint64(1) << (s - np.uint64(1))
        cls = np.where(rem == 0, 0, np.where(rem < half, 1, np.where(rem == half, 2, 3)))
        mag = mag.copy()
        mag[big] = a & ~low  # 53 significant bits: exact in float64
        sticky = np.zeros(arr.shape, np.uint8)
        sticky[big] = cls
        if sticky.any():
            resid = np.zeros(arr.shape, np.int64)
            resid[big] = (rem << (np.uint64(54) - s)).astype(np.int64)  # < 2**54: exact
            sticky, resid = sticky.reshape(shape), resid.reshape(shape)
        else:
            sticky = None
    vals = mag.astype(np.float64)
    if neg is not None:
        np.negative(vals, out=vals, where=neg)
    return vals.reshape(shape), sticky, resid


def holds(src: Format, dst: Format) -> bool:
    """True when every value (and Inf / NaN) of ``dst`` is exactly a value of ``src``
    (remembered per pair of format objects: every cast and emulated operand asks)."""
    key = (id(src), id(dst))
    hit = _HOLDS.get(key)
    if hit is not None and hit[0] is src and hit[1] is dst:
        return hit[2]
    if len(_HOLDS) > 512:
        _HOLDS.clear()
    ans = _holds(src, dst)
    _HOLDS[key] = (src, dst, ans)  # (the formats kept alive: their ids are not reused)
    return ans


_HOLDS: dict = {}


def _holds(src: Format, dst: Format) -> bool:
    if src.kind != "float":
        return False
    if dst.kind == "int":
        return src.mbits + 1 >= dst.bits and src.emax >= dst.bits and src.has_nan
    return (src.mbits >= dst.mbits
            and src.emin - src.mbits <= dst.emin - dst.mbits
            and src.emax >= dst.emax
            and (src.inf or not dst.inf) and src.has_nan and src.signed >= dst.signed)
