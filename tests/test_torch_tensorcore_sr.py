"""Stochastic rounding in ``matmul`` / ``dot`` with a tensor-core model on the device
path (``floatfmt.arith.matrixunit.gemm`` / ``tensorcore`` on tensors, what CUDA tensors run), forced on CPU tensors with
``force_namespace`` (issue 11 item 3).

SR applies where the numpy path applies the call's rounding: the operands' casts to
the model's input format, the epilogue (alpha, beta, c) and ``out_fmt``; the unit's
steps are the model's.  The device draws from one ``torch.Generator`` per call in the
order of the module docstring of ``gemm``; numpy draws from a numpy
Generator, so the same seed gives other bits.  Proven here:

* the device results equal numpy's rule given the same random numbers: the torch
  draws are replayed, stage by stage, into numpy's ``cast`` / ``round_values``
  (``sr_random=``) with numpy's exact remainders (``eft``), and the tensor-core
  product of the replayed operands is numpy's deterministic kernel; zero mismatches,
  for every SR mode, several ``sr_bits``, every epilogue step, and every matmul preset
  of the registry at run time;
* the device's operand casts equal ``round_values(..., sr_random=draws)``;
* every operand and result is a value of its format (decode(encode(v)) == v) and one
  of the two neighbours of the exact value it rounds;
* a seed (int, ``torch.Generator``, or ``torch.manual_seed`` with rng=None) reproduces
  the bits, another seed gives others;
* the frequency law (6 sigma) with 53 random bits and with ``sr_bits``, on both
  paths, including numpy's (which ignored ``sr_bits`` and drew a and b from two
  generators of one int seed before this file).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith import eft
from floatfmt.arith.matrixunit import fdpa
from floatfmt.backend.dispatch import force_namespace
from floatfmt.core.rounding import STOCHASTIC, resolve_mode, resolve_overflow, round_values
from floatfmt.arith.matrixunit.tensorcore import get_model
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _seed(name: str) -> int:
    return int.from_bytes(name.encode(), "little") % 2 ** 31


def data(shape: tuple, rng, lo: int = -6, hi: int = 6) -> np.ndarray:
    """float64 values with many significant bits (almost never in a format), spread
    over a few binades, both signs."""
    return rng.choice([-1.0, 1.0], shape) * (1 + rng.random(shape)) * np.exp2(
        rng.integers(lo, hi + 1, shape).astype(np.float64))


def device(fn, *args, **kw):
    """fn on CPU tensors through the device code (numpy arrays become tensors)."""
    conv = [torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
            for v in args]
    kw = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    with force_namespace():
        return fn(*conv, **kw)


class Replay:
    """The torch draws of a device call, replayed in the documented order: one batch of
    integers in [0, 2**bits) per rounding, of that rounding's shape, from a Generator on
    ``device`` seeded with ``seed``."""

    def __init__(self, seed: int, bits: int, device: str = "cpu"):
        self.g = torch.Generator(device=device).manual_seed(seed)
        self.bits, self.device = bits, device

    def __call__(self, shape: tuple) -> np.ndarray:
        return torch.randint(0, 1 << self.bits, tuple(shape), generator=self.g,
                             dtype=torch.int64, device=self.device).cpu().numpy()


def replay_matmul(kind: str, a, b, fmt: str, preset: str, mode: str, bits: int, seed: int, *,
                  acc_fmt: str = "fp32", alpha: float = 1.0, beta=None, c=None,
                  out_fmt=None, overflow=None, ftz: bool = False,
                  device: str = "cpu") -> np.ndarray:
    """numpy's rule for ``kind(a, b, fmt, model=preset, rounding=mode, sr_bits=bits)``
    given the random numbers a torch Generator on ``device`` seeded with ``seed`` gives
    the device code."""
    draw = Replay(seed, bits, device)
    m = get_model(preset, fmt, acc_fmt)
    sr = dict(overflow=overflow, ftz=ftz, sr_bits=bits)
    first = "fp32" if m.fmt == "tf32" else m.fmt  # tf32: SR to fp32, then the model's rule
    xa = ff.cast(a, first, mode, **sr, sr_random=draw(np.shape(a)))
    xb = ff.cast(b, first, mode, **sr, sr_random=draw(np.shape(b)))
    # the unit's steps are deterministic; operands of the format cast to themselves
    r = np.asarray(getattr(ff, kind)(xa, xb, fmt, acc_fmt, model=preset), np.float64)
    acc = ff.get_format("fp32" if m.fmt == "int8" else m.acc_fmt)
    policy = resolve_overflow(overflow, acc)

    def cast(v, f=acc):
        return np.asarray(ff.cast(v, f, mode, **sr, sr_random=draw(np.shape(v))), np.float64)

    if alpha != 1.0:  # device_mul(alpha, acc): the casts of alpha and acc, the product's
        p = cast(alpha) * cast(r)
        r = round_values(p, acc, mode, policy, ftz=ftz, sr_bits=bits, sr_random=draw(p.shape))
    if c is not None and (beta is None or beta != 0.0):
        cv = ff.cast(c, acc) if out_fmt is None else cast(c, ff.get_format(out_fmt))
        be = 1.0 if beta is None else beta
        p = cast(be) * cast(cv)  # exact (two fp32 values)
        z = cast(r)
        p, z = np.broadcast_arrays(p, z)
        t, R = eft.exact_sum(np.array(p), np.array(z), True)
        r = round_values(t, acc, mode, policy, ftz=ftz, resid=R, sr_bits=bits,
                         sr_random=draw(t.shape))
    if out_fmt is not None:
        f = ff.get_format(out_fmt)
        r = round_values(r, f, mode, resolve_overflow(overflow, f), ftz=ftz, sr_bits=bits,
                         sr_random=draw(np.shape(r)))
    return r


def count(got, want) -> int:
    g = got.numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    return int(mismatches(g, want).sum())


# (alpha, beta, c's scale (None: no c), out_fmt, options): no epilogue, each step alone,
# all of them; c far below the accumulator (2**-30) makes beta * c + acc inexact in
# float64, so that the fma's SR needs its exact remainder (``resid``) past float64
EPILOGUES = [
    (1.0, None, None, None, {}),
    (0.1, None, None, None, {}),
    (1.0, None, 1.0, None, {}),
    (1.0, 0.0, 1.0, "bf16", {}),
    (-0.3, 0.7, 1.0, "fp16", {"overflow": "saturate"}),
    (1.0, 1.0, 1.0, "fp8_e4m3", {"ftz": True, "overflow": "saturate"}),
    (0.75, -1.5, 2.0 ** -30, None, {}),
]
MODES = [("stochastic", 3), ("stochastic", 11), ("stochastic", 23), ("stochastic", 52),
         ("stochastic_a", 6), ("stochastic_b", 9), ("stochastic_c", 13)]
# NVIDIA T-FDPA (c aligned), B200 FP8 (c after), tf32 operands, fp16 accumulator, AMD, int8
PRESETS = [("h100/bf16", "bf16", "fp32"), ("ada/fp8_e4m3", "fp8_e4m3", "fp32"),
           ("b200/fp8_e5m2", "fp8_e5m2", "fp32"), ("a100/tf32", "fp32", "fp32"),
           ("h100/fp16", "fp16", "fp16"), ("mi250/fp16", "fp16", "fp32"),
           ("mi300/fp8_e4m3fnuz", "fp8_e4m3fnuz", "fp32"), ("t4/int8", "int8", "fp32")]


def _operands(fmt: str, shape: tuple, rng) -> np.ndarray:
    if ff.get_format(fmt).kind == "int":
        return rng.integers(-120, 121, shape) + rng.random(shape)
    return data(shape, rng)


@pytest.mark.parametrize("j", range(len(PRESETS)), ids=[p[0] for p in PRESETS])
def test_device_sr_equals_numpy_given_the_same_random_numbers(j):
    """matmul (batched, K not a multiple of L) and dot, every SR mode, several sr_bits,
    every epilogue step (each mode meets each epilogue over the presets): the device's
    bits are numpy's rule on the replayed draws."""
    preset, fmt, acc = PRESETS[j]
    rng = np.random.default_rng(_seed(preset))
    bad = total = 0
    for i, (mode, bits) in enumerate(MODES):
        alpha, beta, cscale, out_fmt, opts = EPILOGUES[(i + j) % len(EPILOGUES)]
        for kind, sa, sb in (("matmul", (2, 3, 37), (37, 4)), ("dot", (3, 21), (21,))):
            a, b = _operands(fmt, sa, rng), _operands(fmt, sb, rng)
            shape = (2, 3, 4) if kind == "matmul" else (3,)
            c = None if cscale is None else data(shape[-1:] if i % 2 else shape, rng) * cscale
            seed = int(rng.integers(1 << 31))
            kw = dict(alpha=alpha, beta=beta, c=c, out_fmt=out_fmt, **opts)
            got = device(getattr(ff, kind), a, b, fmt, acc, model=preset, rounding=mode,
                         rng=torch.Generator().manual_seed(seed), sr_bits=bits, **kw)
            want = replay_matmul(kind, a, b, fmt, preset, mode, bits, seed, acc_fmt=acc, **kw)
            bad += count(got, want)
            total += np.size(want)
    assert bad == 0, f"{bad} of {total} results differ from numpy's rule on the same draws"


