"""Quotients x / scale by a power of two that fall below float64's normal range.

With a power-of-two scale the float64 quotient ``x / scale`` is exact only while it is a
normal float64 number.  Below 2**-1022 the division itself rounds (to a subnormal or to
zero), and rounding that result again to the element format is a double rounding: an
element format's directed modes and round-to-odd then see zero where the exact quotient
is a tiny nonzero number.  This checks the whole class against exact arithmetic: every
element format kind (integers, fp8, fp4, OCP MX with integer and float elements), every
deterministic mode, both signs, quotients spread from just below 2**-1022 to far below
2**-1074, with power-of-two scales given (per tensor and per channel), chosen by
``pow2_scale=True``, and set by MX blocks; on the numpy path and on the device code
(``force_namespace``, CPU tensors).  The reference rounds the exact quotient
``Fraction(x) / Fraction(scale)`` once with the MPFR oracle (tests/oracles/mpfr.py).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from conftest import DET_MODES
from tests.oracles import mpfr

# Tiny magnitudes: significands with 1 to 53 bits, exponents putting x / 2**100 from
# 2**-1023 down to 2**-1180 (float64 subnormal, and past its smallest subnormal).
_SIGS = [1.0, 1.5, 1.75, 1.0 + 2.0 ** -52, 2.0 - 2.0 ** -52, 1.2345678901234567]
_TINY = np.array([s * 2.0 ** e for s in _SIGS for e in (-923, -940, -960, -973, -974, -975, -990,
                                                         -1030, -1074)])
_X = np.concatenate([_TINY, -_TINY, [1.0, -0.5, 0.0, -0.0]])
_SCALE = 2.0 ** 100  # a power of two that float32 holds


def _oracle(x, scale, elem, mode, shift=0):
    """x / scale rounded once to elem (times 2**shift, then back), by Fractions and MPFR
    (a zero keeps its sign: the oracle gets it as a float)."""
    if x == 0:
        return mpfr.round_one(float(x), elem, mode, "saturate")
    return mpfr.round_one(Fraction(float(x)) / Fraction(float(scale)) * 2 ** shift, elem, mode,
                          "saturate") / 2.0 ** shift


def _mismatches(q, x, elem, mode, scale_of, shift=0) -> int:
    el = np.asarray(q.elements, np.float64).ravel()
    bad = 0
    for i, xi in enumerate(np.asarray(x, np.float64).ravel()):
        want = _oracle(xi, scale_of(i), elem, mode, shift)
        got = float(el[i])
        if not (got == want and np.signbit(got) == np.signbit(want)):
            bad += 1
    return bad


def _tensor_cases():
    """(fmt, options, 2-D input, scale of flat element i) with power-of-two scales."""
    x = np.stack([_X, _X[::-1]])
    out = []
    for f in ("int8", "fp8_e4m3", "fp4_e2m1"):
        extra = {"zero_point": 0} if f == "int8" else {}
        out.append((f, dict(scale=_SCALE, **extra), x, lambda i: _SCALE))
        per = [_SCALE, 2.0 ** 90]
        out.append((f, dict(scale=per, granularity="channel", axis=0,
                            **({"zero_point": [0, 0]} if f == "int8" else {})),
                    x, lambda i, per=per: per[i // x.shape[1]]))
    # pow2_scale=True picks 2**k >= amax / qmax (amax 2**120: k = 114 for int8's 127)
    big = np.concatenate([_X, [2.0 ** 120]])
    out.append(("int8", {"pow2_scale": True}, big, None))
    out.append(("fp8_e4m3", {"scale": "amax", "pow2_scale": True}, big, None))
    return out


def _mx_input():
    """Rows of 32: the block max 2**120 (E = 120 - emax_elem) and tiny elements."""
    t = np.resize(_X, (len(_X) + 30) // 31 * 31).reshape(-1, 31)
    return np.concatenate([np.full((t.shape[0], 1), 2.0 ** 120), t], axis=1)


MX = ("mxint8", "mxfp8_e4m3", "mxfp4_e2m1")


def _count_tensor(quantize, fmt, opts, x, scale_of, mode) -> int:
    q = quantize(x, fmt, **dict(opts, rounding=mode))
    if scale_of is None:
        s = float(np.asarray(q.scale))
        assert np.frexp(s)[0] == 0.5  # the rule did pick a power of two
        scale_of = lambda i: s  # noqa: E731
    return _mismatches(q, x, q.element_format if fmt != "int8" else ff.get_format("int8"), mode,
                       scale_of)


def _count_mx(quantize, name, x, mode) -> int:
    q = quantize(x, name, rounding=mode)
    bf = ff.get_block_format(name)
    sc = np.asarray(q.scale, np.float64).ravel()  # one per row (blocks along the last axis)
    return _mismatches(q, x, bf.element_format, mode, lambda i: sc[i // x.shape[1]],
                       bf.element_shift)


def _numpy_quantize(x, fmt, **o):
    return ff.quantize(x, fmt, **o)


@pytest.mark.parametrize("mode", DET_MODES)
def test_numpy_path_rounds_subnormal_quotients_once(mode):
    n = sum(_count_tensor(_numpy_quantize, f, o, x, s, mode) for f, o, x, s in _tensor_cases())
    n += sum(_count_mx(_numpy_quantize, name, _mx_input(), mode) for name in MX)
    assert n == 0, f"{n} mismatches against the exact quotient rounded once ({mode})"


@pytest.mark.parametrize("mode", DET_MODES)
def test_device_path_rounds_subnormal_quotients_once(mode):
    torch = pytest.importorskip("torch")
    from floatfmt.backend.dispatch import force_namespace

    def dev(x, fmt, **o):
        with force_namespace():
            q = ff.quantize(torch.from_numpy(np.ascontiguousarray(x)), fmt, **o)
        return _to_numpy(q, torch)

    n = sum(_count_tensor(dev, f, o, x, s, mode) for f, o, x, s in _tensor_cases())
    n += sum(_count_mx(dev, name, _mx_input(), mode) for name in MX)
    assert n == 0, f"{n} mismatches against the exact quotient rounded once ({mode})"


class _Q:
    def __init__(self, elements, scale, element_format):
        self.elements, self.scale, self.element_format = elements, scale, element_format


def _to_numpy(q, torch):
    def host(a):
        return a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    return _Q(host(q.elements), host(q.scale), q.element_format)


def test_the_cases_reach_below_float64_normal_range():
    """The inputs do put x / scale where float64 rounds or underflows (the class under test)."""
    q = _TINY / _SCALE
    assert all(Fraction(float(v)) / Fraction(_SCALE) < Fraction(2) ** -1022 for v in _TINY)
    assert (q == 0).any() and (q > 0).any() and (q == 2.0 ** -1022).any()  # underflow; rounded up
    assert any(Fraction(float(v)) / Fraction(_SCALE) != Fraction(float(v / _SCALE)) for v in _TINY)


# ---------------------------------------------------------------- dequantize: element * scale
_DEQ_FORMATS = ("int8", "uint8", "int4", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp4_e2m1", "bf16",
                "fp16")
# fp32 scales at the ends of fp32's range, with one and with 24 significant bits
_DEQ_SCALES = (2.0 ** -149, 3 * 2.0 ** -149, float(np.float32(2.0 ** -126 * (2 - 2.0 ** -23))),
               float(np.finfo(np.float32).max) / 2 ** 20, float(np.float32(0.1)))


@pytest.mark.parametrize("fmt", _DEQ_FORMATS)
@pytest.mark.parametrize("device", [False, True])
def test_dequantize_is_the_exact_product(fmt, device):
    """``dequantize`` promises (elements - zero_point) * scale exactly in float64: for every
    format narrower than fp64 and fp32 scales at both ends of fp32's range, no product
    underflows, overflows or loses a bit (checked against Fraction arithmetic)."""
    rng = np.random.default_rng(5)
    e = ff.get_format(fmt)
    top = float(e.max) if e.kind == "float" else 2.0 ** (e.bits - 1)
    lo = float(e.smallest_subnormal) if e.kind == "float" else 1.0
    mags = np.exp2(rng.uniform(np.log2(lo), np.log2(top), 64))
    bad = 0
    for s in _DEQ_SCALES:
        x = np.concatenate([mags, -mags, [lo, -lo, top, 0.0]]) * s
        if device:
            torch = pytest.importorskip("torch")
            from floatfmt.backend.dispatch import force_namespace
            with force_namespace():
                q = ff.quantize(torch.from_numpy(x), fmt, scale=s)
                d = q.dequantize().numpy()
            el, zp = q.elements.numpy(), np.asarray(q.zero_point)
        else:
            q = ff.quantize(x, fmt, scale=s)
            d, el, zp = q.dequantize(), np.asarray(q.elements), np.asarray(q.zero_point)
        assert np.any(el != 0)
        for di, ei in zip(d.ravel(), el.ravel()):
            want = (Fraction(float(ei)) - Fraction(int(zp))) * Fraction(s)
            bad += Fraction(float(di)) != want
    assert bad == 0, f"{bad} inexact dequantised values"


@pytest.mark.parametrize("fmt,opts", [("fp8_e4m3", {"scale": _SCALE}),
                                      ("int8", {"scale": _SCALE, "zero_point": 0}),
                                      ("mxfp8_e4m3", {}), ("mxint8", {})])
@pytest.mark.parametrize("device", [False, True])
def test_stochastic_rounding_of_subnormal_quotients_picks_a_neighbour(fmt, opts, device):
    """Stochastic rounding of those quotients gives one of the two neighbours of the exact
    quotient (the results of modes down and up, by the oracle): never a third value.  With
    53 random bits a tiny positive fraction rounds away with probability 2**-53, so the
    draws here give the value toward zero; the device path no longer refuses them."""
    x = _mx_input() if fmt.startswith("mx") else np.stack([_X, _X[::-1]])

    def run(mode, rng=None):
        o = dict(opts, rounding=mode, **({"rng": rng} if rng is not None else {}))
        if not device:
            return np.asarray(ff.quantize(x, fmt, **o).elements, np.float64)
        torch = pytest.importorskip("torch")
        from floatfmt.backend.dispatch import force_namespace
        with force_namespace():
            return ff.quantize(torch.from_numpy(x), fmt, **o).elements.numpy()

    got, lo, hi, tz = run("stochastic", 3), run("down"), run("up"), run("toward_zero")
    assert np.all((got == lo) | (got == hi))
    tiny = np.abs(x) < 2.0 ** -900
    assert np.array_equal(got[tiny], tz[tiny]) and np.any(lo[tiny] != hi[tiny])


@pytest.mark.parametrize("mode", DET_MODES)
@pytest.mark.parametrize("device", [False, True])
def test_a_float64_wide_element_format_rounds_the_exact_quotient_once(mode, device):
    """Elements in fp64 itself, on both paths (scales that are not powers of two:
    tests/test_torch_wide.py): here the quotient's own subnormal is the answer's grid,
    so the division's rounding and the element rounding coincide in a way that only
    exact arithmetic settles."""
    if device:
        torch = pytest.importorskip("torch")
        from floatfmt.backend.dispatch import force_namespace
        with force_namespace():
            q = _to_numpy(ff.quantize(torch.from_numpy(_X), "fp64", scale=_SCALE,
                                      rounding=mode), torch)
    else:
        q = ff.quantize(_X, "fp64", scale=_SCALE, rounding=mode)
    assert _mismatches(q, _X, ff.get_format("fp64"), mode, lambda i: _SCALE) == 0
