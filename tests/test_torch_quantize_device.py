"""quantize / dequantize / fake_quant on the device path (issue 11 items 1, 4 and 7).

The namespace code (``floatfmt.scaling.quantize_schemes``, ``floatfmt.scaling.quantized_tensor``: what
CUDA tensors run) is run on CPU tensors under ``force_namespace`` and compared with
the numpy path (the default for CPU tensors) element for element, NaN by class and
the sign of zero counted: every scheme (integers symmetric / asymmetric per tensor,
channel, group and 2-D block, calibrated by max or percentile or given a scale and
zero point; float formats the same ways under every overflow policy; every MX format
under every scale rounding; NVFP4), every deterministic rounding mode, float64 /
float32 / bfloat16 inputs, on data spread across and beyond each range plus edge
rows (zeros, signed zeros, all-zero blocks, blocks whose max is a float64
subnormal or past E8M0's range, Inf, NaN).  Where the numpy path raises, the device
path must raise the same exception type.  Plus: the exact quotient against Fraction
arithmetic, percentile against numpy, the straight-through gradients on both paths
against their definition, and what the device path refuses.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.backend.dispatch import force_namespace
from conftest import DET_MODES
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

pytestmark = pytest.mark.usefixtures("torch_one_thread")

INTS = ["int8", "uint8", "int4", "uint4"]
FLOATS = ["fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "bf16", "fp16"]


def _int_schemes():
    out = []
    for f in INTS:
        out += [(f, {}), (f, {"scheme": "asymmetric"}),
                (f, {"granularity": "channel", "axis": 0}),
                (f, {"granularity": "channel", "axis": 1, "scheme": "asymmetric"}),
                (f, {"granularity": "group", "group_size": 16}),
                (f, {"granularity": "group", "group_size": 5, "axis": 0, "scheme": "asymmetric"}),
                (f, {"granularity": "block", "block": (4, 24)}),
                (f, {"calibration": "percentile", "percentile": 99.0}),
                (f, {"calibration": "percentile", "percentile": 90.0, "scheme": "asymmetric",
                     "granularity": "channel", "axis": 0}),
                (f, {"scale": 0.05}), (f, {"scale": 0.25, "zero_point": 1}),
                (f, {"pow2_scale": True, "margin": 1}), (f, {"narrow_range": False})]
    out += [("int8", {"granularity": "channel", "axis": 0, "scale": np.linspace(0.01, 0.3, 12).tolist()}),
            ("uint8", {"granularity": "channel", "axis": 0, "scale": [0.125] * 12,
                       "zero_point": list(range(12))})]
    return out


def _float_schemes():
    out = []
    for f in FLOATS:
        out += [(f, {}), (f, {"granularity": "channel", "axis": 1}),
                (f, {"granularity": "group", "group_size": 32}),
                (f, {"granularity": "block", "block": (3, 16), "margin": -1}),
                (f, {"calibration": "percentile", "percentile": 99.5}),
                (f, {"scale": 0.3}), (f, {"scale": "amax", "pow2_scale": True})]
    return out


def _block_schemes():
    out = []
    for name in ff.block_formats():
        if name == "nvfp4":
            out += [(name, {}), (name, {"axis": 0}), (name, {"tensor_scale": 0.0123})]
        else:
            out += [(name, {"scale_rounding": r}) for r in ("floor", "ceil", "even", "rceil")]
            out += [(name, {"axis": 0})]
    return out


def _policies(f):
    g = ff.get_format(f)
    return ["saturate"] + (["inf"] if g.inf else []) + (["nan"] if g.nan != "none" else [])


def data(seed, edges):
    """12 x 80 float64 rows: spread over 2**-20..2**20 and 2**-60..2**60, ties of a
    0.25 grid, zeros; with ``edges`` also float64 subnormals, fp32-subnormal-sized
    values, huge values (an MX scale past E8M0), and with ``edges="specials"`` Inf and
    NaN (which integer formats and NVFP4 refuse)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((12, 80))
    x[0] *= np.exp2(rng.integers(-20, 20, 80))
    x[1] *= np.exp2(rng.integers(-60, 60, 80))
    x[2] = np.where(rng.random(80) < 0.5, 0.0, -0.0)
    x[3, :] = 0.0
    x[4] = np.round(x[4] * 16) / 4  # ties of the 0.25 grid
    x[5, :40] = 0.0
    x[5, 40:] *= np.exp2(rng.integers(-12, 12, 40))
    x[6:] *= np.exp2(rng.integers(-6, 6, (6, 80)))
    if edges:
        x[7] = rng.standard_normal(80) * 2.0 ** -1060  # float64 subnormals
        x[8] = rng.standard_normal(80) * np.exp2(rng.integers(-150, -120, 80))
        x[9] = rng.standard_normal(80) * np.exp2(rng.integers(900, 1015, 80))
    if edges == "specials":
        x[10, ::7] = np.inf
        x[10, 3::7] = -np.inf
        x[11, ::5] = np.nan
    return x


