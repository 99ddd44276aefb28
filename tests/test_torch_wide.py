"""The device code (``force_namespace`` on CPU tensors, the code CUDA runs) in formats
whose products do not fit float64: fp64 and wide custom formats.

A. ``ff.sqrt`` under stochastic rounding (``residuals.wide_root`` with ``fine``).  The
   remainder handed to the rounding routine (``resid``: 2**54 (sqrt(x) - t) / ulp(t),
   rounded to odd) is checked against an integer square root written here (Python's
   ``math.isqrt`` of the exact x 2**(2 (54 - eu)), independent of floatfmt) and against
   ``floatfmt.arith.eft.exact_sqrt`` (the numpy path): in full where the format reads it in
   full (slack g = ``eft.resid_slack`` < 6: fp64, 50 mantissa bits), else its 2**g cell
   (what the rounding reads).  Inputs: every binade of float64 with subnormals, exact
   squares, their float64 neighbours, roots within a few 2**-54 ulp of the search's cell
   edges, the largest doubles.  Then the SR results equal numpy's rule given the same
   random numbers (the torch draws replayed into ``round_values(sr_random=)``, as
   tests/test_torch_sr.py does), and the frequency law holds.
B. ``ff.quantize`` / ``fake_quant`` of float elements reaching past 2**+-990 with scales
   that are not powers of two (``quantize_schemes.exact_quotient`` through
   ``residuals.wide_quotient``): quotients subnormal, near the top of the range and past
   float64's range; device = numpy element for element, and both = the exact
   ``Fraction(x) / Fraction(scale)`` rounded once by the MPFR oracle.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from conftest import DET_MODES
from floatfmt.arith import eft
from floatfmt.backend.dispatch import force_namespace
from floatfmt.core.rounding import round_values
from tests.oracles import mpfr

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

pytestmark = pytest.mark.usefixtures("torch_one_thread")

W20 = ff.Format("wide_e11m20", kind="float", ebits=11, mbits=20)  # slack 32: resid's cell
W50 = ff.Format("wide_e11m50", kind="float", ebits=11, mbits=50)  # slack 2: the full resid
ROOT_FORMATS = [ff.get_format("fp64"), W50, W20]


# ------------------------------------------------------------------ A: roots
def isqrt_resid(x: float, t: float) -> int:
    """floor(2**54 (sqrt(x) - t) / ulp(t)), made odd where the root is not t: with
    K = 2**54 / ulp(t), floor(sqrt(x) K) = isqrt(floor(x K**2)) and t K is an integer."""
    if Fraction(t) ** 2 == Fraction(x):
        return 0
    K = Fraction(2) ** 54 / Fraction(math.ulp(t))
    y = Fraction(x) * K * K
    root = math.isqrt(y.numerator // y.denominator)
    tk = Fraction(t) * K
    assert tk.denominator == 1
    return (root - tk.numerator) | 1


def root_inputs(seed: int, per_binade: int = 2) -> np.ndarray:
    """Every binade of float64 (subnormals included), exact squares and their
    neighbours, roots just past (2**-53 ulp) edges, the ends of the range."""
    rng = np.random.default_rng(seed)
    e = np.repeat(np.arange(-1074, 1024), per_binade)
    x = np.ldexp(rng.uniform(1, 2, e.size), e)
    x = x[np.isfinite(x)]
    r = np.ldexp(rng.integers(1 << 25, 1 << 26, 300).astype(np.float64),
                 rng.integers(-530, 480, 300))
    sq = r * r  # exact squares (26-bit roots)
    near = np.concatenate([np.nextafter(sq, np.inf), np.nextafter(sq, 0.0)])
    # x = fl((t + c)**2) for c = E 2**-53 ulp(t): roots within an ulp of x's of an edge
    base = 1.0 + rng.integers(1, 1 << 40, 200) * 2.0 ** -52
    E = rng.integers(1, 1 << 53, 200).astype(np.float64)
    edge = [Fraction(b) + Fraction(int(k)) * Fraction(math.ulp(b)) / 2 ** 53
            for b, k in zip(base, E)]
    close = np.array([float(c * c) for c in edge]) * np.exp2(2 * rng.integers(-200, 200, 200))
    big = np.finfo(np.float64).max
    ends = [5e-324, 1e-323, 2.0 ** -1022, np.nextafter(2.0 ** -1022, 0), big,
            np.nextafter(big, 0), 2.0 ** 1023, 1.0, 2.0, 3.0, 0.5]
    return np.concatenate([x, sq, near, close, ends])


def test_root_inputs_reach_the_classes():
    x = root_inputs(1)
    assert (x < 2.0 ** -1022).sum() >= 100 and (x > 2.0 ** 1000).sum() >= 40
    t, R = eft.exact_sqrt(x, True, 0)
    assert (R == 0).sum() >= 300 and (R != 0).sum() > 4000  # exact squares and not


@pytest.mark.parametrize("f", ROOT_FORMATS, ids=lambda f: f.name)
def test_wide_root_resid_equals_integer_square_roots_and_eft(f):
    from floatfmt.arith.residuals import wide_root
    g = eft.resid_slack(f)
    x = root_inputs(2)
    t, R = wide_root(torch.from_numpy(x), True, g)
    t, R = t.numpy(), R.numpy()
    tw, Rw = eft.exact_sqrt(x, True, g)
    assert np.array_equal(t, tw)
    want = np.array([isqrt_resid(float(a), float(b)) for a, b in zip(x, t)], np.int64)
    h = g if g >= 6 else 0  # what the rounding reads of resid (eft.resid_slack)
    bad = int(((R >> h) != (want >> h)).sum()) + int(((R >> h) != (Rw >> h)).sum())
    assert bad == 0, f"{bad} resid mismatches ({f.name}, slack {g})"
    if h:  # a cell's midpoint; zero where exact
        assert np.array_equal(R & ((1 << h) - 1), np.where(want == 0, 0, 1 << (h - 1)))
    k = x.size // 6 * 6  # any shape: the same elementwise results
    t2, R2 = wide_root(torch.from_numpy(x[:k].reshape(2, 3, -1)), True, g)
    assert np.array_equal(t2.numpy().ravel(), t[:k]) and np.array_equal(R2.numpy().ravel(), R[:k])


@pytest.mark.parametrize("f", ROOT_FORMATS, ids=lambda f: f.name)
def test_wide_sr_roots_equal_numpy_given_the_same_random_numbers(f):
    """Operands already in the format (their SR cast keeps them, drawing one batch); the
    second batch rounds the root.  Replayed into numpy's rule with numpy's remainder."""
    x = ff.cast(root_inputs(3, 1), f, "toward_zero")
    x = np.concatenate([x, [0.0, -0.0, np.inf, -1.0, np.nan]])
    n = x.size
    t, R = eft.exact_sqrt(x, True, eft.resid_slack(f))
    for mode, bits in (("stochastic", 9), ("stochastic", 52), ("stochastic", 1),
                       ("stochastic_b", 20), ("stochastic_c", 6)):
        g = torch.Generator().manual_seed(bits)
        with force_namespace():
            got = ff.sqrt(torch.from_numpy(x), f, mode, rng=g, sr_bits=bits)
        g = torch.Generator().manual_seed(bits)
        draws = [torch.randint(0, 1 << bits, (n,), generator=g, dtype=torch.int64)
                 for _ in range(2)]
        want = round_values(t, f, mode, None, resid=R, sr_bits=bits, sr_random=draws[1].numpy())
        got = got.numpy()
        same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (f.name, mode, bits, int((~same).sum()))
        if mode == "stochastic" and bits == 52:
            lo, hi = ff.sqrt(x, f, "toward_zero"), ff.sqrt(x, f, "up")
            assert np.all((got == lo) | (got == hi) | np.isnan(got))
            assert np.any((got == hi) & (lo != hi)) and np.any((got == lo) & (lo != hi))


def _law(v: np.ndarray, lo: float, hi: float, p: float) -> None:
    assert set(np.unique(v)) <= {lo, hi}
    k, n = int((v == hi).sum()), v.size
    assert abs(k - n * p) <= 6 * math.sqrt(n * p * (1 - p)) + 1, (k / n, p)


@pytest.mark.parametrize("f", ROOT_FORMATS, ids=lambda f: f.name)
def test_wide_sr_roots_round_up_with_the_right_frequency(f):
    """sqrt(x) a fraction p of the way from lo to hi: hi with frequency p (53 random
    bits), floor(p 2**N) / 2**N with sr_bits = N; p from the integer square root."""
    n = 40000
    for x, seed in ((2.0, 1), (3.0 * 2.0 ** -1030, 2), (1.5 * 2.0 ** 1001, 3)):
        lo, hi = float(ff.sqrt(x, f, "toward_zero")), float(ff.sqrt(x, f, "up"))
        root = Fraction(math.isqrt(int(Fraction(x) * 2 ** 2400)), 2 ** 1200)  # to 2**-1200
        p = (root - Fraction(lo)) / (Fraction(hi) - Fraction(lo))
        xs = torch.full((n,), x, dtype=torch.float64)
        with force_namespace():
            _law(ff.sqrt(xs, f, "stochastic", rng=seed).numpy(), lo, hi, float(p))
            _law(ff.sqrt(xs, f, "stochastic", rng=seed, sr_bits=3).numpy(), lo, hi,
                 math.floor(p * 8) / 8)


def test_fp64_sr_root_no_longer_refused():
    with force_namespace():
        r = ff.sqrt(torch.tensor([4.0, 2.0]), "fp64", "stochastic", rng=0)
    assert float(r[0]) == 2.0  # sqrt(2) = 1.41421356237309504..: between these two
    assert float(r[1]) in (1.4142135623730950, 1.4142135623730951)


# ------------------------------------------------------------------ B: quotients
QUANT_FORMATS = [ff.get_format("fp64"), W20, W50,
                 ff.Format("wide_e10m40", kind="float", ebits=10, mbits=40)]
SCALE = 0.30000000000000004  # 53 significant bits
CHANNEL_SCALES = [0.7, 3.141592653589793e-250, 6.02214076e250, 1.1]


def quotient_data(scales, seed: int, m: int = 160) -> np.ndarray:
    """Rows (one per scale s) of m float64 x = fl(a 2**k s), a in [1, 2), both signs,
    aiming the quotients x / s at float64's subnormals and below, its normal range,
    its top binades and past 2**1024 (those x that float64 holds, nonzero)."""
    rng = np.random.default_rng(seed)
    rows = []
    top = Fraction(np.finfo(np.float64).max)
    for s in scales:
        k = np.concatenate([rng.integers(-1160, -1020, 2 * m), rng.integers(-1000, 1000, m),
                            rng.integers(1018, 1024, 2 * m), rng.integers(1024, 1100, 2 * m)])
        rng.shuffle(k)
        got = []
        for a, kk in zip(rng.uniform(1, 2, k.size), k):
            v = Fraction(float(a)) * Fraction(2) ** int(kk) * Fraction(s)
            if Fraction(2) ** -1075 < v <= top:
                got.append(float(v))
        assert len(got) >= m
        x = np.array(got[:m]) * np.where(rng.random(m) < 0.5, -1.0, 1.0)
        x[:4] = [0.0, -0.0, np.finfo(np.float64).max, -5e-324]
        rows.append(x)
    return np.stack(rows)


def test_quotient_data_reach_the_classes():
    rows = [*quotient_data([SCALE], 5), *quotient_data(CHANNEL_SCALES, 6, 80)]
    q = [Fraction(float(v)) / Fraction(s) for s, row in zip([SCALE, *CHANNEL_SCALES], rows)
         for v in row if v != 0]
    tiny, big = Fraction(2) ** -1074, Fraction(2) ** 1024
    assert sum(abs(v) < tiny for v in q) >= 10  # below every subnormal
    assert sum(tiny < abs(v) < Fraction(2) ** -1022 for v in q) >= 20  # subnormal
    assert sum(abs(v) >= big for v in q) >= 20  # past float64's range
    assert sum(Fraction(2) ** 1020 < abs(v) < big for v in q) >= 20  # near its top


def _cases():
    out = []
    for f in QUANT_FORMATS:
        out.append((f, {"scale": SCALE}, quotient_data([SCALE], 5), lambda i, j: SCALE))
        out.append((f, {"scale": CHANNEL_SCALES, "granularity": "channel", "axis": 0},
                    quotient_data(CHANNEL_SCALES, 6, 80), lambda i, j: CHANNEL_SCALES[i]))
    return out


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("mode", DET_MODES)
def test_wide_quotients_device_equals_numpy_equals_the_oracle(mode):
    bad_dev = bad_oracle = 0
    for f, opts, x, scale_of in _cases():
        for overflow in ("inf", "saturate"):
            o = dict(opts, rounding=mode, overflow=overflow)
            q_np = np.asarray(ff.quantize(x, f, **o).elements, np.float64)
            with np.errstate(over="ignore"):  # dequantised values past float64: +-Inf
                fq_np = np.asarray(ff.fake_quant(x, f, **o), np.float64)
            with force_namespace():
                q_dev = ff.quantize(torch.from_numpy(x), f, **o).elements.numpy()
                fq_dev = ff.fake_quant(torch.from_numpy(x), f, **o).numpy()
            bad_dev += int((~_same(q_np, q_dev)).sum()) + int((~_same(fq_np, fq_dev)).sum())
            for (i, j), v in np.ndenumerate(x):
                exact = Fraction(float(v)) / Fraction(scale_of(i, j))
                want = mpfr.round_one(exact if v != 0 else float(v), f, mode, overflow)
                bad_oracle += not _same(np.array(q_dev[i, j]), np.array(want))
    assert bad_dev == 0 and bad_oracle == 0, (bad_dev, bad_oracle)


def test_wide_quotients_under_stochastic_rounding_pick_a_neighbour():
    """SR of those quotients (resid from ``wide_quotient``): one of the oracle's two
    neighbours (modes down and up), device and numpy alike."""
    for f, opts, x, _ in _cases()[:4]:
        lo = ff.quantize(x, f, rounding="down", **opts).elements
        hi = ff.quantize(x, f, rounding="up", **opts).elements
        with force_namespace():
            got = ff.quantize(torch.from_numpy(x), f, rounding="stochastic", rng=3,
                              **opts).elements.numpy()
        assert np.all(_same(got, lo) | _same(got, hi)), f.name
