"""A slow, independent tensor-core model: one dot product at a time, Python integers only.

It follows ``reference/tensor_cores.md`` step by step and shares no code with
``floatfmt.arith.matrixunit.tensorcore`` (no numpy arithmetic, no floatfmt rounding).  Every
value is an exact pair (integer m, exponent e) meaning ``m * 2**e``.  Format
facts come from the small table below, written from the format definitions.

Model parameters are read from a ``TensorCoreModel`` record (plain data:
F, L, zero_exponent, accumulator and step formats, step rounding, tf32
operand rule, overflow behaviour, where c enters).

Where c enters (``c_entry``): ``"aligned"``, c is one of the terms that are
aligned to e_max and truncated; ``"after"``, the products alone go through
the fused step and c is then added to its result by an IEEE addition rounded
to nearest-even in the step format (here: the exact rational sum, rounded by
``round_pair``).
"""

from __future__ import annotations

import math

# name: (fraction bits, exponent of the smallest normal binade, largest exponent)
FORMAT_FACTS = {
    "fp32": (23, -126, 127),
    "tf32": (10, -126, 127),
    "fp16": (10, -14, 15),
    "bf16": (7, -126, 127),
    "fp8_e4m3": (3, -6, 8),
    "fp8_e5m2": (2, -14, 15),
    "e8m13": (13, -126, 127),
}


def _pair(x: float):
    """(m, e) with x == m * 2**e exactly (x finite)."""
    n, d = x.as_integer_ratio()
    return n, -(d.bit_length() - 1)


def _floor_log2(m: int, e: int) -> int:
    return abs(m).bit_length() - 1 + e


def _shift_trunc(m: int, k: int) -> int:
    """m * 2**k truncated toward zero (k may be negative)."""
    if k >= 0:
        return m << k
    a = abs(m) >> (-k)
    return -a if m < 0 else a


def round_pair(m: int, e: int, fmt: str, mode: str):
    """Round m * 2**e (m != 0) to the format: 'rz' (toward zero) or 'rne'.  Returns
    (m', e') of the rounded value (exponent range unbounded above)."""
    mbits, emin, _ = FORMAT_FACTS[fmt]
    neg = m < 0
    a = -m if neg else m
    E = max(_floor_log2(a, e), emin)
    shift = (E - mbits) - e  # drop this many low bits of a
    if shift <= 0:
        k = a << (-shift)
    else:
        k = a >> shift
        rem = a - (k << shift)
        if mode == "rne":
            half = 1 << (shift - 1)
            if rem > half or (rem == half and k & 1):
                k += 1
        elif mode != "rz":
            raise ValueError(mode)
    return (-k if neg else k), E - mbits


def _to_float(m: int, e: int) -> float:
    return math.ldexp(float(m), e) if m else 0.0


def _max_pair(fmt):
    mbits, _, emax = FORMAT_FACTS[fmt]
    return ((1 << (mbits + 1)) - 1), emax - mbits


def _exceeds(m, e, fmt, limit_exp):
    """|m * 2**e| >= 2**limit_exp."""
    return _floor_log2(abs(m), e) >= limit_exp


def tf32_operand(x: float, rule: str) -> float:
    """An fp32 value as the tensor core reads it in tf32: 'truncate', 'rne' or 'rna'."""
    if not math.isfinite(x) or x == 0:
        return x
    m, e = _pair(x)
    neg = m < 0
    a = -m if neg else m
    E = max(_floor_log2(a, e), -126)
    shift = (E - 10) - e
    if shift <= 0:
        return x
    k = a >> shift
    rem = a - (k << shift)
    half = 1 << (shift - 1)
    if rule == "rne" and (rem > half or (rem == half and k & 1)):
        k += 1
    elif rule == "rna" and rem >= half:
        k += 1
    elif rule not in ("truncate", "rne", "rna"):
        raise ValueError(rule)
    v = math.ldexp(k, E - 10)
    return -v if neg else v


def _input_exponent(m: int, e: int, fmt: str) -> int:
    return max(_floor_log2(m, e), FORMAT_FACTS[fmt][1])


def fused_step(a_vals, b_vals, c: float, model, c_fmt: str) -> float:
    """One step of the lists a_vals, b_vals and accumulator c, c entering as the model says."""
    entry = getattr(model, "c_entry", "aligned")
    if entry == "aligned":
        return _fused(a_vals, b_vals, c, model, c_fmt)
    if entry != "after":
        raise ValueError(entry)
    s = _fused(a_vals, b_vals, 0.0, model, c_fmt)  # a zero c is a zero term: the products alone
    return add_rne(s, c, model.step_fmt or model.acc_fmt, model.overflow)


