"""``sum`` in every order, and ``dot`` / ``matmul`` without a tensor-core model, on the
device (``floatfmt.arith.accumulate``, written once over the namespace; issue 11 items 1 and 7): forced on CPU tensors
(``force_namespace``, the code CUDA runs) they equal the numpy kernels element for
element (NaN by class, the sign of zero counted) for every format x every
deterministic mode x every order, on data with signed zeros, Inf, NaN, subnormals of
the format, values past its range, sums past the accumulator's range and exact
cancellations; batched shapes, out_fmt and the epilogue as numpy's.
"""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith.accumulate import ORDERS
from floatfmt.backend.dispatch import force_namespace
from tests.conftest import DET_MODES
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

FORMATS = ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3",
           "fp4_e2m1", "int8"]
# an accumulator per input format (a narrow one where the format allows: more roundings)
ACC = {"fp32": "fp32", "tf32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "bf16",
       "fp8_e5m2": "fp16", "fp6_e3m2": "fp8_e4m3", "fp6_e2m3": "fp16", "fp4_e2m1": "fp8_e4m3",
       "int8": "int8"}


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def terms(name: str, shape: tuple, seed: int) -> np.ndarray:
    """Values over (and past) the format's whole range, subnormals included, both signs,
    with +0 and -0, x / -x pairs along axis 0 (exact cancellations), and Inf / NaN
    where the format (and its accumulator) has NaN; in a few columns only, so that
    the others keep finite sums."""
    f = ff.get_format(name)
    rng = np.random.default_rng(seed)
    if f.kind == "int":
        x = rng.integers(-60, 60, shape).astype(np.float64)
        x[..., ::3] += rng.random(x[..., ::3].shape)  # not integers: rounded on input
        x[0, ...] = 200.0  # past the range
        return x
    lo, hi = f.emin - f.mbits - 1, f.emax + 1
    x = np.ldexp(rng.uniform(1, 2, shape), rng.integers(lo, hi, shape))
    x *= np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    n = shape[0]
    x[n // 2, ...], x[n // 2 + 1, ...] = 0.0, -0.0  # zero terms of both signs
    x[1, ...] = -x[0, ...]  # exact cancellation of the first two terms
    flat = x.reshape(n, -1)
    flat[:, 0] = -0.0  # a column of -0: the sum's sign
    flat[:, 1] = 0.0
    flat[3, 1] = -0.0  # mixed zeros
    flat[:, 2] = f.max  # a column that overflows the accumulator (unless it is wide)
    if f.has_nan and ff.get_format(ACC[name]).has_nan and flat.shape[1] > 6:
        flat[4, 3] = np.inf
        flat[5, 4], flat[6, 4] = np.inf, -np.inf  # Inf - Inf
        flat[2, 5] = np.nan
    return x


def check(got, want):
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    w = np.asarray(want, np.float64)
    assert tuple(got.shape) == w.shape
    bad = mismatches(got.numpy(), w)
    assert not bad.any(), f"{int(bad.sum())} mismatches of {w.size}"


def both(call, *arrays, **kw):
    """call on the numpy arrays, and on tensors of them under force_namespace; a
    ValueError (an invalid result in a format without NaN) must be raised by both."""
    try:
        want = call(*arrays, **kw)
    except ValueError as err:
        with force_namespace(), pytest.raises(ValueError, match=str(err)[:25]):
            call(*(torch.from_numpy(a) for a in arrays), **kw)
        return
    with force_namespace():
        got = call(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays), **kw)
    check(got, want)


def _policy(name: str) -> str | None:
    return "saturate" if name == "int8" else None


@pytest.mark.parametrize("name", FORMATS)
def test_device_sum_every_order_and_mode_equals_numpy(name):
    x = terms(name, (13, 9), 11)
    acc, pol = ACC[name], _policy(name)
    for order in ORDERS:
        for mode in DET_MODES:
            both(lambda v: ff.sum(v, name, acc, order, 0, block=4, rounding=mode,
                                  overflow=pol), x)
        both(lambda v: ff.sum(v, name, "fp32" if name != "int8" else acc, order, None,
                              block=5, out_fmt=acc, overflow=pol), x)
        both(lambda v: ff.sum(v, name, acc, order, 1, overflow=pol, ftz=True), x)
    both(lambda v: ff.sum(v, name, acc, "exact", 0, daz=True, overflow=pol), x)


