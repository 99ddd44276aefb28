"""IEEE P3109 formats (v4.0 interim report), checked exhaustively for K = 8.

Two independent references:

* gfloat 0.5.2 (``format_info_p3109``, ``decode_ndarray``, ``round_ndarray``): every
  code of every K=8 format (values, classes, neighbours) and every RNE cast from
  float32 of every code value, every midpoint and its float32 neighbours.
* tests/oracles/p3109.py, the report's own rules (sections 4.7.2-4.7.5) with MPFR
  doing the truncation: every rounding mode under every saturation mode on
  structured edge sets, and the three stochastic variants with every R.

Where gfloat and the report disagree, the test names the section and checks that
the disagreement is exactly that one (see ``_gfloat_differs``):

1. gfloat's ``sat=False`` on a Finite format gives NaN for values past MaxFinite
   and for +-Inf; v4.0 section 4.7.5 SatNone gives M_hi / M_lo there
   ("!Saturate(SatNone;;X;;) if X > M_hi -> M_hi" for non-Extended formats).
2. gfloat 0.5.2 rounds a negative input to an unsigned format as if the format were
   signed and returns a negative value, which is not in the format's datum set;
   section 4.7.5 (M_lo = MinFiniteOf = 0, section 4.14) sends it to 0 (SatFinite)
   or NaN (SatNone).  Those inputs are compared with the report oracle only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import floatfmt as ff
from tests.oracles.p3109 import P3109

gfloat = pytest.importorskip("gfloat")
from gfloat import RoundMode, decode_ndarray, round_ndarray  # noqa: E402
from gfloat.formats import format_info_p3109  # noqa: E402
from gfloat.types import Domain, Signedness  # noqa: E402

NAMES8 = ff.p3109_formats(8)
CODES = np.arange(256)


def _params(name):
    f = ff.get_format(name)
    return 8, f.mbits + 1, f.signed, f.inf


def _fi(name):
    k, p, signed, ext = _params(name)
    return format_info_p3109(k, p, Signedness.Signed if signed else Signedness.Unsigned,
                             Domain.Extended if ext else Domain.Finite)


def _same(a, b):
    """Elementwise equal as values: NaN equals NaN (P3109 has one NaN), 0 == -0 is not
    accepted (no -0 exists, so a -0 would be a bug)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))


def test_the_k8_family_is_complete_and_named_as_the_report_names_it():
    # section 3.1: 0 < P < K signed, 0 < P <= K unsigned; both domains
    assert len(NAMES8) == 2 * 7 + 2 * 8
    assert NAMES8[0] == "binary8p1se" and "binary8p8uf" in NAMES8 and "binary8p8se" not in NAMES8
    for n in NAMES8:
        assert ff.get_format(n.upper()).name == n  # names are case-insensitive
        assert ff.get_format(n.replace("binary", "p3109_k")) == ff.get_format(n)  # gfloat spelling
        assert ff.get_format(n) == ff.p3109(*_params(n))


@pytest.mark.parametrize("name", NAMES8)
def test_format_facts_match_gfloat(name):
    f, fi, info = ff.get_format(name), _fi(name), ff.info(name)
    assert f.bias == fi.bias
    assert info.max == fi.max and info.min == fi.min
    assert info.smallest_normal == fi.smallest_normal
    assert info.smallest_subnormal == (fi.smallest_subnormal if f.mbits else fi.smallest_normal)
    assert info.has_inf == (fi.num_posinfs > 0) and not info.has_negative_zero
    assert info.nan_codes == (ff.core.formats.hex_code(fi.code_of_nan, f),)
    assert ff.encode(math.nan, name) == fi.code_of_nan
    if f.inf:
        assert ff.encode(math.inf, name) == fi.code_of_posinf
        if f.signed:
            assert ff.encode(-math.inf, name) == fi.code_of_neginf
    vals = ff.decode(CODES, name)
    assert info.num_finite == int(np.isfinite(vals).sum())


def test_the_report_value_table_rows():
    # section 3.1 NOTE 2: 2.0 in Binary8p4se is 0x48 and its Inf is 0x7F
    assert ff.encode(2.0, "binary8p4se") == 0x48 and ff.encode(math.inf, "binary8p4se") == 0x7F
    # the max / min-normal / min-subnormal table of shared/reference (K = 8)
    assert ff.info("binary8p3se").max == 49152 and ff.info("binary8p3sf").max == 57344
    assert ff.info("binary8p5ue").max == 232 and ff.info("binary8p8ue").max == 1.9765625


