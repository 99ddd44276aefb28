"""torch's own float32 -> bfloat16 conversion as cast's kernel (``floatfmt.backend.native_bf16``).

``cast(t, "bf16")`` of a float32 CPU tensor takes torch's round trip where the probe
shows it equal to the reference.  Checked here, whether or not this torch passes the
probe: casts of NaN-free tensors (so that the kernel is reached) equal the general
route and ml_dtypes on the structured sample of test_round_f32_fast, in every layout;
NaN payloads, the other modes, policies and options go to the reference; the probe
refuses conversions that flush subnormals, truncate or round ties away; the result
does not change under ``torch.set_flush_denormal(True)``.  The sweep of all 2**32
float32 patterns against ml_dtypes is in the CI run (``heavy``: not in the developer
subset).
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
N = importlib.import_module("floatfmt.backend.native_bf16")
R = importlib.import_module("floatfmt.core.round_f32")

X86 = platform.machine().lower() in ("x86_64", "amd64")


def ml_bf16(x: np.ndarray) -> np.ndarray:
    """ml_dtypes' float32 -> bfloat16 -> float32 (round to nearest even, the oracle)."""
    with np.errstate(all="ignore"):
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)


@pytest.fixture
def taken(monkeypatch):
    """Counts the casts torch's kernel answered (round_bf16 not None)."""
    hits = []
    real = R.round_bf16

    def spy(t, reference):
        r = real(t, reference)
        hits.append(r is not None)
        return r

    monkeypatch.setattr(R, "round_bf16", spy)
    return hits


def nan_free(x: np.ndarray) -> np.ndarray:
    return x[~np.isnan(x)]


def test_available_is_ml_dtypes_verdict_on_x86():
    """torch's kernel is taken exactly where its round trip of the probe's patterns is
    ml_dtypes' (an independent oracle), and on x86-64 only."""
    x = N._patterns().view(np.float32)
    mine = torch.from_numpy(x).to(torch.bfloat16).to(torch.float32).numpy()
    assert N.available(R.bf16_reference) == (X86 and bool(same_bits(mine, ml_bf16(x)).all()))


def test_nan_free_tensors_equal_the_general_route_and_ml_dtypes(taken):
    """The structured sample (+-Inf included: their sum is NaN, and no element is)."""
    x = nan_free(sample("bf16"))
    assert np.isinf(x).sum() >= 2
    got = ff.cast(torch.from_numpy(x), "bf16")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    g = got.numpy()
    assert same_bits(g, general(x, "bf16")).all()
    assert same_bits(g, ml_bf16(x)).all()
    assert taken == [N.available(R.bf16_reference)]


@pytest.mark.parametrize("layout", ["matrix", "transposed", "small transposed", "strided",
                                    "expanded", "scalar", "empty", "short"])
def test_every_layout(layout, taken):
    """Views torch's conversion loops over differently: the values and the shape of the
    numpy route (the layout may differ; the values may not).  Past ``CHUNK`` elements
    only contiguous tensors take torch's kernel (chunk by chunk)."""
    x = nan_free(sample("bf16"))
    n = x.size // 12 * 12
    assert n > N.CHUNK
    base = torch.from_numpy(x[:n].copy())
    t = {"matrix": base.reshape(-1, 12), "transposed": base.reshape(12, -1).T,
         "small transposed": base[:1200].reshape(12, -1).T, "strided": base[1::5],
         "expanded": base[:7].reshape(7, 1).expand(7, 9), "scalar": base[3],
         "empty": base[:0].reshape(0, 4), "short": base[5:8]}[layout]
    got = ff.cast(t, "bf16")
    want = ml_bf16(t.numpy())
    assert tuple(got.shape) == tuple(t.shape) and got.dtype == torch.float32
    assert same_bits(got.numpy(), want).all()
    assert same_bits(got.numpy(), general(t.numpy().copy(), "bf16")).all()
    assert taken == [N.available(R.bf16_reference) and (t.numel() <= N.CHUNK or t.is_contiguous())]


