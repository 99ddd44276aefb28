"""A slow, independent model of the AMD and Blackwell block-scaled matrix-unit steps.

Written from ``shared/reference/matrix_units_and_formats.md`` (sections 3-8), one dot
product at a time, with Python ``Fraction`` arithmetic only: no numpy, nothing from
floatfmt.  Model parameters are read from a ``TensorCoreModel`` record as plain data
(algorithm, F, F2, L, zero_exponent, interleave, group_rounding, combine_rounding,
c_cutoff, product_overflow, scale_block, group).

Steps (``algorithm``):
- ``e_fdpa``: exact sum of the L products and c, rounded once to fp32 (RNE).
- ``ftz_addmul``: subnormal inputs and the first c -> +0; products rounded to fp32 and
  flushed (sign kept); sums (p0+p1)+(p2+p3) (L=4) or p0+p1 (L=2) with fp32 RNE adds,
  each flushed with its sign kept; d = FTZ(d + s).  A short last step is padded with
  +0 products.
- ``tr_fdpa`` / ``gtr_fdpa``: per set of products (interleave 1, or 2: even / odd
  indices) a sum of the products cut toward zero to F bits below the set's largest
  exponent; (GTR) the set sums rounded to F bits below the larger set exponent; then
  E = max(e_p, e_c), the product sum rounded to F2 bits and c to F bits below 2**E
  (floor, or toward zero), c dropped if e_c < E - c_cutoff; RNE to fp32.
- ``st_fdpa``: T-FDPA of the products a*b*s_a*s_b with exponents e_a+e_b+e(s_a)+e(s_b):
  every term (c too) cut toward zero to F bits below the largest exponent, the sum cut
  toward zero to fp32 (RZ-FP32).
- ``gst_fdpa``: the same with terms (sum of G products) * sig(s_a) * sig(s_b), whose
  exponent is e(s_a) + e(s_b) alone, also for a group sum that is exactly 0.
"""

from __future__ import annotations

import math
from fractions import Fraction

# name: (fraction bits, exponent of the smallest normal binade, largest exponent)
FACTS = {
    "fp32": (23, -126, 127), "tf32": (10, -126, 127), "fp16": (10, -14, 15),
    "bf16": (7, -126, 127), "fp8_e4m3": (3, -6, 8), "fp8_e5m2": (2, -14, 15),
    "fp8_e4m3fnuz": (3, -7, 7), "fp8_e5m2fnuz": (2, -15, 15), "fp6_e2m3": (3, 0, 2),
    "fp6_e3m2": (2, -2, 4), "fp4_e2m1": (1, 0, 2), "e8m0": (0, -127, 127),
}
FP32_MIN = Fraction(1, 2 ** 126)
FP32_MAX = Fraction((2 ** 24 - 1), 2 ** 23) * 2 ** 127


def exponent(x: Fraction, fmt: str) -> int:
    """max(floor(log2|x|), emin) of a nonzero value of fmt."""
    n, d = abs(x.numerator), x.denominator
    e = n.bit_length() - d.bit_length()  # floor(log2(n / d)) is e or e - 1
    if (n < (d << e)) if e >= 0 else ((n << -e) < d):
        e -= 1
    return max(e, FACTS[fmt][1])


def _pow2(k: int) -> Fraction:
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


def _cut(x: Fraction, unit_exp: int, mode: str) -> Fraction:
    """x rounded to a multiple of 2**unit_exp: 'trunc' (toward zero) or 'floor'."""
    n, d = x.numerator, x.denominator  # x / 2**unit_exp = num / den
    num, den = (n, d << unit_exp) if unit_exp >= 0 else (n << -unit_exp, d)
    k = num // den  # floor
    if mode != "floor" and n < 0 and k * den != num:
        k += 1  # toward zero
    return k * _pow2(unit_exp)


def to_fp32(x: Fraction, mode: str) -> float:
    """x rounded to fp32 ('rne' or 'rz'), subnormals on the 2**-149 grid, +-Inf past
    the range (RNE: from max + half an ulp; RZ: from 2**128)."""
    if x == 0:
        return 0.0
    neg = x < 0
    a = -x if neg else x
    e = exponent(a, "fp32")
    unit = _pow2(e - 23)
    q = a / unit
    k = math.floor(q)
    rem = q - k
    if mode == "rne" and (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and k % 2 == 1)):
        k += 1
    v = k * unit
    if v == 0:
        return -0.0 if neg else 0.0
    if v > FP32_MAX:
        return -math.inf if neg else math.inf
    r = float(v)  # exact: at most 24 significant bits
    return -r if neg else r


def _special(values):
    """NaN / Inf of a list of floats as a sum would give it, or None if all finite."""
    nan = any(v != v for v in values)
    pos = any(v == math.inf for v in values)
    neg = any(v == -math.inf for v in values)
    if nan or (pos and neg):
        return math.nan
    if pos:
        return math.inf
    if neg:
        return -math.inf
    return None


