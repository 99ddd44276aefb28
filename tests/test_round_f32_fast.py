"""float32 in, float32 out (``floatfmt.core.round_f32``): the same bits as the general route.

The general route (``cast_float32`` switched off: the whole array widened to float64,
rounded by ``round_values``, narrowed) is the reference for every mode (stochastic with
one seed included), policy, ftz and daz, on numpy arrays and CPU tensors, on one thread
and two.  Independently, the deterministic modes are checked against the MPFR oracle on
a sample, and round to nearest even against ml_dtypes' / numpy's own float32 casts on the
whole structured set.  The values: every code boundary of each format and the midpoints
between neighbouring values, each with its float32 neighbours one ulp either side,
every sign and exponent field of float32 with edge and random fractions, random bit
patterns (NaN payloads and subnormals included) and normal data over many binades.

The exhaustive sweep of all 2**32 float32 patterns (bf16, fp16, fp8_e4m3, nearest even:
against the general route and ml_dtypes) runs with ``-m slow``.
"""

from __future__ import annotations

import importlib
import time

import numpy as np
import pytest

import floatfmt as ff
from conftest import DET_MODES, FLOAT_DTYPES, mpfr as O

C = importlib.import_module("floatfmt.core.cast")
R = importlib.import_module("floatfmt.core.round_f32")

# every float format float32 holds (ff.formats() and two custom ones)
FORMATS = ["bf16", "fp16", "tf32", "fp32", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz",
           "fp8_e5m2fnuz", "fp8_e4m3b11fnuz", "fp8_e4m3_ieee", "fp8_e3m4", "fp6_e2m3",
           "fp6_e3m2", "fp4_e2m1", "e8m0", "e5m7", "e3m3"]
MODES = (*DET_MODES, "stochastic")
BITS_FORMATS = [f for f in FORMATS if R._kernel(ff.get_format(f), "nearest_even") is not None]


def general(x, fmt, mode="nearest_even", **kw):
    """``ff.cast`` by the general route (round_f32 switched off)."""
    old = C.cast_float32
    C.cast_float32 = lambda *a, **k: None
    try:
        return ff.cast(x, fmt, mode, **kw)
    finally:
        C.cast_float32 = old


