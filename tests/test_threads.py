"""Threads (floatfmt.core.threads): every chunked path gives the same bits on 1, 2 and 3
threads, stochastic rounding included (its stream is keyed by block, not by thread), the
knob behaves as documented, and the extra memory stays bounded by chunks x threads.

Most tests shrink ``threads.BLOCK`` so that arrays of a few tens of thousands of
elements span many blocks (the split, the shared block counter and the per-block random
streams are exercised as they are at full size); one test runs at the real block size.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith import accumulate_fast, ops_fast as ops
from floatfmt.core import codec, rounding, rounding_fast, threads
from floatfmt.arith.matrixunit import tensorcore, tensorcore_fast
from floatfmt.core.rounding import STOCHASTIC

COUNTS = (1, 2, 3)


def bits(a) -> np.ndarray:
    """Comparable form of a result: the bit patterns, every NaN replaced by one code
    (NaN compared by class), string arrays as they are."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.nan, a).astype(np.float64)
        return a.view(np.int64)
    return a


def each_count(fn):
    """fn() run with 1, 2 and 3 threads; the results (bit patterns)."""
    out = []
    for n in COUNTS:
        with ff.limit_threads(n):
            out.append(bits(fn()))
    return out


def assert_same_for_every_count(fn, what=""):
    r = each_count(fn)
    for n, x in zip(COUNTS[1:], r[1:]):
        assert x.shape == r[0].shape, (what, n)
        assert np.array_equal(x, r[0]), (what, n, int(np.sum(x != r[0])))


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 2**12 elements, parts of 3 blocks and chunks of 2**11, small row tiles:
    many blocks, parts and tiles on small arrays."""
    monkeypatch.setattr(threads, "BLOCK", 1 << 12)
    monkeypatch.setattr(rounding, "CHUNK", 1 << 11)  # the chunk loop
    monkeypatch.setattr(rounding_fast, "CHUNK", 1 << 11)  # its buffers
    monkeypatch.setattr(codec, "_CHUNK", 1 << 11)
    monkeypatch.setattr(ops, "_OP_CHUNK", 1 << 11)
    monkeypatch.setattr(ops, "_FAST_CHUNK", 1 << 11)
    monkeypatch.setattr(ops, "_SUB_CHUNK", 1 << 9)
    monkeypatch.setattr(threads, "PART", 3 << 12)  # a thread takes 3 blocks at once
    monkeypatch.setattr(accumulate_fast, "_SEQ_TILE", 1 << 7)
    monkeypatch.setattr(accumulate_fast, "_SPLIT_ELEMS", 1 << 9)
    monkeypatch.setattr(accumulate_fast, "_CHUNK_ELEMS", 1 << 14)  # matmul rows of vectorised orders
    monkeypatch.setattr(tensorcore_fast, "_TILE_TERMS", 1 << 11)
    monkeypatch.setattr(tensorcore, "_ROWS_ELEMS", 1 << 12)


def _values(n, seed=0):
    """float64 values over many binades with zeros, -0, subnormals of the small formats,
    values past every format's range, Inf and NaN."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1, 2, n) * np.exp2(rng.integers(-30, 30, n).astype(float))
    x *= rng.choice([-1.0, 1.0], n)
    x[::97] = 0.0
    x[5::101] = -0.0
    x[7::211] = 1e300
    x[9::307] = -np.inf
    x[11::401] = np.nan
    x[13::89] = rng.uniform(-1, 1, x[13::89].size) * 2.0 ** -140
    return x


FORMATS = ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1", "fp32", "tf32",
           "int8", "fp8_e4m3fnuz", "e8m0", "fp64"]


# --------------------------------------------------------------------------- the knob
def test_knob_and_context(monkeypatch):
    before = ff.get_num_threads()
    assert before >= 1
    try:
        ff.set_num_threads(3)
        assert ff.get_num_threads() == 3
        with ff.limit_threads(1) as n:
            assert n == 1 and ff.get_num_threads() == 1
            with ff.limit_threads(2):
                assert ff.get_num_threads() == 2
            assert ff.get_num_threads() == 1
        assert ff.get_num_threads() == 3
        monkeypatch.setenv("FLOATFMT_NUM_THREADS", "5")
        monkeypatch.setenv("OMP_NUM_THREADS", "7")
        ff.set_num_threads(None)  # back to the default, the environment re-read
        assert ff.get_num_threads() == 5
        monkeypatch.delenv("FLOATFMT_NUM_THREADS")
        ff.set_num_threads(None)
        assert ff.get_num_threads() == 7
        monkeypatch.setenv("OMP_NUM_THREADS", "3,1")  # nested OpenMP levels: the first one
        ff.set_num_threads(None)
        assert ff.get_num_threads() == 3
        monkeypatch.delenv("OMP_NUM_THREADS")
        ff.set_num_threads(None)
        try:
            import os
            assert ff.get_num_threads() == len(os.sched_getaffinity(0))
        except AttributeError:
            pass
        monkeypatch.setenv("FLOATFMT_NUM_THREADS", "zero")
        ff.set_num_threads(None)
        with pytest.raises(ValueError, match="FLOATFMT_NUM_THREADS"):
            ff.get_num_threads()
    finally:
        monkeypatch.delenv("FLOATFMT_NUM_THREADS", raising=False)
        ff.set_num_threads(None)
    with pytest.raises(ValueError, match="positive"):
        ff.set_num_threads(0)
    with pytest.raises(TypeError):
        ff.set_num_threads(2.0)
    with pytest.raises(TypeError):
        with ff.limit_threads(True):
            pass


