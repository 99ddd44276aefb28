"""DelayedScaling with non-finite, NaN and empty tensors, as Transformer Engine handles them
(issue 9, "Also fix").

TE's rules (amax kernel and ``amax_and_scale_update``, transformer_engine/common/recipe):
a tensor's amax is ``fmaxf`` over ``|x|`` from 0 (NaN elements are skipped, Inf wins, no
elements give 0); that amax is written into the history unchanged; the reference amax
is the window's ``fmaxf`` (``"max"``) or its newest entry (``"most_recent"``); the scale
becomes ``fmt.max / amax_ref / 2**margin`` only when amax_ref is finite and positive,
else the previous scale stays.  floatfmt's scale is TE's ``scale_inv`` (the dequantisation
multiplier), so the expected values below are ``amax_ref * 2**margin / fmt.max`` in fp32.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff


def fp32(fr) -> float:
    """Nearest fp32 to a Fraction, ties to even, by exact comparison of neighbours."""
    fr = Fraction(fr)
    f = np.float32(float(fr))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - fr),
                                     int(np.array(c).view(np.uint32)) & 1))
    return float(best)


def _te_model(steps, history_len, algo, fmt_max, margin=0):
    """Reference trace of (scale, history) after each update, written from TE's rules."""
    hist, scale, out = [], 1.0, []
    for x in steps:
        a = np.abs(np.asarray(x, np.float64)).ravel()
        amax = 0.0
        for v in a:  # fmaxf from 0: NaN loses, Inf wins
            if not math.isnan(v):
                amax = max(amax, v)
        hist = (hist + [amax])[-history_len:]
        ref = hist[-1] if algo == "most_recent" else max(hist)
        if math.isfinite(ref) and ref > 0:
            scale = fp32(Fraction(ref) * 2 ** margin / Fraction(fmt_max))
        out.append((scale, list(hist)))
    return out


STEPS = [
    [1.0, -2.0], [np.inf, 3.0], [4.0], [np.nan, 5.0, np.nan], [-np.inf], [6.0],
    [], [np.nan], np.zeros((2, 0)), [0.0, -0.0], [7.0, np.nan], [8.0], [9.0], [10.0],
]


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("history_len", [1, 2, 3])
@pytest.mark.parametrize("role", ["forward", "backward"])
def test_non_finite_amax_keeps_the_scale(algo, history_len, role):
    ds = ff.DelayedScaling(history_len=history_len, algo=algo, margin=1)
    fmt_max = ff.info("fp8_e4m3" if role == "forward" else "fp8_e5m2").max
    want = _te_model(STEPS, history_len, algo, fmt_max, margin=1)
    for x, (scale, hist) in zip(STEPS, want):
        before = ds.scale("t")
        q = ds.quantize("t", x, role=role)
        assert q.dequantize().shape == np.shape(x)
        got = ds.update()["t"]
        assert got == scale, (x, got, scale)
        assert ds.history("t") == hist
        if not (math.isfinite(max(hist) if algo == "max" else hist[-1])
                and (max(hist) if algo == "max" else hist[-1]) > 0):
            assert got == before  # the previous scale, untouched


def test_inf_freezes_the_scale_for_the_window():
    """Under "max", an Inf in the window keeps the scale for history_len updates; then the
    finite window decides again."""
    ds = ff.DelayedScaling(history_len=3)
    ds.quantize("w", [448.0 * 4])
    s0 = ds.update()["w"]
    assert s0 == 4.0
    ds.quantize("w", [1.0, np.inf])
    assert ds.update()["w"] == s0 and ds.history("w") == [1792.0, np.inf]
    for _ in range(2):
        ds.quantize("w", [448.0])
        assert ds.update()["w"] == s0  # Inf still in the window
    ds.quantize("w", [448.0])
    assert ds.update()["w"] == 1.0  # the Inf has left the window
    assert ds.history("w") == [448.0, 448.0, 448.0]
