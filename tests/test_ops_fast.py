"""The numpy kernels of the arithmetic (``floatfmt.arith.ops_fast``: chunked, in place,
``Fraction`` slow paths) against the rule written once over the array namespace
(``floatfmt.arith.ops``' ``*_rule``, what tensors on a device run), both on numpy
arrays: the same bits for every operation, format and deterministic rounding mode,
with operands in and off the format, specials, subnormals and the ends of the range.
(Under stochastic rounding the two draw their random numbers in another order; the
remainders they round by are compared in tests/test_arith_strategies.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith import ops, ops_fast
from conftest import DET_MODES, all_same

FORMATS = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp32", "fp64")
BINARY = ("add", "sub", "mul", "div", "minimum", "maximum")
UNARY = ("sqrt", "neg", "abs")


def operands(fmt: str, seed: int, n: int = 1500) -> np.ndarray:
    """n float64 values: half in the format (cast), half arbitrary, over the format's
    range and beyond, with zeros of both signs, Inf and NaN (for formats that have them)."""
    f = ff.get_format(fmt)
    rng = np.random.default_rng(seed)
    lo = -1074 if f.name == "fp64" else int(f.emin) - int(f.mbits) - 3
    hi = 1023 if f.name == "fp64" else int(f.emax) + 2
    v = rng.standard_normal(n) * np.exp2(rng.integers(lo, hi, n).astype(float))
    v[: n // 2] = ff.cast(v[: n // 2], f, overflow="saturate")
    v[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0]
    if f.name == "fp64":
        v[6:12] = [2.0 ** -1074, -2.0 ** -1060, 1.7e308, -1.6e308, 2.0 ** 1000, 2.0 ** -1000]
    return v


def _both(name: str, args, fmt: str, **kw):
    fast = getattr(ops_fast, name)(*args, fmt, **kw)
    rule = getattr(ops, name + "_rule")(*args, fmt, **kw)
    return np.asarray(fast), np.asarray(rule)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", DET_MODES)
def test_fast_equals_rule_on_numpy(fmt, mode):
    x, y, z = operands(fmt, 1), operands(fmt, 2), operands(fmt, 3)
    rng = np.random.default_rng(4)
    y = np.where(rng.random(x.size) < 0.2, -x, y)  # exact zero sums
    bad = []
    for name in BINARY:
        fast, rule = _both(name, (x, y), fmt, rounding=mode)
        if not all_same(fast, rule):
            bad.append((name, int((~np.isclose(fast, rule, equal_nan=True)).sum())))
    fast, rule = _both("fma", (x, y, z), fmt, rounding=mode)
    if not all_same(fast, rule):
        bad.append(("fma", fast.size))
    for name in UNARY:
        fast, rule = _both(name, (x,), fmt, rounding=mode)
        if not all_same(fast, rule):
            bad.append((name, fast.size))
    assert not bad, bad


@pytest.mark.parametrize("fmt", ("bf16", "fp8_e4m3", "fp16"))
def test_fast_equals_rule_options(fmt):
    """ftz, daz and the overflow policies take the same path through both kernels."""
    x, y, z = operands(fmt, 5), operands(fmt, 6), operands(fmt, 7)
    for kw in ({"ftz": True}, {"daz": True}, {"overflow": "saturate"},
               {"ftz": True, "daz": True, "rounding": "toward_zero"}):
        for name in ("add", "mul", "div"):
            assert all_same(*_both(name, (x, y), fmt, **kw)), (name, kw)
        assert all_same(*_both("fma", (x, y, z), fmt, **kw)), ("fma", kw)
        assert all_same(*_both("sqrt", (x,), fmt, **kw)), ("sqrt", kw)


def test_fast_equals_rule_in_format_chunks():
    """Large arrays of values in the format: the fast path's exact float64 chunks (no
    error-free transformation at all) against the rule."""
    f = "bf16"
    rng = np.random.default_rng(8)
    x = ff.cast(rng.standard_normal(3 * (1 << 15)), f)
    y = ff.cast(rng.standard_normal(x.size) * 1e-3, f)
    for name in ("add", "sub", "mul"):
        assert all_same(*_both(name, (x, y), f)), name
    assert all_same(*_both("fma", (x, y, x), f))


def test_kernel_choice_is_one_place():
    """``ops._kernel``: tensors (handed over by dispatch only when computed on their
    device) take the rule, everything else the numpy kernel."""
    assert ops._kernel(ops_fast.add, ops.add_rule, np.ones(2), 1.0) is ops_fast.add
    torch = pytest.importorskip("torch")
    assert ops._kernel(ops_fast.add, ops.add_rule, torch.ones(2), 1.0) is ops.add_rule
