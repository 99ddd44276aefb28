"""A slow, independent model of Intel's bf16 dot-product instructions, in plain Python.

Nothing here calls floatfmt.  Values are exact: a finite value is an integer count of
2**-SHIFT (every bf16 product and fp32 value is one, far above 2**-SHIFT), Inf and NaN
are Python floats.  The fp32 addition is written from its definition:

* the exact sum of the two operands (IEEE: x + (-x) is +0, -0 + -0 is -0);
* rounded to nearest even with 24 significant bits and an unbounded exponent;
* tininess after rounding (x86, as Berkeley SoftFloat's 8086 specialisation): a rounded
  result below 2**-126 is tiny, and FTZ returns a zero of its sign; one of 2**128 or
  more is +-Inf;
* DAZ: an input below 2**-126 in magnitude reads as a zero of its sign.

``vdpbf16ps`` follows Intel's pseudo-code for VDPBF16PS (the odd pair first);
``tdpbf16ps`` the structure the measured data shows for TDPBF16PS (two partial sums);
``tdpbf16ps_manual`` Intel's sequential pseudo-code for TDPBF16PS (even then odd pair
per k), which the data refutes.
"""

from __future__ import annotations

import math
import struct

SHIFT = 320
_TINY = 1 << (SHIFT - 126)
_HUGE = 1 << (SHIFT + 128)


class V:
    """An exact value: ``n * 2**-SHIFT`` with the sign of zero kept in ``neg``, or a
    non-finite float ``f``."""

    __slots__ = ("n", "neg", "f")

    def __init__(self, n=0, neg=False, f=None):
        self.n, self.neg, self.f = n, neg, f


def from_float(x: float) -> V:
    """The exact value of a Python float (DAZ applied: |x| < 2**-126 reads as zero)."""
    if math.isnan(x) or math.isinf(x):
        return V(f=x)
    neg = math.copysign(1.0, x) < 0
    if abs(x) < 2.0 ** -126:
        return V(0, neg)
    m, e = math.frexp(abs(x))
    n = int(m * 2 ** 53) << (e - 53 + SHIFT) if e - 53 + SHIFT >= 0 else None
    assert n is not None
    return V(-n if neg else n, neg)


def to_float(v: V) -> float:
    if v.f is not None:
        return v.f
    if v.n == 0:
        return -0.0 if v.neg else 0.0
    return math.ldexp(float(v.n), -SHIFT)  # a 24-bit integer scaled: exact


def _round24(n: int) -> int:
    """n rounded to 24 significant bits, nearest even (unbounded exponent)."""
    a = abs(n)
    drop = a.bit_length() - 24
    if drop <= 0:
        return n
    q, r = divmod(a, 1 << drop)
    half = 1 << (drop - 1)
    if r > half or (r == half and q & 1):
        q += 1
    a = q << drop
    return -a if n < 0 else a


def product(a: V, b: V) -> V:
    """The exact product (IEEE specials: 0 * Inf is NaN)."""
    if a.f is not None or b.f is not None:
        return V(f=to_float(a) * to_float(b))
    return V(a.n * b.n >> SHIFT, a.neg != b.neg)  # exact: both are multiples of 2**-160


def add(x: V, y: V) -> V:
    """One fp32 addition of the units: exact sum, RNE to 24 bits, FTZ after rounding."""
    if x.f is not None or y.f is not None:
        return V(f=to_float(x) + to_float(y))
    s = x.n + y.n
    if s == 0:
        return V(0, x.neg and y.neg if x.n == 0 and y.n == 0 else False)
    r = _round24(s)
    if abs(r) < _TINY:
        return V(0, r < 0)
    if abs(r) >= _HUGE:
        return V(f=math.copysign(math.inf, r))
    return V(r, r < 0)


def bf16(code: int) -> float:
    return struct.unpack("<f", struct.pack("<I", (code & 0xFFFF) << 16))[0]


def fp32(code: int) -> float:
    return struct.unpack("<f", struct.pack("<I", code & 0xFFFFFFFF))[0]


def vdpbf16ps(a: list, b: list, c: float) -> float:
    """One lane: c + a[1] b[1] + a[0] b[0] (a, b: two floats each)."""
    A, B = [from_float(x) for x in a], [from_float(x) for x in b]
    t = add(from_float(c), product(A[1], B[1]))
    return to_float(add(t, product(A[0], B[0])))


def tdpbf16ps(a: list, b: list, c: float) -> float:
    """One output element: 32 products, even / odd partial sums from +0, then c + s."""
    s = [V(0), V(0)]
    for k, (x, y) in enumerate(zip(a, b)):
        s[k % 2] = add(s[k % 2], product(from_float(x), from_float(y)))
    return to_float(add(from_float(c), add(s[0], s[1])))


def tdpbf16ps_manual(a: list, b: list, c: float) -> float:
    """Intel's pseudo-code: tmp += a[2k] b[2k]; tmp += a[2k+1] b[2k+1], k in order."""
    t = from_float(c)
    for x, y in zip(a, b):
        t = add(t, product(from_float(x), from_float(y)))
    return to_float(t)


def torch_mm(a: list, b: list) -> float:
    """torch.mm of bf16 CPU tensors as the data shows it, one output: TDPBF16PS over K tiles
    of 32 from a +0 accumulator, then nearest-even to bf16 (written out here)."""
    acc = 0.0
    for k0 in range(0, len(a), 32):
        acc = tdpbf16ps(a[k0:k0 + 32], b[k0:k0 + 32], acc)
    return to_bf16(acc)


def to_bf16(x: float) -> float:
    """Nearest-even to bf16 (8 significant bits), subnormals kept; Inf past the range."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return x
    m, e = math.frexp(abs(x))  # |x| = m 2**e, m in [0.5, 1)
    q = max(e - 8, -133)  # the quantum: 2**(e-8) for normals, 2**-133 below 2**-126
    n, r = divmod(abs(x), 2.0 ** q)
    half = 2.0 ** (q - 1)
    rem = r
    if rem > half or (rem == half and int(n) & 1):
        n += 1
    v = n * 2.0 ** q
    if v >= 2.0 ** 128 * (1 - 2.0 ** -9):  # past max + half an ulp: Inf
        v = math.inf
    return math.copysign(v, x)
