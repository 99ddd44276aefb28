"""Stochastic rounding in the device arithmetic (``ops``' rules over the namespace, ``accumulate`` on tensors;
issue 11 item 3), forced on CPU tensors (``force_namespace``, the code CUDA runs).

numpy's SR draws from a numpy Generator and the device's from a ``torch.Generator``:
the two streams differ, so the same seed cannot give the same bits.  What is proven
instead, bit for bit:

* the exact remainders the device hands to the rounding routine (``resid``) are those
  of ``floatfmt.arith.eft`` on numpy (sums, quotients, roots, the exact order's limbs);
* given the same random numbers (the torch draws replayed into numpy's
  ``round_values(..., sr_random=)``), the device result equals numpy's rule, for every
  SR mode (``stochastic``, P3109's A/B/C) and several ``sr_bits``;

and statistically: a value a fraction f of the way between two neighbours rounds up
with frequency f (binomial bound, 6 sigma), for every op and the sums; a seed (int or
``torch.Generator``) reproduces its bits.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith import eft
from floatfmt.backend.dispatch import force_namespace
from floatfmt.core.rounding import STOCHASTIC, round_values

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def spread(n: int, seed: int, lo: int = -40, hi: int = 40) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n) * np.exp2(rng.integers(lo, hi, n))


def test_device_sum_remainders_equal_eft():
    """TwoSum's remainder scaled to resid: both sides of s, binade boundaries, halves."""
    from floatfmt.arith.residuals import sum_sticky  # (the path rounded_sum uses)
    x, y = spread(20000, 1), spread(20000, 2)
    x[:6] = [1.0, 1.0, 1.0, 2.0, -1.0, 0.0]
    y[:6] = [2.0 ** -53, -2.0 ** -54, -2.0 ** -60, -2.0 ** -80, 2.0 ** -70, -0.0]
    x[6:40] = -y[6:40]  # exact zeros
    t, R = sum_sticky(torch.from_numpy(x), torch.from_numpy(y), True)
    tw, Rw = eft.exact_sum(x, y, True)
    Rw = np.zeros(x.shape, np.int64) if Rw is None else Rw
    assert np.array_equal(t.numpy(), tw) and np.array_equal(R.numpy(), Rw)
    assert (Rw & 1).any() and ((Rw != 0) & (Rw & 1 == 0)).any()  # inexact and exact halves


def test_device_quotient_and_root_remainders_equal_eft():
    """Quotients: the resid itself; roots: the resid's 2**g cell (g = resid_slack of the
    format; numpy gives the cell midpoint or the exact resid, both in that cell),
    including roots near cell edges (the exact side test)."""
    from floatfmt.arith.residuals import quotient_sticky, root_sticky
    x, y = spread(20000, 3, -300, 300), spread(20000, 4, -300, 300)
    t, R = quotient_sticky(torch.from_numpy(x), torch.from_numpy(y), fine=True)
    tw, Rw = eft.exact_quotient(x, y, fine=True)
    assert np.array_equal(t.numpy(), tw) and np.array_equal(R.numpy(), Rw)
    for name in ("fp32", "bf16", "fp8_e4m3", "int8"):
        g = eft.resid_slack(ff.get_format(name))
        v = ff.cast(np.abs(spread(20000, 5, -60, 60)), name, overflow="saturate")
        t, R = root_sticky(torch.from_numpy(v), fine=True, slack=g)
        tw, Rw = eft.exact_sqrt(v, fine=True)  # the exact resid (integer square roots)
        assert np.array_equal(t.numpy(), tw)
        Rw = np.zeros(v.shape, np.int64) if Rw is None else Rw
        assert np.array_equal(R.numpy() >> g, Rw >> g), name
    # roots whose estimate lies within 16 units of a cell edge: x = (t + c)**2 rounded,
    # for edges c of fp32's cells (g = 29), just below and above
    g = 29
    base = 1.0 + np.arange(1, 400) * 2.0 ** -40
    ulp = np.spacing(base)
    edge = base + np.round(np.linspace(0.1, 0.9, base.size) * 2 ** 25) * 2.0 ** g * ulp / 2 ** 54
    sq = [float(Fraction(e) ** 2) for e in edge]  # the float64 nearest to edge**2
    v = np.array(sq)
    t, R = root_sticky(torch.from_numpy(v), fine=True, slack=g)
    tw, Rw = eft.exact_sqrt(v, fine=True)
    assert np.array_equal(R.numpy() >> g, Rw >> g)