def test_epilogue_remainders_past_float64_on_the_same_draws():
    """beta * c + acc with c some 2**-30 below the accumulator is not a float64: its
    SR takes the exact remainder past float64 (the fma's ``resid``); the results equal
    numpy's rule with ``eft``'s remainder, with random numbers of more bits than float64
    holds below the step (sr_bits > 29 for fp32).  (That remainder moves the
    probability by less than 2**-29 here, so random draws cannot tell it from none;
    tests/test_torch_sr.py proves the device's remainders equal ``eft``'s.)"""
    rng = np.random.default_rng(12)
    bad = total = 0
    for preset, fmt in (("h100/bf16", "bf16"), ("b200/fp8_e4m3", "fp8_e4m3"),
                        ("mi300/fp16", "fp16")):
        for mode, bits in (("stochastic", 52), ("stochastic", 40), ("stochastic_b", 47)):
            a, b = data((3, 40), rng), data((40, 5), rng)
            c = data((3, 5), rng) * 2.0 ** -30
            seed = int(rng.integers(1 << 31))
            kw = dict(alpha=0.7, beta=-1.3, c=c)
            got = device(ff.matmul, a, b, fmt, model=preset, rounding=mode,
                         rng=torch.Generator().manual_seed(seed), sr_bits=bits, **kw)
            want = replay_matmul("matmul", a, b, fmt, preset, mode, bits, seed, **kw)
            bad += count(got, want)
            total += want.size
    assert bad == 0, f"{bad} of {total} results differ"