@pytest.mark.parametrize("name", NAMES8)
def test_every_code_decodes_as_gfloat_and_the_report_say(name):
    f = ff.get_format(name)
    ours = ff.decode(CODES, name)
    theirs = decode_ndarray(_fi(name), CODES)
    report = np.array([P3109(*_params(name)).decode(int(c)) for c in CODES])
    assert int((~_same(ours, report)).sum()) == 0
    # gfloat's NaN carries a sign bit; P3109 has one NaN, so compare NaN-ness there
    assert int((~((ours == theirs) | (np.isnan(ours) & np.isnan(theirs)))).sum()) == 0
    # and encode is decode's inverse on every code but NaN (one NaN code)
    fin = ~np.isnan(ours)
    assert np.array_equal(ff.encode(ours[fin], name), CODES[fin])
    assert f.negative_zero is False


@pytest.mark.parametrize("name", NAMES8)
def test_every_code_classifies_as_gfloat_implies(name):
    fi = _fi(name)
    v = decode_ndarray(fi, CODES)
    a = np.abs(v)
    want = np.select([np.isnan(v), np.isinf(v), a == 0, a < fi.smallest_normal],
                     ["nan", "inf", "zero", "subnormal"], "normal")
    assert np.array_equal(ff.classify(ff.decode(CODES, name), name), want)


@pytest.mark.parametrize("name", NAMES8)
def test_next_up_and_down_of_every_code(name):
    """Against gfloat's value set and section 4.16 (NaN past the ends, NaN after Inf)."""
    v = decode_ndarray(_fi(name), CODES).astype(np.float64)
    v = v[~np.isnan(v)]
    grid = np.unique(v)  # sorted, +-Inf included
    i_up = np.searchsorted(grid, v, side="right")
    want_up = np.where(i_up < grid.size, grid[np.minimum(i_up, grid.size - 1)], np.nan)
    i_dn = np.searchsorted(grid, v, side="left") - 1
    want_dn = np.where(i_dn >= 0, grid[np.maximum(i_dn, 0)], np.nan)
    assert int((~_same(ff.next_up(v, name), want_up + 0.0)).sum()) == 0
    assert int((~_same(ff.next_down(v, name), want_dn + 0.0)).sum()) == 0


def _edge_inputs(name, dtype=np.float32):
    """Every code value, every midpoint between neighbours (and half a step past the
    largest finite value), each with its neighbours in ``dtype``, both signs, the
    extremes of float32, +-Inf, NaN, +-0."""
    v = ff.decode(CODES, name)
    fin = np.unique(np.abs(v[np.isfinite(v)]))
    f = ff.get_format(name)
    top = fin[-1] + ff.ulp(fin[-1], name)  # the next value with an unbounded exponent
    pts = np.concatenate([fin, [top, 2 * top]])
    mids = (pts[1:] + pts[:-1]) / 2
    want = np.concatenate([pts, mids])
    with np.errstate(over="ignore"):
        base = want.astype(dtype)
    exact = base.astype(np.float64) == want  # (2 * top may pass float32's range)
    assert exact[:fin.size + 1].all() and exact[pts.size:pts.size + fin.size].all()
    base = base[exact]
    near = np.concatenate([base, np.nextafter(base, dtype(np.inf)), np.nextafter(base, dtype(0))])
    extra = np.array([np.finfo(dtype).max, np.finfo(dtype).smallest_subnormal, np.inf, 0.0],
                     dtype)
    pos = np.unique(np.concatenate([near, extra]))
    x = np.concatenate([pos, -pos, np.array([np.nan], dtype)])
    assert f.bits == 8
    return x


def _gfloat_differs(name, x, ours, theirs, sat):
    """The documented disagreements (module docstring): a mask of where they are allowed."""
    f = ff.get_format(name)
    ok = np.zeros(x.shape, bool)
    if not f.signed:
        ok |= np.signbit(x) & (x != 0)  # (2) negatives to unsigned: report oracle instead
    if not f.inf and not sat:  # (1) SatNone on a Finite format: M_hi / M_lo, gfloat NaN
        ok |= np.isnan(theirs) & ~np.isnan(x) & (np.abs(ours) == f.max)
    return ok


