"""INT8 / FP8 per-tensor and per-channel quantisation, int_matmul, DelayedScaling, metrics."""

import warnings
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.scaling.quantized_tensor import QuantizedTensor

try:  # torch is optional: its oracle tests skip cleanly without it
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (optional oracle)")


def fp32(fr) -> float:
    """Nearest fp32 to a Fraction (ties to even), by exact search: the test's own oracle."""
    fr = Fraction(fr)
    f = np.float32(float(fr))  # within one fp32 ulp of the answer
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - fr),
                                     int(np.array(c).view(np.uint32)) & 1))
    return float(best)


def rne(fr: Fraction) -> int:
    return round(fr)  # Python's round of a Fraction: half to even


# ----------------------------------------------------------------------------- integer formats
def test_symmetric_int8_rule():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    q = ff.quantize(x, "int8")
    amax = Fraction(float(np.max(np.abs(x))))
    assert q.scale == fp32(amax / 127)
    assert q.zero_point == 0 and (q.qmin, q.qmax) == (-127, 127)
    want = [max(-127, min(127, rne(Fraction(float(v)) / Fraction(q.scale)))) for v in x]
    assert q.codes.tolist() == want
    assert q.codes.dtype == np.int8
    full = ff.quantize(x, "int8", narrow_range=False)
    assert (full.qmin, full.qmax) == (-128, 127)
    assert ff.quantize([-1.0, 1.0], "int8", scale=1 / 128, narrow_range=False).codes.tolist() == [-128, 127]


def test_asymmetric_uint8_and_small_formats():
    x = np.array([-0.3, 0.0, 0.1, 0.9, 1.2])
    q = ff.quantize(x, "uint8", scheme="asymmetric")
    scale = fp32(Fraction(1.5) / 255)
    assert q.scale == scale
    zp = 0 - rne(Fraction(-0.3) / Fraction(scale))
    assert q.zero_point == zp
    assert q.codes.tolist() == [min(255, max(0, rne(Fraction(v) / Fraction(scale)) + zp)) for v in x]
    assert q.codes[1] == zp  # zero is exact
    assert q.dequantize()[1] == 0.0
    # int4 / uint4 ranges
    assert (ff.quantize(x, "int4").qmin, ff.quantize(x, "int4").qmax) == (-7, 7)
    assert (ff.quantize(x, "int4", narrow_range=False).qmin) == -8
    u4 = ff.quantize(x, "uint4", scheme="asymmetric")
    assert u4.codes.min() == 0 and u4.codes.max() == 15


def test_per_channel():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 64)) * np.array([[0.01], [0.1], [1.0], [10.0]])
    q = ff.quantize(w, "int8", granularity="channel")
    assert q.scale.shape == (4, 1)
    for c in range(4):
        row = ff.quantize(w[c], "int8")
        assert q.scale[c, 0] == row.scale
        assert np.array_equal(q.codes[c], row.codes)
    qt = ff.quantize(w, "int8")
    e_c, e_t = ff.quantization_error(w, q), ff.quantization_error(w, qt)
    assert e_c["sqnr_db"] > e_t["sqnr_db"] + 3
    # the row of small weights is lost under one tensor scale and kept per channel
    row0 = lambda qq: ff.quantization_error(w[0], qq.dequantize()[0])  # noqa: E731
    assert row0(q)["sqnr_db"] > 35 and row0(qt)["sqnr_db"] < 1
    assert e_t["frac_flushed"] > 0.2 and e_c["frac_flushed"] < 0.02
    q1 = ff.quantize(w.T, "int8", granularity="channel", axis=1)
    assert np.array_equal(q1.codes, q.codes.T)


def test_exact_quotient_beats_naive_float64_division():
    # x is the float64 nearest to (k + 1/2) * s: the exact x / s is a hair off the tie,
    # but the float64 quotient lands exactly on it and rint would pick the even side.
    s = 0.1
    xs, want, naive_wrong = [], [], 0
    for k in range(-120, 120):
        x = float((k + Fraction(1, 2)) * Fraction(s))
        exact = Fraction(x) / Fraction(s)
        xs.append(x)
        want.append(max(-128, min(127, rne(exact))))
        naive_wrong += int(np.rint(x / s)) != rne(exact)
    assert naive_wrong > 10  # the test has teeth
    got = ff.quantize(np.array(xs), "int8", scale=s, zero_point=0).codes.tolist()
    assert got == want