def test_device_operand_casts_equal_round_values_on_the_same_draws():
    """The device's SR operand casts (``tensorcore._cast_inputs`` on tensors, a then b from one
    generator) equal numpy's ``round_values(..., sr_random=draws)`` of the exact inputs,
    over each format's whole range (subnormals, past max with each overflow policy),
    then the model's own input rule (tf32 truncation, CDNA2's flush of subnormals)."""
    from floatfmt.arith.matrixunit.tensorcore import _cast_inputs
    rng = np.random.default_rng(3)
    bad = 0
    for preset, fmt, _ in PRESETS:
        m = get_model(preset, fmt)
        f = ff.get_format("fp32" if m.fmt == "tf32" else m.fmt)
        if f.kind == "int":
            a, b = (rng.integers(-300, 301, 4000) + rng.random(4000) for _ in range(2))
        else:
            lo, hi = f.emin - f.mbits - 2, f.emax + 1
            a, b = (data((4000,), rng, max(lo, -1000), min(hi, 1000)) for _ in range(2))
        for overflow in (None, "saturate"):
            for mode, bits in MODES[::2]:
                seed = int(rng.integers(1 << 31))
                with force_namespace():
                    x, y, _ = _cast_inputs(torch.from_numpy(a), torch.from_numpy(b), None, m,
                                           mode, overflow, False, False,
                                           torch.Generator().manual_seed(seed), bits)
                draw = Replay(seed, bits)
                pol = resolve_overflow(overflow, f)
                for got, v in ((x, a), (y, b)):
                    want = round_values(v, f, mode, pol, sr_bits=bits, sr_random=draw(v.shape))
                    if m.fmt == "tf32":
                        want = ff.cast(want, "tf32", "toward_zero")
                    if m.ftz:  # CDNA2 flushes subnormal inputs to +0
                        want = fdpa.flush_to_plus_zero(want, f)
                    bad += count(got, want)
    assert bad == 0, f"{bad} operand casts differ"


