"""The buffered sequential kernel of dot / matmul (``accumulate_fast.seq_products``): against
the step-by-step MPFR reference of tests/test_accumulate.py, with sums that float64 cannot
hold exactly (operands 80 binades apart), overflow in the middle of a chain, and every
rounding mode it takes; and bit for bit the generic ``_seq`` path it replaces."""

from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith import accumulate_fast
from floatfmt.arith import eft
from tests.test_accumulate import Ref, _ref_dot, _same, _terms

ac = accumulate_fast
MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "odd"]


@pytest.mark.parametrize("fmt,acc", [("bf16", "fp32"), ("fp16", "fp16"), ("bf16", "bf16"),
                                     ("fp32", "fp32")])
@pytest.mark.parametrize("mode", MODES)
def test_seq_kernel_matches_reference_on_inexact_float64_sums(fmt, acc, mode, monkeypatch):
    calls = []
    real = eft.to_sticky
    monkeypatch.setattr(eft, "to_sticky", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(zlib.crc32(f"{fmt} {acc} {mode}".encode()))
    spread = 40 if ff.info(fmt).max > 1e30 else 7
    A = np.asarray(_terms(fmt, 6 * 41, rng, spread)).reshape(6, 41)
    B = np.asarray(_terms(fmt, 41 * 4, rng, spread)).reshape(41, 4)
    A[0, 5] = 0.0  # a zero product in a chain
    got = ff.matmul(A, B, fmt, acc_fmt=acc, rounding=mode)
    ref = Ref(acc, mode)
    for i in range(6):
        for j in range(4):
            want = _ref_dot(A[i].tolist(), B[:, j].tolist(), ref, "sequential")
            assert _same(got[i, j], want), (i, j, got[i, j], want)
    if acc != "fp16":
        assert calls, "no step had an inexact float64 sum: the test misses the sticky path"


@pytest.mark.parametrize("mode", MODES)
def test_seq_kernel_overflow_inside_the_chain(mode):
    """An fp16 accumulator that overflows at step 2 and is then brought back by
    cancellation (which Inf does not allow), and a NaN from Inf - Inf."""
    a = np.array([[60000.0, 60000.0, -60000.0, 1.0], [60000.0, 60000.0, 1.0, 1.0]])
    b = np.array([1.0, 1.0, 1.0, 1.0])[:, None] * np.array([[1.0, -1.0]])
    got = ff.matmul(a, b, "fp16", acc_fmt="fp16", rounding=mode)
    ref = Ref("fp16", mode)
    for i in range(2):
        for j in range(2):
            prods = [x * y for x, y in zip(a[i].tolist(), b[:, j].tolist())]  # exact
            want = ref.r(Fraction(prods[0]))
            for p in prods[1:]:
                want = ref.add(want, p)  # round(acc + p), Inf and NaN included
            assert _same(got[i, j], want), (mode, i, j, got[i, j], want)


@pytest.mark.parametrize("mode", MODES)
def test_seq_kernel_equals_generic_path(mode, monkeypatch):
    rng = np.random.default_rng(zlib.crc32(mode.encode()))
    A = np.asarray(_terms("bf16", 3 * 20 * 64, rng, 30)).reshape(3, 20, 64)
    B = np.asarray(_terms("bf16", 64 * 24, rng, 30)).reshape(64, 24)
    fast = ff.matmul(A, B, "bf16", rounding=mode)
    dfast = ff.dot(A[0], B.T[:20], "bf16", rounding=mode)
    monkeypatch.setattr(ac, "seq_products_ok", lambda actx: False)
    slow = ff.matmul(A, B, "bf16", rounding=mode)
    dslow = ff.dot(A[0], B.T[:20], "bf16", rounding=mode)
    assert _same(fast, slow) and _same(dfast, dslow)


@pytest.mark.parametrize("mode", MODES)
def test_seq_kernel_sum_on_a_tie_with_a_remainder(mode):
    """acc = 1 + 2**-23 plus the product (1 + 2**-23) * 2**-24 (1 - 2**-23) = 2**-24 -
    2**-70: the float64 sum is the fp32 tie 1 + 3 * 2**-24 and the remainder -2**-70
    decides every mode (RNE of the float64 sum alone would give 1 + 2**-22)."""
    a = np.array([[1.0, 1.0 + 2.0 ** -23]])
    b = np.array([[1.0 + 2.0 ** -23], [2.0 ** -24 * (1 - 2.0 ** -23)]])
    got = ff.matmul(a, b, "fp32", rounding=mode)[0, 0]
    exact = Fraction(1) + Fraction(2) ** -23 + Fraction(2) ** -24 - Fraction(2) ** -70
    want = Ref("fp32", mode).r(exact)
    assert _same(got, want), (mode, got, want)
    if mode == "nearest_even":
        assert got == 1.0 + 2.0 ** -23


# ------------------------------------------------------------------ certified exact steps
def _edge_matrices(fmt, acc, kind, rng, m=5, k=48, n=6):
    """Operands of one class of edge cases, as values of fmt (float64)."""
    info = ff.info(fmt)
    big = float(np.log2(info.max))
    if kind == "gaps":  # a chain of moderate products, then some far below the sum: there
        # the float64 sums stop being exact (late, so that the early steps are certified)
        A = np.asarray(_terms(fmt, m * k, rng, 4)).reshape(m, k)
        B = np.asarray(_terms(fmt, k * n, rng, 4)).reshape(k, n)
        A[:, -12:] = ff.cast(A[:, -12:] * 2.0 ** -int(big * 0.8), fmt)
        A[:, -12::3] = ff.cast(A[:, -12::3] * 2.0 ** int(big * 0.6), fmt)
    elif kind == "rise":  # a first product far below the later ones: the accumulator keeps
        # its low bits, so later sums need the chain's lowest bit, not only their own step's
        A = np.asarray(_terms(fmt, m * k, rng, 4)).reshape(m, k)
        B = np.asarray(_terms(fmt, k * n, rng, 4)).reshape(k, n)
        A[:, 0] = ff.cast(A[:, 0] * 2.0 ** -int(big * 0.4) * (1 + 2.0 ** -info.nmant), fmt)
        A[:, 1:] = ff.cast(A[:, 1:] * 2.0 ** int(big * 0.4), fmt)
    elif kind == "cancel":  # pairs t, -t (the sum returns to exactly 0), then small terms
        A = np.asarray(_terms(fmt, m * k, rng, 6)).reshape(m, k)
        B = np.asarray(_terms(fmt, k * n, rng, 6)).reshape(k, n)
        A[:, 1::2] = -A[:, 0::2]
        B[1::2] = B[0::2]
        A[:, -4:] *= 2.0 ** -8
        A[0] = -0.0  # a row of -0 products in column 0: the signed zero of the sum
        B[:, 0] = np.where(np.arange(k) % 3 == 0, 0.0, np.abs(B[:, 0]))
    elif kind == "tiny":  # products near the accumulator's smallest normal: subnormal sums
        target = int(np.log2(ff.info(acc).smallest_normal))
        least = int(np.log2(info.smallest_normal)) + 2  # (fp16 cannot reach fp32's)
        ea = max(target // 2, least)
        eb = max(target - ea, least)
        A = np.asarray(ff.cast(rng.uniform(1, 2, (m, k)) * rng.choice([-1.0, 1.0], (m, k))
                               * 2.0 ** rng.integers(ea - 5, ea + 2, (m, k)), fmt))
        B = np.asarray(ff.cast(rng.uniform(1, 2, (k, n)) * rng.choice([-1.0, 1.0], (k, n))
                               * 2.0 ** rng.integers(eb - 5, eb + 2, (k, n)), fmt))
    else:  # "huge": products and sums up to and past the accumulator's max
        hi = min(np.sqrt(ff.info(acc).max / 8), info.max)
        A = np.asarray(ff.cast(rng.uniform(0.5, 1, (m, k)) * hi * rng.choice([-1.0, 1.0], (m, k)),
                               fmt, overflow="saturate"))
        B = np.asarray(ff.cast(rng.uniform(0.5, 1, (k, n)) * hi, fmt, overflow="saturate"))
        B[5:, 1] = -B[5:, 1]  # back from the top by cancellation
        if kind == "nan":
            A[1, 7] = np.nan
            A[2, 3] = np.inf
    return A, B


@pytest.mark.parametrize("fmt,acc", [("bf16", "fp32"), ("fp16", "fp32"), ("bf16", "bf16"),
                                     ("fp8_e4m3", "fp16"), ("fp16", "fp16")])
@pytest.mark.parametrize("kind", ["gaps", "rise", "cancel", "tiny", "huge", "nan"])
@pytest.mark.parametrize("mode", MODES)
def test_certified_steps_are_exact_and_match_the_generic_path(fmt, acc, kind, mode, monkeypatch):
    """Every step that ``ExactSteps`` certifies has a float64 sum acc + t_k with a zero
    TwoSum error (the certificate's claim, checked on the real chain), and the kernel with
    its certified steps gives the generic ``_seq`` path's bits, for gaps wide enough that
    some sums are inexact, cancellation to exact zeros, signed zeros, sums below the
    accumulator's smallest normal, overflow to Inf and back, and NaN / Inf operands."""
    rng = np.random.default_rng(zlib.crc32(f"{fmt} {acc} {kind} {mode}".encode()))
    A, B = _edge_matrices(fmt, acc, kind, rng)
    seen = {"yes": 0, "no": 0}
    real = ac.ExactSteps.exact

    def checked(self, k, accv):
        ok = real(self, k, accv)
        seen["yes" if ok else "no"] += 1
        if ok:  # the exact products of step k (fmt fits float64), of matmul or of dot
            t = A[:, k, None] * B[None, k, :] if accv.ndim == 2 else A[:, k] * B[k, :len(A)]
            with np.errstate(invalid="ignore", over="ignore"):
                s = accv + t
                bb = s - accv
                e = (accv - (s - bb)) + (t - bb)
            assert np.isfinite(s).all() and not e.any(), (k, accv, t)
        return ok

    monkeypatch.setattr(ac.ExactSteps, "exact", checked)
    with ff.limit_threads(1):  # one tile: the products above are the kernel's
        fast = ff.matmul(A, B, fmt, acc_fmt=acc, rounding=mode)
        dfast = ff.dot(A, B.T[:A.shape[0]], fmt, acc_fmt=acc, rounding=mode)
    monkeypatch.setattr(ac, "seq_products_ok", lambda actx: False)
    slow = ff.matmul(A, B, fmt, acc_fmt=acc, rounding=mode)
    dslow = ff.dot(A, B.T[:A.shape[0]], fmt, acc_fmt=acc, rounding=mode)
    assert _same(fast, slow) and _same(dfast, dslow)
    if kind in ("cancel", "tiny") or (kind == "gaps" and acc == "fp32"):
        assert seen["yes"], "no step was certified: the test misses the certified path"
    if kind == "nan":
        assert not seen["yes"]  # Inf / NaN operands: no bounds, every step checked


def test_certificate_is_tight_at_53_bits():
    """A sum that needs exactly 53 bits is certified, one that needs 54 is not: acc = 2**52
    (fp64-like bound) is simulated with the bounds of a chain whose products are multiples
    of 2**0 and whose accumulator bound reaches 2**52 - 1 and then 2**52."""
    f = ff.get_format("fp32")
    steps = ac.ExactSteps(f, np.array([0.0, 2.0 ** 52 - 2.0 ** 30, 1.0]), np.zeros(3, np.int64))
    acc = np.array([2.0 ** 30 - 1.0])  # (the bound is carried, acc is not read)
    steps.bound = 2.0 ** 30 - 1.0
    assert steps.exact(1, acc)  # bound + tmax = 2**52 - 1 < 2**53
    steps.bound = 2.0 ** 53
    assert not steps.exact(2, np.array([2.0 ** 53]))  # measured |acc| 2**53: 54 bits


@pytest.mark.parametrize("acc", ["fp32", "bf16", "fp16", "fp8_e4m3"])
def test_carried_bound_covers_every_rounding(acc):
    """The bound ``ExactSteps`` carries past a step is at least |round(s)| in every mode
    for every |s| <= bound + tmax (rounding up the largest sum is the worst case), across
    the accumulator's range, its subnormals included."""
    f = ff.get_format(acc)
    rng = np.random.default_rng(zlib.crc32(acc.encode()))
    lo, hi = np.log2(f.smallest_subnormal) - 2, np.log2(f.max) - 1
    for s in np.exp2(rng.uniform(lo, hi, 300)) * rng.uniform(1, 1.0001, 300):
        steps = ac.ExactSteps(f, np.array([0.0, s]), np.array([2000, 2000]))  # (q: no limit)
        steps.bound = 0.0
        assert steps.exact(1, np.zeros(1))
        assert ff.cast(s, acc, rounding="up") <= steps.bound, (s, steps.bound)


# ------------------------------------------------- every fast kernel against the reference
_ORDERS = ["sequential", "pairwise", "kahan", "blocked", "exact"]


@pytest.mark.parametrize("fmt,acc", [("bf16", "fp32"), ("fp16", "fp16"), ("fp8_e4m3", "bf16"),
                                     ("fp64", "fp64")])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "down"])