def test_device_exact_sum_resid_equals_fractions():
    from floatfmt.arith.limbs import limb_sum as exact_sum
    T = spread(5 * 300, 6, -120, 120).reshape(5, 300)
    T[:, 0] = [1.0, 2.0 ** -53, 0, 0, 0]
    T[:, 1] = [1.0, 2.0 ** -53, 2.0 ** -120, 0, 0]
    t, R = exact_sum(torch.from_numpy(T), "nearest_even", fine=True)
    for j in range(T.shape[1]):
        s = sum((Fraction(float(v)) for v in T[:, j]), Fraction(0))
        tj, rj = float(t[j]), int(R[j])
        rho = abs(s - Fraction(tj)) / Fraction(np.spacing(abs(tj))) * 2 ** 54
        assert rj == (math.floor(rho) | (rho != math.floor(rho))), j


SR_FORMATS = ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3",
              "fp4_e2m1", "int8"]


@pytest.mark.parametrize("name", SR_FORMATS)
def test_device_sr_equals_numpy_given_the_same_random_numbers(name):
    """Operands already in the format (their SR casts keep them, drawing one number per
    element each); the third batch of draws rounds the result.  Replayed into numpy's
    rule (``sr_random``) with numpy's exact remainder: the same bits."""
    f = ff.get_format(name)
    n = 2000
    a = ff.cast(spread(n, 7, -8, 8), name, overflow="saturate")
    b = ff.cast(spread(n, 8, -8, 8), name, overflow="saturate")
    b = np.where(b == 0, 1.0, b)  # no 0 / 0 (formats without NaN refuse it)
    exact = {"add": lambda: eft.exact_sum(a, b, True),
             "sub": lambda: eft.exact_sum(a, -b, True),
             "mul": lambda: (a * b, None),
             "div": lambda: eft.exact_quotient(a, b, True)}
    for op, ex in exact.items():
        for mode in STOCHASTIC:
            for bits in (3, 11, 23) if mode == "stochastic" else (5,):
                g = torch.Generator().manual_seed(bits)
                with force_namespace():
                    got = getattr(ff, op)(torch.from_numpy(a), torch.from_numpy(b), name, mode,
                                          overflow="saturate", rng=g, sr_bits=bits)
                g = torch.Generator().manual_seed(bits)
                draws = [torch.randint(0, 1 << bits, (n,), generator=g, dtype=torch.int64)
                         for _ in range(3)]
                t, R = ex()
                want = round_values(t, f, mode, "saturate", resid=R, sr_bits=bits,
                                    sr_random=draws[2].numpy())
                assert np.array_equal(got.numpy(), want, equal_nan=True), (op, mode, bits)


def _law(values, lo: float, hi: float, p: float) -> None:
    """Every value is lo or hi, and hi occurs with frequency p within 6 sigma."""
    v = values.numpy().reshape(-1)
    assert set(np.unique(v)) <= {lo, hi}
    n = v.size
    k = int((v == hi).sum())
    assert abs(k - n * p) <= 6 * math.sqrt(n * p * (1 - p)) + 1, (k / n, p)