@pytest.mark.parametrize("name", FORMATS)
def test_device_dot_and_matmul_every_order_and_mode_equal_numpy(name):
    """Batched shapes (broadcast batch axes; 1-D operands), every order and mode."""
    a = terms(name, (7, 2, 3), 21).transpose(1, 2, 0)  # (2, 3, 7): K last
    b = terms(name, (7, 4), 22)                       # (7, 4)
    acc, pol = ACC[name], _policy(name)
    for order in ORDERS:
        for mode in DET_MODES:
            both(lambda p, q: ff.matmul(p, q, name, acc, order, block=3, rounding=mode,
                                        overflow=pol), a, b)
        both(lambda p, q: ff.dot(p, q, name, acc, order, block=2, overflow=pol), a, b[:, 0])
        both(lambda p, q: ff.matmul(p, q, name, acc, order, out_fmt=name, overflow=pol),
             a[0, 1], b)
        both(lambda p, q: ff.matmul(p, q, name, acc, order, overflow=pol), a[1], b[:, 2])
        both(lambda p, q: ff.dot(p, q, name, acc, order, overflow=pol), a[1, 2], b[:, 1])


def test_device_products_epilogue_and_empty_equal_numpy():
    a = terms("bf16", (6, 5), 31).T
    b = terms("bf16", (6, 3), 32)
    c = terms("bf16", (5, 3), 33)
    for order in ORDERS:
        both(lambda p, q, r: ff.matmul(p, q, "bf16", "bf16", order, alpha=0.5, c=r,
                                       out_fmt="fp8_e4m3"), a, b, c)
        both(lambda p, q, r: ff.matmul(p, q, "bf16", "fp32", order, beta=-2.0, c=r), a, b, c)
        both(lambda p, q: ff.matmul(p, q, "fp16", order=order), a[:, :0], b[:0])
        both(lambda p, q: ff.dot(p, q, "fp16", order=order), a[:, :0], a[:, :0])
        both(lambda v: ff.sum(v, "fp16", order=order, axis=0), a[:0])


def test_device_exact_sum_long_carries_and_wide_ranges():
    """The exact order's limbs: terms 2**-298 .. 2**254 (fp32 products), long carry
    chains (2**k - tiny), remainders exactly half an ulp, below and above it, both signs."""
    rng = np.random.default_rng(41)
    cols = []
    big, tiny = 2.0 ** 200, 2.0 ** -140
    cols.append([big, tiny, -big])              # only the tiny term survives
    cols.append([2.0 ** 60, -tiny, 0.0])        # just below 2**60: long borrow chain
    cols.append([1.0, 2.0 ** -53, 0.0])         # exactly half an ulp of the float64 sum
    cols.append([1.0, 2.0 ** -53, 2.0 ** -140])  # just above half
    cols.append([-1.0, -2.0 ** -53, 2.0 ** -140])  # negative, just below half
    cols.append([2.0 ** -298, 2.0 ** 254, -2.0 ** 254])
    T = np.array(cols).T
    T = np.concatenate([T, rng.standard_normal((3, 40)) * np.exp2(rng.integers(-298, 254, (3, 40)))], 1)
    for mode in DET_MODES:
        both(lambda v: ff.sum(v, "fp32", "fp32", "exact", 0, rounding=mode), T)
        both(lambda v: ff.dot(v, v, "fp32", "fp32", "exact", rounding=mode), T.T)
    from floatfmt.arith.limbs import limb_sum as exact_sum
    t, cls = exact_sum(torch.from_numpy(T), "nearest_even")
    # oracle: the exact Fraction sum lies in [t, next float64 away from zero) by class
    from fractions import Fraction
    for j in range(T.shape[1]):
        s = sum((Fraction(float(v)) for v in T[:, j]), Fraction(0))
        tj, cj = float(t[j]), int(cls[j])
        if cj == 0:
            assert Fraction(tj) == s
            continue
        ulp = Fraction(np.spacing(abs(tj)))
        frac = abs(s - Fraction(tj)) / ulp
        assert 0 < frac < 1 and abs(s) > abs(Fraction(tj))
        assert cj == (1 if frac < Fraction(1, 2) else 2 if frac == Fraction(1, 2) else 3)


