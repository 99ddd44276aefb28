"""torch's own float32 -> bfloat16 / float16 conversions as cast's kernel
(``floatfmt.backend.native_convert``).

``cast(t, "bf16")`` and ``cast(t, "fp16")`` of a float32 CPU tensor take torch's round trip
where the probe shows it equal to the reference.  Checked here for both, whether or not
this torch passes the probe: casts of NaN-free tensors (so that the kernel is reached)
equal the general route and an independent oracle (ml_dtypes' bfloat16, numpy's own
float16 conversion) on the structured sample of test_round_f32_fast, in every layout; NaN
payloads, the other modes, policies and options go to the reference; the probe refuses
conversions that flush subnormals, truncate or round ties away; the result does not
change under ``torch.set_flush_denormal(True)``, and the probe leaves that state as it
found it.  The sweeps of all 2**32 float32 patterns against the oracles are in the CI
run (``heavy``: not in the developer subset).
"""

from __future__ import annotations

import importlib
import platform
import time

import ml_dtypes
import numpy as np
import pytest

import floatfmt as ff
from test_round_f32_fast import general, sample, same_bits

torch = pytest.importorskip("torch")
N = importlib.import_module("floatfmt.backend.native_convert")
R = importlib.import_module("floatfmt.core.round_f32")
fpu = importlib.import_module("floatfmt.backend.fpu")

X86 = platform.machine().lower() in ("x86_64", "amd64")


NAMES = list(N.FORMATS)


def oracle(x: np.ndarray, name: str) -> np.ndarray:
    """float32 -> ``name`` -> float32 by another library (round to nearest even): ml_dtypes'
    bfloat16, numpy's float16."""
    with np.errstate(all="ignore"):
        return x.astype({"bf16": ml_dtypes.bfloat16, "fp16": np.float16}[name]).astype(np.float32)


@pytest.fixture
def taken(monkeypatch):
    """Counts the casts torch's kernel answered (round_native not None)."""
    hits = []
    real = R.round_native

    def spy(t, name, reference):
        r = real(t, name, reference)
        hits.append(r is not None)
        return r

    monkeypatch.setattr(R, "round_native", spy)
    return hits


def nan_free(x: np.ndarray) -> np.ndarray:
    return x[~np.isnan(x)]


DTYPE = {"bf16": "bfloat16", "fp16": "float16"}


def avail(name: str) -> bool:
    return N.available(name, R.native_reference)


@pytest.mark.parametrize("name", NAMES)
def test_available_is_the_oracles_verdict_on_x86(name):
    """torch's kernel is taken exactly where its round trip of the probe's patterns is the
    independent oracle's, and on x86-64 only."""
    x = N._patterns().view(np.float32)
    mine = torch.from_numpy(x).to(getattr(torch, DTYPE[name])).to(torch.float32).numpy()
    assert avail(name) == (X86 and bool(same_bits(mine, oracle(x, name)).all()))


@pytest.mark.parametrize("name", NAMES)
def test_the_probe_looks_at_every_dropped_bit_count(name):
    """The probe's patterns hold, for every exponent field and every count d of dropped
    bits, a tie (bit d-1 alone) with the kept bit clear and set: the rounding point of the
    format's every binade, its subnormals' included."""
    u = N._patterns()
    assert not np.isnan(u.view(np.float32)).any() and np.unique(u).size == u.size
    frac = u & np.uint32(0x7FFFFF)
    for d in range(1, 23):
        tie = np.uint32(1 << (d - 1))
        low = frac & np.uint32((2 << d) - 1)
        assert (low == tie).any() and (low == tie | np.uint32(1 << d)).any()
    assert np.unique(u >> np.uint32(23)).size == 2 * 255 + 2  # (+-Inf: the 255 field)


@pytest.mark.parametrize("name", NAMES)
def test_nan_free_tensors_equal_the_general_route_and_the_oracle(name, taken):
    """The structured sample (+-Inf included: their sum is NaN, and no element is)."""
    x = nan_free(sample(name))
    assert np.isinf(x).sum() >= 2
    got = ff.cast(torch.from_numpy(x), name)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    g = got.numpy()
    assert same_bits(g, general(x, name)).all()
    assert same_bits(g, oracle(x, name)).all()
    assert taken == [avail(name)]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout", ["matrix", "transposed", "small transposed", "strided",
                                    "expanded", "scalar", "empty", "short"])
