"""course.check: right answers pass, wrong ones fail with a hint that does not
give the answer away.  The right answers here come from numpy / ml_dtypes /
plain integer arithmetic, not from floatfmt."""

import math

import ml_dtypes
import numpy as np
import pytest

from floatfmt import course
from floatfmt.course import check


def _ok(ex, answer, **kw):
    r = check(ex, answer, quiet=True, **kw)
    assert r.passed, r.message
    assert r.message.startswith(f"PASS [{ex}]")
    return r


def _bad(ex, answer, *, hides=(), **kw):
    r = check(ex, answer, quiet=True, **kw)
    assert not r.passed and not r, r.message
    assert r.message.startswith(f"FAIL [{ex}]")
    for h in hides:
        assert h not in r.message, f"the hint gives away {h!r}: {r.message}"
    return r


def test_fp16_one_plus_x():
    codes = np.arange(1, 0x7C00, dtype=np.uint16)
    x = codes.view(np.float16)
    moved = (np.float16(1.0) + x) != np.float16(1.0)
    right = float(x[np.argmax(moved)])
    code = int(codes[np.argmax(moved)])
    assert right == 2.0 ** -11 + 2.0 ** -21 and code == 0x1001
    for form in (right, hex(code), "0x1.004p-11", f"{right!r}", np.float16(right)):
        _ok("fp16-one-plus-x", form)
    # a bare int is the value it is, never silently a code, and the message says which reading was used
    r = _bad("fp16-one-plus-x", code)
    assert f"read {code} as the value" in r.message
    one = _bad("fp16-one-plus-x", 1).message
    assert "5.96e-08" not in one and "read 1 as the value 1.0" in one
    hides = (repr(right), hex(code), str(code), "2^-21")
    assert "tie" in _bad("fp16-one-plus-x", 2.0 ** -11, hides=hides).message
    assert "eps" in _bad("fp16-one-plus-x", 2.0 ** -10, hides=hides).message
    assert "still 1" in _bad("fp16-one-plus-x", 2.0 ** -12, hides=hides).message
    _bad("fp16-one-plus-x", 1e-4, hides=hides)
    _bad("fp16-one-plus-x", -1.0, hides=hides)


def test_bf16_consecutive_integers():
    n = np.arange(0, 5000, dtype=np.float32)
    back = n.astype(ml_dtypes.bfloat16).astype(np.float32)
    right = int(n[np.argmax(back != n)]) - 1
    assert right == 256
    _ok("bf16-consecutive-integers", right)
    _ok("bf16-consecutive-integers", float(right))
    for wrong in (255, 128, 257, 4096, 3.38e38):
        _bad("bf16-consecutive-integers", wrong, hides=("256",))
    # the same exercise for another format, recomputed (numpy float16: 2049 is the first gap)
    _ok("bf16-consecutive-integers", 2048, fmt="fp16")


def test_fp16_overflow_threshold():
    n = np.arange(65504, 65600, dtype=np.float32)
    with np.errstate(over="ignore"):
        right = int(n[np.argmax(np.isinf(n.astype(np.float16)))])
    assert right == 65520
    _ok("fp16-overflow-threshold", right)
    for wrong in (65504, 65505, 65519, 65536):
        _bad("fp16-overflow-threshold", wrong, hides=("65520",))


def test_fp16_loss_scale():
    g = course.gradient_sample()
    ok = []
    for k in range(0, 30):
        with np.errstate(over="ignore"):
            r = (g * 2.0 ** k).astype(np.float16)  # numpy's own float64 -> float16
        if np.mean(r == 0) <= 0.001 and not np.isinf(r).any():
            ok.append(k)
    assert ok == list(range(ok[0], ok[-1] + 1)) and len(ok) > 3
    for k in (ok[0], ok[-1], (ok[0] + ok[-1]) // 2):
        _ok("fp16-loss-scale", 2.0 ** k)
    _ok("fp16-loss-scale", f"2**{ok[0]}")
    assert "too small" in _bad("fp16-loss-scale", 1.0).message
    assert "too small" in _bad("fp16-loss-scale", 2.0 ** (ok[0] - 1)).message
    assert "too large" in _bad("fp16-loss-scale", 2.0 ** (ok[-1] + 1)).message
    _bad("fp16-loss-scale", 0)


def _rne_reference(b):
    b = b.astype(np.uint64)
    nan = (((b >> 23) & 0xFF) == 0xFF) & ((b & 0x7FFFFF) != 0)
    r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return np.where(nan, (b >> 16) | 0x40, r).astype(np.uint16)


def test_bf16_rne_bits():
    bits = np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x00000001], dtype=np.uint32)
    ref = bits.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)  # ml_dtypes: RNE from fp32
    assert (_rne_reference(bits) == ref).all()
    _ok("bf16-rne-bits", _rne_reference)
    _ok("bf16-rne-bits", lambda b: int(_rne_reference(np.array([b], np.uint32))[0]))  # scalar version
    trunc = _bad("bf16-rne-bits", lambda b: b >> 16).message
    # truncation is first of all wrong on ordinary inputs; NaN is listed too, not reported first
    assert trunc.index("ordinary rounding") < trunc.index("NaN inputs")
    no_tie = lambda b: ((b.astype(np.uint64) + 0x8000) >> 16).astype(np.uint16)  # noqa: E731
    _bad("bf16-rne-bits", no_tie)
    nan_kept = lambda b: np.where(  # noqa: E731
        ((b >> 23) & 0xFF == 0xFF) & (b & 0x7FFFFF != 0), (b >> 16) | 0x40,
        (b.astype(np.uint64) + 0x8000) >> 16).astype(np.uint16)
    assert "ties" in _bad("bf16-rne-bits", nan_kept).message
    # "integer operations only": a conversion through float32 / ml_dtypes is refused even
    # though its codes are right
    by_ml_dtypes = lambda b: b.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)  # noqa: E731
    assert (by_ml_dtypes(bits) == ref).all()
    m = _bad("bf16-rne-bits", by_ml_dtypes).message
    assert "rule" in m and "ml_dtypes" in m and "float32" in m
    assert "function" in _bad("bf16-rne-bits", 0x3F80).message