def test_device_accumulation_refuses_what_it_lacks():
    x = torch.ones(3)
    with force_namespace():
        with pytest.raises(ValueError, match="order"):
            ff.dot(x, x, "bf16", order="kahn")
        with pytest.raises(ValueError, match="block"):
            ff.sum(x, "bf16", order="blocked", block=0)
        with pytest.raises(ValueError, match="do not align"):
            ff.matmul(torch.ones(2, 3), torch.ones(2, 3), "bf16")


def fp64_terms(n: int, m: int, seed: int) -> np.ndarray:
    """float64 terms over the whole range (subnormals, the largest double), with columns
    that overflow and come back, ties at half an ulp, subnormal sums, exact
    cancellations, Inf, Inf - Inf and NaN."""
    rng = np.random.default_rng(seed)
    T = np.ldexp(rng.uniform(1, 2, (n, m)), rng.integers(-1075, 1024, (n, m)))
    T *= np.where(rng.random((n, m)) < 0.5, -1.0, 1.0)
    T[:, 1:m // 2] = T[:, 1:m // 2] * 2.0 ** -900  # narrower ranges: real roundings
    big = np.finfo(np.float64).max
    T[:, 0] = [big, big, -big] + [0.0] * (n - 3)
    T[:, 1] = [1.0, 2.0 ** -53, 2.0 ** -53] + [0.0] * (n - 3)
    T[:, 2] = [1.0, -2.0 ** -54, 2.0 ** -110] + [0.0] * (n - 3)
    T[:, 3] = [5e-324, 3 * 5e-324, -2.0 ** -1022] + [0.0] * (n - 3)
    T[:, 4] = [big, 2.0 ** 970, 2.0 ** 970] + [0.0] * (n - 3)
    T[:, 5] = [0.5, -0.5, -0.0] + [-0.0] * (n - 3)
    T[1, 6], T[2, 7], T[3, 7], T[4, 8] = np.inf, np.inf, -np.inf, np.nan
    return T


def test_device_fp64_products_equal_numpy():
    """fp64 mul and fma on the device (``exact_device.exact_products``: mantissa products,
    their TwoProd errors and c summed exactly with the operands' exponents): products
    past the float64 range, subnormal and underflowing products, exact cancellations
    a * b - a * b, Inf / NaN / zero operands, every deterministic mode, ftz / daz."""
    rng = np.random.default_rng(52)
    n = 3000
    a, b, c = (np.ldexp(rng.uniform(1, 2, n), rng.integers(-700, 700, n))
               * np.where(rng.random(n) < 0.5, -1.0, 1.0) for _ in range(3))
    c[:1000] = np.ldexp(c[:1000], rng.integers(-300, 300, 1000))
    big = np.finfo(np.float64).max
    a[:10] = [0.0, -0.0, np.inf, -np.inf, np.nan, big, 5e-324, -2.0 ** -1022, 3.0, 1.5]
    b[:10] = [-0.0, -0.0, 0.0, 2.0, 1.0, big, 0.75, 2.0 ** -40, np.inf, -5e-324]
    b[10:200] = 2.0 ** -1074 / a[10:200] * rng.uniform(0.1, 3000, 190)  # subnormal products
    a[200:300] = np.ldexp(rng.uniform(1, 2, 100), 500)
    b[200:300] = np.ldexp(rng.uniform(0.8, 3.2, 100), 523) / a[200:300] * 2.0 ** 500
    with np.errstate(over="ignore"):  # products past the range: c = +-Inf there
        c[300:400] = -a[300:400] * b[300:400]  # cancellations (c is the rounded product)
    c[400:410] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 5e-324, big, -big, 1.0, -1.0]
    for mode in DET_MODES:
        both(lambda p, q: ff.mul(p, q, "fp64", mode), a, b)
        both(lambda p, q, r: ff.fma(p, q, r, "fp64", mode), a, b, c)
    both(lambda p, q, r: ff.fma(p, q, r, "fp64", ftz=True, daz=True), a, b, c)
    both(lambda p, q: ff.mul(p, q, "fp64", "down", ftz=True), a, b)