def _add_rne_ftz(x: float, y: float) -> float:
    """fp32 RNE addition, then a result below 2**-126 becomes a zero of its sign."""
    sp = _special([x, y])
    if sp is not None:
        return sp
    s = Fraction(x) + Fraction(y)
    if s == 0:  # IEEE: -0 only for (-0) + (-0)
        return -0.0 if (math.copysign(1, x) < 0 and math.copysign(1, y) < 0) else 0.0
    r = to_fp32(s, "rne")
    return math.copysign(0.0, r) if abs(r) < FP32_MIN else r


def _ftz_in(x: float, fmt: str) -> float:
    return 0.0 if abs(x) < 2.0 ** FACTS[fmt][1] else x


def _add_rne(x: float, y: float) -> float:
    """fp32 RNE addition (IEEE signs of zero), no flushing."""
    sp = _special([x, y])
    if sp is not None:
        return sp
    s = Fraction(x) + Fraction(y)
    if s == 0:
        return -0.0 if (math.copysign(1, x) < 0 and math.copysign(1, y) < 0) else 0.0
    return to_fp32(s, "rne")


def ftz_addmul_dot(a, b, model, c: float = 0.0) -> float:
    """The pairwise fp32 tree; with model.ftz False nothing is flushed (the released
    MMA-Sim's reading of CDNA1)."""
    L, ftz = model.L, model.ftz
    add = _add_rne_ftz if ftz else _add_rne
    if ftz:
        a = [_ftz_in(float(x), model.fmt) for x in a]
        b = [_ftz_in(float(x), model.fmt) for x in b]
        d = _ftz_in(float(c), "fp32")
    else:
        a, b, d = list(a), list(b), float(c)
    while len(a) % L:
        a.append(0.0)
        b.append(0.0)
    for k0 in range(0, len(a), L):
        p = []
        for x, y in zip(a[k0:k0 + L], b[k0:k0 + L]):
            if math.isfinite(x) and math.isfinite(y):
                sign = math.copysign(1.0, x) * math.copysign(1.0, y)
                exact = Fraction(x) * Fraction(y)
                r = to_fp32(exact, "rne") if exact != 0 else math.copysign(0.0, sign)
                if ftz and abs(r) < FP32_MIN:
                    r = math.copysign(0.0, sign)
            else:
                r = x * y
            p.append(r)
        if L == 4:
            s = add(add(p[0], p[1]), add(p[2], p[3]))
        elif L == 2:
            s = add(p[0], p[1])
        else:
            raise ValueError(L)
        d = add(d, s)
    return d


def _products(a, b, fmt):
    """[(value Fraction, exponent)] of the pairs, zero products marked with exponent None."""
    out = []
    for x, y in zip(a, b):
        if x == 0 or y == 0:
            out.append((Fraction(0), None))
        else:
            fx, fy = Fraction(x), Fraction(y)
            out.append((fx * fy, exponent(fx, fmt) + exponent(fy, fmt)))
    return out


def e_fdpa_step(a, b, c: float, model) -> float:
    sp = _special([x * y for x, y in zip(a, b)] + [c])
    if sp is not None:
        return sp
    s = sum((Fraction(x) * Fraction(y) for x, y in zip(a, b)), Fraction(0)) + Fraction(c)
    return to_fp32(s, "rne") if s != 0 else 0.0


def _trunc_sum(terms, zero_exp, F):
    """Truncated fused sum: (sum, e_max) with every term cut toward zero to F bits below
    2**e_max; zero terms have exponent zero_exp."""
    e_max = max((e if e is not None else zero_exp) for _, e in terms)
    return sum((_cut(v, e_max - F, "trunc") for v, _ in terms), Fraction(0)), e_max


def tr_fdpa_step(a, b, c: float, model) -> float:
    fmt, F, F2, z = model.fmt, model.F, model.F2, model.zero_exponent
    floats = []
    for x, y in zip(a, b):
        if not (math.isfinite(x) and math.isfinite(y)):
            floats.append(x * y)
            continue
        p = Fraction(x) * Fraction(y)
        big = model.product_overflow and abs(p) >= _pow2(128)
        floats.append(math.copysign(math.inf, p) if big else 0.0)
    sp = _special(floats + [c])
    if sp is not None:
        return sp
    prods = _products(a, b, fmt)
    n = model.interleave
    sets = [_trunc_sum(prods[j::n], z, F) for j in range(min(n, len(prods)))]
    e_p = max(e for _, e in sets)
    rmode = {"floor": "floor", "toward_zero": "trunc"}
    if len(sets) == 1:
        S = sets[0][0]
    else:
        S = sum((_cut(s, e_p - F, rmode[model.group_rounding]) for s, _ in sets), Fraction(0))
    fc = Fraction(c)
    e_c = exponent(fc, "fp32") if c != 0 else z
    E = max(e_p, e_c)
    mode = rmode[model.combine_rounding]
    total = _cut(S, E - F2, mode)
    cc = _cut(fc, E - F, mode)
    if model.c_cutoff is not None and e_c < E - model.c_cutoff:
        cc = Fraction(0)
    total += cc
    return to_fp32(total, "rne") if total != 0 else 0.0