def same_bits(a, b) -> np.ndarray:
    """Elementwise: the same float32 bit pattern, or NaN on both sides."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def f32_neighbours(v) -> np.ndarray:
    """float32 values v and one float32 ulp either side (v float64, exact in float32)."""
    v = np.asarray(v, np.float64)
    v = v[np.isfinite(v) & (np.abs(v) <= np.finfo(np.float32).max)].astype(np.float32)
    with np.errstate(over="ignore"):
        return np.concatenate([v, np.nextafter(v, np.float32(np.inf)),
                               np.nextafter(v, np.float32(-np.inf))])


def boundaries(name) -> np.ndarray:
    """Every value of the format (positive side; signs are added later), the midpoint of
    each pair of neighbours, the midpoint past max and the power of two past max, each
    with its float32 neighbours."""
    f = ff.get_format(name)
    if f.bits <= 16:
        v = ff.values(name)
    else:  # fp32 / wide custom formats: values around every binade edge of the format
        e = np.arange(f.emin - f.mbits, f.emax + 2, dtype=np.float64)
        v = np.concatenate([np.exp2(e), np.exp2(e) * (1 + 2.0 ** -f.mbits)])
    v = np.unique(np.abs(v))
    step = (v[-1] - v[-2]) if v.size > 1 else v[-1]
    ext = np.concatenate([v, [v[-1] + step, v[-1] + step / 2, 2.0 ** (f.emax + 1)]])
    mids = (ext[:-1] + ext[1:]) / 2
    return f32_neighbours(np.concatenate([ext, mids]))


def structured(seed=0, n_random=1 << 16) -> np.ndarray:
    """Every sign and exponent field with edge fractions and random ones, random bit
    patterns, normal data over many binades, signed zeros, Inf and NaN."""
    rng = np.random.default_rng(seed)
    fr = np.array([0, 1, 2, 3, 0x7FFFFF, 0x7FFFFE, 0x400000, 0x3FFFFF, 0x400001, 0x200000,
                   0x600000, 0x1FFFFF, 0x5FFFFF], np.uint32)
    fr = np.concatenate([fr, rng.integers(0, 1 << 23, 24).astype(np.uint32)])
    se = np.arange(512, dtype=np.uint32) << np.uint32(23)
    grid = (se[:, None] | fr[None, :]).reshape(-1)
    pats = rng.integers(0, 1 << 32, n_random, dtype=np.uint64).astype(np.uint32)
    normal = (rng.standard_normal(n_random) * 10.0 ** rng.integers(-12, 6, n_random))
    normal = normal.astype(np.float32)
    return np.concatenate([grid.view(np.float32), pats.view(np.float32), normal,
                           np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)])


def sample(name) -> np.ndarray:
    b = boundaries(name)
    return np.concatenate([b, -b, structured()])


OPTIONS = [{}, {"ftz": True}, {"daz": True}, {"ftz": True, "daz": True},
           {"overflow": "saturate"}]


def policies(name):
    f = ff.get_format(name)
    out = ["saturate"]
    if f.inf:
        out.append("inf")
    if f.has_nan:
        out.append("nan")
    return out + ["propagate", "satnone"] if f.rules == "p3109" else out


def _compare(x, name, modes, options):
    bad = []
    for mode in modes:
        for kw in options:
            if mode == "stochastic":
                kw = {**kw, "rng": 7}
            got, want = ff.cast(x, name, mode, **kw), general(x, name, mode, **kw)
            assert got.dtype == want.dtype == np.float32
            ok = same_bits(got, want)
            if not ok.all():
                bad.append((mode, kw, int((~ok).sum()), x[~ok][:3], got[~ok][:3], want[~ok][:3]))
    assert not bad, bad[:4]


@pytest.mark.parametrize("name", FORMATS)
def test_every_mode_equals_the_general_route(name):
    """Every code boundary and midpoint +-1 ulp, the structured set, every mode."""
    _compare(sample(name), name, MODES, [{}])


@pytest.mark.parametrize("name", FORMATS)
def test_every_option_and_policy_equals_the_general_route(name):
    """ftz, daz and every policy, where they act: the smallest and the largest boundaries
    (subnormals, the normal edge, overflow), a spread of the others, the structured set."""
    b = boundaries(name)
    b = np.sort(np.abs(b))
    part = np.concatenate([b[:1500], b[-1500:], b[::max(1, b.size // 2000)]])
    x = np.concatenate([part, -part, structured(2, 1 << 13)])
    _compare(x, name, MODES, OPTIONS[1:] + [{"overflow": p} for p in policies(name)])


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp8_e4m3"])
def test_threads_tensors_and_shapes_equal_the_general_route(name):
    """Four blocks on one thread (passes of SUB_CHUNK) and on two (passes of a block: the
    subnormal-range indices gathered per block), NaN, overflow, ftz / daz included."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    n = 4 * ((1 << 17) + 25)  # four blocks: the thread pool and the block random streams
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-10, 4, n)).astype(np.float32)
    x[::97] = np.nan
    x[::101] = 1e30
    x = x.reshape(4, -1)
    for mode in ("nearest_even", "up", "odd", "stochastic"):
        kw = {"rng": 11} if mode == "stochastic" else {}
        want = general(x, name, mode, **kw)
        for threads in (1, 2):
            with ff.limit_threads(threads):
                got = ff.cast(x, name, mode, **kw)
            assert got.shape == x.shape and same_bits(got, want).all(), (mode, threads)
            for opt in ({"ftz": True}, {"daz": True}) if mode != "stochastic" else ():
                with ff.limit_threads(threads):
                    got = ff.cast(x, name, mode, **opt)
                assert same_bits(got, general(x, name, mode, **opt)).all(), (mode, threads, opt)
        strided = x[:, ::3]
        assert same_bits(ff.cast(strided, name, mode, **kw), general(strided, name, mode, **kw)).all()
        if mode != "stochastic":  # tensors: stochastic rounding draws from torch (general route)
            t = torch.from_numpy(x)
            r = ff.cast(t, name, mode)
            assert isinstance(r, torch.Tensor) and r.dtype == torch.float32
            assert same_bits(r.numpy(), want).all()
    zero_d = np.array(1.0 + 2 ** -9, np.float32)
    r = ff.cast(zero_d, name)
    assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == np.float32
    assert ff.cast(np.ones(0, np.float32), name).dtype == np.float32


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp8_e4m3", "fp4_e2m1"])
def test_dtype_float64_takes_the_float32_route_with_the_same_bits(name):
    """``dtype=`` float64 / float32 (numpy, torch or a name) on float32 input: the
    float32 route, widened exactly; the same values as the general route, every
    deterministic mode; other dtypes (float16) keep the general route (the route is not called)."""
    torch = pytest.importorskip("torch")
    x = sample(name)
    calls = []
    old = C.cast_float32
    C.cast_float32 = lambda *a, **k: calls.append(1) or old(*a, **k)
    try:
        for mode in DET_MODES:
            want = general(x, name, mode, dtype=np.float64)
            for d in (np.float64, "float64", np.dtype("float64")):
                got = ff.cast(x, name, mode, dtype=d)
                assert got.dtype == np.float64 and same_bits(got, want).all(), (mode, d)
            t = ff.cast(torch.from_numpy(x), name, mode, dtype=torch.float64)
            assert t.dtype == torch.float64 and same_bits(t.numpy(), want).all(), mode
            assert same_bits(ff.cast(x, name, mode, dtype=np.float32), want).all()
        n = len(calls)
        assert n == len(DET_MODES) * 5
        assert ff.cast(x[:4], name, dtype=np.float16).dtype == np.float16
        assert len(calls) == n and old(x[:4].astype(np.float64), ff.get_format(name),
                                          "nearest_even", None, False, False, None, None) is None
    finally:
        C.cast_float32 = old