def test_every_registered_preset_under_stochastic_rounding():
    """Every preset of ``ff.tensorcore_models()`` at run time: matmul presets run SR on
    the device, reproduce their bits per seed, differ for another seed, and equal the
    replayed numpy rule (with c, alpha and out_fmt); block-scaled presets are refused by
    both paths with the same ValueError (their entry, ``block_scaled_matmul``, takes no
    rounding option: nothing in it rounds stochastically)."""
    import inspect
    assert "rounding" not in inspect.signature(ff.block_scaled_matmul).parameters
    rng = np.random.default_rng(11)
    bad = ran = 0
    for preset, m in ff.tensorcore_models().items():
        fmt = m.fmt
        a, b = _operands(fmt, (3, 40), rng), _operands(fmt, (40, 5), rng)
        if m.block_fmt is not None:
            for x, y in ((a, b), (torch.from_numpy(a), torch.from_numpy(b))):
                with force_namespace(), pytest.raises(ValueError, match="block_scaled_matmul"):
                    ff.matmul(x, y, fmt, model=preset, rounding="stochastic", rng=1)
            continue
        c = data((3, 5), rng)
        kw = dict(alpha=0.3, c=c, out_fmt="bf16", rounding="stochastic", sr_bits=17)
        runs = [device(ff.matmul, a, b, fmt, model=preset, rng=s, **kw) for s in (5, 5, 6)]
        assert torch.equal(runs[0], runs[1]), preset
        assert not torch.equal(runs[0], runs[2]), preset
        want = replay_matmul("matmul", a, b, fmt, preset, "stochastic", 17, 5, alpha=0.3,
                             c=c, out_fmt="bf16")
        bad += count(runs[0], want)
        ran += 1
    assert ran >= 30 and bad == 0, (ran, bad)


def test_seeds_reproduce_the_bits():
    """An int seed and a Generator seeded alike give the same bits; another seed other
    bits; a Generator's stream advances from call to call; rng=None draws from torch's
    default generator (torch.manual_seed reproduces it); 53 random bits and sr_bits."""
    rng = np.random.default_rng(4)
    a, b, c = data((4, 64), rng), data((64, 6), rng), data((4, 6), rng)

    def call(r, bits=None):
        return device(ff.matmul, a, b, "fp8_e4m3", model="h100", rounding="stochastic",
                      rng=r, sr_bits=bits, alpha=0.7, c=c, out_fmt="fp16")

    for bits in (None, 8):
        first = call(21, bits)
        assert torch.equal(first, call(21, bits))
        assert torch.equal(first, call(torch.Generator().manual_seed(21), bits))
        assert not torch.equal(first, call(22, bits))
        g = torch.Generator().manual_seed(21)
        assert torch.equal(call(g, bits), first) and not torch.equal(call(g, bits), first)
        torch.manual_seed(3)
        again = call(None, bits)
        torch.manual_seed(3)
        assert torch.equal(again, call(None, bits))
    d = [device(ff.dot, a, b.T[:4], "bf16", model="a100", rounding="stochastic_b", rng=s,
                sr_bits=5) for s in (1, 1, 2)]
    assert torch.equal(d[0], d[1]) and not torch.equal(d[0], d[2])


def _in_format(v: np.ndarray, fmt: str) -> bool:
    return count(torch.from_numpy(np.asarray(ff.decode(ff.encode(v, fmt), fmt), np.float64)),
                 v) == 0


def _neighbours(v: np.ndarray, exact: np.ndarray, fmt: str, overflow=None) -> bool:
    lo = ff.cast(exact, fmt, "down", overflow)
    hi = ff.cast(exact, fmt, "up", overflow)
    return bool(np.all((v == lo) | (v == hi)))


