"""Elementwise arithmetic against MPFR (gmpy2), bit for bit, in every deterministic mode.

For each format and operation: 20,000 operand sets (random codes, operands of
close magnitude, operands chosen so the exact result lands on or next to a
midpoint or a value of the format, and the special values), or every operand
set when there are fewer than that (fp6 / fp4 binary operations, 8-bit
square roots).  The exact result is computed with rationals (square roots:
MPFR at 200 bits, rounded to odd, which any later rounding to 24 bits or
fewer does not disturb) and rounded by ``tests/oracles/mpfr.py``, which never
calls floatfmt.  For fp8_e4m3 / fp8_e5m2 the full 256 x 256 tables of
add / sub / mul / div in round-to-nearest-even are compared too.  fp64 is
checked on a smaller random set including operands near the ends of the
float64 range (the slow exact path).
"""

from __future__ import annotations

import math
import zlib

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpfr, mpq

import floatfmt as ff
from floatfmt.core.codec import codes_to_values
from conftest import DET_MODES as MODES, mpfr as M, same as _same

FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2",
           "fp4_e2m1")
OPS = ("add", "sub", "mul", "div", "sqrt", "fma")
N = 20_000
ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "sqrt": 1, "fma": 3}

_CTX200 = gmpy2.context(precision=200, round=gmpy2.RoundToZero)


# ----------------------------------------------------------------------------- oracle side
def _sqrt_odd(x: float):
    """sqrt(x) for finite x > 0 as an mpq: exact, or rounded to odd at 200 bits."""
    with gmpy2.context(_CTX200) as ctx:
        r = gmpy2.sqrt(mpfr(x))
        inexact = ctx.inexact
    m, e = r.as_mantissa_exp()
    if inexact and m % 2 == 0:
        m += 1
    return mpq(m) * (mpq(2) ** e if e >= 0 else mpq(1, 2 ** -e))


def _zero_sum_sign(x_zero_sign, y_zero_sign, mode):
    """IEEE sign of an exact zero sum. *_zero_sign: +1/-1 for a signed zero term, None otherwise."""
    if x_zero_sign is not None and x_zero_sign == y_zero_sign:
        return -0.0 if x_zero_sign < 0 else 0.0
    return -0.0 if mode == "down" else 0.0


def _zsign(v: float):
    return (-1 if math.copysign(1.0, v) < 0 else 1) if v == 0 else None


def _exact(op, a, b=None, c=None):
    """The exact result: an mpq, or a float for signed zeros / Inf / NaN.  Zero sums are
    returned as the string 'zsum' with the signs of the two terms (mode dependent)."""
    with np.errstate(all="ignore"):
        if op in ("add", "sub"):
            y = -b if op == "sub" else b
            if not (math.isfinite(a) and math.isfinite(y)):
                return float(np.float64(a) + y)
            q = mpq(a) + mpq(y)
            return ("zsum", _zsign(a), _zsign(y)) if q == 0 else q
        if op == "mul":
            if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
                return float(np.float64(a) * b)
            return mpq(a) * mpq(b)
        if op == "div":
            if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
                return float(np.float64(a) / np.float64(b))
            return mpq(a) / mpq(b)
        if op == "sqrt":
            if not math.isfinite(a) or a <= 0:
                return float(np.sqrt(np.float64(a)))
            return _sqrt_odd(a)
        if op == "fma":
            if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
                return float(np.float64(a) * b + c)
            p = mpq(a) * mpq(b)
            q = p + mpq(c)
            if q == 0:
                pz = (-1 if (math.copysign(1, a) * math.copysign(1, b)) < 0 else 1) if p == 0 else None
                return ("zsum", pz, _zsign(c))
            return q
    raise AssertionError(op)


def oracle(op, fmt, args, modes=MODES):
    """{mode: float64 array} of correctly rounded results (never calls floatfmt)."""
    f = ff.get_format(fmt)
    cols = [a.tolist() for a in args]
    exacts = [_exact(op, *vals) for vals in zip(*cols)]
    out = {}
    for mode in modes:
        res = np.empty(len(exacts))
        for i, x in enumerate(exacts):
            if isinstance(x, tuple):
                x = _zero_sum_sign(x[1], x[2], mode)
            res[i] = M.round_one(x, f, mode)
        out[mode] = res
    return out


# ----------------------------------------------------------------------------- operands
def _all_values(f):
    """Every code's value (NaN codes included) for formats of at most 16 bits."""
    return codes_to_values(np.arange(1 << f.bits, dtype=np.int64), f)