def test_fraction_and_string_inputs_are_exact():
    q = ff.quantize([Fraction(1, 3), "0.05", 10 ** 30], "int8", scale=0.1, zero_point=0)
    # 0.05 / 0.1(float64) = 0.4999999999999999722... -> 0
    assert q.codes.tolist() == [3, 0, 127]


def torch_model(x, s, zp, lo, hi):
    """What torch's CPU quantize_per_tensor computes (FBGEMM): everything in fp32,
    ``rint(fp32(fp32(x * fp32(1/s)) + zp))``, then the clamp."""
    y = np.float32(x) * (np.float32(1) / np.float32(s))
    return np.clip(np.rint(y + np.float32(zp)).astype(np.int64), lo, hi)


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("dtype,scheme,zp", [("int8", "symmetric", 0), ("uint8", "asymmetric", 120)])
def test_int8_per_tensor_matches_torch(dtype, scheme, zp):
    tdt = {"int8": torch.qint8, "uint8": torch.quint8}[dtype]
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(20000) * 3).astype(np.float32)
    x[:4] = [0.5 * 2.0 ** -5, -1.5 * 2.0 ** -5, 2.5 * 2.0 ** -3, 1e6]  # exact ties, clipping
    for s in (2.0 ** -5, 2.0 ** -3, 1.0, float(np.float32(0.0173)), float(np.float32(0.31))):
        ours = ff.quantize(x, dtype, scheme=scheme, scale=s, zero_point=zp).codes.astype(np.int64)
        theirs = torch.quantize_per_tensor(torch.from_numpy(x), s, zp, tdt).int_repr().numpy()
        theirs = theirs.astype(np.int64)
        assert np.array_equal(theirs, torch_model(x, s, zp, lo, hi))  # we know what torch does
        if zp == 0 and np.frexp(s)[0] == 0.5:
            # zero point 0 and a power-of-two scale: torch's fp32 steps are exact
            assert np.array_equal(ours, theirs)
            continue
        # otherwise torch rounds twice (x * fp32(1/s), then + zp, in fp32): the codes
        # differ by one, and only where the exact quotient is within 2**-18 of a tie
        diff = np.nonzero(ours != theirs)[0]
        assert np.all(np.abs(ours[diff] - theirs[diff]) == 1)
        for i in diff:
            q = abs(Fraction(float(x[i])) / Fraction(s))
            assert abs(q - int(q) - Fraction(1, 2)) < Fraction(1, 2 ** 18), (s, x[i])
        assert len(diff) <= 10


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_int8_per_channel_matches_torch():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((8, 256)).astype(np.float32)
    scales = 2.0 ** -rng.integers(3, 8, 8)
    ours = ff.quantize(w, "int8", granularity="channel", scale=scales, zero_point=0).codes
    theirs = torch.quantize_per_channel(torch.from_numpy(w), torch.tensor(scales, dtype=torch.float64),
                                        torch.zeros(8, dtype=torch.int64), 0, torch.qint8)
    assert np.array_equal(ours.astype(np.int64), theirs.int_repr().numpy().astype(np.int64))


# ----------------------------------------------------------------------------- calibration
def test_calibration_methods():
    rng = np.random.default_rng(2)
    x = rng.standard_t(3, 20000)  # heavy tails: the max wastes int4's few codes
    by = {c: ff.quantize(x, "int4", calibration=c) for c in ("max", "percentile", "mse")}
    errs = {c: ff.quantization_error(x, q) for c, q in by.items()}
    assert errs["max"]["frac_clipped"] == 0.0
    assert 0 < errs["percentile"]["frac_clipped"] < 0.001
    assert 0 < errs["mse"]["frac_clipped"] < 0.01
    assert errs["mse"]["mse"] < errs["max"]["mse"] / 3
    assert errs["mse"]["mse"] < errs["percentile"]["mse"] < errs["max"]["mse"]
    p = ff.quantize(x, "int8", calibration="percentile", percentile=99.0)
    assert p.scale == fp32(Fraction(float(np.percentile(np.abs(x), 99.0))) / 127)


def test_percentile_asymmetric_and_channel():
    rng = np.random.default_rng(3)
    x = np.abs(rng.standard_normal((3, 500)))
    q = ff.quantize(x, "uint8", scheme="asymmetric", granularity="channel",
                    calibration="percentile", percentile=99.5)
    assert q.scale.shape == (3, 1) and q.zero_point.shape == (3, 1)
    assert np.all(q.codes.max(axis=1) == 255)