def add_rne(x: float, y: float, fmt: str, overflow: str) -> float:
    """IEEE 754 addition x + y rounded to nearest-even in fmt (x, y finite or not).

    Specials: NaN in, or Inf - Inf, gives NaN; an Inf operand gives that Inf.  An exact
    zero sum is +0, or -0 when both operands are -0.  Past the range: +-Inf (overflow
    "inf") or +-max ("saturate")."""
    if x != x or y != y:
        return math.nan
    if math.isinf(x) or math.isinf(y):
        if math.isinf(x) and math.isinf(y) and x != y:
            return math.nan
        return x if math.isinf(x) else y
    if x == 0 and y == 0:
        both_neg = math.copysign(1.0, x) < 0 and math.copysign(1.0, y) < 0
        return -0.0 if both_neg else 0.0
    (mx, ex), (my, ey) = (_pair(x) if x else (0, 0)), (_pair(y) if y else (0, 0))
    e = min(ex, ey)
    S = (mx << (ex - e)) + (my << (ey - e))  # exact sum = S * 2**e
    if S == 0:
        return 0.0
    rm, re = round_pair(S, e, fmt, "rne")
    if rm == 0:
        return -0.0 if S < 0 else 0.0
    r = _to_float(rm, re)
    fmax = _to_float(*_max_pair(fmt))
    if abs(r) > fmax:
        return math.copysign(math.inf if overflow == "inf" else fmax, r)
    return r


def _fused(a_vals, b_vals, c: float, model, c_fmt: str) -> float:
    """One truncated fused dot-product-add of the lists a_vals, b_vals and accumulator c."""
    step_fmt = model.step_fmt or model.acc_fmt
    vals = [x * y for x, y in zip(a_vals, b_vals)]  # floats, only to find Inf / NaN (0*Inf is NaN)
    specials = [v for v in vals + [c] if not math.isfinite(v)]
    if any(v != v for v in specials):
        return math.nan
    if specials:
        pos = any(v > 0 for v in specials)
        negs = any(v < 0 for v in specials)
        return math.nan if (pos and negs) else (math.inf if pos else -math.inf)
    terms = []  # (m, e, alignment exponent)
    for x, y in zip(a_vals, b_vals):
        if x == 0 or y == 0:
            terms.append((0, 0, model.zero_exponent))
            continue
        mx, ex = _pair(x)
        my, ey = _pair(y)
        terms.append((mx * my, ex + ey,
                      _input_exponent(mx, ex, model.fmt) + _input_exponent(my, ey, model.fmt)))
    if c == 0:
        terms.append((0, 0, model.zero_exponent))
    else:
        mc, ecc = _pair(c)
        terms.append((mc, ecc, _input_exponent(mc, ecc, c_fmt)))
    e_max = max(t[2] for t in terms)
    unit = e_max - model.F  # every term becomes an integer multiple of 2**unit
    S = 0
    for m, e, _ in terms:
        if m:
            S += _shift_trunc(m, e - unit)
    if S == 0:
        return 0.0
    mode = "rz" if model.rounding == "toward_zero" else "rne"
    _, _, emax = FORMAT_FACTS[step_fmt]
    if model.overflow == "inf" and _exceeds(S, unit, step_fmt, emax + 1):
        return math.inf if S > 0 else -math.inf
    rm, re = round_pair(S, unit, step_fmt, mode)
    if rm == 0:  # a nonzero sum below the smallest subnormal keeps its sign
        return -0.0 if S < 0 else 0.0
    r = _to_float(rm, re)  # exact: rm has at most mbits + 2 bits
    fmax = _to_float(*_max_pair(step_fmt))
    if abs(r) > fmax:
        if model.overflow == "inf":  # only a round-to-nearest step can get here
            return math.copysign(math.inf, r)
        return math.copysign(fmax, r)
    return r


def dot(a, b, model, c: float = 0.0) -> float:
    """The model's dot product of two lists of input values (already in the input format;
    tf32 models take fp32 values and apply the operand rule), started from the
    accumulator c (a value of the model's accumulator format)."""
    if model.fmt == "tf32":
        a = [tf32_operand(float(x), model.tf32_operands) for x in a]
        b = [tf32_operand(float(x), model.tf32_operands) for x in b]
    else:
        a = [float(x) for x in a]
        b = [float(x) for x in b]
    c = float(c)
    c_fmt = model.acc_fmt
    for k0 in range(0, len(a), model.L):
        c = fused_step(a[k0:k0 + model.L], b[k0:k0 + model.L], c, model, c_fmt)
        c_fmt = model.step_fmt or model.acc_fmt
    return c


def int8_dot(a, b) -> float:
    """Exact int32 dot product with two's-complement wrap-around."""
    s = sum(int(x) * int(y) for x, y in zip(a, b))
    return float((s + 2 ** 31) % 2 ** 32 - 2 ** 31)
