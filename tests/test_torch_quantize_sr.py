"""Stochastic rounding of inexact quotients x / scale in the device ``quantize`` /
``fake_quant`` (``floatfmt.scaling.quantize_schemes``, run on CPU tensors under
``force_namespace``: the code CUDA runs).

numpy's SR draws from a numpy Generator and the device's from a ``torch.Generator``,
and ``quantize`` takes no replayed draws, so what is proven is:

* the exact remainders the device hands to the rounding routine (``exact_quotient``
  with ``fine``: the truncated quotient and its ``resid``) are ``eft.exact_quotient``'s,
  bit for bit, over the whole float64 range;
* given the same random numbers (the torch draws replayed), every element of every
  scheme (integers and floats per tensor / channel / group / 2-D block, given and
  calibrated scales, asymmetric zero points, NVFP4) is the neighbour of the exact
  quotient (Fraction arithmetic) that the rule "away from zero iff u < p" picks, p the
  quotient's fraction of the way between its neighbours;
* statistically: the count of elements rounded away lies within 6 sigma of the sum of
  their fractions, and a seed (int or ``torch.Generator``) reproduces its bits.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith import eft
from floatfmt.backend.dispatch import force_namespace

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def spread(n: int, seed: int, lo: int, hi: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n) * np.exp2(rng.integers(lo, hi, n))


def test_device_quotient_remainders_equal_eft():
    """``exact_quotient(..., fine=True)`` against ``eft.exact_quotient(..., fine=True)``:
    quotients across the float64 range, subnormal ones, ones past the range, specials."""
    from floatfmt.scaling.quantize_schemes import exact_quotient
    n = 20000
    v = spread(n, 1, -1000, 1000)
    s = np.abs(spread(n, 2, -126, 127)).astype(np.float32).astype(np.float64)  # fp32 scales
    s[s == 0] = 0.3
    v[:300] = s[:300] * 2.0 ** -1060 * np.linspace(1.01, 900.3, 300)  # subnormal quotients
    v[300:320] = [0.0, -0.0, np.inf, -np.inf, np.nan] * 4
    v[320:340] = np.finfo(np.float64).max * np.linspace(0.5, 1, 20)  # past the range
    s[320:340] = np.linspace(0.01, 0.9, 20)
    t, R = exact_quotient(torch.from_numpy(v), torch.from_numpy(s), fine=True)
    tw, Rw = eft.exact_quotient(v, s, fine=True)
    assert R is not None and R.dtype == torch.int64
    assert np.array_equal(t.numpy(), tw, equal_nan=True)
    assert np.array_equal(R.numpy(), Rw)
    assert (Rw & 1).any() and (Rw[:300] != 0).any()
    # power-of-two scales: where every float64 quotient is normal (or an exact zero /
    # special) it is exact: the quotient itself, no remainder (as numpy) ...
    s2 = np.exp2(np.round(np.log2(s)))
    with np.errstate(over="ignore", under="ignore"):
        q2 = np.abs(v / s2)
    normal = ~np.isfinite(v) | (v == 0) | ((q2 >= 2.0 ** -1021) & (q2 <= 2.0 ** 1023))
    assert normal.sum() > n // 2 and not normal.all()
    t2, R2 = exact_quotient(torch.from_numpy(v[normal]), torch.from_numpy(s2[normal]), fine=True)
    assert R2 is None
    # ... and where some are subnormal or past the range, the division rounded: the
    # remainders of every quotient, as eft's
    t3, R3 = exact_quotient(torch.from_numpy(v), torch.from_numpy(s2), fine=True)
    tw3, Rw3 = eft.exact_quotient(v, s2, fine=True)
    assert R3 is not None
    assert np.array_equal(t3.numpy(), tw3, equal_nan=True) and np.array_equal(R3.numpy(), Rw3)


# ------------------------------------------------------------------ the exact rule
def _element_scales(q, shape):
    """The scale (and zero point) of each element of a QuantizedTensor, as numpy arrays."""
    def arr(a):
        return a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)

    def expand(a):
        a = arr(a).astype(np.float64) if not isinstance(a, int) else np.asarray(a)
        if a.ndim == 0:
            return np.broadcast_to(a, shape)
        if q.fmt == "nvfp4":
            a = np.repeat(a, q.block_size, axis=q.axis)
        elif q.block_shape is not None:
            for d, k in enumerate(q.block_shape):
                a = np.repeat(a, k, axis=d)
        return np.broadcast_to(a[tuple(slice(0, k) for k in shape)], shape)

    s = expand(q.scale)
    zp = expand(q.zero_point)
    return s, zp


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > a else e


def _neighbours(p: Fraction, f) -> tuple[Fraction, Fraction, Fraction]:
    """(toward zero, away from zero, fraction of the way) of p in f's grid (no bounds)."""
    a = abs(p)
    if f.kind == "int" or a == 0:
        quantum = Fraction(1)
    else:
        quantum = Fraction(2) ** (max(_floor_log2(a), f.emin) - f.mbits)
    k = math.floor(a / quantum)
    frac = a / quantum - k
    sign = -1 if p < 0 else 1
    return sign * k * quantum, sign * (k + 1) * quantum, frac


