"""Per-student variants, refused parameters, and the mistakes each checker's
hints name.  Right answers come from numpy / ml_dtypes / Fraction arithmetic,
not from floatfmt."""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from floatfmt import course
from floatfmt.course import Exercise, Wrong, check, register, variant

STUDENTS = [f"s{i:03d}" for i in range(12)] + [7, "alice@example.org"]
DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32,
          "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}
TF32_MBITS = 10


def _mbits(fmt):
    return TF32_MBITS if fmt == "tf32" else int(ml_dtypes.finfo(DTYPES[fmt]).nmant)


def test_variants_are_stable_and_differ_between_students():
    for ex in course.exercises():
        vs = [variant(ex, s) for s in STUDENTS]
        assert vs == [variant(ex, s) for s in STUDENTS]  # deterministic
        if course.exercise(ex).variant is not None:
            assert len({repr(v) for v in vs}) > 1, ex
    with pytest.raises(TypeError):
        variant("fp16-one-plus-x", 1.5)


def test_one_plus_x_every_student_and_fp32():
    for s in STUDENTS + [None]:
        fmt = variant("fp16-one-plus-x", s)["fmt"] if s is not None else "fp16"
        m = _mbits(fmt)
        right = 2.0 ** -(m + 1) + 2.0 ** -(2 * m + 1)
        if fmt in DTYPES:  # numpy / ml_dtypes: 1 + x moves, 1 + eps/2 does not
            dt = DTYPES[fmt]
            assert float(dt(1.0) + dt(right)) != 1.0 and float(dt(1.0) + dt(2.0 ** -(m + 1))) == 1.0
        assert check("fp16-one-plus-x", right, student=s, quiet=True), (s, fmt)
        assert not check("fp16-one-plus-x", 2.0 ** -(m + 1), student=s, quiet=True)
    # fp32 used to raise (it listed 4 billion values); the answer is 2^-24 + 2^-47
    right = 2.0 ** -24 + 2.0 ** -47
    assert np.float32(1) + np.float32(right) != np.float32(1)
    assert np.float32(1) + np.float32(2.0 ** -24) == np.float32(1)
    assert check("fp16-one-plus-x", right, fmt="fp32", quiet=True)


def test_overflow_threshold_every_format_with_inf_and_refuses_the_rest():
    for fmt in ("fp16", "bf16", "fp32", "fp8_e5m2", "tf32"):
        m = _mbits(fmt)
        mx = Fraction(float(ml_dtypes.finfo(DTYPES.get(fmt, np.float32)).max)) if fmt != "tf32" \
            else (2 - Fraction(2) ** -TF32_MBITS) * Fraction(2) ** 127  # fp32's exponent, 10 fraction bits
        emax = math.floor(math.log2(mx))
        right = mx + Fraction(2) ** (emax - m) / 2  # halfway to 2^(emax+1): the tie goes up
        assert right.denominator == 1
        assert check("fp16-overflow-threshold", int(right), fmt=fmt, quiet=True), fmt
        assert not check("fp16-overflow-threshold", int(right) - 1, fmt=fmt, quiet=True)
        assert not check("fp16-overflow-threshold", int(mx), fmt=fmt, quiet=True)
    for fmt in ("fp8_e4m3", "fp4_e2m1", "int8"):  # no Inf: refused, not a nonsense PASS/FAIL
        with pytest.raises(ValueError, match="valid"):
            check("fp16-overflow-threshold", 448, fmt=fmt, quiet=True)
    for s in STUDENTS:
        assert variant("fp16-overflow-threshold", s)["fmt"] in ("fp16", "bf16", "tf32", "fp32", "fp8_e5m2")


def test_consecutive_integers_every_variant():
    for s in STUDENTS:
        fmt = variant("bf16-consecutive-integers", s)["fmt"]
        n = np.arange(0, 5000, dtype=np.float32)
        if fmt == "tf32":
            right = 2 ** 11
        else:
            back = n.astype(DTYPES[fmt]).astype(np.float32)
            right = int(n[np.argmax(back != n)]) - 1
        assert check("bf16-consecutive-integers", right, student=s, quiet=True), (s, fmt)
        assert not check("bf16-consecutive-integers", right + 1, student=s, quiet=True)


def _dls_ref(g, s, interval=4, reset_overflow=True, growth="reset"):
    good = skipped = 0
    for gm in g:
        with np.errstate(over="ignore"):
            over = np.isinf(np.float16(gm * s))
        if over:
            s, skipped = s / 2, skipped + 1
            if reset_overflow:
                good = 0
        else:
            good += 1
            if good == interval or (growth == "every" and good > interval):
                s *= 2
                if growth == "reset":
                    good = 0
    return s, skipped