def test_fast_kernels_give_the_reference_bits(fmt, acc, mode, monkeypatch):
    """``accumulate_fast`` (picked by ``accumulate._fast``) against the reference orders of
    ``accumulate_orders`` run on numpy (``accumulate_fast.reference()``): sum along an axis
    in thread parts, dot, and matmul (buffered sequential kernel, row parts of the
    vectorised orders), bit for bit, with specials, signed zeros and wide operands; parts
    made small so that several run (threads included)."""
    monkeypatch.setattr(ac, "_SPLIT_ELEMS", 8)
    monkeypatch.setattr(ac, "_CHUNK_ELEMS", 64)
    monkeypatch.setattr(ac, "_SEQ_TILE", 8)
    rng = np.random.default_rng(zlib.crc32(f"fast {fmt} {acc} {mode}".encode()))
    spread = 30 if ff.info(fmt).max > 1e30 else 6
    A = np.asarray(_terms(fmt, 9 * 13, rng, spread)).reshape(9, 13)
    B = np.asarray(_terms(fmt, 13 * 5, rng, spread)).reshape(13, 5)
    A[0, 2], A[1, :] = -0.0, 0.0
    A[2, 3], B[4, 1] = np.inf, np.nan
    v = A.reshape(-1)
    for order in _ORDERS:
        def run():
            return (ff.sum(A, fmt, acc, order, axis=1, rounding=mode),
                    ff.sum(A, fmt, acc, order, axis=0, rounding=mode),
                    ff.sum(v, fmt, acc, order, rounding=mode),
                    ff.dot(A[:5], B.T, fmt, acc, order, rounding=mode),
                    ff.matmul(A, B, fmt, acc, order, rounding=mode),
                    ff.matmul(A[None], B, fmt, acc, order, rounding=mode, alpha=0.5, c=A[:, :5]))
        with ff.limit_threads(2):
            fast = run()
        with ac.reference():
            ref = run()
        for k, (f, r) in enumerate(zip(fast, ref)):
            assert _same(f, r), (order, k)


def test_reference_switch_restores_the_fast_kernels():
    assert ac.enabled()
    with ac.reference():
        assert not ac.enabled()
    assert ac.enabled()