def test_the_general_route_keeps_what_round_f32_does_not_take():
    """dtype=, a tensor that requires grad, wrap, sr_random, formats float32 lacks."""
    torch = pytest.importorskip("torch")
    x = np.array([1.0 + 2 ** -9, 3e-3], np.float32)
    assert ff.cast(x, "bf16", dtype=np.float64).dtype == np.float64
    assert ff.cast(x, "fp64").dtype == np.float64
    t = torch.tensor(x, requires_grad=True)
    r = ff.cast(t, "bf16")
    r.sum().backward()
    assert t.grad is not None and r.dtype == torch.float32
    assert R.cast_float32(x, ff.get_format("int8"), "nearest_even", "wrap", False, False, None,
                          None) is None
    with pytest.raises(ValueError, match="sr_bits"):
        ff.cast(x, "bf16", "stochastic_a")


@pytest.mark.parametrize("name", BITS_FORMATS + ["fp8_e4m3b11fnuz", "e8m0"])
def test_deterministic_modes_against_mpfr(name):
    rng = np.random.default_rng(5)
    b = boundaries(name)
    x = np.concatenate([b[rng.integers(0, b.size, 700)], -b[rng.integers(0, b.size, 300)],
                        rng.choice(structured(1, 1 << 12), 600)])
    if not ff.get_format(name).signed:
        x = np.abs(x)
    xs = x.astype(np.float64)
    for mode in DET_MODES:
        got = ff.cast(x, name, mode)
        want = O.round_many(xs, ff.get_format(name), mode)
        ok = same_bits(got, want.astype(np.float32))
        assert ok.all(), (mode, x[~ok][:4], got[~ok][:4], want[~ok][:4])


@pytest.mark.parametrize("name", [n for n in FLOAT_DTYPES if n != "e8m0"])
def test_nearest_even_against_ml_dtypes(name):
    """Inside the range (ml_dtypes' overflow conventions differ by format and version)."""
    x = sample(name)
    f = ff.get_format(name)
    with np.errstate(invalid="ignore"):
        keep = ~(np.abs(x) > np.float32(f.max))  # NaN kept where the format has one
    if not f.has_nan:
        keep &= ~np.isnan(x)
    x = x[keep]
    with np.errstate(all="ignore"):
        want = x.astype(FLOAT_DTYPES[name]).astype(np.float32)
    got = ff.cast(x, name)
    if not f.negative_zero:
        want = want + np.float32(0)
    ok = same_bits(got, want)
    assert ok.all(), (x[~ok][:4], got[~ok][:4], want[~ok][:4])


