"""sum / dot / matmul: every order against a step-by-step reference built on MPFR
(exact rationals rounded by tests/oracles/mpfr.py), the classic stalled-sum demo,
vectorised axes, epilogue and errors."""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from conftest import all_same as _same, mpfr as M

FMT = ff.get_format


# ----------------------------------------------------------------------------- reference
class Ref:
    """Step-by-step accumulation in Python: each step rounds an exact rational once (MPFR)."""

    def __init__(self, acc_fmt, mode="nearest_even"):
        self.f = FMT(acc_fmt)
        self.mode = mode

    def r(self, q):
        """Round an exact value (Fraction / float) once."""
        if isinstance(q, Fraction) and q == 0:
            return -0.0 if self.mode == "down" else 0.0
        return M.round_one(q, self.f, self.mode)

    def add(self, x, y):
        """round(x + y) of two floats (exact rational sum)."""
        if not (math.isfinite(x) and math.isfinite(y)):
            return self.r(x + y)
        q = Fraction(x) + Fraction(y)
        if q == 0:
            if x == 0 and y == 0 and math.copysign(1, x) == math.copysign(1, y):
                return x
            return -0.0 if self.mode == "down" else 0.0
        return self.r(q)

    def seq(self, terms):
        acc = None
        for t in terms:
            acc = self.r(Fraction(t)) if acc is None else self.add(acc, t)
        return acc

    def pairwise(self, terms):
        level = list(terms)
        if len(level) == 1:
            return self.r(Fraction(level[0]))
        while len(level) > 1:
            nxt = [self.add(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return level[0]

    def kahan(self, terms):
        s = c = 0.0
        for t in terms:
            y = self.add(t, -c)
            t2 = self.add(s, y)
            c = self.add(self.add(t2, -s), -y)
            s = t2
        return s

    def blocked(self, terms, block):
        parts = [self.seq(terms[i:i + block]) for i in range(0, len(terms), block)]
        return self.seq(parts)

    def exact(self, terms):
        q = sum((Fraction(t) for t in terms), Fraction(0))
        return self.r(q)


def _f(fr):
    v = float(fr)
    assert Fraction(v) == fr
    return v


def _terms(fmt, n, rng, spread=12):
    v = np.ldexp(rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n), rng.integers(-spread, spread, n))
    return ff.cast(v, fmt, overflow="saturate")


# ----------------------------------------------------------------------------- the demo
def test_stalled_fp16_sum_of_ten_thousand_ten_thousandths():
    x = [0.0001] * 10_000
    got = ff.sum(x, "fp16")
    # independently: the fp16 term, then 10,000 exact additions each rounded once by MPFR
    f = FMT("fp16")
    term = M.round_one(Fraction("0.0001"), f)
    acc = term
    for _ in range(9_999):
        acc = M.round_one(Fraction(acc) + Fraction(term), f)
    assert got == acc == 0.25  # stalls where half an ulp (2**-13) exceeds the term
    assert got < 0.3  # "far below 1"
    exact = 10_000 * Fraction(term)
    assert abs(ff.sum(x, "fp16", acc_fmt="fp32") - exact) < 1e-4
    assert abs(ff.sum(x, "fp16", order="kahan") - 1.0) <= 2.0 ** -10
    assert ff.sum(x, "fp16", order="exact") == M.round_one(exact, f)
    assert abs(ff.sum(x, "fp16", order="pairwise") - 1.0) <= 2.0 ** -9
    # stochastic rounding in the fp16 accumulator does not stall either
    assert abs(ff.sum(x, "fp16", rounding="stochastic", rng=0) - 1.0) < 0.05


# ----------------------------------------------------------------------------- orders vs reference
CASES = [("fp16", "fp16", "nearest_even"), ("bf16", "bf16", "toward_zero"),
         ("fp16", "fp32", "nearest_even"), ("fp8_e4m3", "fp16", "up"), ("bf16", "fp16", "down"),
         ("fp32", "bf16", "nearest_away"), ("fp8_e5m2", "fp8_e5m2", "odd"), ("fp64", "fp32", "down")]


@pytest.mark.parametrize("fmt,acc,mode", CASES)
@pytest.mark.parametrize("order", ["sequential", "pairwise", "kahan", "blocked", "exact"])
def test_sum_orders_match_reference(fmt, acc, mode, order):
    rng = np.random.default_rng(zlib.crc32(f"{fmt} {acc} {mode} {order}".encode()))
    ref = Ref(acc, mode)
    for n in (1, 2, 7, 64, 101):
        x = _terms(fmt, n, rng)
        got = ff.sum(x, fmt, acc_fmt=acc, order=order, rounding=mode, block=8)
        terms = [float(v) for v in x]
        if order == "blocked":
            want = ref.blocked(terms, 8)
        else:
            want = getattr(ref, {"sequential": "seq"}.get(order, order))(terms)
        assert _same(got, want), (n, got, want)


def test_sum_axis_is_vectorised():
    rng = np.random.default_rng(1)
    X = _terms("bf16", 60, rng).reshape(4, 15)
    for order in ("sequential", "pairwise", "kahan", "blocked", "exact"):
        r0 = ff.sum(X, "bf16", order=order, axis=0, block=4)
        r1 = ff.sum(X, "bf16", order=order, axis=1, block=4)
        assert r0.shape == (15,) and r1.shape == (4,)
        for j in range(15):
            assert _same(r0[j], ff.sum(X[:, j], "bf16", order=order, block=4))
        for i in range(4):
            assert _same(r1[i], ff.sum(X[i], "bf16", order=order, block=4))
        assert _same(ff.sum(X, "bf16", order=order, block=4),
                     ff.sum(X.reshape(-1), "bf16", order=order, block=4))
    assert ff.sum(X, "bf16", axis=-1).shape == (4,)


def test_sum_out_fmt_and_specials():
    x = [1.0, 2.0 ** -8, 2.0 ** -30]
    assert ff.sum(x, "fp32", acc_fmt="fp32", out_fmt="bf16") == ff.cast(ff.sum(x, "fp32"), "bf16")
    assert ff.sum(x, "fp32", order="exact", out_fmt="bf16") == 1.0 + 2.0 ** -7  # one rounding
    assert ff.sum(x, "fp32", out_fmt="bf16") == 1.0  # two roundings: the tie goes to even
    assert math.isnan(ff.sum([1.0, math.inf, -math.inf], "fp16"))
    assert math.isnan(ff.sum([1.0, math.inf, -math.inf], "fp16", order="exact"))
    assert ff.sum([1.0, math.inf], "fp16", order="exact") == math.inf
    assert ff.sum([60000.0, 60000.0], "fp16") == math.inf
    assert ff.sum([60000.0, 60000.0, -60000.0], "fp16", order="exact") == 60000.0  # no overflow on the way
    assert ff.sum([], "fp16") == 0.0
    r = ff.sum([-0.0, -0.0], "fp16", order="exact")
    assert r == 0 and math.copysign(1, r) < 0
    assert math.copysign(1, ff.sum([1.0, -1.0], "fp16", rounding="down")) < 0
    with pytest.raises(ValueError, match="no NaN"):
        ff.dot([0.0], [math.nan], "fp4_e2m1")


# ----------------------------------------------------------------------------- dot / matmul
def _ref_dot(a, b, ref, order, block=8):
    prods = [Fraction(x) * Fraction(y) for x, y in zip(a, b)]
    if order == "sequential":  # acc = round(acc + a_k * b_k): one rounding per step
        acc = None
        for p in prods:
            acc = ref.r(p) if acc is None else (ref.r(Fraction(acc) + p) if Fraction(acc) + p != 0
                                                 else ref.add(acc, -acc))
        return acc
    if order == "exact":
        return ref.exact(prods)
    terms = [_f(p) for p in prods]  # products of formats up to fp32 are float64 values
    if order == "blocked":
        return ref.blocked(terms, block)
    return getattr(ref, order)(terms)


@pytest.mark.parametrize("fmt,acc,mode", [("fp16", "fp32", "nearest_even"),
                                          ("bf16", "bf16", "nearest_even"),
                                          ("fp8_e4m3", "fp16", "toward_zero"),
                                          ("fp16", "fp16", "up")])
@pytest.mark.parametrize("order", ["sequential", "pairwise", "kahan", "blocked", "exact"])
def test_dot_and_matmul_match_reference(fmt, acc, mode, order):
    rng = np.random.default_rng(zlib.crc32(f"{fmt} {acc} {mode} {order}".encode()))
    ref = Ref(acc, mode)
    A = _terms(fmt, 5 * 37, rng, 6).reshape(5, 37)
    B = _terms(fmt, 37 * 3, rng, 6).reshape(37, 3)
    got = ff.matmul(A, B, fmt, acc_fmt=acc, order=order, rounding=mode, block=8)
    d = ff.dot(A[:, None, :], B.T[None], fmt, acc_fmt=acc, order=order, rounding=mode, block=8)
    assert got.shape == (5, 3) and _same(got, d)
    for i in range(5):
        for j in range(3):
            want = _ref_dot(A[i].tolist(), B[:, j].tolist(), ref, order)
            assert _same(got[i, j], want), (i, j, got[i, j], want)


def test_matmul_shapes_like_numpy():
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    v = rng.standard_normal(4)
    assert ff.matmul(A, B, "fp32").shape == (2, 3, 5)
    assert ff.matmul(A[0], v, "fp32").shape == (3,)
    assert ff.matmul(v, B, "fp32").shape == (5,)
    assert isinstance(ff.dot(v, v, "fp32"), float)
    assert np.allclose(ff.matmul(A, B, "fp32"), A @ B, rtol=1e-5)
    assert np.allclose(ff.matmul(A, B, "fp32", order="pairwise"), A @ B, rtol=1e-5)
    assert np.allclose(ff.matmul(A, B, "bf16", model="h100"), A @ B, rtol=3e-2, atol=3e-2)
    with pytest.raises(ValueError, match="align"):
        ff.matmul(A, A, "fp32")
    with pytest.raises(ValueError, match="differ"):
        ff.dot([1.0, 2.0], [1.0], "fp32")


def test_fp16_accumulation_loses_what_fp32_keeps():
    rng = np.random.default_rng(3)
    a = np.abs(rng.standard_normal(4096))
    b = np.abs(rng.standard_normal(4096))
    exact = ff.dot(a, b, "fp16", order="exact", acc_fmt="fp64")
    e16 = abs(ff.dot(a, b, "fp16", acc_fmt="fp16") - exact)
    e32 = abs(ff.dot(a, b, "fp16", acc_fmt="fp32") - exact)
    assert e16 > 100 * e32


def test_fp64_dot_uses_exact_fma_steps():
    import gmpy2
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(200), rng.standard_normal(200)
    got = ff.dot(a, b, "fp64", acc_fmt="fp64")
    with gmpy2.context(gmpy2.ieee(64)):
        acc = gmpy2.mpfr(float(a[0])) * float(b[0])
        for x, y in zip(a[1:], b[1:]):
            acc = gmpy2.fma(gmpy2.mpfr(float(x)), float(y), acc)
    assert got == float(acc)
    q = sum((Fraction(x) * Fraction(y) for x, y in zip(a, b)), Fraction(0))
    assert ff.dot(a, b, "fp64", acc_fmt="fp64", order="exact") == M.round_one(q, FMT("fp64"))
    # other orders round each product to acc_fmt first (documented)
    assert ff.dot(a, b, "fp64", acc_fmt="fp64", order="pairwise") == pytest.approx(float(q), rel=1e-13)


def test_epilogue_alpha_beta_c_and_out_fmt():
    rng = np.random.default_rng(5)
    A, B, C = rng.standard_normal((3, 8)), rng.standard_normal((8, 2)), rng.standard_normal((3, 2))
    acc = ff.matmul(A, B, "bf16")
    got = ff.matmul(A, B, "bf16", alpha=3.0, beta=-1.0, c=C, out_fmt="bf16")
    want = ff.cast(ff.fma(-1.0, ff.cast(C, "bf16"), ff.mul(3.0, acc, "fp32"), "fp32"), "bf16")
    assert np.array_equal(got, want)
    # c without beta is added (beta = 1, as torch.addmm does); beta=0 drops it
    assert np.array_equal(ff.matmul(A, B, "bf16", c=C),
                          ff.add(acc, ff.cast(C, "fp32"), "fp32"))  # c in the output format
    assert np.array_equal(ff.matmul(A, B, "bf16", c=C, beta=0.0), acc)


def test_errors():
    with pytest.raises(ValueError, match="Did you mean 'pairwise'"):
        ff.sum([1.0], "fp16", order="pairwyse")
    with pytest.raises(TypeError):
        ff.sum([1.0], "fp16", order=3)
    with pytest.raises(ValueError, match="block"):
        ff.sum([1.0], "fp16", order="blocked", block=0)
    with pytest.raises(ValueError, match="unknown format"):
        ff.sum([1.0], "fp16", acc_fmt="fp33")
    with pytest.raises(ValueError, match="scalar"):
        ff.dot(1.0, 2.0, "fp16")
    with pytest.raises(ValueError):
        ff.sum(1.0, "fp16", axis=0)


def test_sum_axis_errors_are_clear():
    x = [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(ValueError, match="axis 3 is out of range for a 2-dimensional input"):
        ff.sum(x, "fp16", axis=3)
    with pytest.raises(TypeError, match="axis must be an int or None, not float"):
        ff.sum(x, "fp16", axis=1.0)
    assert ff.sum(x, "fp16", axis=-1).tolist() == [3.0, 7.0]


def test_c_is_never_silently_ignored():
    """A ``c`` given without ``beta`` is added (beta = 1), in dot and matmul, with and
    without a tensor-core model; ``beta=0`` still drops it, as cuBLAS's beta does."""
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.eye(2)
    C = np.array([[0.5, 0.25], [1.0, 2.0]])
    for model in (None, "h100"):
        got = ff.matmul(a, b, "bf16", model=model, c=C)
        assert np.array_equal(got, a + C), (model, got)
        assert np.array_equal(ff.matmul(a, b, "bf16", model=model, c=C, beta=0.0), a)
        assert np.array_equal(ff.matmul(a, b, "bf16", model=model, c=C, beta=2.0), a + 2 * C)
    assert ff.dot([1.0, 2.0], [3.0, 4.0], "bf16", c=0.5) == 11.5
