"""The binary32 plan of the rounding routine (``rounding._Kind.F32``: IEEE binary32,
nearest-even, Inf past the range, done by numpy's float64 -> float32 conversion) against
the MPFR oracle on the values where a conversion could go wrong (ties in every binade,
subnormal ties, the overflow boundary, float64 subnormals, signed zeros, Inf, NaN), the
FLOAT plan it replaces, and an FPU that flushes subnormals (the plan must step aside)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import floatfmt as ff
from conftest import all_same, mpfr as O

rounding = importlib.import_module("floatfmt.core.rounding")
F32 = ff.get_format("fp32")


def _edges() -> np.ndarray:
    """float64 values around every binary32 decision point kind."""
    e = np.arange(-149, 128)
    ulp = np.exp2(np.maximum(e - 23, -149).astype(np.float64))
    base = np.exp2(e.astype(np.float64)) * 1.25  # a value of each binade (or subnormal)
    ties = base + ulp / 2
    pts = [base, ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf), base + ulp * 1.5]
    sub = np.arange(0, 9) * 2.0 ** -150  # multiples of half the smallest subnormal
    mx = F32.max
    top = [mx, mx + 2.0 ** 103, np.nextafter(mx + 2.0 ** 103, 0), mx + 2.0 ** 104, 1e300,
           np.inf, 5e-324, 2.0 ** -1022, 0.0]
    v = np.concatenate(pts + [sub, np.array(top)])
    return np.concatenate([v, -v, [np.nan]])


def test_binary32_requests_take_the_conversion_plan():
    p = rounding._plan(F32, "nearest_even", "inf", None)
    assert p.kind is rounding._Kind.F32 and p.alt.kind is rounding._Kind.FLOAT
    for mode, policy in [("toward_zero", "inf"), ("nearest_even", "saturate"),
                         ("nearest_away", "inf")]:
        assert rounding._plan(F32, mode, policy, None).kind is rounding._Kind.FLOAT


@pytest.mark.parametrize("plan", ["f32", "float"])
def test_binary32_edges_against_mpfr(plan, monkeypatch):
    if plan == "float":
        monkeypatch.setattr(rounding, "_f32_keeps_subnormals", lambda: False)
    x = _edges()
    got = ff.cast(x, "fp32")
    want = np.array([O.round_one(float(v), F32) for v in x])
    bad = [(v, g, w) for v, g, w in zip(x, got, want) if not all_same(g, w)]
    assert not bad, bad[:5]
    # with a remainder (sticky) the chunk takes the FLOAT plan: a hair above each tie
    from fractions import Fraction
    ties = x[np.isfinite(x) & (np.abs(x) < F32.max)][::7]
    exact = [Fraction(float(v)) + Fraction(1, 2 ** 1200) for v in ties]
    got2 = ff.cast(exact, "fp32")
    want2 = np.array([O.round_one(q, F32) for q in exact])
    assert all_same(got2, want2)


def test_flushing_fpu_takes_the_float_plan():
    torch = pytest.importorskip("torch")
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero control")
    try:
        assert not rounding._f32_keeps_subnormals()
        x = _edges()
        got = ff.cast(x, "fp32")
    finally:
        torch.set_flush_denormal(False)
    assert rounding._f32_keeps_subnormals()
    want = np.array([O.round_one(float(v), F32) for v in x])
    assert all_same(got, want)