def test_every_layout(name, layout, taken):
    """Views torch's conversion loops over differently: the values and the shape of the
    numpy route (the layout may differ; the values may not).  Past ``CHUNK`` elements
    only contiguous tensors take torch's kernel (chunk by chunk)."""
    x = nan_free(sample(name))
    n = x.size // 12 * 12
    assert n > N.CHUNK
    base = torch.from_numpy(x[:n].copy())
    t = {"matrix": base.reshape(-1, 12), "transposed": base.reshape(12, -1).T,
         "small transposed": base[:1200].reshape(12, -1).T, "strided": base[1::5],
         "expanded": base[:7].reshape(7, 1).expand(7, 9), "scalar": base[3],
         "empty": base[:0].reshape(0, 4), "short": base[5:8]}[layout]
    got = ff.cast(t, name)
    want = oracle(t.numpy(), name)
    assert tuple(got.shape) == tuple(t.shape) and got.dtype == torch.float32
    assert same_bits(got.numpy(), want).all()
    assert same_bits(got.numpy(), general(t.numpy().copy(), name)).all()
    assert taken == [avail(name) and (t.numel() <= N.CHUNK or t.is_contiguous())]


@pytest.mark.parametrize("name", NAMES)
def test_nan_payloads_go_to_the_reference(name, taken):
    """torch makes NaNs its own quiet NaN; cast keeps the payload (quieted) as the numpy
    route does, so a tensor holding a NaN is rounded there."""
    u = np.array([0x7FC12345, 0xFFC00001, 0x7F800001, 0x7FFFE000, 0x3F808000, 0x3F818000,
                  0x3F801000, 0x3F803000], np.uint32)
    x = u.view(np.float32)
    got = ff.cast(torch.from_numpy(x.copy()), name).numpy()
    assert got.view(np.uint32).tolist() == ff.cast(x, name).view(np.uint32).tolist()
    assert np.isnan(got[:4]).all() and taken == [False]
    if name == "bf16":  # (a payload past the format's bits: those of the format kept)
        assert got.view(np.uint32)[:4].tolist() == [0x7FC12345, 0xFFC00001, 0x7FC00001, 0x7FFFE000]
        assert got[4:].tolist() == [1.0, 1.015625, 1.0, 1.0]  # ties to even, beside the NaNs
    else:
        assert got[4:].tolist() == [1.00390625, 1.01171875, 1.0, 1.001953125]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode,kw", [("up", {}), ("toward_zero", {}), ("nearest_away", {}),
                                     ("nearest_even", {"overflow": "saturate"}),
                                     ("nearest_even", {"ftz": True}), ("nearest_even", {"daz": True})])
def test_other_modes_and_options_do_not_take_it(name, mode, kw, taken):
    x = nan_free(sample(name))
    got = ff.cast(torch.from_numpy(x), name, mode, **kw).numpy()
    assert same_bits(got, general(x, name, mode, **kw)).all()
    assert taken == []


def test_only_bf16_and_fp16_take_it(taken):
    """Other formats do not; bf16 and fp16 under other names do (the same fields)."""
    x = nan_free(sample("fp16"))
    for name in ("tf32", "e8m6", "fp8_e5m2", "e5m9"):
        ff.cast(torch.from_numpy(x), name)
    assert taken == []
    ff.cast(torch.from_numpy(x), ff.Format("my_bf16", ebits=8, mbits=7))
    ff.cast(torch.from_numpy(x), ff.Format("my_fp16", ebits=5, mbits=10))
    ff.cast(torch.from_numpy(x), "binary16")
    assert taken == [avail("bf16"), avail("fp16"), avail("fp16")]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", ["flushes subnormals", "truncates", "rounds ties away"])