def test_device_fp64_dot_and_matmul_every_order_equal_numpy():
    """fp64 products in every order (sequential: exact fused steps; exact: every
    product's two terms summed once; the others: products rounded to acc_fmt first):
    products past the float64 range, subnormal ones, cancellations, zeros of both signs,
    Inf and NaN, fp64 and narrower accumulators."""
    rng = np.random.default_rng(53)
    a = np.ldexp(rng.uniform(1, 2, (2, 3, 6)), rng.integers(-600, 600, (2, 3, 6)))
    b = np.ldexp(rng.uniform(1, 2, (6, 4)), rng.integers(-600, 600, (6, 4)))
    a *= np.where(rng.random(a.shape) < 0.5, -1.0, 1.0)
    a[0, 0, :2], b[:2, 0] = [2.0 ** 600, -2.0 ** 600], [2.0 ** 500, 2.0 ** 500]  # cancel
    a[0, 1, :], b[:, 1] = -0.0, 0.0  # a row of zero products (signs)
    a[1, 0, 3], b[3, 2] = 2.0 ** -600, 2.0 ** -480  # a subnormal product
    a[1, 2, 4], b[5, 3], a[1, 1, 5] = np.inf, np.nan, -np.inf
    for order in ORDERS:
        for mode in DET_MODES:
            both(lambda p, q: ff.matmul(p, q, "fp64", "fp64", order, block=2, rounding=mode),
                 a, b)
        both(lambda p, q: ff.dot(p, q, "fp64", "bf16", order), a, a[:, ::-1])
        both(lambda p, q: ff.matmul(p, q, "fp64", "fp32", order, out_fmt="fp16"), a[0, 2], b)


def test_device_fp64_additions_and_sums_equal_numpy():
    """fp64 on the device where no product is needed: add, sub, neg, abs, minimum,
    maximum and sum in every order (TwoSum is exact for float64 operands; a sum past the
    float64 range is carried as +-Inf with class 3), every deterministic mode, ftz / daz."""
    T = fp64_terms(7, 40, 51)
    a, b = T[0], T[1]
    b2 = np.concatenate([b[:20], -a[20:30], a[30:] * 2.0 ** -53])  # cancellations, near ties
    for mode in DET_MODES:
        for op in ("add", "sub", "minimum", "maximum"):
            both(lambda p, q: getattr(ff, op)(p, q, "fp64", mode), a, b2)
        both(lambda p: ff.neg(p, "fp64", mode), a)
        both(lambda p: ff.abs(p, "fp64", mode, daz=True), a)
        for order in ORDERS:
            both(lambda v: ff.sum(v, "fp64", "fp64", order, 0, block=3, rounding=mode), T)
        both(lambda v: ff.sum(v, "fp64", "fp32", "pairwise", 0, rounding=mode, out_fmt="bf16"), T)
    both(lambda p, q: ff.add(p, q, "fp64", ftz=True, daz=True), a, b2)
    with force_namespace():  # SR roots in fp64 run too (tests/test_torch_wide.py): exact ones stay
        r = ff.sqrt(torch.tensor([1.0, 4.0, 2.0 ** -1074], dtype=torch.float64), "fp64",
                    "stochastic", rng=0)
    assert r.tolist() == [1.0, 2.0, 2.0 ** -537]


def test_device_fp64_quotients_and_roots_equal_numpy():
    """fp64 div and sqrt on the device (``residuals.wide_quotient`` / ``wide_root``):
    operands over the whole float64 range, so quotients past the range, subnormal ones
    (truncated to 2**-1074 with the mantissa quotient's remainder) and ones below the
    smallest subnormal; x / 0, 0 / 0, Inf / Inf, roots of subnormals; every mode."""
    rng = np.random.default_rng(54)
    n = 3000
    a, b = (np.ldexp(rng.uniform(1, 2, n), rng.integers(-1074, 1024, n))
            * np.where(rng.random(n) < 0.5, -1.0, 1.0) for _ in range(2))
    a[:10] = [0.0, -0.0, np.inf, np.nan, 1.0, 5e-324, 3.0, -1.0, np.inf, 2.0 ** -1022]
    b[:10] = [0.0, 2.0, np.inf, 1.0, 0.0, 3.0, 5e-324, -0.0, -2.0, 3.0]
    ea = np.frexp(a[10:300])[1]  # quotients near and below the subnormal range:
    b[10:300] = np.ldexp(rng.uniform(1, 2, 290), np.minimum(ea + rng.integers(1015, 1080, 290), 1023))
    for mode in DET_MODES:
        both(lambda p, q: ff.div(p, q, "fp64", mode), a, b)
        both(lambda p: ff.sqrt(p, "fp64", mode), np.abs(a))
    both(lambda p, q: ff.div(p, q, "fp64", "down", ftz=True, daz=True), a, b)