@pytest.mark.parametrize("name", ["fp16", "fp8_e4m3", "fp4_e2m1", "fp8_e5m2fnuz"])
def test_without_the_scaled_kernel_the_bit_kernel_equals_the_general_route(name, monkeypatch):
    """Where float32 arithmetic flushes subnormal inputs (or rounds otherwise) the scaled
    kernel steps aside: the bit kernel, with the inputs below 2**emin done apart."""
    monkeypatch.setattr(R, "_fpu_ok", lambda: False)
    _compare(sample(name), name, ("nearest_even", "toward_zero", "up", "down"), [{}])


def test_bit_kernel_takes_the_named_formats():
    """The bit kernel is what makes float32 fast: it must not quietly stop applying."""
    for name in ["bf16", "tf32", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp4_e2m1",
                 "fp6_e2m3", "fp6_e3m2"]:
        for mode in ("nearest_even", "toward_zero", "up", "down"):
            assert R._kernel(ff.get_format(name), mode) is not None, (name, mode)


@pytest.fixture
def _only_when_selected(request):
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the 2**32 sweep runs only with -m slow")


@pytest.mark.slow
@pytest.mark.usefixtures("_only_when_selected")
@pytest.mark.parametrize("name", ["bf16", "fp16", "fp8_e4m3"])
def test_every_float32_pattern_nearest_even(name):
    step = 1 << 24
    base = np.arange(step, dtype=np.uint32)
    f = ff.get_format(name)
    bad_general = bad_ml = 0
    t0 = time.perf_counter()
    for start in range(0, 1 << 32, step):
        x = (base + np.uint32(start)).view(np.float32)
        got = ff.cast(x, name)
        bad_general += int((~same_bits(got, general(x, name))).sum())
        inside = ~(np.abs(x) > f.max)
        with np.errstate(all="ignore"):
            want = x[inside].astype(FLOAT_DTYPES[name]).astype(np.float32)
        bad_ml += int((~same_bits(got[inside], want)).sum())
    print(f"{name}: 2**32 patterns in {time.perf_counter() - t0:.0f} s")
    assert bad_general == 0 and bad_ml == 0, (bad_general, bad_ml)


def test_fp32_of_finite_float32_is_each_value(monkeypatch):
    """fp32 itself from finite float32 (subnormals included): each block of finite values
    is copied, for every deterministic mode and policy (the general route agrees); ftz /
    daz, Inf and NaN take the float64 route."""
    x = structured()
    x = x[np.isfinite(x)]
    assert (np.abs(x[x != 0]) < 2.0 ** -126).sum() > 100  # float32 subnormals among them
    _compare(x, "fp32", DET_MODES, [{}, {"overflow": "saturate"}, {"ftz": True}, {"daz": True}])
    routed = []
    real = R._route64
    monkeypatch.setattr(R, "_route64", lambda *a: routed.append(1) or real(*a))
    for mode in DET_MODES:
        ff.cast(x, "fp32", mode)
    assert routed == []
    ff.cast(np.append(x, np.float32(np.inf)), "fp32")
    assert routed == [1]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_flush_switch_between_calls_is_seen(threads):
    """The FPU check is asked once per call and thread: casts on either side of
    ``torch.set_flush_denormal(True)`` on the calling thread give the same bits, for
    arrays on one thread and on the pool.  The inputs: normal values with a few float32
    subnormals in every block, which the scaled kernel's directed modes would read as
    zero on a flushing thread; there the bit kernel rounds them with integers.  (A block
    of many float32 subnormals goes to the float64 route, whose widening a flushing
    thread zeroes: not looked at here.)"""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    n = 4 * (1 << 17)
    x = rng.standard_normal(n).astype(np.float32)
    x[::1000] = rng.integers(1, 1 << 23, x[::1000].size, dtype=np.uint32).view(np.float32)
    want = general(x, "fp16", "up")
    assert (want[::1000] == 2.0 ** -24).all()  # each subnormal rounds up to fp16's smallest
    with ff.limit_threads(threads):
        before = ff.cast(x, "fp16", "up")
        if not torch.set_flush_denormal(True):
            pytest.skip("this CPU has no flush-to-zero control")
        try:
            assert not R._fpu_ok()
            during = ff.cast(x, "fp16", "up")
        finally:
            torch.set_flush_denormal(False)
        after = ff.cast(x, "fp16", "up")
    for got in (before, during, after):
        assert same_bits(got, want).all()