def outcome(fn):
    try:
        return "ok", fn()
    except (ValueError, TypeError, NotImplementedError) as e:
        return "raise", type(e)


def count(a, b) -> int:
    """Elementwise mismatches of two tensors / arrays / numbers (NaN by class)."""
    a = a.detach().to(torch.float64).numpy() if isinstance(a, torch.Tensor) else np.asarray(a, np.float64)
    b = b.detach().to(torch.float64).numpy() if isinstance(b, torch.Tensor) else np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return int(mismatches(a, b).sum())


FIELDS = ("elements", "scale", "zero_point", "scale_codes", "tensor_scale")
META = ("fmt", "granularity", "axis", "block_size", "block_shape", "qmin", "qmax", "scheme")


def compare_quantized(q, qh) -> int:
    """Mismatches between a device-path and a numpy-path QuantizedTensor (both of tensors)."""
    n = 0
    for name in META:
        assert getattr(q, name) == getattr(qh, name), name
    assert repr(q) == repr(qh) and q.bits_per_element == qh.bits_per_element
    for name in FIELDS:
        a, b = getattr(q, name), getattr(qh, name)
        assert isinstance(a, torch.Tensor) == isinstance(b, torch.Tensor), name
        if a is None or b is None:
            assert a is None and b is None, name
            continue
        if isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype and a.device == b.device, (name, a.dtype, b.dtype)
        n += count(a, b)
    with force_namespace():
        d, (lo, hi) = q.dequantize(), q.limits()
        d32 = q.dequantize(torch.float32)
        c = outcome(lambda: q.codes)  # NaN elements of a format without NaN: ValueError
    dh, (loh, hih) = qh.dequantize(), qh.limits()
    ch = outcome(lambda: qh.codes)
    assert c[0] == ch[0] and (c[0] == "ok" or c[1] is ch[1])
    if c[0] == "ok":
        assert c[1].dtype == ch[1].dtype
        n += count(c[1], ch[1])
    assert d.dtype == dh.dtype and d32.dtype == torch.float32
    lo_b, hi_b = torch.broadcast_tensors(torch.as_tensor(lo), torch.as_tensor(hi))
    loh_b, hih_b = torch.broadcast_tensors(torch.as_tensor(loh), torch.as_tensor(hih))
    return (n + count(d, dh) + count(lo_b, loh_b) + count(hi_b, hih_b)
            + count(d32, qh.dequantize(torch.float32)))


def check(fmt, opts, t) -> int:
    """Mismatches of quantize and fake_quant of the tensor t, device path against numpy."""
    with force_namespace():
        dev = outcome(lambda: ff.quantize(t, fmt, **opts))
        fdev = outcome(lambda: ff.fake_quant(t, fmt, **opts))
    host = outcome(lambda: ff.quantize(t, fmt, **opts))
    fhost = outcome(lambda: ff.fake_quant(t, fmt, **opts))
    assert dev[0] == host[0] and fdev[0] == fhost[0], (fmt, opts, dev, host)
    if dev[0] == "raise":
        assert dev[1] is host[1] and fdev[1] is fhost[1], (fmt, opts, dev, host)
        return 0
    assert fdev[1].dtype == fhost[1].dtype
    return compare_quantized(dev[1], host[1]) + count(fdev[1], fhost[1])


def run_scheme(fmt, opts, policies=(None,)):
    n = calls = 0
    for seed, edges in enumerate((False, True, "specials")):
        x = data(7 + seed, edges)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            t = torch.from_numpy(x).to(dtype)
            modes = DET_MODES if dtype == torch.float64 else ("nearest_even", "up")
            for mode in modes:
                for pol in policies:
                    o = dict(opts, rounding=mode)
                    if pol is not None:
                        o["overflow"] = pol
                    n += check(fmt, o, t)
                    calls += 1
    assert calls and n == 0, f"{n} mismatches for {fmt} {opts}"