def test_nan_payloads_go_to_the_reference(taken):
    """torch makes every NaN its own quiet NaN; cast keeps the payload (quieted) as the
    numpy route does, so a tensor holding a NaN is rounded there."""
    u = np.array([0x7FC12345, 0xFFC00001, 0x7F800001, 0x3F808000, 0x3F818000], np.uint32)
    x = u.view(np.float32)
    got = ff.cast(torch.from_numpy(x.copy()), "bf16").numpy()
    assert got.view(np.uint32).tolist() == ff.cast(x, "bf16").view(np.uint32).tolist()
    assert got.view(np.uint32)[:3].tolist() == [0x7FC12345, 0xFFC00001, 0x7FC00001]
    assert got[3:].tolist() == [1.0, 1.015625]  # ties to even, beside the NaNs
    assert taken == [False]


@pytest.mark.parametrize("mode,kw", [("up", {}), ("toward_zero", {}), ("nearest_away", {}),
                                     ("nearest_even", {"overflow": "saturate"}),
                                     ("nearest_even", {"ftz": True}), ("nearest_even", {"daz": True})])
def test_other_modes_and_options_do_not_take_it(mode, kw, taken):
    x = nan_free(sample("bf16"))
    got = ff.cast(torch.from_numpy(x), "bf16", mode, **kw).numpy()
    assert same_bits(got, general(x, "bf16", mode, **kw)).all()
    assert taken == []


def test_only_bf16_takes_it(taken):
    x = nan_free(sample("fp16"))
    for name in ("fp16", "tf32", "e8m6"):
        ff.cast(torch.from_numpy(x), name)
    assert taken == []
    ff.cast(torch.from_numpy(x), ff.Format("my_bf16", ebits=8, mbits=7))  # bf16 by another name
    assert taken == [N.available(R.bf16_reference)]


@pytest.mark.parametrize("how", ["flushes subnormals", "truncates", "rounds ties away"])
def test_the_probe_refuses_other_roundings(how):
    """The probe refuses a conversion that differs from nearest even where it looks."""
    def flush(v):
        return torch.where(v.abs() < 2.0 ** -126, v * 0.0, v).to(torch.bfloat16).to(torch.float32)

    def trunc(v):
        return (v.contiguous().view(torch.int32) & ~0xFFFF).view(torch.float32)

    def away(v):
        u = v.contiguous().view(torch.int32)
        return ((u + 0x8000) & ~0xFFFF).view(torch.float32)  # (no Inf / NaN patterns round here)

    wrong = {"flushes subnormals": flush, "truncates": trunc, "rounds ties away": away}[how]
    assert N._probe(R.bf16_reference, wrong) is False


def test_flush_denormal_does_not_change_the_result():
    """``torch.set_flush_denormal(True)`` sets DAZ / FTZ on x86: the cast still rounds
    float32 subnormals as nearest even says (ml_dtypes computed before the switch)."""
    u = np.concatenate([np.arange(1, 1 << 12, dtype=np.uint32),
                        np.arange(0x7F0000, 0x800000, 7, dtype=np.uint32)])
    x = np.concatenate([u, u | np.uint32(1 << 31)]).view(np.float32)
    want = ml_bf16(x)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-denormal mode")  # (x86 has one)
    try:
        got = ff.cast(torch.from_numpy(x), "bf16").numpy()
    finally:
        torch.set_flush_denormal(False)
    assert same_bits(got, want).all()
    assert (got != 0).sum() > 1000  # subnormal results survive


def test_every_float32_pattern_against_ml_dtypes():
    """All 2**32 float32 patterns as tensors, 2**24 at a time: NaN-free chunks through torch's
    kernel (where available), the chunks holding NaN through the reference; every
    non-NaN result is ml_dtypes', every NaN stays NaN with the numpy route's bits."""
    step = 1 << 24
    base = np.arange(step, dtype=np.uint32)
    bad = 0
    t0 = time.perf_counter()
    for start in range(0, 1 << 32, step):
        x = (base + np.uint32(start)).view(np.float32)
        got = ff.cast(torch.from_numpy(x), "bf16").numpy()
        nan = np.isnan(x)
        if nan.any():
            bad += int((~same_bits(got[nan], ff.cast(x[nan], "bf16"))).sum())
            bad += int((got[nan].view(np.uint32) != ff.cast(x[nan], "bf16").view(np.uint32)).sum())
            keep = ~nan
            bad += int((~same_bits(got[keep], ml_bf16(x[keep]))).sum())
        else:
            bad += int((got.view(np.uint32) != ml_bf16(x).view(np.uint32)).sum())
    print(f"bf16, tensors: 2**32 patterns in {time.perf_counter() - t0:.0f} s")
    assert bad == 0