def test_limit_is_per_calling_thread():
    """limit_threads applies to the thread that entered it, not to other threads."""
    import threading
    seen = []
    with ff.limit_threads(1):
        t = threading.Thread(target=lambda: seen.append(ff.get_num_threads()))
        t.start()
        t.join()
    assert seen == [ff.get_num_threads()]


def test_run_parts_first_error_and_nesting():
    """Every part runs once; the first failing part's exception is raised (as one thread
    would), after all threads stopped; calls made inside a part stay on its thread."""
    for n in COUNTS:
        with ff.limit_threads(n):
            done = np.zeros(40, int)
            inner = []

            def work(p):
                done[p] += 1
                threads.run_parts(3, lambda q: inner.append(threading_ident()))

            threads.run_parts(40, work)
            assert (done == 1).all()
            assert len(inner) == 120

            def bad(p):
                if p in (13, 29):
                    raise KeyError(p)

            with pytest.raises(KeyError) as e:
                threads.run_parts(40, bad)
            assert e.value.args == (13,)


def threading_ident():
    import threading
    return threading.get_ident()


# ---------------------------------------------------------------- every path, same bits
@pytest.mark.parametrize("fmt", FORMATS)
def test_cast_same_bits(fmt, small_blocks):
    x = _values(20_000)
    policies = [None, "saturate"]
    for mode in ff.MODES:
        for ov in policies:
            kw = {"rng": 7} if mode == "stochastic" else {}
            if mode in STOCHASTIC[1:]:  # P3109's variants draw sr_bits = N random bits
                kw = {"rng": 7, "sr_bits": 8}
            if fmt == "fp64" and mode in STOCHASTIC:
                continue

            def run():
                with np.errstate(all="ignore"):
                    return ff.cast(x, fmt, mode, overflow=ov, **kw)
            assert_same_for_every_count(run, (fmt, mode, ov))
    # ftz / daz, and out= aliasing through round_values
    assert_same_for_every_count(lambda: ff.cast(x, fmt, ftz=True, daz=True), (fmt, "ftz"))


def test_cast_with_remainder_same_bits(small_blocks):
    """Inputs float64 cannot hold (int64 past 2**53): sticky and resid per block."""
    rng = np.random.default_rng(3)
    big = (rng.integers(2 ** 55, 2 ** 62, 20_000) | 1) * rng.choice([-1, 1], 20_000)
    for fmt in ("bf16", "fp32", "fp64"):
        for mode in ff.MODES:
            extra = {"sr_bits": 8} if mode in STOCHASTIC[1:] else {}  # P3109 variants: N bits
            assert_same_for_every_count(
                lambda: ff.cast(big, fmt, mode, **({"rng": np.random.default_rng(5), **extra}
                                                   if mode in STOCHASTIC else {})), (fmt, mode))


def test_codec_paths_same_bits(small_blocks):
    x = _values(20_000, 1)
    x4 = np.nan_to_num(x, nan=0.0)
    for fmt in ("bf16", "fp8_e4m3", "fp4_e2m1", "fp32", "int8"):
        xf = x4 if fmt in ("fp4_e2m1", "int8") else x
        assert_same_for_every_count(lambda: ff.encode(xf, fmt), ("encode", fmt))
        codes = ff.encode(xf, fmt)
        assert_same_for_every_count(lambda: ff.decode(codes, fmt), ("decode", fmt))
        assert_same_for_every_count(lambda: ff.classify(xf, fmt), ("classify", fmt))
        assert_same_for_every_count(lambda: ff.classify(xf, fmt, "sr", rng=4), ("classify sr", fmt))
        assert_same_for_every_count(lambda: ff.next_up(xf, fmt), ("next_up", fmt))
        assert_same_for_every_count(lambda: ff.next_down(xf, fmt), ("next_down", fmt))
        assert_same_for_every_count(lambda: ff.ulp(xf, fmt), ("ulp", fmt))


