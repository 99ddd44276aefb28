"""Inputs for comparing the explorer page's engine with floatfmt.

Decimal strings built from floatfmt's own value lists: every value (or a sample,
for 16 and 32 bits), the exact midpoint between neighbours, the midpoint a hair
(10**-(digits + 3)) above and below, the overflow threshold and a hair around
it, special strings, and random short decimals across the format's range.  The
expected answers come from floatfmt itself (``cast`` / ``values_to_codes`` /
``decode`` / ``next_up`` / ``next_down`` / ``ulp`` / ``classify`` / ``quantize``).
"""

from __future__ import annotations

import random
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

import floatfmt as ff
from floatfmt.core.codec import values_to_codes

SPECIALS = ["0", "-0", "0.0e5", "inf", "-inf", "Infinity", "nan", "1e400", "-1e400", "1e-500", "-1e-500", "1e99999", "-1e-99999",
            "0.1", "-0.1", "1", "-1", "0.5", "3", "1_000", ".5", "5.", "1E-3", "0x1.8p1", "-0x1p-3", "+2.5",
            "0.30000000000000000000000000000000000001", "4.9e-324", "2e-324", "1.7976931348623157e308"]


def dec(fr: Fraction) -> str:
    """Exact decimal string of a dyadic rational."""
    with localcontext() as ctx:
        ctx.prec = 2000
        d = Decimal(fr.numerator) / Decimal(fr.denominator)
    s = format(d, "f")
    return s


def _hair(s: str, up: bool) -> str:
    """``s`` (a positive exact decimal) moved by 10**-(its fraction digits + 3)."""
    frac = len(s.split(".")[1]) if "." in s else 0
    with localcontext() as ctx:
        ctx.prec = 3000
        h = Decimal(1).scaleb(-(frac + 3))
        return format(Decimal(s) + h if up else Decimal(s) - h, "f")


def _sample_values(f, rng: random.Random, n16=220, n32=220):
    """Positive finite values of f (all for <= 8 bits; extremes plus a sample above)."""
    if f.bits <= 8:
        v = ff.values(f)
    elif f.bits <= 16:
        allv = ff.values(f)
        idx = sorted(set(rng.sample(range(len(allv)), n16)) | {0, 1, 2, len(allv) - 1, len(allv) - 2})
        v = allv[idx]
    else:
        codes = [rng.randrange(0, int(f.max_code) + 1) for _ in range(n32)] + [0, 1, 2, int(f.max_code)]
        v = ff.decode(np.array(codes, np.uint32), f)
    return sorted({float(x) for x in np.abs(v) if np.isfinite(x)})


def round_inputs(name: str, seed: int = 0) -> list[str]:
    """Decimal strings for one format (both signs)."""
    f = ff.get_format(name)
    rng = random.Random(f"{seed}-{name}")
    vals = _sample_values(f, rng)
    pos = []
    for a in vals:
        fa = Fraction(a)
        pos.append(dec(fa))
        b = ff.next_up(a, f)
        if not np.isfinite(b):  # past the largest value: the overflow threshold (max + ulp/2)
            b = a + ff.ulp(a, f)
        mid = dec((fa + Fraction(b)) / 2)
        pos += [mid, _hair(mid, True), _hair(mid, False)]
    for _ in range(max(120, 520 - 4 * len(vals))):  # short random decimals across the range
        lo = vals[1] if len(vals) > 1 and vals[0] == 0 else vals[0]
        e = rng.uniform(np.log10(max(lo, 1e-300)) - 1, np.log10(vals[-1]) + 1)
        pos.append(f"{rng.randrange(1, 10 ** rng.randrange(1, 8))}e{int(e) - rng.randrange(0, 7)}")
    pos += [dec(Fraction(vals[-1]) * 2), dec(Fraction(vals[-1]) * 4)]
    out = []
    for s in pos:
        out += [s, "-" + s]
    return out + SPECIALS