@pytest.mark.parametrize("fmt,opts", _int_schemes(), ids=str)
def test_int_schemes_equal_numpy(fmt, opts):
    run_scheme(fmt, opts)


@pytest.mark.parametrize("fmt,opts", _float_schemes(), ids=str)
def test_float_schemes_equal_numpy_every_policy(fmt, opts):
    run_scheme(fmt, opts, _policies(fmt))


LIBRARY_CONVENTIONS = [
    ("fp8_e4m3", {"scale_convention": "te"}), ("fp8_e5m2", {"scale_convention": "torchao"}),
    ("fp8_e4m3", {"scale_convention": "torchao", "granularity": "channel", "axis": 1, "pow2_scale": True}),
    ("fp4_e2m1", {"scale_convention": "te", "margin": 2}),
    ("fp8_e4m3", {"scale_convention": "te", "scale": 150.0}),
]


@pytest.mark.parametrize("fmt,opts", LIBRARY_CONVENTIONS, ids=str)
def test_library_scale_conventions_equal_numpy(fmt, opts):
    """Transformer Engine's and torchao's FP8 conventions, written over the namespace, give
    the numpy kernels' bits on the device path."""
    run_scheme(fmt, opts)


@pytest.mark.parametrize("fmt,opts", _block_schemes(), ids=str)
def test_mx_and_nvfp4_equal_numpy(fmt, opts):
    run_scheme(fmt, opts)


def test_blocks_past_the_range_and_all_zero_blocks_are_covered():
    """The edge data really holds the cases named: a NaN MX scale, an all-zero block at
    the lowest scale, a block whose amax is a float64 subnormal."""
    x = torch.from_numpy(data(9, "specials"))
    with force_namespace():
        q = ff.quantize(x, "mxfp8_e4m3")
    codes = q.scale_codes
    assert bool((codes[9] == 255).any()) and bool((codes[3] == 0).all()) and bool((codes[7] == 0).all())


def test_shapes_edge_cases_equal_numpy():
    """1-D, 3-D, one block shorter than a block, and empty tensors."""
    rng = np.random.default_rng(3)
    cases = [rng.standard_normal(7), rng.standard_normal((2, 3, 40)) * 100, np.zeros((0, 32)),
             rng.standard_normal((5, 1))]
    for x in cases:
        t = torch.from_numpy(x)
        for fmt, opts in [("int8", {}), ("int8", {"granularity": "channel", "axis": 0}),
                          ("uint4", {"scheme": "asymmetric", "granularity": "channel", "axis": -1}),
                          ("fp8_e4m3", {"calibration": "percentile"}), ("mxfp4_e2m1", {}),
                          ("mxint8", {"axis": 0}), ("nvfp4", {}),
                          ("int8", {"granularity": "group", "group_size": 1})]:
            assert check(fmt, opts, t) == 0, (x.shape, fmt, opts)


# ------------------------------------------------------------------ the exact quotient
def _rz_class(q: Fraction, sign: float = 1.0):
    """(q truncated toward zero to float64, remainder class 0..3) by Fraction arithmetic;
    past the float64 range +-Inf with class 3; a zero keeps ``sign``."""
    if abs(q) >= Fraction(2) ** 1024:
        return (math.inf if q > 0 else -math.inf), 3
    top = Fraction(np.finfo(np.float64).max)
    r = float(q) if abs(q) <= top else float(top if q > 0 else -top)
    if abs(Fraction(r)) > abs(q):
        r = math.nextafter(r, 0.0)
    r = math.copysign(r, sign) if r == 0 else r
    rem = abs(q - Fraction(r))
    if rem == 0:
        return r, 0
    half = Fraction(math.ulp(r)) / 2
    return r, (1 if rem < half else 2 if rem == half else 3)


