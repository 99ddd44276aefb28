"""next_up / next_down / classify / ulp work chunk by chunk (issue 9, "Also fix").

The extra memory of a call (tracemalloc peak minus the result itself) must not grow with
the input: it is a few cache-sized chunks, as for ``cast``.  Working in chunks must not
change any value, nor the random stream of stochastic rounding.
"""

import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff

CHUNK = 1 << 15  # codec's chunk (elements)


def _extra_peak(fn, x):
    """Peak bytes allocated during fn(x), beyond the result's own buffer."""
    tracemalloc.start()
    try:
        r = fn(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - r.nbytes


def _data(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
    x[::997] = 0.0
    x[1::991] = np.inf
    x[2::983] = np.nan
    return x


CALLS = {
    "next_up": lambda x: ff.next_up(x, "bf16"),
    "next_down": lambda x: ff.next_down(x, "fp8_e4m3"),
    "next_down_fp4": lambda x: ff.next_down(x, "fp4_e2m1"),
    "classify": lambda x: ff.classify(x, "fp16"),
    "classify_sr": lambda x: ff.classify(x, "fp8_e5m2", "stochastic", rng=1, ftz=True),
    "ulp": lambda x: ff.ulp(x, "bf16"),
    "cast": lambda x: ff.cast(x, "bf16"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_extra_memory_does_not_grow_with_size(name):
    fn = CALLS[name]
    small, big = _data(3_000_000), _data(6_000_000)
    fn(small[:10])  # lazy imports and caches before measuring
    e_small, e_big = _extra_peak(fn, small), _extra_peak(fn, big)
    bound = 64 * CHUNK * 8  # a few dozen float64 chunks (16 MiB); the input is 24 / 48 MB
    assert e_small < bound and e_big < bound, (e_small, e_big)
    assert e_big < e_small + 2 * CHUNK * 8, (e_small, e_big)  # no term that scales with n


def test_chunked_equals_elementwise():
    """Across chunk borders every element gets the same answer as alone (scalar call)."""
    x = _data(3 * CHUNK + 123)
    idx = np.r_[0:50, CHUNK - 25:CHUNK + 25, 2 * CHUNK - 3:2 * CHUNK + 3, x.size - 50:x.size]
    for fmt in ("bf16", "fp8_e4m3", "fp4_e2m1", "int8", "e8m0"):
        up, down, cls, u = (ff.next_up(x, fmt), ff.next_down(x, fmt), ff.classify(x, fmt),
                            ff.ulp(x, fmt))
        for i in idx:
            v = float(x[i])
            for got, want in ((up[i], ff.next_up(v, fmt)), (down[i], ff.next_down(v, fmt)),
                              (u[i], ff.ulp(v, fmt))):
                assert (np.isnan(got) and np.isnan(want)) or (got == want and
                                                              np.signbit(got) == np.signbit(want))
            assert cls[i] == ff.classify(v, fmt)


def test_chunked_inputs_with_a_remainder():
    """Inputs wider than float64 (a sticky remainder) keep their remainder per chunk."""
    tiny = Fraction(1, 2 ** 70)
    vals = [Fraction(1) + (tiny if i % 3 else 0) for i in range(2 * CHUNK + 7)]
    arr = np.array(vals, dtype=object)
    up = ff.next_up(arr, "fp64")
    down = ff.next_down(arr, "fp64")
    exact = np.array([i % 3 == 0 for i in range(arr.size)])
    assert (up == 1 + 2.0 ** -52).all()
    assert (down == np.where(exact, 1 - 2.0 ** -53, 1.0)).all()


def test_classify_stochastic_stream_unchanged():
    """classify with stochastic rounding uses one random stream across the chunks: it
    classifies exactly the values cast gives with the same seed."""
    x = np.full(3 * CHUNK + 5, 0.75 * 2.0 ** -24)  # between fp16's 0 and its smallest subnormal
    for seed in (0, 1, 2):
        r = ff.cast(x, "fp16", "stochastic", rng=seed)
        want = np.where(r == 0, "zero", "subnormal")
        assert (ff.classify(x, "fp16", "stochastic", rng=seed) == want).all()
    with pytest.raises(TypeError, match="unexpected keyword"):
        ff.classify(x, "fp16", bogus=1)