def test_device_sr_rounds_up_with_the_right_frequency():
    """For a value a fraction f of the way from its neighbour toward zero (lo) to the
    one away (hi), hi occurs with frequency f: every op, sums in every order, 53 random
    bits and sr_bits (frequency floor(f 2**N) / 2**N)."""
    n = 40000
    one = torch.ones(n, dtype=torch.float64)
    u = 2.0 ** -7  # bf16's step at 1
    with force_namespace():
        _law(ff.add(one, 0.3125 * u, "bf16", "stochastic", rng=1), 1.0, 1 + u, 0.3125)
        _law(ff.add(one, 0.3125 * u, "bf16", "stochastic", rng=1, sr_bits=2), 1.0, 1 + u, 0.25)
        _law(ff.sub(-one, 0.625 * u, "bf16", "stochastic", rng=2), -1.0, -1 - u, 0.625)
        third = Fraction(1, 3)
        lo, hi = ff.div(1.0, 3.0, "bf16", "toward_zero"), ff.div(1.0, 3.0, "bf16", "up")
        _law(ff.div(one, 3.0, "bf16", "stochastic", rng=3), lo, hi,
             float((third - Fraction(lo)) / (Fraction(hi) - Fraction(lo))))
        lo, hi = ff.sqrt(2.0, "fp8_e4m3", "toward_zero"), ff.sqrt(2.0, "fp8_e4m3", "up")
        _law(ff.sqrt(2 * one, "fp8_e4m3", "stochastic", rng=4), lo, hi,
             (math.sqrt(2) - lo) / (hi - lo))
        x = 1 + 3 * u  # x * x = 1 + 6u + 9u**2: 9u**2 / u = 9u of a step past 1 + 6u
        _law(ff.mul(x * one, x, "bf16", "stochastic", rng=5), 1 + 6 * u, 1 + 7 * u, 9 * u)
        # x * x - 1 = 6u + 9u**2 = (192 + 2.25) 2**-12, bf16's step in [2**-5, 2**-4)
        _law(ff.fma(x * one, x, -1.0, "bf16", "stochastic", rng=6), 194 * 2.0 ** -12,
             195 * 2.0 ** -12, 0.25)
        T = torch.stack([one, torch.full((n,), 0.3125 * u, dtype=torch.float64)])
        for order in ("sequential", "pairwise", "kahan", "blocked", "exact"):
            _law(ff.sum(T, "fp32", "bf16", order, 0, rounding="stochastic", rng=7), 1.0,
                 1 + u, 0.3125)
            _law(ff.matmul(T.T[:, None, :], torch.ones(2, 1, dtype=torch.float64), "fp32",
                           "bf16", order, rounding="stochastic", rng=8), 1.0, 1 + u, 0.3125)


def test_device_sr_is_reproducible_per_seed():
    x, y = (torch.from_numpy(spread(3000, s, -4, 4)) for s in (9, 10))
    with force_namespace():
        for call in (lambda r: ff.add(x, y, "fp8_e5m2", "stochastic", rng=r),
                     lambda r: ff.sqrt(x.abs(), "bf16", "stochastic_c", rng=r, sr_bits=6),
                     lambda r: ff.sum(x.reshape(30, 100), "bf16", "bf16", "kahan", 0,
                                      rounding="stochastic", rng=r),
                     lambda r: ff.matmul(x.reshape(30, 100), y.reshape(100, 30), "fp8_e4m3",
                                         "bf16", "pairwise", rounding="stochastic", rng=r)):
            first = call(21).numpy()
            assert np.array_equal(first, call(21).numpy(), equal_nan=True)
            assert np.array_equal(first, call(torch.Generator().manual_seed(21)).numpy(),
                                  equal_nan=True)
            assert not np.array_equal(first, call(22).numpy(), equal_nan=True)


def test_device_sr_bad_generators_are_refused():
    x = torch.ones(3)
    with force_namespace():
        with pytest.raises(TypeError, match="torch.Generator, an int seed or None"):
            ff.add(x, x, "bf16", "stochastic", rng=np.random.default_rng(0))
        with pytest.raises(ValueError, match="sr_bits applies"):
            ff.add(x, x, "bf16", sr_bits=4)
        with pytest.raises(ValueError, match="needs sr_bits"):
            ff.add(x, x, "bf16", "stochastic_a", rng=0)