@pytest.mark.parametrize("name", NAMES8)
def test_rne_casts_from_float32_match_gfloat(name):
    x = _edge_inputs(name)
    x64 = x.astype(np.float64)
    fi = _fi(name)
    compared = 0
    for sat, policy in ((True, "saturate"), (False, "satnone")):
        ours = ff.cast(x, name, "nearest_even", overflow=policy, dtype=np.float64)
        theirs = round_ndarray(fi, x64, RoundMode.TiesToEven, sat).astype(np.float64)
        bad = ~_same(ours, theirs + 0.0)
        allowed = _gfloat_differs(name, x64, ours, theirs, sat)
        assert int((bad & ~allowed).sum()) == 0, (policy, x64[bad & ~allowed][:5])
        compared += int((~allowed).sum())
        if not ff.get_format(name).inf and not sat:
            assert (bad & allowed).any()  # the SatNone difference is real, and only there
    assert compared > 1000
    # the default policy is SatNone
    assert np.array_equal(ff.cast(x, name, dtype=np.float64),
                          ff.cast(x, name, overflow="satnone", dtype=np.float64), equal_nan=True)


MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
SATS = {"SatFinite": "saturate", "SatPropagate": "propagate", "SatNone": "satnone"}


def _report_edges(name):
    x = _edge_inputs(name, np.float64)
    return x


@pytest.mark.parametrize("name", NAMES8)
def test_every_mode_and_saturation_match_the_report(name):
    """Six rounding modes x three saturation modes on the edge set, against the report's
    RoundToPrecision and Saturate (tests/oracles/p3109.py, MPFR for the truncation)."""
    o = P3109(*_params(name))
    x = _report_edges(name)
    xs = x.tolist()
    total = 0
    for mode in MODES:
        rounded = [o.round_to_precision(v, mode) for v in xs]
        for sat, policy in SATS.items():
            want = np.array([math.nan if math.isnan(v) else
                             o.saturate(sat, mode, r) + 0.0 for v, r in zip(xs, rounded)])
            ours = ff.cast(x, name, mode, overflow=policy)
            bad = ~_same(ours, want)
            assert int(bad.sum()) == 0, (mode, sat, x[bad][:4], ours[bad][:4], want[bad][:4])
            total += x.size
    assert total > 20000


@pytest.mark.parametrize("name", ["binary8p1se", "binary8p1ue", "binary8p3se", "binary8p4ue",
                                  "binary8p7sf", "binary8p8uf"])
def test_stochastic_variants_match_the_report_and_gfloat(name):
    """Every R in [0, 2**N) for N = 1, 3, 5 at 15 points inside every gap (nu = k/16)
    and at every value: the report's StochasticA/B/C (the oracle gives the integers each
    variant compares, once per value; the comparison with every R is then vectorised)
    and gfloat's StochasticFastest / StochasticFast / Stochastic (which are A, B, C)."""
    o = P3109(*_params(name))
    fi = _fi(name)
    v = ff.decode(CODES, name)
    fin = np.unique(v[np.isfinite(v)])
    lo, hi = fin[:-1], fin[1:]
    x = (lo[:, None] + (hi - lo)[:, None] * (np.arange(1, 16) / 16)[None, :]).ravel()
    x = np.concatenate([x, fin])
    if not ff.get_format(name).signed:
        x = x[x >= 0]
    gmodes = {"stochastic_a": RoundMode.StochasticFastest,
              "stochastic_b": RoundMode.StochasticFast, "stochastic_c": RoundMode.Stochastic}
    for n in (1, 3, 5):
        parts = [o.stochastic_parts(xv, n) for xv in x.tolist()]
        toward = np.array([float(p[0]) for p in parts])
        away = np.array([float(p[1]) for p in parts])
        ints = {m: np.array([p[i] for p in parts], np.int64)
                for i, m in ((2, "stochastic_a"), (3, "stochastic_b"), (4, "stochastic_c"))}
        R = np.arange(1 << n)[:, None] + np.zeros(x.size, np.int64)[None, :]  # (2**N, len(x))
        X = np.broadcast_to(x, R.shape)
        for mode, gmode in gmodes.items():
            F = ints[mode][None, :]
            go = (F + 2 * R + 1 >= 2 ** (n + 1)) if mode == "stochastic_b" else (F + R >= 2 ** n)
            want = np.where(go, away, toward)
            want = np.minimum(want, ff.info(name).max) + 0.0  # SatFinite (values here are >= min)
            ours = ff.cast(X, name, mode, overflow="saturate", sr_bits=n, sr_random=R)
            assert int((~_same(ours, want)).sum()) == 0, (mode, n)
            theirs = round_ndarray(fi, X.ravel(), gmode, True, srbits=R.ravel(), srnumbits=n)
            assert int((~_same(ours.ravel(), theirs + 0.0)).sum()) == 0, (mode, n, "gfloat")