# ----------------------------------------------------------------------------- FP8 per tensor
def test_fp8_amax_scaling_margin_pow2():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(4096) * 1e-3
    amax = Fraction(float(np.max(np.abs(x))))
    q = ff.quantize(x, "fp8_e4m3", scale="amax")
    assert q.scale == fp32(amax / 448)
    assert np.max(np.abs(q.elements)) == 448.0
    q1 = ff.quantize(x, "fp8_e4m3", scale="amax", margin=1)
    assert q1.scale == fp32(amax * 2 / 448) and np.max(np.abs(q1.elements)) == 224.0
    qp = ff.quantize(x, "fp8_e4m3", scale="amax", pow2_scale=True)
    assert np.frexp(qp.scale)[0] == 0.5 and qp.scale >= float(amax / 448) > qp.scale / 2
    e5 = ff.quantize(x, "fp8_e5m2")  # default for 8-bit formats: amax scaling
    assert e5.scale == fp32(amax / 57344)
    # unscaled small values fall into E4M3's subnormals / flush: scaling fixes it
    plain = ff.quantization_error(x, ff.quantize(x, "fp8_e4m3", scale=1.0))
    assert plain["frac_flushed"] > 0.2 and ff.quantization_error(x, q)["frac_flushed"] < 0.01
    # elements are E4M3 values: codes decode back to them
    assert np.array_equal(ff.decode(q.codes, "fp8_e4m3"), q.elements)


def test_wide_float_default_is_a_plain_cast():
    x = np.array([0.1, 1e-5, 70000.0])
    assert np.array_equal(ff.fake_quant(x, "bf16"), ff.cast(x, "bf16"))
    assert ff.quantize(x, "fp16").scale == 1.0
    assert ff.fake_quant(x, "fp16")[2] == 65504.0  # quantisation saturates


def test_fp8_delayed_scaling_trace():
    ds = ff.DelayedScaling(history_len=2, algo="max")
    seen = []
    for amax in (1.0, 10.0, 2.0, 3.0):
        ds.quantize("x", np.array([amax, -amax / 2]))
        seen.append(ds.update()["x"])
    assert seen == [fp32(Fraction(a) / 448) for a in (1, 10, 10, 3)]
    assert ds.history("x") == [2.0, 3.0]
    rec = ff.DelayedScaling(history_len=2, algo="most_recent")
    got = []
    for amax in (1.0, 10.0, 2.0, 3.0):
        rec.quantize("x", np.array([amax]))
        got.append(rec.update()["x"])
    assert got == [fp32(Fraction(a) / 448) for a in (1, 10, 2, 3)]
    # a jump in amax between updates saturates: the scale lags one step
    q = rec.quantize("x", np.array([30.0, 1.0]))
    assert q.dequantize()[0] == pytest.approx(448 * float(got[-1]))
    assert rec.clip_fraction["x"] == 0.5
    g = ff.DelayedScaling()
    g.quantize("grad", np.array([1e-6, -2e-6]), role="backward")
    assert g.update()["grad"] == fp32(Fraction(2e-6) / 57344)
    with pytest.raises(ValueError, match="registered as backward"):
        g.quantize("grad", np.ones(2), role="forward")
    with pytest.raises(ValueError, match="algo"):
        ff.DelayedScaling(algo="mean")


# ----------------------------------------------------------------------------- int_matmul
def test_int_matmul_exact_and_requantised():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((6, 40))
    b = rng.standard_normal((40, 5))
    qa = ff.quantize(a, "int8", granularity="channel", axis=0)
    qb = ff.quantize(b, "int8", granularity="channel", axis=1)
    r = ff.int_matmul(qa, qb)
    ref = qa.codes.astype(np.int64) @ qb.codes.astype(np.int64)
    assert np.array_equal(r.acc, ref) and r.n_overflow == 0
    deq = r.dequantize()
    for i in range(6):
        for j in range(5):
            exact = Fraction(int(ref[i, j])) * Fraction(qa.scale[i, 0]) * Fraction(qb.scale[0, j])
            assert deq[i, j] == float(exact)  # correctly rounded
    out = ff.int_matmul(qa, qb, out_scale=0.1)
    m = [[fp32(Fraction(qa.scale[i, 0]) * Fraction(qb.scale[0, j]) / Fraction(0.1))
          for j in range(5)] for i in range(6)]
    want = [[max(-128, min(127, rne(int(ref[i, j]) * Fraction(m[i][j])))) for j in range(5)]
            for i in range(6)]
    assert out.out.codes.tolist() == want
    assert np.max(np.abs(out.dequantize() - a @ b)) < 0.2