def _random_values(f, n, rng):
    codes = rng.integers(0, 1 << f.bits, size=n, dtype=np.int64)
    return codes_to_values(codes, f)


def _specials(f):
    vals = [0.0, -0.0, f.max, -f.max, f.smallest_subnormal, -f.smallest_subnormal,
            f.smallest_normal, -f.smallest_normal, 1.0, -1.0]
    if f.inf:
        vals += [np.inf, -np.inf]
    if f.has_nan:
        vals += [np.nan]
    return np.array(vals)


def _cast(x, f, rng):
    mode = rng.choice(["nearest_even", "up", "down"], size=np.shape(x))
    out = np.empty(np.shape(x))
    for m in ("nearest_even", "up", "down"):
        sel = mode == m
        with np.errstate(all="ignore"):
            out[sel] = ff.cast(np.asarray(x, np.float64)[sel], f, m, overflow="saturate")
    return out


def _targets(f, n, rng):
    """Values of the format and midpoints between neighbours, finite, nonzero."""
    v = _random_values(f, n, rng)
    v = np.where(np.isfinite(v) & (v != 0), v, 1.0)
    up = ff.next_up(np.abs(v), f)
    up = np.where(np.isfinite(up), up, np.abs(v))
    mid = np.sign(v) * (np.abs(v) + up) / 2
    return np.where(rng.random(n) < 0.6, mid, v)


def operands(op, fmt, rng):
    """The operand sets for (op, fmt), each a tuple of float64 arrays of values of fmt."""
    f = ff.get_format(fmt)
    k = ARITY[op]
    small = f.bits <= 8
    if small and (k == 1 or (f.bits <= 6 and k == 2) or (f.bits <= 4 and k == 3)):
        allv = _all_values(f).tolist()
        vals = sorted({v for v in allv if v == v and v != 0}) + [0.0, -0.0]
        vals = np.array(vals + ([np.nan] if f.has_nan else []))
        grids = np.meshgrid(*([vals] * k), indexing="ij")
        args = tuple(g.reshape(-1) for g in grids)
        return _drop_invalid_for_no_nan(op, f, args)
    n = N
    nspec = _specials(f)
    # special combinations: every special with every special (pairs), plus random partners
    sp = np.meshgrid(*([nspec] * min(k, 2)), indexing="ij")
    sp = [g.reshape(-1) for g in sp]
    if k == 3:
        sp.append(_random_values(f, sp[0].size, rng))
    if k == 1:
        sp = [nspec]
    n_sp = sp[0].size
    n_rand = (n - n_sp) // 3
    n_close = (n - n_sp) // 3
    n_mid = n - n_sp - n_rand - n_close
    rand = [_random_values(f, n_rand, rng) for _ in range(k)]
    # close magnitudes
    a = _random_values(f, n_close, rng)
    a = np.where(np.isfinite(a), a, 1.0)
    close = [a]
    for _ in range(k - 1):
        scale = np.ldexp(rng.uniform(0.5, 1.0, n_close) * rng.choice([-1, 1], n_close),
                         rng.integers(-f.mbits - 3, 4, n_close))
        close.append(_cast(a * scale, f, rng))
    # results on / next to midpoints
    t = _targets(f, n_mid, rng)
    x = _random_values(f, n_mid, rng)
    x = np.where(np.isfinite(x) & (x != 0), x, 1.0)
    with np.errstate(all="ignore"):
        if op == "add":
            mid = [x, _cast(t - x, f, rng)]
        elif op == "sub":
            mid = [x, _cast(x - t, f, rng)]
        elif op == "mul":
            mid = [x, _cast(t / x, f, rng)]
        elif op == "div":
            mid = [x, _cast(x / t, f, rng)]
        elif op == "sqrt":
            mid = [_cast(t * t, f, rng)]
        else:
            y = _random_values(f, n_mid, rng)
            y = np.where(np.isfinite(y), y, 1.0)
            y = _cast(np.sqrt(np.abs(t)) * np.sign(rng.standard_normal(n_mid)), f, rng)
            mid = [x, y, _cast(t - x * y, f, rng)]
    args = tuple(np.concatenate([sp[i], rand[i], close[i], mid[i]]) for i in range(k))
    return _drop_invalid_for_no_nan(op, f, args)


def _drop_invalid_for_no_nan(op, f, args):
    """Formats without NaN raise on invalid operations (tested separately): leave them out."""
    if f.has_nan:
        return args
    with np.errstate(all="ignore"):
        if op == "div":
            keep = ~((args[0] == 0) & (args[1] == 0))
        elif op == "sqrt":
            keep = ~(args[0] < 0)
        else:
            keep = np.ones(args[0].shape, bool)
    return tuple(a[keep] for a in args)