def test_stochastic_variants_probabilities_and_floatfmt_own_mapping():
    # nu = 0.8 at 0.3 in binary8p3se (quantum 1/16); N = 3: floor(nu 8) = 6
    x = np.full(8, 0.3)
    R = np.arange(8)
    a = ff.cast(x, "binary8p3se", "stochastic_a", sr_bits=3, sr_random=R)
    assert a.tolist() == [0.25, 0.25] + [0.3125] * 6  # away iff 6 + R >= 8
    own = ff.cast(x, "binary8p3se", "stochastic", sr_bits=3, sr_random=R)
    assert own.tolist() == [0.3125] * 6 + [0.25, 0.25]  # away iff R < 6: same count
    # B: floor(nu 16) = 12, away iff 12 + 2R + 1 >= 16, R >= 2 (1.5)
    b = ff.cast(x, "binary8p3se", "stochastic_b", sr_bits=3, sr_random=R)
    assert (b == 0.3125).sum() == 6
    # C: RNITE(6.4) = 6
    c = ff.cast(x, "binary8p3se", "stochastic_c", sr_bits=3, sr_random=R)
    assert (c == 0.3125).sum() == 6
    # a tie of RNITE: nu = 9/16, N = 3 -> nu 8 = 4.5 -> 4 (even), away iff R >= 4
    y = np.full(8, 0.25 + 9 / 256)
    c = ff.cast(y, "binary8p3se", "stochastic_c", sr_bits=3, sr_random=R)
    assert c.tolist() == [0.25] * 4 + [0.3125] * 4


def test_stochastic_variants_round_exact_inputs_without_a_double_rounding():
    """A Fraction that float64 does not hold keeps its remainder (resid): nu just above
    one of the variant's thresholds must round as the exact nu, not its float64."""
    from fractions import Fraction
    q = Fraction(1, 16)
    # 0.25 + q * (6/8) + tiny: nu = 0.75 + 2**-70, floor(nu 8) = 6, and just above
    x = Fraction(1, 4) + q * Fraction(3, 4) + Fraction(1, 2 ** 70)
    o = P3109(8, 3, True, True)
    for mode in ("stochastic_a", "stochastic_b", "stochastic_c"):
        for r in range(8):
            got = ff.cast(x, "binary8p3se", mode, sr_bits=3, sr_random=r)
            assert got == o.project(x, mode, "SatFinite", 3, r), (mode, r)
    xn = Fraction(1, 4) + q * Fraction(3, 4) - Fraction(1, 2 ** 70)
    for mode in ("stochastic_a", "stochastic_b", "stochastic_c"):
        for r in range(8):
            assert ff.cast(xn, "binary8p3se", mode, sr_bits=3, sr_random=r) == \
                o.project(xn, mode, "SatFinite", 3, r), (mode, r)


@pytest.mark.parametrize("k", [3, 4, 5, 6, 7, 10])
def test_other_bitwidths_decode_as_the_report_says(k):
    for n in ff.p3109_formats(k):
        o = P3109(k, ff.get_format(n).mbits + 1, ff.get_format(n).signed, ff.get_format(n).inf)
        codes = np.arange(1 << k)
        want = np.array([o.decode(int(c)) for c in codes])
        assert int((~_same(ff.decode(codes, n), want)).sum()) == 0, n