def test_int_matmul_overflow_is_detected():
    k = 140000  # 140000 * 127 * 127 > 2**31 - 1
    qa = ff.quantize(np.ones((1, k)), "int8", scale=1 / 127)
    qb = ff.quantize(np.ones((k, 1)), "int8", scale=1 / 127)
    with pytest.warns(RuntimeWarning, match="overflowed"):
        r = ff.int_matmul(qa, qb)
    assert r.exact[0, 0] == k * 127 * 127
    assert r.overflowed[0, 0] and r.may_overflow[0, 0]
    assert r.acc[0, 0] == k * 127 * 127 - 2 ** 32  # wrapped, as an int32 register would
    # mixed signs: no final overflow, but some summation order could pass 2**31
    sign = np.where(np.arange(k) % 2 == 0, 1.0, -1.0)
    qc = ff.quantize(sign.reshape(k, 1), "int8", scale=1 / 127)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r2 = ff.int_matmul(qa, qc)
    assert r2.exact[0, 0] == 0 and not r2.overflowed.any() and r2.may_overflow.all()


def test_int_matmul_errors():
    qa = ff.quantize(np.ones((2, 3)), "int8")
    with pytest.raises(ValueError, match="align"):
        ff.int_matmul(qa, qa)
    with pytest.raises(ValueError, match="integer"):
        ff.int_matmul(qa, ff.quantize(np.ones((3, 2)), "fp8_e4m3"))
    with pytest.raises(ValueError, match="axis 1"):
        ff.int_matmul(qa, ff.quantize(np.ones((3, 2)), "int8", granularity="channel", axis=0))
    with pytest.raises(TypeError):
        ff.int_matmul(np.ones((2, 3)), qa)


# ----------------------------------------------------------------------------- metrics and table
def test_quantization_error_metrics():
    x = np.array([0.001, 0.5, -1.0, 0.0])
    q = ff.quantize(x, "int8")
    xh = q.dequantize()
    e = ff.quantization_error(x, q)
    err = xh - x
    assert e["mse"] == pytest.approx(np.mean(err ** 2))
    assert e["sqnr_db"] == pytest.approx(10 * np.log10(np.mean(x ** 2) / np.mean(err ** 2)))
    assert e["max_abs_err"] == pytest.approx(np.max(np.abs(err)))
    assert e["max_rel_err"] == 1.0  # 0.001 -> 0
    assert e["frac_flushed"] == 0.25 and e["frac_clipped"] == 0.0
    arr = ff.quantization_error(x, xh)
    assert arr["mse"] == e["mse"] and arr["frac_clipped"] != arr["frac_clipped"]  # NaN
    assert ff.quantization_error(x, "int8")["mse"] == e["mse"]


def test_compare_quantization_table(capsys):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((64, 64))
    rows = ff.compare_quantization(x, ["int8", ("int8/ch", "int8", {"granularity": "channel"}),
                                       "int4", "mxfp8_e4m3", "mxfp4", "nvfp4", "fp8_e4m3"])
    out = capsys.readouterr().out
    assert "SQNR dB" in out and "nvfp4" in out and "int8/ch" in out
    by = {r["format"]: r for r in rows}
    assert by["int8"]["sqnr_db"] > by["int4"]["sqnr_db"] + 20  # about 6 dB per bit
    assert by["mxfp8_e4m3"]["sqnr_db"] > by["mxfp4"]["sqnr_db"]
    assert by["nvfp4"]["sqnr_db"] > by["mxfp4"]["sqnr_db"]  # finer blocks, finer scales
    assert by["mxfp4"]["bits_per_element"] == 4.25
    with pytest.raises(TypeError):
        ff.compare_quantization(x, [3])


def test_master_weights_demo(capsys):
    d = ff.master_weights_demo(steps=10)
    out = capsys.readouterr().out
    assert "fp16 only" in out
    assert set(d["low"]) == {1.0}  # 1 + 0.0001 rounds back to 1 in fp16, every time
    assert d["master"][-1] == pytest.approx(1.001, abs=1e-6)
    # fp16(master) steps up once the master passes the midpoint 1 + 2**-11
    assert d["from_master"][4] == 1.0 and d["from_master"][5] == 1.0009765625
    # bf16 has fewer bits: even the master copy's bf16 image does not move in 10 steps
    assert ff.master_weights_demo(fmt="bf16", show=False)["from_master"][-1] == 1.0