def test_the_probe_refuses_other_roundings(name, how):
    """The probe refuses a conversion that differs from nearest even where it looks: at
    the format's own subnormals (fp16: below 2**-14; bf16: float32's), at its dropped bits
    and its ties."""
    smallest = {"bf16": 2.0 ** -126, "fp16": 2.0 ** -14}[name]
    d = {"bf16": 16, "fp16": 13}[name]
    dtype = getattr(torch, DTYPE[name])

    def flush(v):
        return torch.where(v.abs() < smallest, v * 0.0, v).to(dtype).to(torch.float32)

    def trunc(v):
        return (v.contiguous().view(torch.int32) & ~((1 << d) - 1)).view(torch.float32)

    def away(v):  # (for the normal range; the probe's first mismatch is enough)
        u = v.contiguous().view(torch.int32)
        return ((u + (1 << (d - 1))) & ~((1 << d) - 1)).view(torch.float32)

    wrong = {"flushes subnormals": flush, "truncates": trunc, "rounds ties away": away}[how]
    assert N._probe(name, R.native_reference, wrong) is False


@pytest.mark.parametrize("name", NAMES)
def test_flush_denormal_does_not_change_the_result(name):
    """``torch.set_flush_denormal(True)`` sets DAZ / FTZ on x86: the cast still rounds
    values in the format's subnormal range (and float32's) as nearest even says (the oracle
    computed before the switch), and the probe, run in that state, leaves it set."""
    u = np.concatenate([np.arange(1, 1 << 12, dtype=np.uint32),
                        np.arange(0x7F0000, 0x800000, 7, dtype=np.uint32),
                        np.arange(0x33000000, 0x38800000, 4099, dtype=np.uint32)])  # 2**-25..2**-14
    x = np.concatenate([u, u | np.uint32(1 << 31)]).view(np.float32)
    want = oracle(x, name)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-denormal mode")  # (x86 has one)
    try:
        N._STATE.pop(name, None)  # probe again, from the flushing state
        got = ff.cast(torch.from_numpy(x), name).numpy()
        assert fpu.flushing()
    finally:
        torch.set_flush_denormal(False)
    assert same_bits(got, want).all()
    assert (got != 0).sum() > 1000  # subnormal results survive
    assert not fpu.flushing()
    assert avail(name) == X86


def test_the_probe_restores_the_floating_point_state():
    """The probe switches this thread's flush-denormal state and puts it back."""
    for name in NAMES:
        N._STATE.pop(name, None)
        avail(name)
        assert not fpu.flushing()


def oracle_chunk(name: str, c: int) -> bool:
    """Whether the 2**24-pattern chunk ``c`` (patterns ``c << 24`` on) is compared with the
    oracle in the sweep: every chunk for bf16 (ml_dtypes is fast); for fp16 (numpy's float16
    conversion is scalar, 10-60 ns an element here) every eighth chunk and every chunk of
    fp16's subnormal and underflow range (2**-27 to 2**-14), of its largest finite values
    and overflow boundary (2**15 to 2**17), and of Inf / NaN, both signs."""
    return name == "bf16" or c % 8 == 0 or (c & 0x7F) in (*range(0x32, 0x39), 0x47, 0x7F)


@pytest.mark.parametrize("name", NAMES)
def test_every_float32_pattern_against_the_oracle(name):
    """All 2**32 float32 patterns as tensors, 2**24 at a time: NaN-free chunks through torch's
    kernel (where available), the chunks holding NaN through the reference.  Every result
    has the numpy route's bits (that route: the 2**32 sweep of test_round_f32_fast against
    ml_dtypes / numpy, ``-m slow``, and MPFR); on ``oracle_chunk``'s chunks every non-NaN
    result is the oracle's (ml_dtypes' bfloat16, numpy's float16) and every NaN is NaN."""
    step = 1 << 24
    base = np.arange(step, dtype=np.uint32)
    bad = looked = 0
    t0 = time.perf_counter()
    for c in range(256):
        x = (base + np.uint32(c << 24)).view(np.float32)
        got = ff.cast(torch.from_numpy(x), name).numpy()
        bad += int((got.view(np.uint32) != ff.cast(x, name).view(np.uint32)).sum())
        if oracle_chunk(name, c):
            looked += 1
            bad += int((~same_bits(got, oracle(x, name))).sum())
    print(f"{name}, tensors: 2**32 patterns in {time.perf_counter() - t0:.0f} s, "
          f"{looked} chunks against the oracle")
    assert bad == 0 and looked >= 48