def test_exact_quotient_against_fractions():
    """t is the exact quotient truncated toward zero and the class says where the rest
    lies, for numerators across float64 (subnormals included) and scales across fp32
    and float64: quotients of every magnitude, subnormal ones (truncated to 2**-1074),
    ones below 2**-1074 (a signed zero) and past the float64 range (+-Inf, class 3)."""
    from floatfmt.scaling.quantize_schemes import exact_quotient
    rng = np.random.default_rng(11)
    n = 4000
    v = rng.standard_normal(n) * np.exp2(rng.integers(-1074, 1000, n).astype(float))
    v[:4] = [0.0, -0.0, 5e-324, -2.0 ** -1074]
    s = np.abs(rng.standard_normal(n)).astype(np.float32).astype(np.float64) * np.exp2(
        rng.integers(-140, 120, n).astype(float))
    s[:1000] = rng.uniform(1, 2, 1000) * np.exp2(rng.integers(-1074, 1000, 1000).astype(float))
    s[s == 0] = 1.5
    t, cls = exact_quotient(torch.from_numpy(v), torch.from_numpy(s))
    t, cls = t.numpy(), cls.numpy()
    bad = 0
    for vi, si, ti, ci in zip(v, s, t, cls):
        want = _rz_class(Fraction(vi) / Fraction(si), vi)
        bad += not (ti == want[0] and math.copysign(1, ti) == math.copysign(1, want[0])
                    and ci == want[1])
    with np.errstate(over="ignore", under="ignore"):
        q = np.abs(v / s)
    assert (q == np.inf).sum() > 10 and ((q < 2.0 ** -1022) & (v != 0)).sum() > 10
    assert bad == 0


def test_percentile_equals_numpy():
    """The device percentile gives numpy's values (method "linear") to the bit.  Zeros
    compare without their sign: which of -0 and +0 a sort puts first is not defined,
    and quantize never sees the sign of a zero range (|x| is taken, or the range is
    clamped to include 0)."""
    from floatfmt.scaling.quantize_schemes import _percentile
    rng = np.random.default_rng(5)
    bad = 0
    for n in (1, 2, 3, 10, 97, 1000):
        a = np.round(rng.standard_normal((4, n)) * 8) / 8 * np.exp2(rng.integers(-5, 5, (4, n)))
        for q in (0.0, 0.1, 25.0, 50.0, 90.0, 99.0, 99.99, 100.0, 100 - 99.99):
            got = _percentile(torch.from_numpy(a), q, None).numpy()
            bad += int(mismatches(got + 0.0, np.percentile(a, q) + 0.0).sum())
            got = _percentile(torch.from_numpy(a), q, 0).numpy()
            bad += int(mismatches(got + 0.0, np.percentile(a, q, axis=1, keepdims=True) + 0.0).sum())
    assert bad == 0


# ------------------------------------------------------------------ gradients
GRAD_CASES = [("int8", {}), ("int8", {"scale": 0.02}), ("uint8", {"scheme": "asymmetric", "scale": 0.02, "zero_point": 10}),
              ("int4", {"granularity": "channel", "axis": 0}),
              ("int8", {"granularity": "group", "group_size": 16, "scale": None}),
              ("fp8_e4m3", {"scale": 0.005}), ("fp8_e5m2", {"granularity": "block", "block": (2, 32)}),
              ("mxfp8_e4m3", {}), ("mxfp4_e2m1", {"axis": 0}), ("nvfp4", {})]