def test_quantized_tensor_api():
    q = ff.quantize(np.array([[0.5, -0.25]]), "int8")
    assert isinstance(q, QuantizedTensor)
    assert "int8" in repr(q) and q.shape == (1, 2)
    assert np.array_equal(np.asarray(q), q.dequantize())
    assert np.array_equal(ff.dequantize(q), q.dequantize())
    with pytest.raises(TypeError):
        ff.dequantize(np.ones(2))


def test_bad_options():
    x = np.ones(4)
    with pytest.raises(ValueError, match="symmetric"):
        ff.quantize(x, "int8", scheme="symetric")
    with pytest.raises(ValueError, match="granularity"):
        ff.quantize(x, "int8", granularity="row")
    with pytest.raises(ValueError, match="calibration"):
        ff.quantize(x, "int8", calibration="minmax")
    with pytest.raises(ValueError, match="unknown format"):
        ff.quantize(x, "int9")
    with pytest.raises(ValueError, match="NaN"):
        ff.quantize(np.array([1.0, np.nan]), "int8")
    with pytest.raises(ValueError, match="positive"):
        ff.quantize(x, "int8", scale=-1.0)
    with pytest.raises(TypeError, match="margin"):
        ff.quantize(x, "fp8_e4m3", margin=0.5)
    with pytest.raises(ValueError, match="percentile"):
        ff.quantize(x, "int8", calibration="percentile", percentile=0)
    with pytest.raises(ValueError, match="symmetric"):
        ff.quantize(x, "fp8_e4m3", scheme="asymmetric")
    with pytest.raises(ValueError, match="rounding mode"):
        ff.quantize(x, "int8", rounding="nearest_odd")


# ----------------------------------------------------------------------------- lab exercises
def test_course_exercises_of_the_quantisation_lab():
    from floatfmt import course
    b = course.mx_block()
    amax = Fraction(float(np.max(np.abs(b))))
    e = amax.numerator.bit_length() - amax.denominator.bit_length()
    e -= Fraction(2) ** e > amax  # exact floor(log2)
    assert np.floor(np.log2(float(amax))) == e + 1  # the trap: float log2 rounds up here
    code = e - 8 + 127
    assert course.check("mx-scale-code", code, quiet=True)
    assert course.check("mx-scale-code", hex(code), quiet=True)
    bad = course.check("mx-scale-code", code + 1, quiet=True)
    assert not bad and "frexp" in bad.message
    x = course.activation_sample()
    s = fp32(Fraction(float(np.max(np.abs(x)))) / 127)
    want = [rne(Fraction(float(v)) / Fraction(s)) for v in x[:8]]
    assert course.check("int8-codes", want, quiet=True)
    assert not course.check("int8-codes", np.trunc(x[:8] / s), quiet=True)
    assert not course.check("int8-codes", want[:7], quiet=True)


def test_given_scales_and_zero_points():
    w = np.arange(12.0).reshape(3, 4)
    q = ff.quantize(w, "uint8", scheme="asymmetric", granularity="channel",
                    scale=[0.1, 0.2, 0.3], zero_point=np.array([1, 2, 3]))
    want = [[min(255, rne(Fraction(float(w[i, j])) / Fraction([0.1, 0.2, 0.3][i])) + i + 1)
             for j in range(4)] for i in range(3)]
    assert q.codes.tolist() == want and q.zero_point.shape == (3, 1)
    assert np.allclose(q.dequantize(), w, atol=0.15)
    # symmetric unsigned: zero point 128; signed symmetric: -127..127 unless a zero point is given
    assert ff.quantize([-1.0, 1.0], "uint8", scale=0.01).codes.tolist() == [28, 228]
    assert ff.quantize([-2.0, 2.0], "int8", scale=0.01).codes.tolist() == [-127, 127]
    assert ff.quantize([-2.0, 2.0], "int8", scale=0.01, zero_point=0).codes.tolist() == [-128, 127]


def test_unknown_block_format_names_the_close_block_formats():
    with pytest.raises(ValueError) as info:
        ff.quantize([1.0, 2.0], "mxfp5")
    msg = str(info.value)
    assert "Close block formats" in msg and "'mxfp4'" in msg and "nvfp4" in msg