@pytest.mark.parametrize("k", [3, 4, 6])
def test_other_bitwidths_round_as_the_report_says(k):
    for n in ff.p3109_formats(k):
        o = P3109(*[k, ff.get_format(n).mbits + 1, ff.get_format(n).signed, ff.get_format(n).inf])
        v = ff.decode(np.arange(1 << k), n)
        fin = np.unique(np.abs(v[np.isfinite(v)]))
        x = np.concatenate([fin, (fin[1:] + fin[:-1]) / 2, [fin[-1] * 1.3, 2 * fin[-1], np.inf]])
        x = np.concatenate([x, -x])
        for mode in MODES:
            for sat, policy in SATS.items():
                want = np.array([o.project(xv, mode, sat) for xv in x.tolist()])
                assert int((~_same(ff.cast(x, n, mode, overflow=policy), want)).sum()) == 0, \
                    (n, mode, sat)


IEEE = ["fp16", "bf16", "fp8_e5m2", "fp8_e4m3_ieee", "fp8_e3m4"]


@pytest.mark.parametrize("name", IEEE)
def test_satnone_is_inf_and_propagate_is_defined_on_ieee_formats(name):
    """The documented mapping: on IEEE formats SatNone is floatfmt's 'inf' (the max code
    is odd, the Inf code even, so round-to-odd keeps max), SatFinite is 'saturate', and
    SatPropagate saturates finite values and keeps +-Inf."""
    f = ff.get_format(name)
    top = f.max
    x = np.array([1.0, top, top * (1 + 2.0 ** -(f.mbits + 1)), top * 1.01, top * 4, np.inf,
                  -np.inf, np.nan, 0.0, -0.0, -top * 3])
    for mode in MODES:
        inf = ff.cast(x, name, mode, overflow="inf")
        assert int((~_same(ff.cast(x, name, mode, overflow="satnone"), inf)).sum()) == 0
        assert int((~_same(ff.cast(x, name, mode, overflow="satfinite"),
                           ff.cast(x, name, mode, overflow="saturate"))).sum()) == 0
        sat = ff.cast(x, name, mode, overflow="saturate")
        prop = ff.cast(x, name, mode, overflow="propagate")
        want = np.where(np.isinf(x), x, sat)
        assert int((~_same(prop, want)).sum()) == 0


def test_p1_ties_use_the_code_parity():
    # section 4.7.4 CodeIsEven for P = 1: IsEven(Q + B).  B = 64: 1.0 (code 64) is even.
    assert ff.cast([1.5, 3.0, 6.0, 12.0, 0.75], "binary8p1se").tolist() == [1, 4, 4, 16, 1]
    # E8M0 (OCP, IEEE rules) keeps rounding ties away, as ml_dtypes does
    assert ff.cast([1.5, 3.0], "e8m0").tolist() == [2.0, 4.0]


def test_round_to_odd_overflow_follows_the_inf_code_parity():
    # section 4.7.5 NOTE: signed extended Inf is 0x7F (odd) -> Inf; unsigned 0xFE -> M_hi
    assert ff.cast(6e4, "binary8p3se", "odd") == math.inf
    assert ff.cast(-6e4, "binary8p3se", "odd") == -math.inf
    assert ff.cast(6e4, "binary8p3se", "odd", overflow="inf") == 49152.0  # IEEE 'inf' rule
    big = ff.info("binary8p3ue").max * 1.1
    assert ff.cast(big, "binary8p3ue", "odd") == ff.info("binary8p3ue").max


def test_unsigned_negatives_follow_the_saturation_mode():
    for name in ("binary8p3ue", "binary8p4uf"):
        assert ff.cast(-1.0, name, overflow="satfinite") == 0.0
        assert ff.cast(-math.inf, name, overflow="satpropagate") == 0.0
        assert math.isnan(ff.cast(-1.0, name))  # SatNone
        assert ff.cast(-1.0, name, "toward_zero") == 0.0 and ff.cast(-1.0, name, "up") == 0.0
        assert math.isnan(ff.cast(-math.inf, name, "up"))
        assert ff.cast(-1e-30, name) == 0.0  # rounds to zero before saturation
        assert ff.next_down(0.0, name) != ff.next_down(0.0, name)  # NaN: nothing below 0