@pytest.mark.parametrize("mode,bits", [("stochastic", None), ("stochastic", 4),
                                       ("stochastic_c", 8)])
def test_operands_and_results_are_values_on_the_two_neighbours(mode, bits):
    """The SR operands are values of the input format next to the exact inputs; the
    SR results (out_fmt) are values of out_fmt next to the exact accumulator values
    (numpy's deterministic unit on those operands, which the device path equals)."""
    from floatfmt.arith.matrixunit.tensorcore import _cast_inputs
    rng = np.random.default_rng(8)
    for preset, fmt, out_fmt in (("h100/bf16", "bf16", "fp8_e5m2"),
                                 ("b200/fp8_e4m3", "fp8_e4m3", "bf16"),
                                 ("mi300/fp16", "fp16", "fp8_e5m2"), ("t4/int8", "int8", "bf16")):
        a, b = _operands(fmt, (6, 50), rng), _operands(fmt, (50, 7), rng)
        m = get_model(preset, fmt)
        with force_namespace():
            x, y, _ = _cast_inputs(torch.from_numpy(a), torch.from_numpy(b), None, m, mode, None,
                                   False, False, torch.Generator().manual_seed(9), bits)
        for v, exact in ((x.numpy(), a), (y.numpy(), b)):
            assert _in_format(v, m.fmt) and _neighbours(v, exact, m.fmt), preset
            tz = ff.cast(exact, m.fmt, "toward_zero")
            assert (v == tz).any() and (v != tz).any(), preset  # both neighbours occur
        got = device(ff.matmul, a, b, fmt, model=preset, rounding=mode, sr_bits=bits,
                     rng=torch.Generator().manual_seed(9), out_fmt=out_fmt,
                     overflow="saturate").numpy()
        acc = ff.matmul(x.numpy(), y.numpy(), fmt, model=preset)  # the same operands
        assert _in_format(got, out_fmt) and _neighbours(got, acc, out_fmt, "saturate"), preset


def _law(v, lo: float, hi: float, p: float) -> None:
    """Every value is lo or hi, and hi occurs with frequency p within 6 sigma."""
    v = np.asarray(v.numpy() if isinstance(v, torch.Tensor) else v).reshape(-1)
    assert set(np.unique(v)) <= {lo, hi}, np.unique(v)
    n, k = v.size, int((v == hi).sum())
    assert abs(k - n * p) <= 6 * math.sqrt(n * p * (1 - p)) + 1, (k / n, p)