def _expected(x, q, u):
    """The elements the rule "away iff u < fraction" gives (quotient units: integer codes
    or rounded quotients), and the list of fractions."""
    f = q.element_format
    s, zp = _element_scales(q, x.shape)
    ts = Fraction(q.tensor_scale) if q.tensor_scale is not None else Fraction(1)
    xs, us = x.reshape(-1), u.reshape(-1)
    out, fracs = np.empty(xs.size), []
    for i, (xv, sv, zv) in enumerate(zip(xs, s.reshape(-1), zp.reshape(-1))):
        p = Fraction(float(xv)) / (Fraction(float(sv)) * ts)
        lo, hi, fr = _neighbours(p, f)
        r = hi if Fraction(float(us[i])) < fr else lo
        fracs.append((fr, r == hi and fr != 0))
        if f.kind == "int":
            out[i] = min(max(int(r) + int(zv), q.qmin), q.qmax)
        else:
            out[i] = float(max(min(r, Fraction(f.max)), -Fraction(f.max)))
    return out.reshape(x.shape), fracs


SCHEMES = [("int8", {}), ("int8", {"scale": 0.3}), ("uint8", {"scheme": "asymmetric"}),
           ("int4", {"granularity": "channel", "axis": 0}),
           ("int8", {"granularity": "group", "group_size": 16, "scheme": "asymmetric"}),
           ("int8", {"granularity": "block", "block": (4, 24)}),
           ("int8", {"calibration": "percentile", "percentile": 99.0}),
           ("fp8_e4m3", {}), ("fp8_e5m2", {"granularity": "channel", "axis": 1}),
           ("fp6_e2m3", {"granularity": "group", "group_size": 16}),
           ("fp8_e4m3", {"granularity": "block", "block": (3, 16)}),
           ("bf16", {"scale": 0.3}), ("nvfp4", {}),
           # 50 fraction bits: the quantum is 4 float64 ulps, so the remainder below the
           # float64 (resid) moves the threshold by up to 2**-51 of a step, which 53-bit
           # draws resolve (for narrow formats only resid != 0 matters)
           ("e10m50", {"scale": 0.3}),
           ("e10m50", {"granularity": "channel", "axis": 0,
                       "scale": np.linspace(0.1, 0.7, 12).tolist()})]


@pytest.mark.parametrize("fmt,opts", SCHEMES)
def test_device_sr_quantize_follows_the_exact_rule_given_the_same_draws(fmt, opts):
    """Each element is the exact quotient's neighbour toward zero, or the one away from
    zero iff the replayed draw u (53 bits, k 2**-53) is below the quotient's fraction p
    (``round_values``: away iff k < ceil(p 2**53), i.e. u < p)."""
    n = 12 * 48 * (40 if fmt == "e10m50" else 1)
    x = spread(n, 3, -3, 3).reshape(12, -1)
    seed = 17
    with force_namespace():
        q = ff.quantize(torch.from_numpy(x), fmt, rounding="stochastic", rng=seed, **opts)
    u = torch.rand(x.size, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    want, fracs = _expected(x, q, u.numpy().reshape(x.shape))
    got = q.elements.numpy()
    assert int((got != want).sum()) == 0, (got[got != want][:5], want[got != want][:5])
    inexact = sum(1 for fr, _ in fracs if fr != 0)
    assert inexact > x.size // 2  # the quotients are inexact (what this test is about)
    # the frequency of rounding away: a sum of Bernoulli(p_i) within 6 sigma
    mean = sum(float(fr) for fr, _ in fracs)
    var = sum(float(fr) * (1 - float(fr)) for fr, _ in fracs)
    k = sum(1 for _, up in fracs if up)
    assert abs(k - mean) <= 6 * math.sqrt(var) + 1


def test_device_sr_quantize_frequency_of_one_quotient():
    """1 / 0.3 = 3.33...: int8 with scale 0.3 gives code 4 with frequency 1/3 (of the
    exact quotient 1 / fl(0.3)), code 3 otherwise; NVFP4 the same for a block scale
    that is not a power of two."""
    n = 40000
    s = Fraction(0.3)
    p = Fraction(1) / s - 3
    with force_namespace():
        q = ff.quantize(torch.ones(n, dtype=torch.float64), "int8", scale=0.3,
                        rounding="stochastic", rng=4)
    v = q.elements.numpy()
    assert set(np.unique(v)) <= {3.0, 4.0}
    k = int((v == 4).sum())
    assert abs(k - n * float(p)) <= 6 * math.sqrt(n * float(p) * (1 - float(p))) + 1
    # NVFP4: blocks [3, 1, 1, ...]: ts = 3 / (6 * 448) (fp32), block scale 448 (E4M3),
    # elements x / (448 ts): 1 / (448 ts) lies between E2M1 values
    x = torch.ones(n // 16, 16, dtype=torch.float64)
    x[:, 0] = 3.0
    with force_namespace():
        q = ff.quantize(x, "nvfp4", rounding="stochastic", rng=5)
    d = Fraction(float(q.scale.reshape(-1)[0])) * Fraction(q.tensor_scale)
    lo, hi, fr = _neighbours(Fraction(1) / d, ff.get_format("fp4_e2m1"))
    assert 0 < fr < 1
    v = q.elements[:, 1:].numpy().reshape(-1)
    assert set(np.unique(v)) <= {float(lo), float(hi)}
    m, k = v.size, int((v == float(hi)).sum())
    assert abs(k - m * float(fr)) <= 6 * math.sqrt(m * float(fr) * (1 - float(fr))) + 1


def test_device_sr_quantize_is_reproducible_per_seed():
    x = torch.from_numpy(spread(12 * 48, 6, -3, 3).reshape(12, 48))
    with force_namespace():
        for fmt, opts in (("int8", {"scale": 0.3}), ("fp8_e4m3", {}), ("nvfp4", {}),
                          ("int4", {"granularity": "group", "group_size": 16})):
            def call(r):
                return ff.fake_quant(x, fmt, rounding="stochastic", rng=r, **opts)
            first = call(21)
            assert torch.equal(first, call(21))
            assert torch.equal(first, call(torch.Generator().manual_seed(21)))
            assert not torch.equal(first, call(22))