def test_decode_equals_the_table(small_blocks):
    """The chunked decode is the format's value table, looked up (an independent check)."""
    codes = np.random.default_rng(2).integers(0, 1 << 16, 50_000).astype(np.uint16)
    for n in COUNTS:
        with ff.limit_threads(n):
            got = ff.decode(codes, "bf16")
        with np.errstate(invalid="ignore"):
            want = (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        assert np.array_equal(bits(got), bits(want))


@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3", "fp16", "e8m30"])
def test_ops_same_bits(fmt, small_blocks):
    if fmt == "e8m30":
        fmt = ff.Format("e8m30", ebits=8, mbits=30)
    rng = np.random.default_rng(4)
    n = 20_000
    a, b, c = (ff.cast(np.ldexp(rng.uniform(-2, 2, n), rng.integers(-12, 12, n)), fmt,
                       overflow="saturate") for _ in range(3))
    b[::50] = 0.0
    raw = _values(n, 5)  # operands not in the format: the general path casts them
    for mode in ("nearest_even", "down", "odd", "stochastic"):
        kw = {"rounding": mode, "rng": 9} if mode == "stochastic" else {"rounding": mode}
        with np.errstate(all="ignore"):
            for name, args in (("add", (a, b)), ("sub", (a, raw)), ("mul", (a, b)),
                               ("div", (a, b)), ("fma", (a, b, c)), ("sqrt", (np.abs(a),)),
                               ("mul", (raw, c))):
                fn = getattr(ff, name)
                if fmt in ("fp8_e4m3",) and name in ("sub", "mul") and args[-1] is raw:
                    pass
                assert_same_for_every_count(lambda: fn(*args, fmt, **kw), (name, mode))


def test_fparray_ops_same_bits(small_blocks):
    rng = np.random.default_rng(6)
    a = ff.array(rng.standard_normal(20_000), "bf16")
    b = ff.array(rng.standard_normal(20_000), "bf16")
    assert_same_for_every_count(lambda: np.asarray(ff.add(a, b, "bf16")), "fparray add")
    assert_same_for_every_count(lambda: np.asarray(ff.fma(a, b, a, "bf16", rounding="sr",
                                                          rng=3)), "fparray fma sr")


def test_reductions_same_bits(small_blocks):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((64, 300))
    for order in ("sequential", "pairwise", "kahan", "blocked", "exact"):
        for mode in ("nearest_even", "stochastic"):
            kw = {"rng": 11} if mode == "stochastic" else {}
            for axis in (0, 1):
                assert_same_for_every_count(
                    lambda: ff.sum(x, "bf16", acc_fmt="fp16", order=order, axis=axis,
                                   rounding=mode, **kw), (order, mode, axis))


def test_matmul_same_bits(small_blocks):
    rng = np.random.default_rng(9)
    A = rng.standard_normal((70, 48))
    B = rng.standard_normal((48, 90))
    A[3, 5] = 0.0
    for kw in ({"acc_fmt": "fp32"}, {"acc_fmt": "fp16"}, {"acc_fmt": "bf16", "rounding": "up"},
               {"acc_fmt": "fp32", "order": "pairwise"}, {"acc_fmt": "fp16", "order": "kahan"},
               {"acc_fmt": "fp32", "rounding": "stochastic", "rng": 3},
               {"acc_fmt": "fp16", "order": "blocked", "rounding": "stochastic", "rng": 3},
               {"model": "h100"}, {"model": "b200", "acc_fmt": "fp32"}):
        fmt = "fp8_e4m3" if kw.get("model") == "b200" else "bf16"
        assert_same_for_every_count(lambda: ff.matmul(A, B, fmt, **kw), kw)
    Ainf = A.copy()
    Ainf[1, 1] = np.inf  # the general (non-fast) tensor-core path
    assert_same_for_every_count(lambda: ff.matmul(Ainf, B, "bf16", model="h100"), "inf")


def test_real_block_size():
    """At the real block size: 4.5 blocks (the fewest that threads share is
    ``MIN_BLOCKS``), every thread count, RNE and SR."""
    assert threads.MIN_BLOCKS <= 4
    x = _values(int(4.5 * threads.BLOCK), 12)
    assert_same_for_every_count(lambda: ff.cast(x, "fp8_e4m3"), "rne")
    assert_same_for_every_count(lambda: ff.cast(x, "bf16", "stochastic", rng=1), "sr")
    a = ff.cast(x, "bf16")
    assert_same_for_every_count(lambda: ff.add(a, a[::-1].copy(), "bf16"), "add")


# ---------------------------------------------------------------------- stochastic rounding
def test_sr_stream_keyed_by_block(small_blocks):
    """The random stream of a seed does not depend on the thread count (above), differs
    from block to block (no block reuses another's bits), changes from call to call with
    one Generator, and stays unbiased across blocks."""
    n = 40 * threads.BLOCK
    p = 0.3
    x = np.full(n, 1.0 + p * 2.0 ** -7)  # bf16 quantum 2**-7 at 1: up with probability p
    with ff.limit_threads(2):
        r = ff.cast(x, "bf16", "stochastic", rng=np.random.default_rng(0))
    up = (r > 1.0).reshape(40, -1)
    assert len({row.tobytes() for row in up}) == 40  # every block its own bits
    frac = up.mean()
    assert abs(frac - p) < 5 * np.sqrt(p * (1 - p) / n)
    g = np.random.default_rng(0)
    r1 = ff.cast(x, "bf16", "sr", rng=g)
    r2 = ff.cast(x, "bf16", "sr", rng=g)
    assert not np.array_equal(r1, r2)
    assert np.array_equal(r1, r)  # a fresh generator of the same seed: the same draws
    # the documented derivation: one 63-bit key from the generator, block b from
    # default_rng([key, b]) (chunks of a block in order)
    key = int(np.random.default_rng(0).integers(0, 1 << 63))
    u = threads.block_rng(key, 1).random(threads.BLOCK)
    b = slice(threads.BLOCK, 2 * threads.BLOCK)
    f = (x[b] - 1.0) * 2.0 ** 7
    assert np.array_equal(r[b] > 1.0, u < f)


def test_sr_small_arrays_keep_one_stream():
    """One block: the caller's generator draws directly, as before threads."""
    x = np.full(1000, 1.0 + 2.0 ** -9)
    g = np.random.default_rng(5)
    r = ff.cast(x, "bf16", "sr", rng=g)
    u = np.random.default_rng(5).random(1000)
    assert np.array_equal(r > 1.0, u < 0.25)


# -------------------------------------------------------------------------------- memory
def _peak_extra(fn):
    """Peak bytes allocated by fn() beyond its result."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    r = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - np.asarray(r).nbytes


@pytest.mark.parametrize("what", ["cast", "encode", "add", "classify", "next_up"])
def test_peak_memory_bounded_by_chunks_times_threads(what):
    """Peak extra memory (beyond input and output) of a chunked path is a few chunks per
    thread, whatever the input size: the same bound at 6 and at 12 blocks."""
    x = _values(12 * threads.BLOCK, 13)
    x = np.nan_to_num(x, nan=1.0, posinf=1.0, neginf=-1.0)
    a = ff.cast(x, "bf16")
    fn = {"cast": lambda v: ff.cast(v, "fp8_e4m3"),
          "encode": lambda v: ff.encode(v, "bf16"),
          "add": lambda v: ff.add(v, v, "bf16"),
          "classify": lambda v: ff.classify(v, "bf16"),
          "next_up": lambda v: ff.next_up(v, "bf16")}[what]
    v = a if what == "add" else x
    # bytes of a float64 chunk
    chunk = 8 * max(rounding.CHUNK, codec._CHUNK, ops._OP_CHUNK, ops._FAST_CHUNK)
    for t in (1, 2, 3):
        with ff.limit_threads(t):
            fn(v[: 6 * threads.BLOCK])  # warm the threads' scratch buffers
            half = _peak_extra(lambda: fn(v[: 6 * threads.BLOCK]))
            full = _peak_extra(lambda: fn(v))
        bound = 24 * chunk * t
        assert full <= bound, (what, t, full, bound)
        assert full <= half + 4 * chunk * t, (what, t, full, half)  # does not grow with n


def test_errors_from_a_block_reach_the_caller(small_blocks):
    """A ValueError raised in one block (NaN into a format without NaN, in a late block)
    is the caller's, whatever the thread count, and the pool stays usable."""
    x = np.ones(20_000)
    x[17_000] = np.nan
    for n in COUNTS:
        with ff.limit_threads(n):
            with pytest.raises(ValueError, match="NaN"):
                ff.encode(x, "fp4_e2m1")
            with pytest.raises(ValueError, match="NaN"):
                ff.add(x, x, "fp4_e2m1")
            assert ff.encode(np.ones(20_000), "fp4_e2m1").sum() == 2 * 20_000