def test_bad_p3109_names_and_parameters():
    def err(fn):
        with pytest.raises(ValueError) as e:
            fn()
        return str(e.value)

    m = err(lambda: ff.get_format("binary8p8se"))
    assert "P (precision) 8" in m and "1..7" in m
    m = err(lambda: ff.get_format("binary8p0ue"))
    assert "P (precision) 0" in m and "1..8" in m
    m = err(lambda: ff.p3109(2, 1))
    assert "K (bitwidth) 2" in m and "3..64" in m
    m = err(lambda: ff.get_format("binary8p3xe"))
    assert "signedness" in m and "'x'" in m and "'s'" in m and "'u'" in m
    m = err(lambda: ff.get_format("binary8p3sq"))
    assert "domain" in m and "'q'" in m and "'e'" in m and "'f'" in m
    # exponent field too wide for float64: K - P <= 10 bits (an 11-bit field has bias 1024,
    # smallest normal 2**-1023), so P >= 10 for K = 20
    m = err(lambda: ff.get_format("binary20p2se"))
    assert "P (precision) 2" in m and "10..19" in m
    m = err(lambda: ff.get_format("binary64p53se"))  # no P fits: K - P <= 10 and P <= 53
    assert "valid P are none" in m
    with pytest.raises(TypeError):
        ff.p3109(8, 3.0)
    # close matches still work around the new names
    assert "fp8_e4m3" in err(lambda: ff.get_format("fp8_e4m4"))
    assert "binaryKpP" in err(lambda: ff.get_format("binary8"))


def test_bad_stochastic_options():
    with pytest.raises(ValueError, match="needs sr_bits"):
        ff.cast(0.3, "binary8p3se", "stochastic_a")
    with pytest.raises(ValueError, match="0..7"):
        ff.cast(0.3, "binary8p3se", "stochastic_b", sr_bits=3, sr_random=8)
    with pytest.raises(ValueError, match="sr_random= drives stochastic rounding only"):
        ff.cast(0.3, "binary8p3se", "nearest_even", sr_random=1)
    with pytest.raises(ValueError, match="broadcast"):
        ff.cast([0.3, 0.4], "binary8p3se", "stochastic_c", sr_bits=3, sr_random=[1, 2, 3])
    with pytest.raises(TypeError):
        ff.cast(0.3, "binary8p3se", "stochastic_c", sr_bits=3, sr_random=0.5)
    with pytest.raises(ValueError, match="float formats only"):
        ff.cast(3.0, "int8", overflow="satnone")


@pytest.mark.parametrize("name", ["binary8p1se", "binary8p1ue", "binary8p3se", "binary8p3uf",
                                  "binary8p4sf", "binary8p8ue"])
def test_torch_path_equals_numpy_path(name):
    """The rounding routine on tensors (torch ops, the general path) against numpy."""
    torch = pytest.importorskip("torch")
    x = _edge_inputs(name, np.float64)
    t = torch.from_numpy(x)
    for mode in MODES:
        for policy in SATS.values():
            want = ff.cast(x, name, mode, overflow=policy)
            got = ff.cast(t, name, mode, overflow=policy).numpy()
            assert int((~_same(got, want)).sum()) == 0, (mode, policy)
    for mode in ("stochastic_a", "stochastic_b", "stochastic_c"):
        got = ff.cast(t, name, mode, overflow="saturate", sr_bits=4, rng=7).numpy()
        v = ff.decode(CODES, name)
        assert np.isin(got[~np.isnan(got)], v[~np.isnan(v)]).all()


def test_p3109_formats_lists_exactly_what_get_format_builds():
    """Every name p3109_formats(k) lists constructs (issue 22: 212 of 2,324 did not, every
    one with an 11-bit exponent field), and every P3109 name it leaves out is refused
    with a ValueError: the list and the constructor agree for every K and P."""
    refused_listed, built_unlisted = [], []
    for k in range(3, 65):
        listed = set(ff.p3109_formats(k))
        for signed in "su":
            for p in range(1, k + (signed == "u")):
                for d in "ef":
                    name = f"binary{k}p{p}{signed}{d}"
                    try:
                        f = ff.get_format(name)
                    except ValueError:
                        if name in listed:
                            refused_listed.append(name)
                        continue
                    assert f.name == name and f.bits == k and f.mbits == p - 1
                    if name not in listed:
                        built_unlisted.append(name)
    assert refused_listed == [] and built_unlisted == []