@pytest.mark.parametrize("path", ["numpy", "device"])
def test_sr_frequency_law_and_sr_bits(path):
    """A value a fraction f of the way between its neighbours rounds away with
    frequency f (53 bits) or floor(f 2**N) / 2**N (sr_bits=N), 6 sigma, in every place
    the call rounds: the operands' casts, alpha * acc, c's cast, out_fmt.  a and b
    draw independent numbers (one stream: with a seed's numbers reused, the product of
    two equal operands could never be 1 + u).  numpy's path used to ignore sr_bits and
    to reuse an int seed for b: this fails there on the old code."""
    n = 40000
    run = (lambda fn, *a, **k: fn(*a, **k)) if path == "numpy" else device
    ones = np.ones((n, 1))
    u = 2.0 ** -7
    x = np.full((n, 1), 1 + 0.625 * u)  # bf16 operand: 1 or 1 + u
    for bits, p in ((None, 0.625), (1, 0.5), (2, 0.5), (3, 0.625)):
        r = run(ff.matmul, x, np.ones((1, 1)), "bf16", model="h100", rounding="stochastic",
                rng=1, sr_bits=bits)
        _law(r, 1.0, 1 + u, p)
        # alpha * acc = (1 + 5 * 2**-19) (1 + u): 0.625 of fp32's step past lo
        lo = 1 + u + 5 * 2.0 ** -19
        r = run(ff.matmul, (1 + u) * ones, np.ones((1, 1)), "bf16", model="h100",
                rounding="stochastic", rng=2, sr_bits=bits, alpha=1 + 5 * 2.0 ** -19)
        _law(r, lo, lo + 2.0 ** -23, p)
        # out_fmt: the exact fp32 accumulator 1 + 5 * 2**-10 (fp16 operands) to bf16
        r = run(ff.matmul, np.full((n, 1), 1 + 5 * 2.0 ** -10), np.ones((1, 1)), "fp16",
                model="a100", rounding="stochastic", rng=3, sr_bits=bits, out_fmt="bf16")
        _law(r, 1.0, 1 + u, p)
        # c = 1 + 0.625 u cast to out_fmt bf16, added to an exact zero accumulator
        r = run(ff.matmul, np.zeros((n, 1)), np.ones((1, 1)), "bf16", model="h100",
                rounding="stochastic", rng=4, sr_bits=bits, c=x, out_fmt="bf16")
        _law(r, 1.0, 1 + u, p)
    # independent draws for a and b: x_i * y_i = 1 + u iff exactly one rounded up
    d = np.asarray(run(ff.dot, np.full((n, 1), 1 + 0.5 * u), np.full((n, 1), 1 + 0.5 * u),
                       "bf16", model="h100", rounding="stochastic", rng=5))
    _law(d[d <= 1 + u], 1.0, 1 + u, 2 * 0.25 / (0.25 + 0.5))
    assert abs((d == (1 + u) ** 2).mean() - 0.25) < 6 * math.sqrt(0.25 * 0.75 / n)
    # without a model, numpy's epilogue honours sr_bits too (the device path did)
    r = run(ff.matmul, (1 + u) * ones, np.ones((1, 1)), "bf16", rounding="stochastic", rng=6,
            sr_bits=1, alpha=1 + 5 * 2.0 ** -19)
    _law(r, 1 + u + 5 * 2.0 ** -19, 1 + u + 5 * 2.0 ** -19 + 2.0 ** -23, 0.5)


def test_sr_options_are_checked_alike():
    """sr_bits without a stochastic mode, out of range, P3109 modes without it, and a
    numpy Generator for a tensor: the same errors as numpy's (TypeError for the last)."""
    a, b = np.ones((2, 3)), np.ones((3, 2))
    for run in ((lambda fn, *x, **k: fn(*x, **k)), device):
        with pytest.raises(ValueError, match="sr_bits applies to the stochastic"):
            run(ff.matmul, a, b, "bf16", model="h100", sr_bits=4)
        with pytest.raises(ValueError, match="sr_bits must be an integer"):
            run(ff.matmul, a, b, "bf16", model="h100", rounding="stochastic", rng=1, sr_bits=60)
        with pytest.raises(ValueError, match="needs sr_bits"):
            run(ff.dot, a, a, "bf16", model="h100", rounding="stochastic_a", rng=1)
    with pytest.raises(TypeError, match="torch.Generator"):
        device(ff.matmul, a, b, "bf16", model="h100", rounding="stochastic",
               rng=np.random.default_rng(0))
    assert resolve_mode("sr") in STOCHASTIC


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_sr_reproducible_and_equal_to_numpy_on_the_same_draws():
    """On CUDA: a seed reproduces the bits, another gives others, and the results equal
    numpy's rule on the CUDA generator's draws (replayed on the host)."""
    rng = np.random.default_rng(21)
    bad = total = 0
    for preset, fmt, acc in PRESETS:
        a, b = _operands(fmt, (4, 70), rng), _operands(fmt, (70, 3), rng)
        c = data((4, 3), rng)
        ta, tb, tc = (torch.from_numpy(v).cuda() for v in (a, b, c))
        kw = dict(alpha=0.3, c=tc, out_fmt="bf16", rounding="stochastic", sr_bits=20)
        runs = [ff.matmul(ta, tb, fmt, acc, model=preset, rng=s, **kw) for s in (7, 7, 8)]
        assert runs[0].device.type == "cuda"
        assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2]), preset
        want = replay_matmul("matmul", a, b, fmt, preset, "stochastic", 20, 7, acc_fmt=acc,
                             alpha=0.3, c=c, out_fmt="bf16", device="cuda")
        bad += count(runs[0].cpu(), want)
        total += want.size
    assert bad == 0, f"{bad} of {total} results differ"