def test_dynamic_loss_scale_catches_the_named_mistakes():
    for s in [None] + STUDENTS:
        p = variant("dynamic-loss-scale", s) if s is not None else {}
        g = course.grad_max_per_step(**{k: v for k, v in p.items() if k in ("seed", "spikes")})
        right = _dls_ref(g, 2.0 ** 16)
        assert check("dynamic-loss-scale", right, student=s, quiet=True)
        for kw, word in [(dict(reset_overflow=False), "after an overflow"),
                         (dict(growth="once"), "after a doubling"), (dict(growth="every"), "after a doubling")]:
            wrong = _dls_ref(g, 2.0 ** 16, **kw)
            assert wrong != right, (s, kw)  # the data makes every named mistake visible
            r = check("dynamic-loss-scale", wrong, student=s, quiet=True)
            assert not r and word in r.message, (s, kw, r.message)
        r = check("dynamic-loss-scale", (right[0], right[1] + 0.6), student=s, quiet=True)
        assert not r and "whole number" in r.message  # no int() truncation of 2.6 to 2


def test_e4m3_nan_code_hint_is_about_the_sign():
    assert int(np.array([470.0], np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)[0]) == 0x7F
    r = check("e4m3-code", [0x2A, 0xCA, 0xFF], quiet=True)
    assert not r and "finite" not in r.message and "sign" in r.message


def test_e4m3_variants_checked_against_ml_dtypes():
    for s in STUDENTS:
        xs = variant("e4m3-code", s)["values_"]
        codes = [int(c) for c in np.array(xs, np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)]
        assert np.isnan(float(np.float32(xs[2]).astype(ml_dtypes.float8_e4m3fn)))  # the overflow case
        assert check("e4m3-code", codes, student=s, quiet=True), (s, xs)


def test_public_exercise_definition_with_variants_and_points():
    def checker(answer, n=3):
        if answer != 2 ** n:
            raise Wrong(f"count the codes of {n} bits")
        return f"{2 ** n} codes"

    ex = register(Exercise("test-codes", checker, "codes of n bits", points=3, defaults={"n": 3},
                           variant=lambda rng: {"n": int(rng.integers(2, 9))}, allowed={"n": range(1, 17)},
                           hints=("2 choices per bit",)), replace=True)
    assert "test-codes" in course.exercises() and ex.points == 3
    r = check("test-codes", 8, quiet=True)
    assert r and r.points == 3 and r.message == "PASS [test-codes] 8 codes"
    n = variant("test-codes", "bob")["n"]
    assert check("test-codes", 2 ** n, student="bob", quiet=True).points == 3
    r = check("test-codes", 2 ** n + 1, student="bob", quiet=True)
    assert not r and r.points == 0 and "count the codes" in r.message
    with pytest.raises(ValueError, match="valid"):
        check("test-codes", 1, n=40, quiet=True)
    with pytest.raises(ValueError, match="already registered"):
        register(Exercise("test-codes", checker))


def test_no_student_gets_the_lessons_version():
    """The lessons work the default versions out in the open, so no student's version is one
    of them: another format, or data whose answers differ (numpy references)."""
    for s in STUDENTS:
        assert variant("fp16-one-plus-x", s)["fmt"] != "fp16"
        assert variant("bf16-consecutive-integers", s)["fmt"] != "bf16"
        assert variant("fp16-overflow-threshold", s)["fmt"] != "fp16"
        p = variant("fp8-scale", s)
        x0, x = course.activation_sample(), course.activation_sample(seed=p["seed"]) * p["gain"]
        k0 = np.frexp(448 / np.abs(x0).max())[1] - 1  # floor(log2(448 / amax)) from the exponent bits
        k = np.frexp(448 / np.abs(x).max())[1] - 1
        assert k != k0 and check("fp8-scale", 2.0 ** k, student=s, quiet=True)
        assert not check("fp8-scale", 2.0 ** k0, student=s, quiet=True)


def _fp16_band(g):
    with np.errstate(over="ignore"):
        return {k for k in range(-10, 70) if np.mean((g * 2.0 ** k).astype(np.float16) == 0) <= 0.001
                and not np.isinf((g * 2.0 ** k).astype(np.float16)).any()}


def test_loss_scale_versions_share_no_answer_with_the_lesson():
    lesson = _fp16_band(course.gradient_sample())
    assert lesson
    for s in STUDENTS[:4]:
        p = variant("fp16-loss-scale", s)
        band = _fp16_band(course.gradient_sample(seed=p["seed"], center=p["center"]))
        assert band and not band & lesson
        k = max(band)
        assert check("fp16-loss-scale", 2.0 ** k, student=s, quiet=True)
        assert not check("fp16-loss-scale", 2.0 ** max(lesson), student=s, quiet=True)
