"""P3109 ConvertToBlockMaxAbsFinite / BlockProject (v4.0 sections 5.1.2, 5.2.3, 4.11.3)
against a reference written from the report's text: the MaximumFinite reduction over
exact values, and every element projected by tests/oracles/p3109.py from the exact
rational X_i / S (no floatfmt rounding in the reference)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.scaling.p3109_blocks import block_project, convert_to_block_max_abs_finite
from tests.oracles.p3109 import P3109

SATS = {"saturate": "SatFinite", "propagate": "SatPropagate", "satnone": "SatNone"}


def _oracle(name):
    f = ff.get_format(name)
    return P3109(f.bits, f.mbits + 1, f.signed, f.inf)


def _max_finite(vals):
    """reduce(MaximumFinite, [NaN, M_1, ..., M_B]) of section 4.11.3, M_i = |X_i| >= 0."""
    acc = math.nan
    for m in vals:
        if math.isnan(acc):
            acc = m
        elif math.isnan(m):
            pass
        elif math.isinf(acc) and math.isinf(m):
            acc = math.inf
        elif math.isinf(acc):
            acc = m
        elif math.isinf(m):
            pass
        else:
            acc = max(acc, m)
    return acc


def _reference(block, scale_name, elem_name, srnd, ssat, rnd, sat):
    so, eo = _oracle(scale_name), _oracle(elem_name)
    S = _max_finite([abs(v) for v in block])
    s = so.project(S if not math.isfinite(S) else Fraction(S), srnd, SATS[ssat])
    out = []
    for v in block:
        if math.isnan(s) or math.isnan(v):
            z = math.nan
        elif s == 0:
            z = 0.0
        elif math.isinf(s):
            z = float(np.sign(v) * np.sign(s))
        elif math.isinf(v):
            z = math.copysign(math.inf, v) * (1 if s > 0 else -1)
        else:
            z = Fraction(v) / Fraction(s)
        out.append(eo.project(z, rnd, SATS[sat]))
    return s, out


def _blocks(rng, n, b, elem_max):
    x = rng.standard_normal((n, b)) * np.exp2(rng.integers(-20, 20, (n, 1)))
    x[0] = np.nan  # all NaN
    x[1] = [np.inf, -np.inf] * (b // 2)  # all infinite
    x[2, :2] = [np.nan, np.inf]  # some special
    x[3] = 0.0  # all zero
    x[4, 0] = -np.inf
    x[5] *= 1e-30  # the scale may round to zero or a subnormal
    x[6] *= 1e30  # the scale may overflow its format
    x[7, 1] = elem_max * 7  # a big outlier
    return x


@pytest.mark.parametrize("scale_name,elem_name", [("binary8p1uf", "binary8p4se"),
                                                  ("binary8p1ue", "binary8p3sf"),
                                                  ("binary8p3se", "binary8p5ue"),
                                                  ("binary8p4uf", "binary8p4sf")])
def test_convert_to_block_max_abs_finite_matches_the_report(scale_name, elem_name):
    rng = np.random.default_rng(3109)
    b = 4
    x = _blocks(rng, 24, b, ff.info(elem_name).max)
    bad = n = 0
    for srnd, ssat in (("up", "saturate"), ("nearest_even", "satnone"), ("down", "propagate")):
        for rnd in ("nearest_even", "toward_zero", "odd"):
            for sat in SATS:
                s, r = convert_to_block_max_abs_finite(
                    x.ravel(), b, scale_name, elem_name, scale_rounding=srnd,
                    scale_overflow=ssat, rounding=rnd, overflow=sat)
                for i, blk in enumerate(x):
                    ws, wr = _reference(blk.tolist(), scale_name, elem_name, srnd, ssat, rnd, sat)
                    got = [s[i]] + r[i * b:(i + 1) * b].tolist()
                    want = [ws] + wr
                    for g, w in zip(got, want):
                        n += 1
                        bad += not ((math.isnan(g) and math.isnan(w)) or
                                    (g == w and math.copysign(1, g) == math.copysign(1, w)))
    assert bad == 0 and n > 3000


def test_notes_of_section_5_2_3():
    # NOTE 1: all NaN -> NaN scale and elements
    s, r = convert_to_block_max_abs_finite([np.nan] * 4, 4, "binary8p1ue", "binary8p4se")
    assert np.isnan(s).all() and np.isnan(r).all()
    # NOTE 2: all infinite -> scale Inf (or MaxFinite), elements +-1 (or MaxFinite)
    s, r = convert_to_block_max_abs_finite([np.inf, -np.inf], 2, "binary8p1ue", "binary8p4se")
    assert s.tolist() == [np.inf] and r.tolist() == [1.0, -1.0]
    s, r = convert_to_block_max_abs_finite([np.inf, -np.inf], 2, "binary8p1uf", "binary8p4se")
    assert s.tolist() == [ff.info("binary8p1uf").max]
    # NOTE 3: an infinite element does not change the scale and stays infinite (SatNone)
    s, r = convert_to_block_max_abs_finite([np.inf, 3.0], 2, "binary8p1ue", "binary8p4se",
                                           scale_rounding="up")
    assert s.tolist() == [4.0] and r.tolist() == [np.inf, 0.75]
    # NOTE 4: a scale that rounds to zero makes every element zero
    s, r = convert_to_block_max_abs_finite([1e-300, -1e-300], 2, "binary8p1ue", "binary8p4se")
    assert s.tolist() == [0.0] and r.tolist() == [0.0, 0.0]


def test_axis_and_shapes():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 11
    s, r = convert_to_block_max_abs_finite(x, 3, "binary8p1ue", "binary8p4se", axis=1)
    assert s.shape == (2, 4, 1) and r.shape == x.shape
    s2, r2 = convert_to_block_max_abs_finite(np.moveaxis(x, 1, -1), 3, "binary8p1ue",
                                             "binary8p4se")
    assert np.array_equal(np.moveaxis(r2, -1, 1), r) and np.array_equal(s2, s)


def test_bad_block_options():
    with pytest.raises(ValueError, match=r"block_size 3 does not divide the axis length 4.*\[1, 2, 4\]"):
        convert_to_block_max_abs_finite(np.ones(4), 3, "binary8p1ue", "binary8p4se")
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        convert_to_block_max_abs_finite(np.ones(4), 0, "binary8p1ue", "binary8p4se")
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        convert_to_block_max_abs_finite(np.ones(4), 2, "binary8p1ue", "binary8p4se", axis=2)
    with pytest.raises(ValueError, match="binary8p9se"):
        convert_to_block_max_abs_finite(np.ones(4), 2, "binary8p9se", "binary8p4se")
    assert block_project(0.0, [1.0, np.nan], "binary8p4se")[0] == 0.0