@pytest.mark.parametrize("fmt,opts", GRAD_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_gradients_equal_on_both_paths_and_their_definition(fmt, opts, dtype):
    """quantize(x).dequantize() and fake_quant(x): the gradient is the incoming one
    (ste None / "identity") or the incoming one where lo < x < hi of the numpy path's
    QuantizedTensor.limits, 0 elsewhere (ste "clipped"), on the numpy path and on the
    device path alike; the forward values are equal too."""
    opts = {k: v for k, v in opts.items() if v is not None}
    xv = np.linspace(-6, 6, 4 * 64).reshape(4, 64) * np.exp2(np.arange(4))[:, None]
    xv = torch.from_numpy(xv).to(dtype).to(torch.float64).numpy()
    gv = np.arange(xv.size, dtype=np.float64).reshape(xv.shape) + 1
    lo, hi = ff.quantize(xv, fmt, **opts).limits()
    inside = (xv > lo) & (xv < hi)
    for ste, want in ((None, gv), ("identity", gv), ("clipped", np.where(inside, gv, 0.0))):
        results = []
        for forced in (False, True):
            for how in ("dequantize", "fake_quant"):
                x = torch.from_numpy(xv).to(dtype).requires_grad_(True)
                with force_namespace(forced):
                    if how == "dequantize":
                        y = ff.quantize(x, fmt, ste=ste, **opts).dequantize()
                    else:
                        y = ff.fake_quant(x, fmt, ste=ste, **opts)
                y.backward(torch.from_numpy(gv).to(y.dtype))
                assert x.grad.dtype == dtype
                assert np.array_equal(x.grad.to(torch.float64).numpy(), want), (fmt, ste, forced, how)
                results.append(y.detach())
        assert count(results[2], results[0]) == 0 and count(results[3], results[1]) == 0


# ------------------------------------------------------------------ stochastic rounding, refusals
def test_mx_stochastic_rounding_on_the_device_path():
    """MX quotients are exact, so stochastic rounding runs on the device from a
    torch.Generator: reproducible per seed, every value one of its two neighbours
    (the results of modes down and up), and unbiased on average."""
    x = torch.full((64, 32), 1.0 + 2.0 ** -5)  # between 1 and 1.125 in E4M3 (scale 1 by block)
    x[:, 0] = 256.0  # the block max sets E = 0
    with force_namespace():
        a = ff.fake_quant(x, "mxfp8_e4m3", rounding="stochastic", rng=torch.Generator().manual_seed(1))
        b = ff.fake_quant(x, "mxfp8_e4m3", rounding="stochastic", rng=1)
        c = ff.fake_quant(x, "mxfp8_e4m3", rounding="stochastic", rng=2)
        lo = ff.fake_quant(x, "mxfp8_e4m3", rounding="down")
        hi = ff.fake_quant(x, "mxfp8_e4m3", rounding="up")
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert bool(((a == lo) | (a == hi)).all())
    frac = float((a[:, 1:] == hi[:, 1:]).double().mean())
    assert abs(frac - 0.25) < 0.05  # 2**-5 is a quarter of the step 2**-3


@pytest.mark.parametrize("fmt,opts", [("int8", {"pow2_scale": True}),
                                      ("fp8_e5m2", {"pow2_scale": True, "granularity": "channel"}),
                                      ("bf16", {}), ("int4", {"scale": 0.25})])
def test_stochastic_rounding_of_exact_quotients_on_the_device_path(fmt, opts):
    """Power-of-two scales (and scale 1) make every quotient exact: stochastic rounding
    runs on the device, reproducible per seed, each value one of its two neighbours
    (modes down and up), the mean of many draws near the exact value."""
    torch.manual_seed(3)
    x = torch.randn(64, 256, dtype=torch.float64) * 3
    with force_namespace():
        a = ff.fake_quant(x, fmt, rounding="stochastic", rng=5, **opts)
        b = ff.fake_quant(x, fmt, rounding="stochastic", rng=torch.Generator().manual_seed(5), **opts)
        lo = ff.fake_quant(x, fmt, rounding="down", **opts)
        hi = ff.fake_quant(x, fmt, rounding="up", **opts)
        draws = torch.stack([ff.fake_quant(x[:4], fmt, rounding="stochastic", rng=s, **opts)
                             for s in range(200)])
    assert torch.equal(a, b) and bool(((a == lo) | (a == hi)).all()) and not torch.equal(lo, hi)
    inside = (lo[:4] != hi[:4])
    err = (draws.mean(0) - x[:4]).abs() / (hi[:4] - lo[:4]).clamp(min=1e-300)
    assert float(err[inside].mean()) < 0.05


def test_what_the_device_path_refuses():
    x = torch.linspace(-3, 3, 64).reshape(2, 32)
    with force_namespace():
        mse = ff.fake_quant(x, "int8", calibration="mse")  # runs (tests/test_torch_quantize_mse.py)
        with pytest.raises(ValueError, match="does not apply"):
            ff.quantize(x, "mxfp8_e4m3", scale=2.0)
        with pytest.raises(ValueError, match="unknown ste"):
            ff.fake_quant(x, "int8", ste="bogus")
    assert count(mse, ff.fake_quant(x, "int8", calibration="mse")) == 0


def test_nvfp4_tiny_blocks_under_the_automatic_tensor_scale():
    """NVFP4 with its own tensor scale on the edge rows but the huge one (which no fp32
    tensor scale holds: ValueError on both paths): float64-subnormal blocks, blocks at
    fp32's subnormal sizes, zero blocks."""
    x = data(8, True)
    x[9] = 1e30
    n = 0
    for mode in DET_MODES:
        for axis in (-1, 0):
            n += check("nvfp4", {"rounding": mode, "axis": axis}, torch.from_numpy(x))
    assert n == 0
    huge = torch.from_numpy(data(8, True))
    for forced in (False, True):
        with force_namespace(forced), pytest.raises(ValueError, match="overflows fp32"):
            ff.quantize(huge, "nvfp4")


def test_a_tensor_scale_with_a_list_input_is_refused_on_the_device_path():
    with force_namespace(), pytest.raises(TypeError, match="give x as a tensor"):
        ff.quantize([1.0, 2.0], "int8", scale=torch.tensor(0.5, dtype=torch.float64))