def canon(values: np.ndarray, f) -> list[str]:
    """floatfmt's answers in the harness's canonical form (value and code)."""
    out = []
    vals = np.asarray(values, np.float64)
    codes = np.full(vals.shape, -1, np.int64)
    ok = ~np.isnan(vals) | f.has_nan
    if ok.any():
        codes[ok] = values_to_codes(vals[ok], f).astype(np.int64)
    for v, c in zip(vals, codes):
        sign = "-" if np.signbit(v) else "+"
        if np.isnan(v):
            s = "nan" + sign
        elif np.isinf(v):
            s = "inf" + sign
        else:
            fr = abs(Fraction(float(v)))
            s = f"{sign}{fr.numerator}/{fr.denominator}"
        out.append(f"{s} {'none' if c < 0 else c}")
    return out


def expected_round(inputs, name, mode, policy):
    f = ff.get_format(name)
    arr = np.array(inputs, dtype=object)
    return canon(ff.cast(arr, f, rounding=mode, overflow=policy), f)


def decode_codes(name: str, seed: int = 0, n32: int = 4000) -> list[int]:
    f = ff.get_format(name)
    if f.bits <= 16:
        return list(range(1 << f.bits))
    rng = random.Random(f"{seed}-codes-{name}")
    special = [0, 1, 2, int(f.max_code), int(f.max_code) + 1, (1 << f.bits) - 1, 1 << (f.bits - 1),
               (1 << (f.bits - 1)) + 1, int(f.max_code) + (1 << (f.bits - 1))]
    return special + [rng.randrange(0, 1 << f.bits) for _ in range(n32)]


def _canon_value(v: float) -> str:
    sign = "-" if np.signbit(v) else "+"
    if np.isnan(v):
        return "nan" + sign
    if np.isinf(v):
        return "inf" + sign
    fr = abs(Fraction(float(v)))
    return f"{sign}{fr.numerator}/{fr.denominator}"


def expected_decode(codes, name) -> list[str]:
    """decode, classify, next_up, next_down, ulp and the exact decimal of each code
    (NaN signs are not compared for neighbours / ulp: they carry no code)."""
    f = ff.get_format(name)
    dt = np.uint32 if f.bits > 16 else np.uint16
    v = ff.decode(np.array(codes, dt), f)
    cls = ff.classify(v, f)
    up, dn, u = ff.next_up(v, f), ff.next_down(v, f), ff.ulp(v, f)
    out = []
    for i in range(len(codes)):
        text = "NaN" if np.isnan(v[i]) else (("-" if v[i] < 0 else "+") + "Inf" if np.isinf(v[i])
                                              else _exact_text(v[i]))
        nosign = lambda w: _canon_value(w).replace("nan-", "nan+")  # noqa: E731
        out.append([_canon_value(v[i]), str(cls[i]), nosign(up[i]), nosign(dn[i]), nosign(u[i]), text])
    return out


def _exact_text(v: float) -> str:
    return format(Decimal(float(v)), "f")  # Decimal(float) is exact


def mx_blocks(name: str, rng: random.Random, n: int = 12) -> list[list[str]]:
    """Random MX blocks: mixed magnitudes, an outlier, exact ties of the element grid."""
    blocks = []
    for j in range(n):
        size = 32 if j % 3 else rng.randrange(1, 33)
        scale = 10.0 ** rng.uniform(-6, 6)
        blk = [f"{rng.gauss(0, 1) * scale:.{rng.randrange(1, 12)}g}" for _ in range(size)]
        if j % 4 == 1:
            blk[rng.randrange(size)] = f"{scale * 1000:.6g}"
        if j % 5 == 2:  # exact quarter steps: many ties
            blk = [str(rng.randrange(-64, 65) / 8) for _ in range(size)]
        blocks.append(blk)
    blocks.append(["0"] * 32)
    blocks.append(["1", "nan"] + ["0.5"] * 30)
    blocks.append(["448", "449", "-464", "1e-30"] + ["0"] * 28)
    blocks.append(["6", "6.0000000000000000001", "5.99999999999999999", "-7"])
    blocks.append(["1e38", "3e38"])
    return blocks


def expected_mx(blocks, name, scale_rounding, mode) -> list[str]:
    out = []
    for blk in blocks:
        q = ff.quantize(np.array(blk, dtype=object), name, rounding=mode, scale_rounding=scale_rounding)
        out.append(f"{int(q.scale_codes[0])}:" + ",".join(str(int(c)) for c in q.codes))
    return out