def test_e4m3_code():
    xs = np.array([0.3, -5.0, 470.0], dtype=np.float32)
    codes = [int(c) for c in xs.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)]
    assert codes == [0x2A, 0xCA, 0x7F]
    _ok("e4m3-code", codes)
    _ok("e4m3-code", ["0 0101 010", "0b11001010", "0x7f"])
    _ok("e4m3-code", [hex(c) for c in codes])
    r = _bad("e4m3-code", [0x29, 0xCA, 0x7F], hides=("0x2a",))
    assert "0.28125" in r.message  # it decodes the student's code, not the answer
    _bad("e4m3-code", [0x2A, 0x4A, 0x7F], hides=("0xca",))
    _bad("e4m3-code", [0x2A, 0xCA, 0x7E], hides=("0x7f",))
    assert "code" in _bad("e4m3-code", [0.3125, 0xCA, 0x7F]).message
    assert "3 codes" in _bad("e4m3-code", [0x2A]).message
    ys = np.array([1.0, 100.0], np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    _ok("e4m3-code", [int(c) for c in ys], values_=(1.0, 100.0))


def test_master_weights():
    w16, w32 = np.float16(1.0), np.float32(1.0)
    for _ in range(1000):
        w16 = np.float16(w16 + np.float16(1e-4))
        w32 = np.float32(w32 + np.float32(1e-4))
    assert float(w16) == 1.0 and abs(float(w32) - 1.1) < 1e-4 and float(w32) != 1.1
    _ok("master-weights", (float(w16), float(w32)))
    _ok("master-weights", {"fp16": w16, "fp32": w32})
    _bad("master-weights", (1.0, 1.1), hides=(repr(float(w32)),))
    _bad("master-weights", (1.1, float(w32)))
    _bad("master-weights", 1.0)


def test_fp8_scale():
    x = course.activation_sample()
    amax = float(np.max(np.abs(x)))
    k = max(k for k in range(-20, 40) if amax * 2.0 ** k <= 448)
    _ok("fp8-scale", 2.0 ** k)
    _ok("fp8-scale", f"2^{k}")
    assert "448" in _bad("fp8-scale", 2.0 ** (k + 1)).message
    _bad("fp8-scale", 2.0 ** (k - 1), hides=(f"2^{k}",))
    assert "power of two" in _bad("fp8-scale", 100.0).message


def test_dynamic_loss_scale():
    g = course.grad_max_per_step()
    s, good, skipped = 2.0 ** 16, 0, 0
    for gm in g:
        with np.errstate(over="ignore"):
            over = np.isinf(np.float16(gm * s))
        if over:
            s, good, skipped = s / 2, 0, skipped + 1
        else:
            good += 1
            if good == 4:
                s, good = s * 2, 0
    assert skipped >= 1
    _ok("dynamic-loss-scale", (s, skipped))
    _bad("dynamic-loss-scale", (2.0 ** 16, 0))
    _bad("dynamic-loss-scale", (s * 2, skipped))


def test_no_answer_unknown_id_and_printing(capsys):
    r = check("fp16-one-plus-x", None)
    assert not r and "NO ANSWER" in capsys.readouterr().out
    check("fp16-overflow-threshold", 65520)
    assert capsys.readouterr().out.startswith("PASS")
    with pytest.raises(ValueError, match="fp16-overflow-threshold"):
        check("fp16-overflow-treshold", 1)
    with pytest.raises(TypeError):
        check(3, 1)
    assert set(course.exercises()) >= {"fp16-one-plus-x", "bf16-consecutive-integers", "fp16-loss-scale",
                                       "bf16-rne-bits", "e4m3-code", "master-weights"}
    assert not math.isnan(course.gradient_sample(10, seed=1)[0])