def _t_fdpa_terms(terms, c: float, model) -> float:
    """T-FDPA of exact terms [(value, exponent or None)] and c, RZ to fp32."""
    sp = _special([c])
    if sp is not None:
        return sp
    fc = Fraction(c)
    allt = list(terms) + [(fc, exponent(fc, "fp32") if c != 0 else None)]
    S, _ = _trunc_sum(allt, model.zero_exponent, model.F)
    return to_fp32(S, "rz") if S != 0 else 0.0


def scale_parts(s: float, fmt: str):
    """(significand Fraction, exponent) of |s| (sign ignored), or None for NaN."""
    if s != s or math.isinf(s):
        return None
    fs = abs(Fraction(s))
    if fs == 0:
        return Fraction(0), FACTS[fmt][1]
    e = exponent(fs, fmt)
    return fs / _pow2(e), e


def block_scaled_step(a, b, sa, sb, c: float, model, b_fmt: str | None = None) -> float:
    """One ST / GST step: a, b the step's elements, sa, sb one scale per scale_block.
    With ``c_entry == "after"`` the terms are fused without c and c is then added by an
    fp32 RNE addition.  ``b_fmt``: b's element format when it is not the model's (mixed
    operands: each element's exponent is its own format's)."""
    if getattr(model, "c_entry", "aligned") == "after":
        return _add_rne(block_scaled_step(a, b, sa, sb, 0.0, model.replace(c_entry="aligned"),
                                          b_fmt), c)
    fmt, G, blk = model.fmt, model.group, model.scale_block
    fmt_b = fmt if b_fmt is None else b_fmt
    sp = _special([x * y for x, y in zip(a, b)] + [c])
    if sp is not None:
        return sp
    terms: list = []
    parts = {}
    for g0 in range(0, len(a), G):
        k = g0 // blk
        if k not in parts:
            parts[k] = (scale_parts(sa[k], model.scale_fmt), scale_parts(sb[k], model.scale_fmt))
        pa, pb = parts[k]
        if pa is None or pb is None:
            return math.nan
        if G == 1:
            x, y = a[g0], b[g0]
            if x == 0 or y == 0 or pa[0] == 0 or pb[0] == 0:
                terms.append((Fraction(0), None))
                continue
            fx, fy = Fraction(x), Fraction(y)
            terms.append((fx * fy * pa[0] * pb[0] * _pow2(pa[1] + pb[1]),
                          exponent(fx, fmt) + exponent(fy, fmt_b) + pa[1] + pb[1]))
        else:
            gs = sum((Fraction(x) * Fraction(y) for x, y in zip(a[g0:g0 + G], b[g0:g0 + G])),
                     Fraction(0))
            v = gs * pa[0] * pb[0] * _pow2(pa[1] + pb[1])
            # GST aligns every group term by its scales' exponents, also a group whose
            # sum is exactly 0 (MMA-Sim, nv_fused_dot_add_with_block_scale: the exponent
            # e(s_a) + e(s_b) is appended whatever the sum; a zero scale's exponent is
            # the zero exponent, -126 there)
            ea = pa[1] if pa[0] != 0 else model.zero_exponent
            eb = pb[1] if pb[0] != 0 else model.zero_exponent
            terms.append((v, ea + eb))
    return _t_fdpa_terms(terms, c, model)


def dot(a, b, model, c: float = 0.0, sa=None, sb=None, b_fmt: str | None = None) -> float:
    """The model's dot product (steps of L in K order) from the accumulator c; tf32
    models read only the top 10 fraction bits of each fp32 operand; block-scaled models
    take one scale per ``scale_block`` elements in sa, sb (``b_fmt``: b's element format
    when it differs from the model's)."""
    a, b = [float(x) for x in a], [float(x) for x in b]
    alg = model.algorithm
    if alg == "ftz_addmul":
        return ftz_addmul_dot(a, b, model, c)
    if model.fmt == "tf32":
        a, b = [tf32_cut(x) for x in a], [tf32_cut(x) for x in b]
    c = float(c)
    L = model.L
    for k0 in range(0, len(a), L):
        ak, bk = a[k0:k0 + L], b[k0:k0 + L]
        if alg == "e_fdpa":
            c = e_fdpa_step(ak, bk, c, model)
        elif alg in ("tr_fdpa", "gtr_fdpa"):
            c = tr_fdpa_step(ak, bk, c, model)
        elif alg in ("st_fdpa", "gst_fdpa"):
            blk = model.scale_block
            c = block_scaled_step(ak, bk, sa[k0 // blk:], sb[k0 // blk:], c, model, b_fmt)
        else:
            raise ValueError(alg)
    return c


def tf32_cut(x: float) -> float:
    """An fp32 value with all but the top 10 fraction bits cut (toward zero)."""
    if not math.isfinite(x) or x == 0:
        return x
    fx = Fraction(x)
    e = exponent(abs(fx), "fp32")
    return float(_cut(fx, e - 10, "trunc"))
