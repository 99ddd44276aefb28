"""Assignments 12-17: each checker passes the answer of an independent
reference (published tensor-core parameters, Fraction arithmetic, numpy /
ml_dtypes, tests/test_mx.py's reference MX block) for many students, and fails
the mistakes its hints name."""

from fractions import Fraction

import ml_dtypes
import numpy as np

from floatfmt import course
from floatfmt.course import check, variant

from test_mx import ref_mx_block  # the independent OCP MX reference of tests/test_mx.py

STUDENTS = [None] + [f"s{i}" for i in range(10)]
# F (fraction bits kept after alignment) as published (Fasi et al. 2021; Khattak & Mikaitis 2025), L block size
PUBLISHED = {("v100", "fp16"): (23, 4), ("a100", "bf16"): (24, 8), ("a100", "tf32"): (24, 4),
             ("h100", "bf16"): (25, 16), ("h100", "fp16"): (25, 16)}


def _p(ex, s):
    return course.exercise(ex).params_for(s)


def test_tensorcore_probe():
    for s in STUDENTS:
        p = _p("tensorcore-probe", s)
        F, L = PUBLISHED[(p["model"], p["fmt"])]
        keep = F if p["same_block"] else min(F, 23)   # between blocks: an fp32 running sum
        right = [2.0 ** -d if d <= keep else 0.0 for d in p["ds"]]
        assert check("tensorcore-probe", right, student=s, quiet=True), (s, p)
        exact = [2.0 ** -d for d in p["ds"]]
        if exact != right:
            r = check("tensorcore-probe", exact, student=s, quiet=True)
            assert not r and "exact result" in r.message


def _bf16_or_fp16_neighbours(x, mbits):
    e = int(np.floor(np.log2(x)))
    u = Fraction(2) ** (e - mbits)
    lo = (Fraction(x) // u) * u
    return lo, (lo if lo == Fraction(x) else lo + u)


def test_sr_sum_moments():
    for s in STUDENTS:
        p = _p("sr-sum-moments", s)
        x = course.sr_values(p.get("seed", 1))
        m = {"bf16": 7, "fp16": 10}[p["fmt"]]
        e, var = Fraction(0), Fraction(0)
        for v in x:
            lo, hi = _bf16_or_fp16_neighbours(float(v), m)
            e += Fraction(float(v))
            var += (Fraction(float(v)) - lo) * (hi - Fraction(float(v)))
        assert check("sr-sum-moments", (float(e), float(var)), student=s, quiet=True)
        r = check("sr-sum-moments", (float(e), 0.0), student=s, quiet=True)
        assert not r and "not 0" in r.message
        dt = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}[p["fmt"]]
        nearest = float(sum(Fraction(float(dt(v))) for v in x))
        r = check("sr-sum-moments", (nearest, float(var)), student=s, quiet=True)
        assert not r and "nearest" in r.message


def test_int8_zero_point():
    for s in STUDENTS:
        p = _p("int8-zero-point", s)
        x = course.zp_data(p.get("seed", 1))
        scale = np.float32((x.max() - x.min()) / 255)
        z = int(np.clip(np.rint(-x.min() / np.float64(scale)), 0, 255))
        code = int(np.clip(np.rint(p.get("probe", 0.0) / np.float64(scale)) + z, 0, 255))
        assert check("int8-zero-point", (z, code), student=s, quiet=True), (s, z, code)
        r = check("int8-zero-point", (-z, code), student=s, quiet=True)
        assert not r and "sign" in r.message


def test_mx_outlier():
    for s in STUDENTS:
        p = _p("mx-outlier", s)
        x = course.mx_outlier_block(p.get("seed", 1), p.get("outlier", 40.0))
        code, vals = ref_mx_block(x, "mxfp4_e2m1")
        flushed = int(np.sum((np.asarray(vals) == 0) & (x != 0)))
        assert flushed > 0
        assert check("mx-outlier", (code, flushed), student=s, quiet=True), s
        assert not check("mx-outlier", (code, 0), student=s, quiet=True)


def test_fp8_delayed_scaling():
    for s in STUDENTS:
        p = _p("fp8-delayed-scaling", s)
        amax = course.amax_history(p.get("seed", 1))
        n, algo = p.get("history_len", 4), p.get("algo", "max")
        window, scale, clipped = [], 1.0, 0
        for a in amax:
            clipped += a > 448 * scale
            last_scale = scale
            window = (window + [a])[-n:]
            ref = max(window) if algo == "max" else window[-1]
            scale = float(np.float32(ref / 448))
        assert clipped >= 1
        assert check("fp8-delayed-scaling", (last_scale, clipped), student=s, quiet=True), (s, p)
        assert not check("fp8-delayed-scaling", (last_scale, 0), student=s, quiet=True)


def _ref_layer(x, W, b, fmt):
    dt = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}[fmt]
    xr, Wr, br = (np.asarray(v).astype(dt).astype(np.float64) for v in (x, W, b))
    out = np.zeros((x.shape[0], W.shape[1]))
    for i in range(x.shape[0]):
        for j in range(W.shape[1]):
            acc = np.float32(0)
            for k in range(x.shape[1]):
                acc = np.float32(acc + np.float32(xr[i, k] * Wr[k, j]))  # product exact in fp32
            out[i, j] = float(dt(acc))
    h = (out + br).astype(dt).astype(np.float64)   # bf16 + bf16 is exact in float64: one rounding
    return np.maximum(h, 0.0)


def test_emulate_layer():
    for s in STUDENTS[:5]:
        p = _p("emulate-layer", s)
        x, W, b = course.layer_data(p.get("seed", 1))
        ref = _ref_layer(x, W, b, p.get("fmt", "bf16"))
        assert check("emulate-layer", ref, student=s, quiet=True), s
        r = check("emulate-layer", np.maximum(x @ W + b, 0), student=s, quiet=True)
        assert not r and "float64" in r.message


def test_mx_scale_code_versions():
    """Each student's block has its own power of two just above amax, so the code differs even
    between students with the same element format (reference: tests/test_mx.py)."""
    codes = set()
    for s in STUDENTS[1:]:
        p = variant("mx-scale-code", s)
        x = course.mx_block(p["seed"], p["top"])
        code, _ = ref_mx_block(x, p["fmt"])
        assert check("mx-scale-code", int(code), student=s, quiet=True), (s, p)
        r = check("mx-scale-code", int(code) + 1, student=s, quiet=True)
        assert not r and "One too high" in r.message
        codes.add(int(code))
    assert len(codes) >= 5