def _run(op, fmt, args, mode):
    fn = getattr(ff, op)
    return fn(*args, fmt, rounding=mode)


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op", OPS)
def test_op_matches_mpfr_in_every_mode(op, fmt):
    rng = np.random.default_rng(zlib.crc32(f"{op} {fmt}".encode()))  # reproducible
    args = operands(op, fmt, rng)
    n = args[0].size
    f = ff.get_format(fmt)
    exhaustive = f.bits <= 8 and (ARITY[op] == 1 or (f.bits <= 6 and ARITY[op] == 2)
                                  or (f.bits <= 4))
    assert n >= (1 if exhaustive else N - 50), n
    ref = oracle(op, fmt, args)
    for mode in MODES:
        got = _run(op, fmt, args, mode)
        bad = ~_same(got, ref[mode])
        if bad.any():
            i = np.flatnonzero(bad)[:5]
            detail = [(tuple(float(a[j]) for a in args), float(got[j]), float(ref[mode][j]))
                      for j in i]
            pytest.fail(f"{op} {fmt} {mode}: {int(bad.sum())} of {n} differ, e.g. "
                        f"(operands, floatfmt, mpfr) {detail}")


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_8bit_exhaustive_tables_rne(op, fmt):
    f = ff.get_format(fmt)
    v = _all_values(f)
    a, b = (g.reshape(-1) for g in np.meshgrid(v, v, indexing="ij"))
    assert a.size == 65536
    ref = oracle(op, fmt, (a, b), modes=("nearest_even",))["nearest_even"]
    got = _run(op, fmt, (a, b), "nearest_even")
    bad = ~_same(got, ref)
    assert not bad.any(), (f"{int(bad.sum())} mismatches, first: "
                           f"{[(a[i], b[i], got[i], ref[i]) for i in np.flatnonzero(bad)[:5]]}")


# ----------------------------------------------------------------------------- fp64
def _fp64_operands(op, rng, n):
    def rnd(size, lo=-60, hi=60):
        return np.ldexp(rng.uniform(1, 2, size) * rng.choice([-1.0, 1.0], size),
                        rng.integers(lo, hi, size))
    a, b, c = rnd(n), rnd(n), rnd(n)
    # near the ends of the range, where the error-free transformations need the slow path
    m = n // 4
    a[:m] = rnd(m, -1074, -900)
    b[:m] = rnd(m, -200, 200)
    a[m:2 * m] = rnd(m, 900, 1023)
    b[m:2 * m] = rnd(m, -150, 150)
    # exact and near-exact cancellations for fma and add
    c[2 * m:3 * m] = -(a[2 * m:3 * m] * b[2 * m:3 * m])
    b[3 * m:] = -a[3 * m:] * (1 + np.ldexp(rng.integers(-3, 4, n - 3 * m).astype(float), -52))
    if op == "sqrt":
        return (np.abs(a),)
    return (a, b, c)[:ARITY[op]]


@pytest.mark.parametrize("op", OPS)
def test_fp64_matches_mpfr(op):
    rng = np.random.default_rng(7)
    args = _fp64_operands(op, rng, 2000)
    modes = ("nearest_even", "toward_zero", "up", "down")
    ref = _fp64_oracle(op, args, modes)
    for mode in modes:
        got = _run(op, "fp64", args, mode)
        bad = ~_same(got, ref[mode])
        assert not bad.any(), (op, mode, [(tuple(x[i] for x in args), got[i], ref[mode][i])
                                          for i in np.flatnonzero(bad)[:3]])


def _fp64_oracle(op, args, modes):
    rnd = {"nearest_even": gmpy2.RoundToNearest, "toward_zero": gmpy2.RoundToZero,
           "up": gmpy2.RoundUp, "down": gmpy2.RoundDown}
    out = {}
    for mode in modes:
        ctx = gmpy2.ieee(64)
        ctx.round = rnd[mode]
        res = []
        with gmpy2.context(ctx):
            for vals in zip(*(a.tolist() for a in args)):
                x = [mpfr(v) for v in vals]
                if op == "add":
                    r = x[0] + x[1]
                elif op == "sub":
                    r = x[0] - x[1]
                elif op == "mul":
                    r = x[0] * x[1]
                elif op == "div":
                    r = x[0] / x[1]
                elif op == "sqrt":
                    r = gmpy2.sqrt(x[0])
                else:
                    r = gmpy2.fma(x[0], x[1], x[2])
                res.append(float(r))
        out[mode] = np.array(res)
    return out