def test_device_fp64_sr_additions_equal_numpy_given_the_same_random_numbers():
    """fp64 add / sub under SR: the remainder is TwoSum's error (sums past the float64
    range included); replayed draws give numpy's bits."""
    n = 3000
    a, b = spread(n, 11, -60, 60), spread(n, 12, -60, 60) * 2.0 ** -50
    big = np.finfo(np.float64).max
    a[:3], b[:3] = [big, -big, 5e-324], [big, 2.0 ** 969, 5e-324]  # past the range, ties
    for op, sign in (("add", 1.0), ("sub", -1.0)):
        for mode, bits in (("stochastic", 7), ("stochastic", 52), ("stochastic_b", 9)):
            g = torch.Generator().manual_seed(bits)
            with force_namespace():
                got = getattr(ff, op)(torch.from_numpy(a), torch.from_numpy(b), "fp64", mode,
                                      rng=g, sr_bits=bits)
            g = torch.Generator().manual_seed(bits)
            draws = [torch.randint(0, 1 << bits, (n,), generator=g, dtype=torch.int64)
                     for _ in range(3)]
            t, R = eft.exact_sum(a, sign * b, True)
            want = round_values(t, ff.get_format("fp64"), mode, None, resid=R, sr_bits=bits,
                                sr_random=draws[2].numpy())
            assert np.array_equal(got.numpy(), want, equal_nan=True), (op, mode, bits)


def test_device_fp64_sr_products_equal_numpy_given_the_same_random_numbers():
    """fp64 mul / fma under SR: the resid of the limbs' exact sum of p, e (and c) is
    eft's; replayed draws (the result's come after one batch per operand) give numpy's
    bits, subnormal and past-the-range products included."""
    n = 3000
    a, b, c = spread(n, 13, -500, 500), spread(n, 14, -500, 500), spread(n, 15, -900, 900)
    b[:100] = 2.0 ** -1074 / a[:100] * np.linspace(0.3, 700, 100)  # subnormal products
    c[100:200] = -a[100:200] * b[100:200] * (1 + 2.0 ** -40)  # near cancellations
    fp64 = ff.get_format("fp64")
    for op, k, ex in (("mul", 2, lambda: eft.exact_product(a, b, False, fine=True)),
                      ("fma", 3, lambda: eft.exact_fma(a, b, c, False, fine=True))):
        for mode, bits in (("stochastic", 9), ("stochastic", 52), ("stochastic_c", 6)):
            args = (a, b) if op == "mul" else (a, b, c)
            g = torch.Generator().manual_seed(bits)
            with force_namespace():
                got = getattr(ff, op)(*(torch.from_numpy(v) for v in args), "fp64", mode,
                                      rng=g, sr_bits=bits)
            g = torch.Generator().manual_seed(bits)
            draws = [torch.randint(0, 1 << bits, (n,), generator=g, dtype=torch.int64)
                     for _ in range(k + 1)]
            t, R = ex()
            want = round_values(t, fp64, mode, None, resid=R, sr_bits=bits,
                                sr_random=draws[k].numpy())
            assert np.array_equal(got.numpy(), want, equal_nan=True), (op, mode, bits)


def test_device_fp64_sr_quotients_equal_numpy_given_the_same_random_numbers():
    """fp64 div under SR (``wide_quotient``): quotients over the whole range, subnormal
    ones (resid from the dropped bits and the mantissa quotient's own resid) and ones
    far below the smallest subnormal; replayed draws give numpy's bits."""
    n = 4000
    rng = np.random.default_rng(16)
    a = np.ldexp(rng.uniform(1, 2, n), rng.integers(-1074, 1024, n))
    b = np.ldexp(rng.uniform(1, 2, n), rng.integers(-1074, 1024, n))
    ea = np.frexp(a[:600])[1]  # quotients near and below the subnormal range
    b[:600] = np.ldexp(rng.uniform(1, 2, 600), np.minimum(ea + rng.integers(1015, 1130, 600), 1023))
    b *= np.where(rng.random(n) < 0.5, -1.0, 1.0)
    fp64 = ff.get_format("fp64")
    t, R = eft.exact_quotient(a, b, fine=True)
    for mode, bits in (("stochastic", 9), ("stochastic", 52), ("stochastic_b", 20)):
        g = torch.Generator().manual_seed(bits)
        with force_namespace():
            got = ff.div(torch.from_numpy(a), torch.from_numpy(b), "fp64", mode, rng=g,
                         sr_bits=bits)
        g = torch.Generator().manual_seed(bits)
        draws = [torch.randint(0, 1 << bits, (n,), generator=g, dtype=torch.int64)
                 for _ in range(3)]
        want = round_values(t, fp64, mode, None, resid=R, sr_bits=bits,
                            sr_random=draws[2].numpy())
        assert np.array_equal(got.numpy(), want, equal_nan=True), (mode, bits)
